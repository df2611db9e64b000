# The dequantization formulas of ../../shared/quantized-layouts.md (the team's notes on every layout), written
# from that text in numpy alone, independent of the reference implementations. make-quantized-models.py checks
# that every golden tensor the references computed equals these bit for bit, so a fixture, the notes and the
# references agree. Each function takes the stored parts of one module (numpy arrays, as read from the folder)
# and returns the logical tensor in the reference's output dtype (float32 arrays rounded to it, and the dtype).
import json

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16


def to_bf16(x):
    """float32 -> bfloat16, round to nearest even (ml_dtypes does that from float32)."""
    return np.asarray(x, dtype=np.float32).astype(BF16)


def to_f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def bitstream(words, bits, count, axis):
    """Unsigned codes from 32-bit words along `axis`, LSB-first: code i at bits [i*bits, (i+1)*bits) of the
    little-endian stream of the words along that axis."""
    w = np.moveaxis(np.asarray(words).view(np.uint32), axis, -1)
    planes = ((w[..., None] >> np.arange(32, dtype=np.uint32)) & 1).reshape(*w.shape[:-1], -1)
    planes = planes[..., : count * bits].reshape(*w.shape[:-1], count, bits).astype(np.int64)
    codes = (planes << np.arange(bits)).sum(axis=-1)
    return np.moveaxis(codes, -1, axis)


# ---- GPTQ (§4) ----------------------------------------------------------------------------------------------


def gptq(qweight, qzeros, scales, g_idx, bits, v1):
    in_features, out_features = g_idx.shape[0], scales.shape[1]
    q = bitstream(qweight, bits, in_features, axis=0)  # [in, out]
    z = bitstream(qzeros, bits, out_features, axis=1)  # [groups, out]
    if v1:
        z = z + 1
    g = g_idx.astype(np.int64)
    s = scales.astype(np.float32)[g]  # [in, out]
    wt = to_f16(s * (q - z[g]).astype(np.float32))
    return wt.T, np.float16


# ---- AWQ GEMM (§5) ------------------------------------------------------------------------------------------

AWQ_SHIFT = [0, 4, 1, 5, 2, 6, 3, 7]  # column 8c + j is at nibble AWQ_SHIFT[j] of word c


def awq_unpack(words):
    w = np.asarray(words).view(np.uint32)
    nibbles = [(w >> np.uint32(4 * AWQ_SHIFT[j])) & 15 for j in range(8)]
    return np.stack(nibbles, axis=-1).reshape(w.shape[0], -1).astype(np.int64)


def awq(qweight, qzeros, scales, group_size):
    q = awq_unpack(qweight)  # [in, out]
    z = awq_unpack(qzeros)  # [groups, out]
    g = np.arange(q.shape[0]) // group_size
    wt = to_f16((q - z[g]).astype(np.float32) * scales.astype(np.float32)[g])
    return wt.T, np.float16


# ---- bitsandbytes (§6) --------------------------------------------------------------------------------------

NF4 = [
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
]
# bitsandbytes functional.py get_4bit_type("fp4") writes its code 8 as the Python int -0, which is +0: the
# table (and the stored quant_map) holds +0.0 there, not -0.0.
BNB_FP4 = [0, 0.0625, 8, 12, 4, 6, 2, 3, 0, -0.0625, -8, -12, -4, -6, -2, -3]


