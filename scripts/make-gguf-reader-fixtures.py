# Makes test/fixtures/gguf/reader/: small GGUF files written by gguf-py (and one by llama.cpp's converter), each
# with a golden JSON of what gguf-py's GGUFReader reads from it, which test/gguf/reader.test.ts holds openGguf to.
# Run once by hand, never in CI; its output is committed.
#
#   /work/venv-gguf/bin/python scripts/make-gguf-reader-fixtures.py [CONVERTED.gguf]
#
# CONVERTED.gguf: a GGUF that llama.cpp's convert_hf_to_gguf.py wrote, copied in as qwen3-converter.gguf; made by
#   /work/venv-gguf/bin/python scripts/gguf-reference.py --llama-cpp /work/llama.cpp-src OUT qwen3   (OUT/qwen3.F16.gguf)
#
# The files:
#   every-type.gguf      v3, little-endian, alignment 32: every metadata value type, scalar and array (nested
#                        arrays, a 1000-string array, non-finite floats, 64-bit extremes), and every ggml type
#                        gguf-py knows but Q8_1 (below) as 1-D, 2-D and 3-D tensors (plain types: random values, also 4-D, a scalar
#                        and an empty one; quantized types: random bytes, so any scale, NaN and Inf included)
#   v2.gguf              the same layout with version 2 (v2 and v3 differ only in v3's big-endian files)
#   big-endian.gguf      gguf-py's writer in big-endian order: every metadata value type, every plain type
#   big-endian-converted.gguf
#                        big-endian-converted.source.gguf, a little-endian file of F32/F16/BF16 and the quantized
#                        types gguf-py's gguf_convert_endian.py swaps, swapped by that script (llama.cpp's way
#                        to big-endian)
#   alignment-8.gguf     general.alignment 8: the data section and every tensor on 8-byte boundaries
#   qwen3-converter.gguf llama.cpp's converter's F16 GGUF of test/fixtures/gguf/qwen3 (given as the argument)
#
# Golden (<name>.json): version, byte order, alignment, data offset; every field as gguf-py's ReaderField gives it
# (types, and contents(): nested arrays flattened, as gguf-py flattens them; what the script wrote, where it
# wrote it); every tensor's name, type, ne (ggml's order), shape (outermost first), element and byte counts, the
# absolute offset of its data, the sha256 of its bytes as stored, and for the plain types the sha256 of gguf-py's
# values as little-endian bytes (BF16, which gguf-py gives as raw bytes: those bytes as 16-bit words in the
# file's order, as gguf_convert_endian.py swaps them). 64-bit integers are {"bigint": "..."}; non-finite floats
# {"float": "nan" | "inf" | "-inf"}.
import argparse
import hashlib
import json
import math
import os
import shutil
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf.constants import GGML_QUANT_SIZES
from gguf.scripts import gguf_convert_endian

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "fixtures", "gguf", "reader")

PLAIN = {Q.F32: np.float32, Q.F16: np.float16, Q.F64: np.float64, Q.I8: np.int8, Q.I16: np.int16, Q.I32: np.int32, Q.I64: np.int64}
SIXTY_FOUR = {V.UINT64, V.INT64}


