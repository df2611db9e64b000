// ggml's lattice types (ggml-common.h's block_iq2_xxs, block_iq2_xs, block_iq2_s, block_iq3_xxs, block_iq3_s,
// block_iq1_s, block_iq1_m), to F32 as dequantize_row_<type> computes them (ggml-shared.ts). Each group of 8 values
// is a grid entry (8 bytes, or two entries of 4), each byte times the group's scale, its sign flipped where a sign
// bit is set (ggml multiplies by -1, which flips the sign and nothing else); IQ1 adds a shift of +-1/8 to each byte
// before the scale. Each kernel takes `count` values (whole blocks of 256) at `src`, writes them at `dst` and
// returns the end of its blocks. Offsets are bytes in a block.

import {
  IQ1S_CODES, IQ1S_VALUES, IQ2S_CODES, IQ2S_VALUES, IQ2XS_CODES, IQ2XS_VALUES, IQ2XXS_CODES, IQ2XXS_VALUES, IQ3S_CODES,
  IQ3S_VALUES, IQ3XXS_CODES, IQ3XXS_VALUES,
} from './ggml-grids';
import { half, halfAt } from './ggml-shared';

// Constant vectors are read from memory: V8 rebuilds a v128 literal at each of its uses in a loop (SPLATS in
// convert.ts says more). Multipliers that move 2-bit and 3-bit fields to the top of 16-bit lanes, and sign bits to
// the top of 32-bit ones; the grids' values, twice.
const TWO_BIT_FIELDS = memory.data<u16>([1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1], 16);
const THREE_BIT_FIELDS = memory.data<u16>([1 << 13, 1 << 10, 1 << 7, 1 << 4, 1 << 13, 1 << 10, 1 << 7, 1 << 4], 16);
const SIGNS_LOW = memory.data<u32>([1 << 31, 1 << 30, 1 << 29, 1 << 28], 16);
const SIGNS_HIGH = memory.data<u32>([1 << 27, 1 << 26, 1 << 25, 1 << 24], 16);
const SIGN_BIT = memory.data<u32>([1 << 31, 1 << 31, 1 << 31, 1 << 31], 16);
const IQ2XXS = memory.data<u64>([IQ2XXS_VALUES, IQ2XXS_VALUES], 16);
const IQ2XS = memory.data<u64>([IQ2XS_VALUES, IQ2XS_VALUES], 16);
const IQ2S = memory.data<u64>([IQ2S_VALUES, IQ2S_VALUES], 16);
const IQ3XXS = memory.data<u64>([IQ3XXS_VALUES, IQ3XXS_VALUES], 16);
const IQ3S = memory.data<u64>([IQ3S_VALUES, IQ3S_VALUES], 16);
const IQ1S = memory.data<u64>([IQ1S_VALUES, IQ1S_VALUES], 16);

// An entry of a grid: its bytes' indices, moved to the top of 16-bit lanes by a multiply (wasm has no shift by lane),
// pick its bytes out of the grid's list of values. Entry `index` of an 8-byte grid of 2-bit indices:
@inline function entry8(codes: usize, values: usize, index: u32): v128 {
  let code = i16x8.splat(load<u16>(codes + (<usize>index << 1)));
  let indices = i16x8.shr_u(i16x8.mul(code, v128.load(TWO_BIT_FIELDS)), 14);
  return i8x16.swizzle(v128.load(values), i8x16.narrow_i16x8_u(indices, indices));
}

// Entries `first` and `second` of a 4-byte grid of 3-bit indices, as the 8 bytes of a group.
@inline function twoEntries4(codes: usize, values: usize, first: u32, second: u32): v128 {
  let pair = i32x4.splat(<u32>load<u16>(codes + (<usize>first << 1)) | (<u32>load<u16>(codes + (<usize>second << 1)) << 16));
  let code = i8x16.shuffle(pair, pair, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);
  let indices = i16x8.shr_u(i16x8.mul(code, v128.load(THREE_BIT_FIELDS)), 13);
  return i8x16.swizzle(v128.load(values), i8x16.narrow_i16x8_u(indices, indices));
}

// ggml's ksigns_iq2xs: 7 stored sign bits and an eighth that makes their count even.
@inline function evenSigns(bits: u32): u32 {
  return bits | ((popcnt(bits) & 1) << 7);
}

