// ggml's super-blocks of 256 values (ggml-common.h's block_q2_K ... block_q8_K, block_iq4_xs, block_tq1_0,
// block_tq2_0), to F32 as dequantize_row_<type> computes them (ggml-shared.ts). Each kernel takes `count` values
// (whole blocks) at `src`, writes them at `dst` and returns the end of its blocks. Offsets are bytes in a block.

import { iq4nlValues } from './ggml-legacy';
import { halfAt, highNibbles, lowNibbles, storeScaled, storeScaledMinus } from './ggml-shared';

// Scale j (0-7) of the 12 bytes of 6-bit scales and mins of Q4_K and Q5_K at `scales` (ggml's get_scale_min_k4),
// and its min.
@inline function kScale(scales: usize, j: usize): u32 {
  if (j < 4) return load<u8>(scales + j) & 63;
  return (load<u8>(scales + j + 4) & 15) | ((load<u8>(scales + j - 4) >> 6) << 4);
}
@inline function kMin(scales: usize, j: usize): u32 {
  if (j < 4) return load<u8>(scales + j + 4) & 63;
  return (load<u8>(scales + j + 4) >> 4) | ((load<u8>(scales + j) >> 6) << 4);
}

// Q2_K, 84 bytes: 16 scale bytes at 0 (scale in the low nibble, min in the high one, one pair each 16 values), 2-bit
// codes at 16, d at 80 and dmin at 82 (F16). Each 128 values take 32 code bytes: four shifts, each 16 values from
// bytes 0-15 then 16 from bytes 16-31; (d * scale) * q - dmin * min.
export function q2_K(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 84) {
    let d = halfAt(src + 80);
    let dmin = halfAt(src + 82);
    for (let half: usize = 0; half < 2; half++) {
      let q0 = v128.load(src + 16 + (half << 5));
      let q1 = v128.load(src + 32 + (half << 5));
      for (let shift: u32 = 0; shift < 8; shift += 2, dst += 128) {
        let scales = load<u16>(src + (half << 3) + (shift >> 0));
        let low = scales & 0xff;
        let high = scales >> 8;
        let mask = i8x16.splat(3);
        storeScaledMinus(v128.and(i8x16.shr_u(q0, shift), mask), f32x4.splat(d * <f32>(low & 15)), f32x4.splat(dmin * <f32>(low >> 4)), dst);
        storeScaledMinus(v128.and(i8x16.shr_u(q1, shift), mask), f32x4.splat(d * <f32>(high & 15)), f32x4.splat(dmin * <f32>(high >> 4)), dst + 64);
      }
    }
  }
  return src;
}

// The 16 signed 6-bit scales of a Q3_K block (12 bytes at `scales`), unpacked into SCALES as ggml unpacks them:
// scale j's low four bits are a nibble of bytes 0-7, its top two bits two of bytes 8-11.
const SCALES = memory.data(16, 16);

@inline function unpackQ3Scales(scales: usize): void {
  let a = load<u32>(scales);
  let b = load<u32>(scales, 4);
  let top = load<u32>(scales, 8);
  store<u32>(SCALES, (a & 0x0f0f0f0f) | ((top & 0x03030303) << 4));
  store<u32>(SCALES, (b & 0x0f0f0f0f) | (((top >> 2) & 0x03030303) << 4), 4);
  store<u32>(SCALES, ((a >> 4) & 0x0f0f0f0f) | (((top >> 4) & 0x03030303) << 4), 8);
  store<u32>(SCALES, ((b >> 4) & 0x0f0f0f0f) | (((top >> 6) & 0x03030303) << 4), 12);
}

// Q3_K, 110 bytes: high bits at 0 (32 bytes; bit k of byte l for the k-th group of 32 values of l's position), 2-bit
// codes at 32 (as Q2_K's), scales at 96 (12 bytes), d at 108; (d * (scale - 32)) * (q - (high bit ? 0 : 4)).
export function q3_K(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 110) {
    let d = halfAt(src + 108);
    unpackQ3Scales(src + 96);
    let h0 = v128.load(src);
    let h1 = v128.load(src, 16);
    let bit: u32 = 0;
    for (let half: usize = 0; half < 2; half++) {
      let q0 = v128.load(src + 32 + (half << 5));
      let q1 = v128.load(src + 48 + (half << 5));
      for (let shift: u32 = 0; shift < 8; shift += 2, bit++, dst += 128) {
        let scale = SCALES + (half << 3) + (shift >> 0);
        let mask = i8x16.splat(3);
        let four = i8x16.splat(4);
        // 4 where the high bit is clear: the bit moved to bit 2, then flipped.
        let minus0 = v128.andnot(four, i8x16.shl(i8x16.shr_u(h0, bit), 2));
        let minus1 = v128.andnot(four, i8x16.shl(i8x16.shr_u(h1, bit), 2));
        let codes0 = i8x16.sub(v128.and(i8x16.shr_u(q0, shift), mask), minus0);
        let codes1 = i8x16.sub(v128.and(i8x16.shr_u(q1, shift), mask), minus1);
        storeScaled(codes0, f32x4.splat(d * <f32>(<i32>load<u8>(scale) - 32)), dst);
        storeScaled(codes1, f32x4.splat(d * <f32>(<i32>load<u8>(scale, 1) - 32)), dst + 64);
      }
    }
  }
  return src;
}

