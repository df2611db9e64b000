// ggml's blocks of 32 to 128 values with one scale a block (ggml-common.h's block_q4_0 ... block_q8_0, block_iq4_nl,
// block_mxfp4, block_nvfp4, block_q1_0, block_q2_0), to F32 as dequantize_row_<type> computes them (ggml-shared.ts).
// Each kernel takes `count` values (whole blocks) at `src`, writes them at `dst` and returns the end of its blocks.
// Offsets below are bytes in a block; values j and j + 16 of a 32-block share byte j (low nibble, high nibble).

import { bitLanes, halfAt, highNibbles, lowNibbles, storeScaled, storeScaledPlus } from './ggml-shared';

// ggml-common.h's kvalues_iq4nl and kvalues_mxfp4 (E2M1 values doubled, which ggml's halved scales make up for).
@inline export function iq4nlValues(): v128 {
  return i8x16(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
}
@inline function fp4Values(): v128 {
  return i8x16(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
}

// The fifth bits of Q5_0 and Q5_1: lane j is 16 where bit j of `bits` is set.
@inline function fifthBits(bits: u32): v128 {
  return v128.and(bitLanes(bits), i8x16.splat(16));
}

// Q4_0, 18 bytes: d (F16) at 0, 16 bytes of nibbles at 2; (q - 8) * d.
export function q4_0(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 32, src += 18, dst += 128) {
    let d = f32x4.splat(halfAt(src));
    let q = v128.load(src, 2);
    storeScaled(i8x16.sub(lowNibbles(q), i8x16.splat(8)), d, dst);
    storeScaled(i8x16.sub(highNibbles(q), i8x16.splat(8)), d, dst + 64);
  }
  return src;
}

// Q4_1, 20 bytes: d at 0, m at 2 (F16), nibbles at 4; q * d + m.
export function q4_1(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 32, src += 20, dst += 128) {
    let d = f32x4.splat(halfAt(src));
    let m = f32x4.splat(halfAt(src + 2));
    let q = v128.load(src, 4);
    storeScaledPlus(lowNibbles(q), d, m, dst);
    storeScaledPlus(highNibbles(q), d, m, dst + 64);
  }
  return src;
}

// Q5_0, 22 bytes: d at 0, the fifth bits at 2 (a little-endian u32, bit j for value j), nibbles at 6; (q - 16) * d.
export function q5_0(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 32, src += 22, dst += 128) {
    let d = f32x4.splat(halfAt(src));
    let high = load<u32>(src, 2);
    let q = v128.load(src, 6);
    storeScaled(i8x16.sub(v128.or(lowNibbles(q), fifthBits(high)), i8x16.splat(16)), d, dst);
    storeScaled(i8x16.sub(v128.or(highNibbles(q), fifthBits(high >> 16)), i8x16.splat(16)), d, dst + 64);
  }
  return src;
}

// Q5_1, 24 bytes: d at 0, m at 2, the fifth bits at 4, nibbles at 8; q * d + m.
export function q5_1(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 32, src += 24, dst += 128) {
    let d = f32x4.splat(halfAt(src));
    let m = f32x4.splat(halfAt(src + 2));
    let high = load<u32>(src, 4);
    let q = v128.load(src, 8);
    storeScaledPlus(v128.or(lowNibbles(q), fifthBits(high)), d, m, dst);
    storeScaledPlus(v128.or(highNibbles(q), fifthBits(high >> 16)), d, m, dst + 64);
  }
  return src;
}

// Q8_0, 34 bytes: d at 0, 32 int8 at 2; q * d.
export function q8_0(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 32, src += 34, dst += 128) {
    let d = f32x4.splat(halfAt(src));
    storeScaled(v128.load(src, 2), d, dst);
    storeScaled(v128.load(src, 18), d, dst + 64);
  }
  return src;
}

// IQ4_NL, 18 bytes: d at 0, nibbles at 2 indexing kvalues_iq4nl; d * value.
export function iq4_nl(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 32, src += 18, dst += 128) {
    let d = f32x4.splat(halfAt(src));
    let q = v128.load(src, 2);
    storeScaled(i8x16.swizzle(iq4nlValues(), lowNibbles(q)), d, dst);
    storeScaled(i8x16.swizzle(iq4nlValues(), highNibbles(q)), d, dst + 64);
  }
  return src;
}

// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128), the subnormals 2^-128 and 2^-127 for e 0 and 1; e 255 is 2^127.
@inline function e8m0Half(e: u32): f32 {
  return reinterpret<f32>(e < 2 ? <u32>0x00200000 << e : (e - 1) << 23);
}

// MXFP4, 17 bytes: the E8M0 exponent at 0, nibbles at 1 indexing kvalues_mxfp4; value * d.
export function mxfp4(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 32, src += 17, dst += 128) {
    let d = f32x4.splat(e8m0Half(load<u8>(src)));
    let q = v128.load(src, 1);
    storeScaled(i8x16.swizzle(fp4Values(), lowNibbles(q)), d, dst);
    storeScaled(i8x16.swizzle(fp4Values(), highNibbles(q)), d, dst + 64);
  }
  return src;
}

// ggml's ggml_ue4m3_to_fp32: an unsigned E4M3 (bias 7; bit 7 ignored) halved, and 0 for the codes 0 and 0x7f.
// Every step of ggml's ldexpf arithmetic is exact, so the value is built from its bits.
@inline function ue4m3Half(code: u32): f32 {
  if (code == 0 || code == 0x7f) return 0;
  let exponent = (code >> 3) & 15;
  let mantissa = code & 7;
  if (exponent == 0) return <f32>mantissa * 0.0009765625; // mantissa * 2^-9, halved
  return reinterpret<f32>(((exponent + 119) << 23) | (mantissa << 20)); // (1 + mantissa / 8) * 2^(exponent - 7), halved
}

// NVFP4, 36 bytes: four UE4M3 scales at 0, one for each 16 values, nibbles at 4 (8 bytes a sub-block: values j and
// j + 8 share byte j); value * d.
export function nvfp4(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 64, src += 36) {
    for (let s: usize = 0; s < 4; s++, dst += 64) {
      let q = v128.load64_zero(src + 4 + (s << 3));
      let codes = i8x16.shuffle(lowNibbles(q), highNibbles(q), 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
      storeScaled(i8x16.swizzle(fp4Values(), codes), f32x4.splat(ue4m3Half(load<u8>(src + s))), dst);
    }
  }
  return src;
}

// Q1_0, 18 bytes: d at 0, 128 bits at 2 (bit j % 8 of byte j / 8 for value j); d where set, -d where not.
export function q1_0(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 128, src += 18) {
    let d = f32x4.splat(halfAt(src));
    let minusD = f32x4.neg(d);
    for (let j: usize = 0; j < 16; j += 2, dst += 64) {
      let set = bitLanes(load<u16>(src + 2 + j));
      let low = i16x8.extend_low_i8x16_s(set);
      let high = i16x8.extend_high_i8x16_s(set);
      v128.store(dst, v128.bitselect(d, minusD, i32x4.extend_low_i16x8_s(low)));
      v128.store(dst, v128.bitselect(d, minusD, i32x4.extend_high_i16x8_s(low)), 16);
      v128.store(dst, v128.bitselect(d, minusD, i32x4.extend_low_i16x8_s(high)), 32);
      v128.store(dst, v128.bitselect(d, minusD, i32x4.extend_high_i16x8_s(high)), 48);
    }
  }
  return src;
}

// Q2_0, 18 bytes: d at 0, 2-bit codes at 2 (bits 2 (j % 4) of byte j / 4 for value j); (q - 1) * d.
export function q2_0(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 64, src += 18) {
    let d = f32x4.splat(halfAt(src));
    for (let j: usize = 0; j < 16; j += 4, dst += 64) {
      let bytes = v128.load32_zero(src + 2 + j);
      let three = i8x16.splat(3);
      // Codes 0 and 1 of each byte, then 2 and 3, interleaved into value order.
      let first = i8x16.shuffle(v128.and(bytes, three), v128.and(i8x16.shr_u(bytes, 2), three), 0, 16, 1, 17, 2, 18, 3, 19, 0, 0, 0, 0, 0, 0, 0, 0);
      let second = i8x16.shuffle(v128.and(i8x16.shr_u(bytes, 4), three), i8x16.shr_u(bytes, 6), 0, 16, 1, 17, 2, 18, 3, 19, 0, 0, 0, 0, 0, 0, 0, 0);
      let codes = i8x16.shuffle(first, second, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
      storeScaled(i8x16.sub(codes, i8x16.splat(1)), d, dst);
    }
  }
  return src;
}