// Stores the 8 values of a group: `bytes` (8 unsigned grid bytes in the low half) times `scale`, signs flipped by
// the bits of `signs`.
@inline function storeGroup(bytes: v128, scale: v128, signs: u32, dst: usize): void {
  let wide = i16x8.extend_low_i8x16_u(bytes);
  // Bit j of the signs to the top of lane j, by a multiply again.
  let spread = i32x4.splat(signs);
  let low = v128.and(i32x4.mul(spread, v128.load(SIGNS_LOW)), v128.load(SIGN_BIT));
  let high = v128.and(i32x4.mul(spread, v128.load(SIGNS_HIGH)), v128.load(SIGN_BIT));
  v128.store(dst, v128.xor(f32x4.mul(scale, f32x4.convert_i32x4_u(i32x4.extend_low_i16x8_u(wide))), low));
  v128.store(dst, v128.xor(f32x4.mul(scale, f32x4.convert_i32x4_u(i32x4.extend_high_i16x8_u(wide))), high), 16);
}

// The scale of 32 values of IQ2_XXS, IQ2_XS and IQ2_S: (d * (0.5 + s)) * 0.25, two roundings as in ggml.
@inline function iq2Scale(d: f32, s: u32): v128 {
  return f32x4.splat(d * (0.5 + <f32>s) * 0.25);
}

// IQ2_XXS, 66 bytes: d at 0, then 8 bytes each 32 values: 4 grid indices (bytes), and a u32 with four 7-bit sign
// fields (bits 7l) and the scale in its top 4 bits.
export function iq2_xxs(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 66) {
    let d = halfAt(src);
    for (let ib: usize = 0; ib < 8; ib++) {
      let at = src + 2 + (ib << 3);
      let rest = load<u32>(at, 4);
      let scale = iq2Scale(d, rest >> 28);
      for (let l: usize = 0; l < 4; l++, dst += 32) {
        storeGroup(entry8(IQ2XXS_CODES, IQ2XXS, load<u8>(at + l)), scale, evenSigns((rest >> (7 * <u32>l)) & 127), dst);
      }
    }
  }
  return src;
}

// IQ2_XS, 74 bytes: d at 0, 32 u16 at 2 (a 9-bit grid index and 7 sign bits each 8 values), 8 scale bytes at 66 (a
// nibble each 16 values).
export function iq2_xs(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 74) {
    let d = halfAt(src);
    for (let ib: usize = 0; ib < 8; ib++) {
      let scales = <u32>load<u8>(src + 66 + ib);
      for (let l: usize = 0; l < 4; l++, dst += 32) {
        let q = <u32>load<u16>(src + 2 + (ib << 3) + (l << 1));
        storeGroup(entry8(IQ2XS_CODES, IQ2XS, q & 511), iq2Scale(d, l < 2 ? scales & 15 : scales >> 4), evenSigns(q >> 9), dst);
      }
    }
  }
  return src;
}

// IQ2_S, 82 bytes: d at 0, grid indices' low bytes at 2 (4 each 32 values), sign bytes at 34 (one each 8 values),
// the indices' top 2 bits at 66 (a byte each 32 values, bits 2l), scale bytes at 74 (as IQ2_XS).
export function iq2_s(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 82) {
    let d = halfAt(src);
    for (let ib: usize = 0; ib < 8; ib++) {
      let scales = <u32>load<u8>(src + 74 + ib);
      let top = <u32>load<u8>(src + 66 + ib);
      for (let l: usize = 0; l < 4; l++, dst += 32) {
        let index = <u32>load<u8>(src + 2 + (ib << 2) + l) | ((top << (8 - 2 * <u32>l)) & 0x300);
        storeGroup(entry8(IQ2S_CODES, IQ2S, index), iq2Scale(d, l < 2 ? scales & 15 : scales >> 4), load<u8>(src + 34 + (ib << 2) + l), dst);
      }
    }
  }
  return src;
}

// IQ3_XXS, 98 bytes: d at 0, grid indices at 2 (8 bytes each 32 values, two 4-byte entries each 8 values), then a
// u32 each 32 values at 66 (four 7-bit sign fields, the scale in the top 4 bits); scale (d * (0.5 + s)) * 0.5.
export function iq3_xxs(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 98) {
    let d = halfAt(src);
    for (let ib: usize = 0; ib < 8; ib++) {
      let rest = load<u32>(src + 66 + (ib << 2));
      let scale = f32x4.splat(d * (0.5 + <f32>(rest >> 28)) * 0.5);
      let indices = src + 2 + (ib << 3);
      for (let l: usize = 0; l < 4; l++, dst += 32) {
        let bytes = twoEntries4(IQ3XXS_CODES, IQ3XXS, load<u8>(indices + 2 * l), load<u8>(indices + 2 * l + 1));
        storeGroup(bytes, scale, evenSigns((rest >> (7 * <u32>l)) & 127), dst);
      }
    }
  }
  return src;
}

