// ggml's first quantization types, blocks of 32 values with one F16 scale (Q4_0, Q5_0) or a scale and a minimum
// (Q4_1, Q5_1): quantize_row_<type>_ref, which ggml_quantize_chunk runs for them with no importance matrix. Each
// function quantizes the block of 32 finite F32 at `x` into the block at `y`, with vectors where the order of
// ggml's scans does not matter. The codes are C's float to int conversions as x86-64 makes them (codesX4); they
// only leave the code's range where the scale's inverse overflows.

import { halfBits } from './ggml-quant-math';

/** The index of the first of the 32 values at `x` whose bits (with the sign cleared) are `magnitude`. */
@inline function firstOfMagnitude(x: usize, magnitude: u32): usize {
  let target = i32x4.splat(magnitude);
  let k: usize = 0;
  let found = i32x4.bitmask(i32x4.eq(f32x4.abs(v128.load(x)), target));
  while (found == 0) {
    k += 4;
    found = i32x4.bitmask(i32x4.eq(f32x4.abs(v128.load(x + (k << 2))), target));
  }
  return k + ctz(found);
}

/** The lanes of `v` reduced by `reduce` to one value in every lane. */
@inline function acrossLanes(v: v128, reduce: (a: v128, b: v128) => v128): v128 {
  v = reduce(v, i32x4.shuffle(v, v, 2, 3, 0, 1));
  return reduce(v, i32x4.shuffle(v, v, 1, 0, 3, 2));
}

@inline function maxBits(a: v128, b: v128): v128 {
  return i32x4.max_s(a, b);
}

@inline function minValue(a: v128, b: v128): v128 {
  return f32x4.pmin(a, b);
}

@inline function maxValue(a: v128, b: v128): v128 {
  return f32x4.pmax(a, b);
}

/**
 * The value of largest magnitude, the first of them on a tie, and +0 when all are zero (ggml's `amax < fabsf(v)`
 * scan). The magnitudes' bits order as the magnitudes do (the values are finite).
 */
@inline function signedMax(x: usize): f32 {
  let m = i32x4.max_s(i32x4.max_s(f32x4.abs(v128.load(x)), f32x4.abs(v128.load(x, 16))), f32x4.abs(v128.load(x, 32)));
  for (let k: usize = 48; k < 128; k += 16) m = i32x4.max_s(m, f32x4.abs(v128.load(x + k)));
  let amax = <u32>i32x4.extract_lane(acrossLanes(m, maxBits), 0);
  return amax == 0 ? 0 : load<f32>(x + (firstOfMagnitude(x, amax) << 2));
}

// The smallest and largest value of a block (Q4_1, Q5_1), set by spanOf.
let spanMin: f32 = 0;
let spanMax: f32 = 0;

/**
 * ggml's `if (v < min) min = v; if (v > max) max = v;` scan: the values are exact whatever the order, but a zero
 * minimum or maximum is the first zero of the block, +0 or -0.
 */
@inline function spanOf(x: usize): void {
  let low = v128.load(x);
  let high = low;
  for (let k: usize = 16; k < 128; k += 16) {
    let v = v128.load(x + k);
    low = f32x4.pmin(low, v);
    high = f32x4.pmax(high, v);
  }
  spanMin = f32x4.extract_lane(acrossLanes(low, minValue), 0);
  spanMax = f32x4.extract_lane(acrossLanes(high, maxValue), 0);
  if (spanMin == 0 || spanMax == 0) {
    let zero = load<f32>(x + (firstOfMagnitude(x, 0) << 2));
    if (spanMin == 0) spanMin = zero;
    if (spanMax == 0) spanMax = zero;
  }
}

const INT_LIMIT = memory.data<f32>([2147483648, 2147483648, 2147483648, 2147483648]);

/**
 * The codes of the values `v`, C's `(int8_t)((v - min) * id + add)` as x86-64 converts it (cvttss2si: truncation,
 * INT_MIN for NaN or out of range; then the low byte, sign-extended), `MIN(limit, ·)` and stored as a uint8_t
 * (Q5_1, which has no MIN, passes a limit that changes nothing).
 */
