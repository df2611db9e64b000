// Q8_0 quantization: ggml's block_q8_0, 32 values in 34 bytes, an F16 scale d (little-endian) then 32 int8.
//
// Step for step in F32, as ggml's quantize_row_q8_0_ref (what ggml_quantize_chunk runs for Q8_0, with or without an
// importance matrix) and gguf-py's quants.Q8_0 (llama.cpp's converter) both compute it:
//   amax = max |x|,  d = amax / 127,  id = d == 0 ? 0 : 1 / d,  q = round(x * id) half away from zero,
//   the scale stored as d rounded to F16 (nearest even).
// ggml-cpu's x86 quantize_row_q8_0, which quantizes activations at run time, differs: id = 127 / amax, ties to even.
//
// Where x * id leaves the int8 range, C's conversion to int8 (undefined) and gguf-py's cast are what x86-64 does
// (cvttss2si, then the low byte). That happens only for a scale below the smallest normal F32 (amax < 1.5e-36:
// 1 / d is then inexact or infinite), whose F16 is 0, so every value of the block dequantizes to 0 whatever q
// holds. To stay byte-identical there too, q is the integer's low byte, and 0 for a NaN or anything outside the
// 32-bit range. NaN and infinite inputs are refused: they would make a block that dequantizes to NaN in all 32
// places (d NaN or infinite), which is no answer.
//
// quantizeQ8_0(src, dst, blocks), on F32, is ggml-quant.ts's loop for Q8_0. Each block's input is read before its
// output is stored, so src == dst works (the output is narrower), as the conversion kernels' in-place contract
// has it (assembly/convert.ts).

import { ENCODER, setSplat, splat, toF16Bits } from './convert';

const BLOCK: usize = 32;
const BLOCK_BYTES: usize = 34;
const F32_MAX: f32 = 3.4028234663852886e38;
const F32_MIN_NORMAL: f32 = 1.1754943508222875e-38;

// The block the scalar path is working on, copied first: the output may overwrite its input (src == dst).
const VALUES = memory.data(<i32>BLOCK << 2, 16);

// Rounding half away from zero is truncating v + copysign(0.5 - 2^-25, v): with 0.5 itself, 0.5 - 2^-25 (the
// largest F32 below 0.5) would give 1 - 2^-25, a tie that rounds up to 1. Checked for every finite F32.
const HALF_BELOW: f32 = 0.4999999701976776;

@inline function roundHalfAway(v: f32): f32 {
  return trunc(v + copysign<f32>(HALF_BELOW, v));
}

// numpy's float to int8 cast on x86-64, for a value already rounded to an integer (see the top).
@inline function int8Of(r: f32): u8 {
  return abs(r) < 2147483648.0 ? <u8><i32>r : 0;
}

// Quantizes the block in VALUES into `out`; -1, or the index in the block of its first NaN or infinity.
function quantizeValues(out: usize): i32 {
  let amax: f32 = 0;
  for (let j: usize = 0; j < BLOCK; j++) amax = max(amax, abs(load<f32>(VALUES + (j << 2))));
  if (!(amax <= F32_MAX)) {
    for (let j: usize = 0; j < BLOCK; j++) if (!(abs(load<f32>(VALUES + (j << 2))) <= F32_MAX)) return <i32>j;
  }
  let d = amax / 127;
  let id: f32 = d != 0 ? 1 / d : 0;
  for (let j: usize = 0; j < BLOCK; j++) store<u8>(out + 2 + j, int8Of(roundHalfAway(load<f32>(VALUES + (j << 2)) * id)));
  store<u16>(out, <u16>toF16Bits(reinterpret<u32>(d)));
  return -1;
}

// Slots in the conversion kernels' SPLATS (see there why constants are loaded).
const Q_HALF_BELOW: u32 = ENCODER;
const Q_SIGN: u32 = ENCODER + 1;
const Q_MAGIC: u32 = ENCODER + 2; // the F32 1.5 * 2^23, whose ulp is 1

@inline function prepareRounding(): void {
  setSplat(Q_HALF_BELOW, reinterpret<u32>(HALF_BELOW));
  setSplat(Q_SIGN, 0x80000000);
  setSplat(Q_MAGIC, 0x4b400000);
}