// IQ3_S, 110 bytes: d at 0, grid indices' low bytes at 2 (8 each 32 values), their ninth bits at 66 (a byte each 32
// values: bits 2l and 2l + 1 for the two entries of group l), sign bytes at 74, scale nibbles at 106 (one each 32
// values); scale d * (1 + 2s).
export function iq3_s(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 110) {
    let d = halfAt(src);
    for (let ib: usize = 0; ib < 8; ib++) {
      let s = (<u32>load<u8>(src + 106 + (ib >> 1)) >> ((<u32>ib & 1) << 2)) & 15;
      let scale = f32x4.splat(d * <f32>(s * 2 + 1));
      let top = <u32>load<u8>(src + 66 + ib);
      let indices = src + 2 + (ib << 3);
      for (let l: usize = 0; l < 4; l++, dst += 32) {
        let first = <u32>load<u8>(indices + 2 * l) | ((top << (8 - 2 * <u32>l)) & 256);
        let second = <u32>load<u8>(indices + 2 * l + 1) | ((top << (7 - 2 * <u32>l)) & 256);
        storeGroup(twoEntries4(IQ3S_CODES, IQ3S, first, second), scale, load<u8>(src + 74 + (ib << 2) + l), dst);
      }
    }
  }
  return src;
}

// Stores the 8 values of an IQ1 group: scale * (byte + delta), the grid's bytes signed (-1, 0, 1).
@inline function storeShiftedGroup(index: u32, scale: v128, delta: v128, dst: usize): void {
  let wide = i16x8.extend_low_i8x16_s(entry8(IQ1S_CODES, IQ1S, index));
  v128.store(dst, f32x4.mul(scale, f32x4.add(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(wide)), delta)));
  v128.store(dst, f32x4.mul(scale, f32x4.add(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(wide)), delta)), 16);
}

// ggml's IQ1S_DELTA and IQ1M_DELTA.
const IQ1_DELTA: f32 = 0.125;

@inline function iq1Delta(negative: bool): v128 {
  return f32x4.splat(negative ? -IQ1_DELTA : IQ1_DELTA);
}

// IQ1_S, 50 bytes: d at 0, grid indices' low bytes at 2 (4 each 32 values), a u16 each 32 values at 34: the indices'
// top 3 bits (bits 3l), the scale s (bits 12-14, scale d * (2s + 1)) and the delta's sign (bit 15).
export function iq1_s(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 50) {
    let d = halfAt(src);
    for (let ib: usize = 0; ib < 8; ib++) {
      let high = <u32>load<u16>(src + 34 + (ib << 1));
      let scale = f32x4.splat(d * <f32>(((high >> 12) & 7) * 2 + 1));
      let delta = iq1Delta((high & 0x8000) != 0);
      for (let l: usize = 0; l < 4; l++, dst += 32) {
        let index = <u32>load<u8>(src + 2 + (ib << 2) + l) | (((high >> (3 * <u32>l)) & 7) << 8);
        storeShiftedGroup(index, scale, delta, dst);
      }
    }
  }
  return src;
}

// IQ1_M, 56 bytes: grid indices' low bytes at 0 (4 each 32 values), a byte each 16 values at 32 (the indices' top 3
// bits and the delta's sign of its two groups: bits 0-2 and 3, 4-6 and 7), four u16 at 48 holding 3-bit scales (s,
// scale d * (2s + 1), one each 16 values) and, in their top nibbles, the F16 d.
export function iq1_m(src: usize, dst: usize, count: usize): usize {
  for (let i: usize = 0; i < count; i += 256, src += 56) {
    let scales = src + 48;
    let dBits = (<u32>load<u16>(scales) >> 12) | ((<u32>load<u16>(scales, 2) >> 8) & 0xf0) | ((<u32>load<u16>(scales, 4) >> 4) & 0xf00) | (<u32>load<u16>(scales, 6) & 0xf000);
    let d = half(dBits);
    for (let ib: usize = 0; ib < 8; ib++) {
      let word = <u32>load<u16>(scales + ((ib >> 1) << 1)) >> (6 * (<u32>ib & 1));
      for (let g: usize = 0; g < 2; g++) {
        let scale = f32x4.splat(d * <f32>(((word >> (3 * <u32>g)) & 7) * 2 + 1));
        let high = <u32>load<u8>(src + 32 + (ib << 1) + g);
        for (let l: usize = 0; l < 2; l++, dst += 32) {
          let index = <u32>load<u8>(src + (ib << 2) + (g << 1) + l) | (((high >> (4 * <u32>l)) & 7) << 8);
          storeShiftedGroup(index, scale, iq1Delta(((high >> (4 * <u32>l)) & 8) != 0), dst);
        }
      }
    }
  }
  return src;
}