def metadata(writer, written):
    """Every value type, scalar and array; `written` records what was written under each key."""

    def add(key, value, vtype, sub_type=None):
        writer.add_key_value(key, value, vtype, sub_type)
        written[key] = value

    add("test.u8", 255, V.UINT8)
    add("test.i8", -128, V.INT8)
    add("test.u16", 65535, V.UINT16)
    add("test.i16", -32768, V.INT16)
    add("test.u32", 4294967295, V.UINT32)
    add("test.i32", -2147483648, V.INT32)
    add("test.u64", 2**64 - 1, V.UINT64)
    add("test.u64.small", 7, V.UINT64)
    add("test.i64", -(2**63), V.INT64)
    add("test.f32", 3.1415927410125732, V.FLOAT32)
    add("test.f32.subnormal", 1.401298464324817e-45, V.FLOAT32)
    add("test.f32.inf", math.inf, V.FLOAT32)
    add("test.f64", 2.718281828459045, V.FLOAT64)
    add("test.f64.negzero", -0.0, V.FLOAT64)
    add("test.f64.nan", math.nan, V.FLOAT64)
    add("test.bool.true", True, V.BOOL)
    add("test.bool.false", False, V.BOOL)
    add("test.string", "héllo wörld 😀", V.STRING)
    add("test.string.empty", "", V.STRING)
    add("test.array.u8", [0, 1, 255], V.ARRAY, V.UINT8)
    add("test.array.i8", [-128, 0, 127], V.ARRAY, V.INT8)
    add("test.array.u16", [0, 65535], V.ARRAY, V.UINT16)
    add("test.array.i16", [-32768, 32767], V.ARRAY, V.INT16)
    add("test.array.u32", [0, 4294967295], V.ARRAY, V.UINT32)
    add("test.array.i32", [-2147483648, 2147483647, 5], V.ARRAY, V.INT32)
    add("test.array.u64", [0, 2**64 - 1, 2**53 + 1], V.ARRAY, V.UINT64)
    add("test.array.i64", [-(2**63), 2**63 - 1], V.ARRAY, V.INT64)
    add("test.array.f32", [1.5, -0.0, math.inf, -math.inf, math.nan, 1.401298464324817e-45], V.ARRAY, V.FLOAT32)
    add("test.array.f64", [0.1, -1e300, math.nan], V.ARRAY, V.FLOAT64)
    add("test.array.bool", [True, False, True], V.ARRAY, V.BOOL)
    add("test.array.string", ["a", "", "ünïcødé", "😀"], V.ARRAY, V.STRING)
    add("test.array.long", [f"token {i}" for i in range(1000)], V.ARRAY, V.STRING)
    add("test.array.nested", [[1, 2, 3], [4]], V.ARRAY)
    add("test.array.nested.mixed", [[1.5], ["x", "y"], [[True]]], V.ARRAY)


