#!/usr/bin/env python3
"""Golden Q8_0 vectors from gguf-py (llama.cpp's converter library), for test/gguf/ggml-quantizers.test.ts.

Writes test/fixtures/gguf/q8_0/:
  values.f32   the inputs, little-endian float32, 32 per block
  q8_0.bin     gguf.quants.quantize(values, Q8_0): 34 bytes per block (F16 scale, then 32 int8)
  cases.json   [[case name, block count], ...] in file order, so that a failure names its case

The cases aim at every decision of the definition: random blocks of several scales, zeros and -0.0, a
single non-zero value, ties (x * id exactly k + 0.5, both signs, for exact and inexact scales), values
where x * id and x / d round apart, scales that are exact and not, scales on and beside F16 ties, F16
subnormal scales, scales that overflow F16 (huge values, up to the largest float32), and values so small
that the scale is below the smallest normal float32, where numpy's float -> int8 cast gets values outside
the int8 range (x86-64: the low byte of the 32-bit conversion). NaN and infinities are left out: the
library refuses them (assembly/q8_0.ts says why); this script prints what gguf-py makes of them.

Run once on x86-64, never in CI (the tests read the files):

    python3 -m venv /work/venv-gguf && /work/venv-gguf/bin/pip install gguf numpy
    /work/venv-gguf/bin/python scripts/make-q8-vectors.py
"""
import json
import os
import platform
import warnings

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import quantize

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "test", "fixtures", "gguf", "q8_0")
assert platform.machine() == "x86_64", "the out-of-range casts are x86-64's"

f32 = np.float32
rng = np.random.default_rng(20261202)
cases = []


def add(name, blocks):
    blocks = np.asarray(blocks, dtype=f32).reshape(-1, 32)
    cases.append((name, blocks))


def block_with(amax, values, fill=0.0):
    """A block holding `values`, then `amax` (which fixes the scale), the rest `fill`."""
    b = np.full(32, fill, dtype=f32)
    b[: len(values)] = values
    b[31] = amax
    return b


def nudge(x, ulps):
    x = f32(x)
    for _ in range(abs(ulps)):
        x = np.nextafter(x, f32(np.inf) if ulps > 0 else f32(-np.inf), dtype=f32)
    return x


# Random normal blocks of several scales, and blocks with one outlier among small values.
for scale in [1e-3, 0.02, 1.0, 100.0, 1e4]:
    add(f"normal x {scale}", rng.standard_normal((8, 32)) * scale)
outliers = rng.standard_normal((8, 32)) * 0.01
outliers[np.arange(8), rng.integers(0, 32, 8)] = rng.choice([-1, 1], 8) * rng.uniform(1, 50, 8)
add("one outlier", outliers)

# Zeros and signed zeros; a single non-zero value.
add("zeros", np.zeros(32))
add("negative zeros", np.full(32, -0.0))
add("mixed zeros", np.where(np.arange(32) % 2 == 0, f32(0.0), f32(-0.0)))
single = np.zeros((6, 32), dtype=f32)
for row, (pos, v) in enumerate([(0, 1.0), (7, -3.7), (31, 1e-5), (15, -1e-30), (3, 6.5e4), (30, -2.5)]):
    single[row, pos] = v
add("single non-zero", single)

# Ties with an exact scale: amax 127 * 2^e gives d = 2^e, id = 2^-e, and x = (k + 0.5) * 2^e is a tie.
for e in [0, -10, -3, 4, 12]:
    ties = np.arange(-127, 127, dtype=np.float64) + 0.5
    rows = []
    for chunk in np.array_split(ties, 9):
        rows.append(block_with(127 * 2.0**e, chunk * 2.0**e))
        rows.append(block_with(-127 * 2.0**e, -chunk * 2.0**e))
    add(f"ties, d = 2^{e}", rows)

# One and two float32 ulps either side of every tie at d = 1, where a rounding by adding 0.5 goes wrong
# (0.5 - 2^-25 + 0.5 rounds up to 1 in float32).
near = np.array([nudge(k + 0.5, u) for k in range(-127, 127) for u in [-2, -1, 1, 2]], dtype=f32)
add("next to ties, d = 1", [block_with(127, chunk) for chunk in np.array_split(near, 34)])

# Ties and near-ties with inexact scales: x such that fl(x * id) is exactly k + 0.5, and its neighbours;
# then values where fl(x * id) and fl(x / d) round to different integers.
ties, apart = [], []
for amax in rng.uniform(0.01, 100, 400).astype(f32):
    d = f32(amax / f32(127))
    id = f32(f32(1) / d)
    k = int(rng.integers(-127, 127))
    x = f32((k + 0.5) * float(d))
    for step in range(-3, 4):
        y = nudge(x, step)
        p = f32(y * id)
        if abs(float(p)) <= 127 and float(p) - np.floor(float(p)) == 0.5:
            ties.append((amax, [nudge(y, -1), y, nudge(y, 1)]))
            break
    for step in range(-4, 5):
        y = nudge(x, step)
        a, b = float(f32(y * id)), float(f32(y / d))
        if abs(a) <= 127 and np.floor(abs(a) + 0.5) != np.floor(abs(b) + 0.5):
            apart.append((amax, [y]))
            break
