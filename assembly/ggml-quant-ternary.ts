// ggml's ternary types (BitNet b1.58, TriLMs), blocks of 256 values -1, 0, 1 times an F16 scale d = max|x|:
// quantize_row_tq1_0_ref and quantize_row_tq2_0_ref, which ggml_quantize_chunk runs for them with or without an
// importance matrix. Each trit is lroundf(x / d) + 1: x * (1 / d) rounded half away from zero by glibc's lroundf,
// whose NaN and infinities (a scale whose inverse overflows) come out as LONG_MIN, so as trit 1 once truncated to
// int. Four values a vector, in the order ggml packs them.

import { halfBits } from './ggml-quant-math';

// The largest F32 below 0.5 (see roundAway), and the sign bit.
const HALF_BELOW = memory.data<u32>([0x3effffff, 0x3effffff, 0x3effffff, 0x3effffff]);
const SIGN = memory.data<u32>([0x80000000, 0x80000000, 0x80000000, 0x80000000]);

/** max|x| over the 256 values at `x` (ggml's MAX(amax, fabsf(v)): the order does not matter; finite values). */
@inline function absMax(x: usize): f32 {
  let m = f32x4.abs(v128.load(x));
  for (let k: usize = 16; k < 1024; k += 16) m = i32x4.max_s(m, f32x4.abs(v128.load(x + k)));
  m = i32x4.max_s(m, i32x4.shuffle(m, m, 2, 3, 0, 1));
  return f32x4.extract_lane(i32x4.max_s(m, i32x4.shuffle(m, m, 1, 0, 3, 2)), 0);
}

/** The trits (0, 1, 2) of the four values at `at`: lroundf(x * id) + 1, NaN and infinities giving 1. */
@inline function tritsX4(at: usize, id: v128): v128 {
  let p = f32x4.mul(v128.load(at), id);
  let rounded = f32x4.trunc(f32x4.add(p, v128.or(v128.and(p, v128.load(SIGN)), v128.load(HALF_BELOW))));
  // |x * id| <= 1 + 2^-23 whenever id is finite (|x| <= d); else it is infinite or NaN.
  let finite = f32x4.le(f32x4.abs(p), f32x4.splat(2));
  return i32x4.add(v128.and(i32x4.trunc_sat_f32x4_s(rounded), finite), i32x4.splat(1));
}

/** Base-3 digits, the first the most significant, to the byte ggml stores: 256 * q / 243 rounded up. */
@inline function tritsBytes(q: v128): v128 {
  // (256 q + 242) / 243 in F32: the dividend (below 2^16) is exact, and the quotient's rounding error (at most
  // 2^-24 relative) is far below the 1/243 that separates a non-integer quotient from the next integer.
  let dividend = f32x4.convert_i32x4_s(i32x4.add(i32x4.shl(q, 8), i32x4.splat(242)));
  return i32x4.trunc_sat_f32x4_s(f32x4.trunc(f32x4.div(dividend, f32x4.splat(243))));
}

/** The low bytes of the four lanes of `v` at `at`. */
@inline function storeLowBytes(at: usize, v: v128): void {
  store<u32>(at, i32x4.extract_lane(i8x16.shuffle(v, v, 0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0));
}

/** Byte m of a run (four at a time): the trits of `digits` values `stride` apart from x + 4 m, as tritsBytes. */
function tritsRun(x: usize, bytes: usize, digits: usize, stride: usize, id: v128, out: usize): void {
  for (let m: usize = 0; m < bytes; m += 4) {
    let q = i32x4.splat(0);
    for (let n: usize = 0; n < digits; n++) q = i32x4.add(i32x4.mul(q, i32x4.splat(3)), tritsX4(x + ((m + n * stride) << 2), id));
    storeLowBytes(out + m, tritsBytes(digits == 4 ? i32x4.mul(q, i32x4.splat(3)) : q));
  }
}

export function quantizeTQ1_0Block(x: usize, y: usize): void {
  let d = absMax(x);
  let id = f32x4.splat(d != 0 ? <f32>1 / d : 0);
  store<u16>(y + 52, halfBits(d));
  // qs[0..31]: five values 32 apart each; qs[32..47]: five values 16 apart from 160; qh[0..3]: four values 4 apart
  // from 240, times 3 so that their first trit is the most significant as well.
  tritsRun(x, 32, 5, 32, id, y);
  tritsRun(x + (160 << 2), 16, 5, 16, id, y + 32);
  tritsRun(x + (240 << 2), 4, 4, 4, id, y + 48);
}

export function quantizeTQ2_0Block(x: usize, y: usize): void {
  let d = absMax(x);
  let id = f32x4.splat(d != 0 ? <f32>1 / d : 0);
  store<u16>(y + 64, halfBits(d));
  // Byte m of each half: four values 32 apart, two bits each, the first in the low bits.
  let three = i32x4.splat(3);
  for (let half: usize = 0; half < 2; half++) {
    let at = x + (half << 9);
    for (let m: usize = 0; m < 32; m += 4) {
      let q = i32x4.splat(0);
      for (let n: usize = 0; n < 4; n++) q = v128.or(q, i32x4.shl(v128.and(tritsX4(at + ((m + n * 32) << 2), id), three), 2 * <i32>n));
      storeLowBytes(y + (half << 5) + m, q);
    }
  }
}