// roundHalfAway, then the integer as i32, four lanes at a time; |v| < 128 here. Adding 1.5 * 2^23 puts the
// integer in the low mantissa bits: cheaper than i32x4.trunc_sat_f32x4_s, which V8 expands to about 8 x64
// instructions (measured: the kernel 24% faster).
@inline function roundX4(v: v128): v128 {
  let rounded = f32x4.trunc(f32x4.add(v, v128.or(v128.and(v, splat(Q_SIGN)), splat(Q_HALF_BELOW))));
  return i32x4.sub(f32x4.add(rounded, splat(Q_MAGIC)), splat(Q_MAGIC));
}

// The larger magnitude, lane by lane, as an integer compare of the bits: with the sign cleared, integer order is
// float order and every NaN sorts above infinity, so max|x| still comes out NaN when one is. f32x4.max, which V8
// expands to about 9 x64 instructions for its NaN and signed-zero rules, made the kernel twice as slow.
@inline function maxAbs(a: v128, b: v128): v128 {
  return i32x4.max_s(f32x4.abs(a), f32x4.abs(b));
}

// One block with vectors; false, storing nothing, for a block whose scale is below the smallest normal F32 (or not
// finite), which the scalar path takes.
@inline function quantizeBlockX4(at: usize, out: usize): bool {
  let v0 = v128.load(at);
  let v1 = v128.load(at, 16);
  let v2 = v128.load(at, 32);
  let v3 = v128.load(at, 48);
  let v4 = v128.load(at, 64);
  let v5 = v128.load(at, 80);
  let v6 = v128.load(at, 96);
  let v7 = v128.load(at, 112);
  let m = i32x4.max_s(i32x4.max_s(maxAbs(v0, v1), maxAbs(v2, v3)), i32x4.max_s(maxAbs(v4, v5), maxAbs(v6, v7)));
  m = i32x4.max_s(m, i32x4.shuffle(m, m, 2, 3, 0, 1));
  m = i32x4.max_s(m, i32x4.shuffle(m, m, 1, 0, 3, 2));
  let d = reinterpret<f32>(i32x4.extract_lane(m, 0)) / 127;
  if (!(d <= F32_MAX) || (d != 0 && d < F32_MIN_NORMAL)) return false;
  let id = f32x4.splat(d != 0 ? 1 / d : 0);
  let q0 = i16x8.narrow_i32x4_s(roundX4(f32x4.mul(v0, id)), roundX4(f32x4.mul(v1, id)));
  let q1 = i16x8.narrow_i32x4_s(roundX4(f32x4.mul(v2, id)), roundX4(f32x4.mul(v3, id)));
  let q2 = i16x8.narrow_i32x4_s(roundX4(f32x4.mul(v4, id)), roundX4(f32x4.mul(v5, id)));
  let q3 = i16x8.narrow_i32x4_s(roundX4(f32x4.mul(v6, id)), roundX4(f32x4.mul(v7, id)));
  store<u16>(out, <u16>toF16Bits(reinterpret<u32>(d)));
  v128.store(out + 2, i8x16.narrow_i16x8_s(q0, q1));
  v128.store(out + 18, i8x16.narrow_i16x8_s(q2, q3));
  return true;
}

/**
 * Quantizes `blocks` blocks of 32 F32 values at `src` into `blocks` * 34 bytes at `dst` (src == dst allowed).
 * Returns -1, or the index of the first NaN or infinite value, in which case the blocks before its block are
 * written and the rest untouched.
 */
export function quantizeQ8_0(src: usize, dst: usize, blocks: usize): i32 {
  prepareRounding();
  for (let b: usize = 0; b < blocks; b++) {
    let at = src + b * (BLOCK << 2);
    let out = dst + b * BLOCK_BYTES;
    if (quantizeBlockX4(at, out)) continue;
    memory.copy(VALUES, at, BLOCK << 2);
    let bad = quantizeValues(out);
    if (bad >= 0) return <i32>(b * BLOCK) + bad;
  }
  return -1;
}