add("ties, inexact d", [block_with(amax, v) for amax, v in ties[:40]])
add("x * id and x / d round apart", [block_with(amax, v) for amax, v in apart[:40]])
assert len(ties) >= 40 and len(apart) >= 20, (len(ties), len(apart))

# Scales exact and not.
add("d exact", [block_with(127 * m * 2.0**e, rng.uniform(-1, 1, 31) * 127 * m * 2.0**e) for m, e in [(1, 0), (3, -5), (5, 7), (1.5, -1)]])
add("d inexact", [block_with(a, rng.uniform(-1, 1, 31) * a) for a in [1.0, 3.0, 0.1, 1e-3, 12345.678]])

# Scales on an F16 tie (halfway between two F16 values: 127 * h is exact in float32, and so is h back),
# and one float32 ulp either side; normal and subnormal F16.
f16_ties = []
for bits in [0x3C00, 0x3C01, 0x4000, 0x7BFE, 0x0400, 0x2E66, 0x0001, 0x0002, 0x0155, 0x03FF]:
    lo = float(np.array([bits], dtype=np.uint16).view(np.float16)[0])
    hi = float(np.array([bits + 1], dtype=np.uint16).view(np.float16)[0])
    h = f32((lo + hi) / 2)
    for step in [-1, 0, 1]:
        amax = nudge(f32(127 * float(h)), step)
        f16_ties.append(block_with(amax, rng.uniform(-1, 1, 31) * float(amax)))
add("d on and beside F16 ties", f16_ties)

# F16 subnormal scales, and scales below half the smallest F16 subnormal (2^-25), which round to 0.
add("F16 subnormal d", [block_with(127 * 2.0**e, rng.uniform(-1, 1, 31) * 127 * 2.0**e) for e in [-15, -18, -20, -24, -25, -26, -30]])

# Scales that overflow F16: 65504 is the largest F16, 65520 the tie that rounds to infinity.
big = [127 * 65504.0, 127 * 65519.0, 127 * 65520.0, 127 * 1e5, 1e30, float(np.finfo(f32).max)]
add("d overflows F16", [block_with(a, rng.uniform(-1, 1, 31) * a) for a in big])
add("largest float32s", [np.full(32, np.finfo(f32).max), np.where(np.arange(32) % 2, np.finfo(f32).max, -np.finfo(f32).max)])

# Tiny values: scales below the smallest normal float32 (amax < 127 * 2^-126), down to float32's smallest
# subnormal, where fl(1 / d) is inexact or infinite and x * id leaves the int8 range.
tiny = []
tiny_f32 = np.finfo(f32).smallest_normal
for amax in [1e-45, 3e-45, 1e-44, 1e-42, 1e-40, 3e-39, 1e-38, float(127 * tiny_f32) * 0.5, 1e-37]:
    tiny.append(block_with(amax, rng.uniform(-1, 1, 31) * amax))
    tiny.append(block_with(amax, np.linspace(-amax, amax, 31)))
for step in [-2, -1, 0, 1, 2]:
    amax = nudge(f32(127 * float(tiny_f32)), step)
    tiny.append(block_with(amax, rng.uniform(-1, 1, 31) * float(amax)))
add("d below the smallest normal float32", tiny)

# Random finite float32 bit patterns, exponents across the whole range.
random_bits = rng.integers(0, 2**32, (24, 32), dtype=np.uint64).astype(np.uint32)
random_values = random_bits.view(f32)
random_values[~np.isfinite(random_values)] = 1.0
add("random float32 bits", random_values)
# The same with one exponent per block, so that the values are of one size.
per_block = (random_bits & np.uint32(0x807FFFFF)) | (rng.integers(1, 254, (24, 1), dtype=np.uint32) << np.uint32(23))
add("random mantissas, one exponent a block", per_block.view(f32))

values = np.concatenate([blocks for _, blocks in cases]).ravel()
assert np.all(np.isfinite(values))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    quantized = quantize(values, GGMLQuantizationType.Q8_0)
assert quantized.dtype == np.uint8 and quantized.size == values.size // 32 * 34

os.makedirs(OUT, exist_ok=True)
values.astype("<f4").tofile(os.path.join(OUT, "values.f32"))
quantized.tofile(os.path.join(OUT, "q8_0.bin"))
with open(os.path.join(OUT, "cases.json"), "w") as f:
    f.write("[\n" + ",\n".join(json.dumps([name, len(blocks)]) for name, blocks in cases) + "\n]\n")

print(f"{values.size // 32} blocks, {len(cases)} cases; numpy warnings: {sorted({str(w.message) for w in caught})}")
for label, block in [("NaN", [np.nan] + [1.0] * 31), ("infinity", [np.inf] + [1.0] * 31), ("-infinity", [-np.inf] + [1.0] * 31)]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = quantize(np.array(block, dtype=f32), GGMLQuantizationType.Q8_0)
    print(f"gguf-py on a block with {label}: d bits {q[:2].view(np.uint16)[0]:#06x}, q {sorted(set(q[2:].view(np.int8).tolist()))}")