def random_tensors(writer, rng, types, shapes_of):
    for t in types:
        block, size = GGML_QUANT_SIZES[t]
        for shape in shapes_of(t, block):
            name = f"{t.name}.{len(shape)}d" if shape else f"{t.name}.scalar"
            if 0 in shape:
                name = f"{t.name}.empty"
            if t in PLAIN:
                dtype = PLAIN[t]
                if np.issubdtype(dtype, np.integer):
                    info = np.iinfo(dtype)
                    data = np.asarray(rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True))
                else:
                    data = np.asarray(rng.standard_normal(size=shape), dtype=dtype)
                writer.add_tensor(name, data)
            elif t == Q.BF16:
                writer.add_tensor(name, np.asarray(rng.integers(0, 2**16, size=shape, dtype=np.uint16)), raw_dtype=Q.BF16)
            else:
                rows = list(shape[:-1])
                data = rng.integers(0, 256, size=(*rows, shape[-1] // block * size), dtype=np.uint8)
                writer.add_tensor(name, data, raw_dtype=t)


def quantized_shapes(t, block):
    return [(2 * block,), (3, block), (2, 2, 2 * block)]


def plain_shapes(t, block):
    # gguf-py reads BF16 as bytes, by the shape of its rows: not as a scalar.
    return [(5,), (3, 4), (2, 3, 4), (2, 1, 3, 2), *([] if t == Q.BF16 else [()]), (0, 4)]


def every_shape(t, block):
    return plain_shapes(t, block) if block == 1 else quantized_shapes(t, block)


def write(path, fill, endianess=gguf.GGUFEndian.LITTLE, alignment=None):
    writer = gguf.GGUFWriter(path, "test", endianess=endianess)
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    written = {}
    fill(writer, written)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written


def encode(value, vtype):
    """A value as the golden JSON holds it (bigint for 64-bit integers, tagged non-finite floats)."""
    if isinstance(value, list):
        return [encode(v, vtype) for v in value]
    if vtype in SIXTY_FOUR:
        return {"bigint": str(int(value))}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    return value


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def golden(path, written):
    reader = gguf.GGUFReader(path)
    big = reader.endianess == gguf.GGUFEndian.BIG
    fields = []
    for field in reader.fields.values():
        if field.name.startswith("GGUF."):
            continue
        types = [t.name for t in field.types]
        entry = {"key": field.name, "types": types, "value": encode(field.contents(), field.types[-1])}
        if field.name in written and field.types[0] == V.ARRAY and field.types[1] == V.ARRAY:
            entry["written"] = written[field.name]
        fields.append(entry)
    tensors = []
    for t in reader.tensors:
        ne = [int(n) for n in t.shape]
        start = t.data_offset
        raw = bytes(reader.data[start : start + t.n_bytes])
        entry = {
            "name": t.name,
            "type": t.tensor_type.name,
            "ne": ne,
            "shape": ne[::-1],
            "elements": int(t.n_elements),
            "bytes": int(t.n_bytes),
            "offset": int(start),
            "sha256": sha256(raw),
        }
        if t.tensor_type in PLAIN:
            entry["valuesSha256"] = sha256(np.ascontiguousarray(t.data).astype(np.dtype(PLAIN[t.tensor_type]).newbyteorder("<")).tobytes())
        elif t.tensor_type == Q.BF16:
            words = np.frombuffer(raw, dtype=">u2" if big else "<u2")
            entry["valuesSha256"] = sha256(words.astype("<u2").tobytes())
        tensors.append(entry)
    out = {
        "version": int(reader.fields["GGUF.version"].contents()),
        "byteOrder": "big" if big else "little",
        "alignment": int(reader.alignment),
        "dataOffset": int(reader.data_offset),
        "fileSize": os.path.getsize(path),
        "fields": fields,
        "tensors": tensors,
    }
    with open(path[: -len(".gguf")] + ".json", "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(path, os.path.getsize(path), "bytes,", len(fields), "keys,", len(tensors), "tensors")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("converted", nargs="?", help="llama.cpp's converter's GGUF of test/fixtures/gguf/qwen3")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    # Q8_1 aside: gguf-py 0.19 sizes its blocks at 40 bytes, ggml at 36 (ggml_type_size; its d and s are F16), so
    # a Q8_1 tensor gguf-py writes is not one ggml reads.
    every = [t for t in Q if t in GGML_QUANT_SIZES and t != Q.Q8_1]

    def every_type(writer, written):
        metadata(writer, written)
        random_tensors(writer, np.random.default_rng(41), every, every_shape)

    path = os.path.join(OUT, "every-type.gguf")
    golden(path, write(path, every_type))

    def small(writer, written):
        writer.add_key_value("test.u64", 2**40 + 3, V.UINT64)
        writer.add_key_value("test.strings", ["x", "yz"], V.ARRAY, V.STRING)
        random_tensors(writer, np.random.default_rng(2), [Q.F32, Q.I32, Q.Q8_0], lambda t, b: [(3, b)] if b > 1 else [(2, 3)])

    path = os.path.join(OUT, "v2.gguf")
    write(path, small)
    with open(path, "r+b") as f:
        f.seek(4)
        f.write((2).to_bytes(4, "little"))
    golden(path, {})

    def big_endian(writer, written):
        metadata(writer, written)
        plain = [t for t in every if GGML_QUANT_SIZES[t][0] == 1]
        random_tensors(writer, np.random.default_rng(3), plain, lambda t, b: [(5,), (3, 4), (2, 3, 4)])

    path = os.path.join(OUT, "big-endian.gguf")
    golden(path, write(path, big_endian, endianess=gguf.GGUFEndian.BIG))

    swappable = [Q.F32, Q.F16, Q.BF16, *[t for t in gguf_convert_endian.byteswap_tensors if t in GGML_QUANT_SIZES]]

    def to_convert(writer, written):
        writer.add_key_value("test.i64", -5, V.INT64)
        writer.add_key_value("test.array.f32", [1.5, -2.25], V.ARRAY, V.FLOAT32)
        random_tensors(writer, np.random.default_rng(4), swappable, lambda t, b: [(3, 2 * b)] if b > 1 else [(3, 4)])

    path = os.path.join(OUT, "big-endian-converted.gguf")
    source = os.path.join(OUT, "big-endian-converted.source.gguf")
    golden(source, write(source, to_convert))
    shutil.copyfile(source, path)
    gguf_convert_endian.input = lambda prompt: "YES"
    gguf_convert_endian.convert_byteorder(gguf.GGUFReader(path, "r+"), argparse.Namespace(order="big", dry_run=False))
    golden(path, {})

    def aligned(writer, written):
        writer.add_key_value("test.string", "eight", V.STRING)
        random_tensors(writer, np.random.default_rng(5), [Q.F16, Q.I8, Q.Q4_0, Q.F64], lambda t, b: [(3,), (1, 3)] if b == 1 else [(b,)])

    path = os.path.join(OUT, "alignment-8.gguf")
    golden(path, write(path, aligned, alignment=8))

    if args.converted:
        path = os.path.join(OUT, "qwen3-converter.gguf")
        shutil.copyfile(args.converted, path)
        golden(path, {})


if __name__ == "__main__":
    sys.exit(main())