// Bit `bit` of each of 16 bytes as 16 (the fifth bits of Q5_K).
@inline function sixteenAt(bits: v128, bit: u32): v128 {
  return v128.and(i8x16.shl(i8x16.shr_u(bits, bit), 4), i8x16.splat(16));
}

// Q4_K, 144 bytes: d at 0, dmin at 2, scales and mins at 4 (12 bytes), nibbles at 16: each 64 values take 32 bytes,
// their low nibbles then their high ones, with scales 2c and 2c + 1; (d * scale) * q - dmin * min.
// Q5_K (`fifth`), 176 bytes: the same with fifth bits at 16 (32 bytes: bit 2c of byte l for the low nibbles of the
// c-th 64 values, bit 2c + 1 for the high ones) and the nibbles at 48.
@inline function q4_5K(fifth: bool, src: usize, dst: usize, count: usize): usize {
  let bytes: usize = fifth ? 176 : 144;
  let nibbles: usize = fifth ? 48 : 16;
  for (let i: usize = 0; i < count; i += 256, src += bytes) {
    let d = halfAt(src);
    let dmin = halfAt(src + 2);
    let scales = src + 4;
    let h0 = i32x4.splat(0);
    let h1 = h0;
    if (fifth) {
      h0 = v128.load(src, 16);
      h1 = v128.load(src, 32);
    }
    for (let j: usize = 0; j < 8; j += 2, dst += 256) {
      let d1 = f32x4.splat(d * <f32>kScale(scales, j));
      let m1 = f32x4.splat(dmin * <f32>kMin(scales, j));
      let d2 = f32x4.splat(d * <f32>kScale(scales, j + 1));
      let m2 = f32x4.splat(dmin * <f32>kMin(scales, j + 1));
      let q0 = v128.load(src + nibbles + (j << 4));
      let q1 = v128.load(src + nibbles + 16 + (j << 4));
      let a = lowNibbles(q0);
      let b = lowNibbles(q1);
      let c = highNibbles(q0);
      let e = highNibbles(q1);
      if (fifth) {
        a = v128.or(a, sixteenAt(h0, <u32>j));
        b = v128.or(b, sixteenAt(h1, <u32>j));
        c = v128.or(c, sixteenAt(h0, <u32>j + 1));
        e = v128.or(e, sixteenAt(h1, <u32>j + 1));
      }
      storeScaledMinus(a, d1, m1, dst);
      storeScaledMinus(b, d1, m1, dst + 64);
      storeScaledMinus(c, d2, m2, dst + 128);
      storeScaledMinus(e, d2, m2, dst + 192);
    }
  }
  return src;
}

export function q4_K(src: usize, dst: usize, count: usize): usize {
  return q4_5K(false, src, dst, count);
}

export function q5_K(src: usize, dst: usize, count: usize): usize {
  return q4_5K(true, src, dst, count);
}

// Q6_K, 210 bytes: low nibbles at 0 (128 bytes), 2-bit high parts at 128 (64 bytes), 16 int8 scales at 192 (one each
// 16 values), d at 208. Each 128 values take 64 low bytes and 32 high ones: value l + 32k (l < 32) has the low or
// high nibble of low byte l or l + 32 and bits 2k of high byte l; (d * scale) * (q - 32).
export function q6_K(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 210) {
    let d = halfAt(src + 208);
    for (let half: usize = 0; half < 2; half++) {
      let low = src + (half << 6);
      let high = src + 128 + (half << 5);
      let scales = src + 192 + (half << 3);
      for (let l: usize = 0; l < 2; l++, dst += 64) {
        let a = v128.load(low + (l << 4));
        let b = v128.load(low + 32 + (l << 4));
        let h = v128.load(high + (l << 4));
        let three = i8x16.splat(3);
        let offset = i8x16.splat(32);
        let q1 = i8x16.sub(v128.or(lowNibbles(a), i8x16.shl(v128.and(h, three), 4)), offset);
        let q2 = i8x16.sub(v128.or(lowNibbles(b), i8x16.shl(v128.and(i8x16.shr_u(h, 2), three), 4)), offset);
        let q3 = i8x16.sub(v128.or(highNibbles(a), i8x16.shl(v128.and(i8x16.shr_u(h, 4), three), 4)), offset);
        let q4 = i8x16.sub(v128.or(highNibbles(b), i8x16.shl(i8x16.shr_u(h, 6), 4)), offset);
        storeScaled(q1, f32x4.splat(d * <f32>load<i8>(scales + l)), dst);
        storeScaled(q2, f32x4.splat(d * <f32>load<i8>(scales + l + 2)), dst + 128);
        storeScaled(q3, f32x4.splat(d * <f32>load<i8>(scales + l + 4)), dst + 256);
        storeScaled(q4, f32x4.splat(d * <f32>load<i8>(scales + l + 6)), dst + 384);
      }
      dst += 512 - 128;
    }
  }
  return src;
}

