// Q8_0 quantization: ggml's block_q8_0, 32 values in 34 bytes, an F16 scale d (little-endian) then 32 int8.
//
// The definition followed is gguf-py's quants.Q8_0 (llama.cpp's converter), step for step in F32:
//   amax = max |x|,  d = amax / 127,  id = d == 0 ? 0 : 1 / d,  q = round(x * id) half away from zero,
//   the scale stored as d rounded to F16 (nearest even).
// ggml's quantize_row_q8_0_ref computes the same; its x86 SIMD quantize_row_q8_0 (which llama-quantize does not
// use for files) differs: id = 127 / amax, and _mm256_round_ps rounds ties to even.
//
// Where x * id leaves the int8 range gguf-py's cast to int8 is the platform's float to int conversion (C leaves
// it undefined). That happens only for a scale below the smallest normal F32 (amax < 1.5e-36: 1 / d is then
// inexact or infinite), whose F16 is 0, so every value of the block dequantizes to 0 whatever q holds. To stay
// byte-identical there too, q is what numpy gives on x86-64 (cvttss2si, then the low byte): the integer's low
// byte, and 0 for a NaN or anything outside the 32-bit range. NaN and infinite inputs are refused: gguf-py would
// write a block that dequantizes to NaN in all 32 places (d NaN or infinite), which is no answer.
//
// One export, quantizeQ8_0(from, src, dst, blocks), reads F32, F16 or BF16 (indices in DTYPES) through the
// conversion kernels' decoders. Each block's input is loaded before its output is stored, so src == dst works
// (the output is narrower), as the conversion kernels' in-place contract has it (assembly/convert.ts).

import { BF16, F16, F32 } from './dtypes';
import { ENCODER, ieeeBits, ieeeBitsX4, prepareF16, setSplat, splat, toF16Bits } from './convert';

const BLOCK: usize = 32;
const BLOCK_BYTES: usize = 34;
const F32_MAX: f32 = 3.4028234663852886e38;
const F32_MIN_NORMAL: f32 = 1.1754943508222875e-38;

// The values of the block the scalar path is working on, as F32.
const VALUES = memory.data(<i32>BLOCK << 2, 16);

@inline function roundHalfAway(v: f32): f32 {
  let t = trunc(v);
  return abs(v - t) >= 0.5 ? t + copysign<f32>(1, v) : t;
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

// Slots in the conversion kernels' SPLATS (see there why constants are loaded): the encoders' slots, which the
// decoders (F16) leave alone.
const Q_HALF: u32 = ENCODER; // the F32 0.5
const Q_ONE: u32 = ENCODER + 1; // the F32 1.0
const Q_SIGN: u32 = ENCODER + 2;

@inline function prepareRounding(): void {
  setSplat(Q_HALF, 0x3f000000);
  setSplat(Q_ONE, 0x3f800000);
  setSplat(Q_SIGN, 0x80000000);
}

// roundHalfAway and the conversion to i32, four lanes at a time; |v| < 128 here.
@inline function roundX4(v: v128): v128 {
  let t = f32x4.trunc(v);
  let away = f32x4.ge(f32x4.abs(f32x4.sub(v, t)), splat(Q_HALF));
  let step = v128.and(away, v128.or(v128.and(v, splat(Q_SIGN)), splat(Q_ONE)));
  return i32x4.trunc_sat_f32x4_s(f32x4.add(t, step));
}

// The F32 bits of elements first + 4k .. first + 4k + 3 of the source.
@inline function lanes(from: u32, src: usize, first: usize, k: usize): v128 {
  return ieeeBitsX4(from, F32, src, first + ((k >> 1) << 3), (k & 1) == 1);
}

@inline function maxAbs(a: v128, b: v128): v128 {
  return f32x4.max(f32x4.abs(a), f32x4.abs(b));
}

// One block with vectors. A block whose scale is below the smallest normal F32 (or not finite) is left to the
// scalar path: its values go to VALUES and the result is false.
@inline function quantizeBlockX4(from: u32, src: usize, first: usize, out: usize): bool {
  let v0 = lanes(from, src, first, 0);
  let v1 = lanes(from, src, first, 1);
  let v2 = lanes(from, src, first, 2);
  let v3 = lanes(from, src, first, 3);
  let v4 = lanes(from, src, first, 4);
  let v5 = lanes(from, src, first, 5);
  let v6 = lanes(from, src, first, 6);
  let v7 = lanes(from, src, first, 7);
  let m = f32x4.max(f32x4.max(maxAbs(v0, v1), maxAbs(v2, v3)), f32x4.max(maxAbs(v4, v5), maxAbs(v6, v7)));
  m = f32x4.max(m, i32x4.shuffle(m, m, 2, 3, 0, 1));
  m = f32x4.max(m, i32x4.shuffle(m, m, 1, 0, 3, 2));
  let d = f32x4.extract_lane(m, 0) / 127;
  if (!(d <= F32_MAX) || (d != 0 && d < F32_MIN_NORMAL)) {
    v128.store(VALUES, v0);
    v128.store(VALUES, v1, 16);
    v128.store(VALUES, v2, 32);
    v128.store(VALUES, v3, 48);
    v128.store(VALUES, v4, 64);
    v128.store(VALUES, v5, 80);
    v128.store(VALUES, v6, 96);
    v128.store(VALUES, v7, 112);
    return false;
  }
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

@inline function quantizeBlocks(from: u32, src: usize, dst: usize, blocks: usize): i32 {
  if (ASC_FEATURE_SIMD) {
    if (from == F16) prepareF16();
    prepareRounding();
  }
  for (let b: usize = 0; b < blocks; b++) {
    let first = b * BLOCK;
    let out = dst + b * BLOCK_BYTES;
    if (ASC_FEATURE_SIMD) {
      if (quantizeBlockX4(from, src, first, out)) continue;
    } else {
      for (let j: usize = 0; j < BLOCK; j++) store<u32>(VALUES + (j << 2), ieeeBits(from, F32, src, first + j));
    }
    let bad = quantizeValues(out);
    if (bad >= 0) return <i32>first + bad;
  }
  return -1;
}

/**
 * Quantizes `blocks` blocks of 32 values at `src` (dtype `from`: F32, F16 or BF16) into `blocks` * 34 bytes at
 * `dst` (src == dst allowed). Returns -1, or the index of the first NaN or infinite value, in which case the
 * blocks before its block are written and the rest untouched; -2 for a `from` with no kernel, touching nothing.
 */
export function quantizeQ8_0(from: u32, src: usize, dst: usize, blocks: usize): i32 {
  if (from == F32) return quantizeBlocks(F32, src, dst, blocks);
  if (from == F16) return quantizeBlocks(F16, src, dst, blocks);
  if (from == BF16) return quantizeBlocks(BF16, src, dst, blocks);
  return -2;
}