def bnb_4bit(weight, absmax, quant_map, quant_state, nested_absmax=None, nested_quant_map=None):
    state = json.loads(bytes(np.asarray(quant_state, dtype=np.uint8)).decode())
    table = np.array(NF4 if state["quant_type"] == "nf4" else [v / 12 for v in BNB_FP4], dtype=np.float32)
    assert np.array_equal(table.view(np.uint32), np.asarray(quant_map, dtype=np.float32).view(np.uint32))
    out_features, in_features = state["shape"]
    n = out_features * in_features
    b = np.asarray(weight).view(np.uint8).reshape(-1)
    codes = np.stack([b >> 4, b & 15], axis=-1).reshape(-1)[:n]  # high nibble first
    if "nested_blocksize" in state:
        i = np.arange(absmax.shape[0])
        scaled = (
            nested_quant_map.astype(np.float32)[absmax.astype(np.int64)] * nested_absmax[i // state["nested_blocksize"]]
        ).astype(np.float32)
        absmax = (scaled + np.float32(state["nested_offset"])).astype(np.float32)
    flat = (table[codes] * absmax.astype(np.float32)[np.arange(n) // state["blocksize"]]).astype(np.float32)
    dtype = {"bfloat16": BF16, "float16": np.float16, "float32": np.float32}[state["dtype"]]
    return flat.reshape(out_features, in_features).astype(dtype), dtype


def bnb_8bit(weight, scb):
    w = (weight.astype(np.float32) * scb.astype(np.float32)[:, None]).astype(np.float32)
    return (w * np.float32(7.874015718698502e-3)).astype(np.float32), np.float32


# ---- FP8 (§2) -----------------------------------------------------------------------------------------------


def fp8_blocks(weight_f32, scale, block):
    rows, cols = weight_f32.shape
    s = np.repeat(np.repeat(np.asarray(scale, dtype=np.float32), block[0], axis=0), block[1], axis=1)[:rows, :cols]
    return to_bf16((weight_f32 * s).astype(np.float32)), BF16


def fp8_scaled(weight_f32, scale):
    """Per tensor ([] scale) or per row ([out, 1])."""
    return to_bf16((weight_f32 * np.asarray(scale, dtype=np.float32)).astype(np.float32)), BF16


# ---- MXFP4 (§1) ---------------------------------------------------------------------------------------------

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


def mxfp4(blocks, scales):
    """[E, out, in/32, 16] U8 and [E, out, in/32] E8M0 -> [E, in, out] (transformers' orientation), bfloat16."""
    b = np.asarray(blocks, dtype=np.uint8)
    codes = np.stack([b & 15, b >> 4], axis=-1).reshape(*b.shape[:-1], 32)  # low nibble first
    values = np.ldexp(E2M1[codes], scales.astype(np.int64)[..., None] - 127)  # exact in float64
    with np.errstate(over="ignore"):
        w = values.reshape(*b.shape[:-2], -1).astype(np.float32)  # exact or ±inf
    return to_bf16(w).transpose(0, 2, 1), BF16


# ---- compressed-tensors (§3) --------------------------------------------------------------------------------


def ct_pack_quantized(
    weight_packed, weight_scale, weight_shape, num_bits, group_size, symmetric, zero_point=None, g_idx=None
):
    rows, cols = [int(v) for v in weight_shape]
    u = bitstream(weight_packed, num_bits, cols, axis=1)  # [out, in], unsigned
    n_groups = weight_scale.shape[1]
    zu = np.full((rows, n_groups), 2 ** (num_bits - 1)) if symmetric else bitstream(zero_point, num_bits, rows, axis=0)
    g = np.asarray(g_idx, dtype=np.int64) if g_idx is not None else np.arange(cols) // group_size
    s = weight_scale.astype(np.float32)
    w = (u - zu[:, g]).astype(np.float32) * s[:, g]
    return w.astype(weight_scale.dtype), weight_scale.dtype


def ct_channel(weight_f32, weight_scale):
    """int-quantized / float-quantized with a channel scale: T(q * scale), T = the scale dtype."""
    w = weight_f32 * weight_scale.astype(np.float32)
    return w.astype(weight_scale.dtype), weight_scale.dtype


E2M1_F32 = E2M1.astype(np.float32)


# ModelOpt's nvfp4_tensor.py e2m1_values holds 0 (+0) at code 8 where the others (transformers' MXFP4 table,
# compressed-tensors' sign-times-magnitude) give -0.
E2M1_MODELOPT = np.where(np.arange(16) == 8, np.float32(0), E2M1_F32).astype(np.float32)


def fp4_unpack(packed, table=E2M1_F32):
    b = np.asarray(packed, dtype=np.uint8)
    return table[np.stack([b & 15, b >> 4], axis=-1).reshape(b.shape[0], -1)]  # low nibble first


def ct_nvfp4(weight_packed, weight_scale_f32, weight_global_scale):
    s = (weight_scale_f32 / np.float32(weight_global_scale.reshape(-1)[0])).astype(np.float32)
    w = (fp4_unpack(weight_packed) * np.repeat(s, 16, axis=1)).astype(np.float32)
    return to_bf16(w), BF16


def modelopt_nvfp4(weight, weight_scale_f32, weight_scale_2):
    s = (weight_scale_f32 * np.float32(weight_scale_2.reshape(-1)[0])).astype(np.float32)
    w = (fp4_unpack(weight, E2M1_MODELOPT) * np.repeat(s, 16, axis=1)).astype(np.float32)
    return to_bf16(w), BF16