@inline function codesX4(v: v128, min: v128, id: v128, add: v128, limit: v128): v128 {
  let f = f32x4.add(f32x4.mul(f32x4.sub(v, min), id), add);
  let t = v128.bitselect(i32x4.splat(i32.MIN_VALUE), i32x4.trunc_sat_f32x4_s(f), f32x4.ge(f, v128.load(INT_LIMIT)));
  return v128.and(i32x4.min_s(i32x4.shr_s(i32x4.shl(t, 24), 24), limit), i32x4.splat(0xff));
}

/** A byte a lane: code j's low nibble, code 16 + j's as the high one. */
@inline function nibblePairs(low: v128, up: v128): v128 {
  let nibble = i32x4.splat(0xf);
  return v128.or(v128.and(low, nibble), i32x4.shl(v128.and(up, nibble), 4));
}

/** Bit 4 of each lane's code, as four bits (moved to the lanes' sign bits, gathered by bitmask). */
@inline function fifthBits(codes: v128): u32 {
  return i32x4.bitmask(i32x4.shl(codes, 27));
}

/**
 * The 32 values at `x` as ggml packs their codes (codesX4): 16 bytes at `qs`, value j's low nibble in the low nibble
 * of byte j and value 16 + j's in its high one; with `qh` (the 5-bit types), bit 4 of value j's code in bit j of the
 * little-endian u32 at qh.
 */
@inline function packCodes(x: usize, min: f32, id: f32, add: f32, limit: i32, qs: usize, qh: usize): void {
  let mins = f32x4.splat(min);
  let ids = f32x4.splat(id);
  let adds = f32x4.splat(add);
  let limits = i32x4.splat(limit);
  let l0 = codesX4(v128.load(x), mins, ids, adds, limits);
  let l1 = codesX4(v128.load(x, 16), mins, ids, adds, limits);
  let l2 = codesX4(v128.load(x, 32), mins, ids, adds, limits);
  let l3 = codesX4(v128.load(x, 48), mins, ids, adds, limits);
  let u0 = codesX4(v128.load(x, 64), mins, ids, adds, limits);
  let u1 = codesX4(v128.load(x, 80), mins, ids, adds, limits);
  let u2 = codesX4(v128.load(x, 96), mins, ids, adds, limits);
  let u3 = codesX4(v128.load(x, 112), mins, ids, adds, limits);
  let first = i16x8.narrow_i32x4_u(nibblePairs(l0, u0), nibblePairs(l1, u1));
  let second = i16x8.narrow_i32x4_u(nibblePairs(l2, u2), nibblePairs(l3, u3));
  v128.store(qs, i8x16.narrow_i16x8_u(first, second));
  if (qh == 0) return;
  let low = fifthBits(l0) | (fifthBits(l1) << 4) | (fifthBits(l2) << 8) | (fifthBits(l3) << 12);
  let high = fifthBits(u0) | (fifthBits(u1) << 4) | (fifthBits(u2) << 8) | (fifthBits(u3) << 12);
  store<u32>(qh, low | (high << 16));
}

/** Q4_0 and Q5_0: d = the signed value of largest magnitude / `divisor`, codes of x * (1 / d) + `add`. */
function symmetricBlock(x: usize, y: usize, divisor: f32, add: f32, limit: i32, qs: usize, qh: usize): void {
  let d = signedMax(x) / divisor;
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y, halfBits(d));
  packCodes(x, 0, id, add, limit, qs, qh);
}

/** Q4_1 and Q5_1: d = (max - min) / `steps` and the minimum, codes of (x - min) * (1 / d) + 0.5. */
function affineBlock(x: usize, y: usize, steps: f32, limit: i32, qs: usize, qh: usize): void {
  spanOf(x);
  let d = (spanMax - spanMin) / steps;
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y, halfBits(d));
  store<u16>(y + 2, halfBits(spanMin));
  packCodes(x, spanMin, id, 0.5, limit, qs, qh);
}

export function quantizeQ4_0Block(x: usize, y: usize): void {
  symmetricBlock(x, y, -8, 8.5, 15, y + 2, 0);
}

export function quantizeQ4_1Block(x: usize, y: usize): void {
  affineBlock(x, y, 15, 15, y + 4, 0);
}

export function quantizeQ5_0Block(x: usize, y: usize): void {
  symmetricBlock(x, y, -16, 16.5, 31, y + 6, y + 2);
}

export function quantizeQ5_1Block(x: usize, y: usize): void {
  // (uint8_t)f: no MIN; a limit above any byte changes nothing.
  affineBlock(x, y, 31, 0x7fffffff, y + 8, y + 4);
}