// Q8_K, 292 bytes: d (F32) at 0, 256 int8 at 4, then sums ggml keeps for its dot products; d * q.
export function q8_K(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 292) {
    let d = v128.load32_splat(src);
    for (let j: usize = 0; j < 256; j += 16, dst += 64) storeScaled(v128.load(src + 4 + j), d, dst);
  }
  return src;
}

// IQ4_XS, 136 bytes: d at 0, the scales' top bits at 2 (u16: bits 2j for the j-th 32 values), their low nibbles at
// 4 (4 bytes), nibbles at 8 indexing kvalues_iq4nl (16 bytes a 32 values, as IQ4_NL); (d * (scale - 32)) * value.
export function iq4_xs(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 136) {
    let d = halfAt(src);
    let top = <u32>load<u16>(src, 2);
    for (let j: usize = 0; j < 8; j++, dst += 128) {
      let scale = ((<u32>load<u8>(src + 4 + (j >> 1)) >> ((<u32>j & 1) << 2)) & 15) | (((top >> (<u32>j << 1)) & 3) << 4);
      let dl = f32x4.splat(d * <f32>(<i32>scale - 32));
      let q = v128.load(src + 8 + (j << 4));
      storeScaled(i8x16.swizzle(iq4nlValues(), lowNibbles(q)), dl, dst);
      storeScaled(i8x16.swizzle(iq4nlValues(), highNibbles(q)), dl, dst + 64);
    }
  }
  return src;
}

// TQ2_0, 66 bytes: 2-bit codes at 0 (each 128 values take 32 bytes, four shifts of 32 values), d at 64; (q - 1) * d.
export function tq2_0(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 66) {
    let d = f32x4.splat(halfAt(src + 64));
    for (let half: usize = 0; half < 2; half++) {
      let q0 = v128.load(src + (half << 5));
      let q1 = v128.load(src + 16 + (half << 5));
      for (let shift: u32 = 0; shift < 8; shift += 2, dst += 128) {
        let mask = i8x16.splat(3);
        let one = i8x16.splat(1);
        storeScaled(i8x16.sub(v128.and(i8x16.shr_u(q0, shift), mask), one), d, dst);
        storeScaled(i8x16.sub(v128.and(i8x16.shr_u(q1, shift), mask), one), d, dst + 64);
      }
    }
  }
  return src;
}

// The base-3 digit of 16 TQ1_0 bytes that multiplying by `power` (3^n, modulo 256) brings to the top: ggml's
// ((u8)(q * 3^n) * 3) >> 8, minus 1.
@inline function ternaryDigits(bytes: v128, power: i32): v128 {
  let low = i16x8.extend_low_i8x16_u(bytes);
  let high = i16x8.extend_high_i8x16_u(bytes);
  let byteMask = i16x8.splat(0xff);
  low = i16x8.shr_u(i16x8.mul(v128.and(i16x8.mul(low, i16x8.splat(<i16>power)), byteMask), i16x8.splat(3)), 8);
  high = i16x8.shr_u(i16x8.mul(v128.and(i16x8.mul(high, i16x8.splat(<i16>power)), byteMask), i16x8.splat(3)), 8);
  return i8x16.sub(i8x16.narrow_i16x8_u(low, high), i8x16.splat(1));
}

// TQ1_0, 54 bytes: 48 bytes of five ternary digits each at 0 (bytes 0-31 give 5 x 32 values, digit n of all 32 before
// digit n + 1; bytes 32-47 then 5 x 16), 4 bytes of four digits at 48 (4 x 4 values), d at 52; (digit - 1) * d.
export function tq1_0(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 54) {
    let dValue = halfAt(src + 52);
    let d = f32x4.splat(dValue);
    let a = v128.load(src);
    let b = v128.load(src, 16);
    let c = v128.load(src, 32);
    let power = 1;
    for (let n = 0; n < 5; n++, power *= 3, dst += 128) {
      storeScaled(ternaryDigits(a, power), d, dst);
      storeScaled(ternaryDigits(b, power), d, dst + 64);
    }
    power = 1;
    for (let n = 0; n < 5; n++, power *= 3, dst += 64) storeScaled(ternaryDigits(c, power), d, dst);
    power = 1;
    for (let n = 0; n < 4; n++, power *= 3) {
      for (let j: usize = 0; j < 4; j++, dst += 4) {
        let q = (<u32>load<u8>(src + 48 + j) * <u32>power) & 0xff;
        store<f32>(dst, <f32>(<i32>((q * 3) >> 8) - 1) * dValue);
      }
    }
  }
  return src;
}
