// Dequantization kernels: the packed codes of a quantized checkpoint (src/quant/) to floats, bit for bit as each
// layout's reference computes them (../shared/quantized-layouts.md), then in the dtype asked for.
//
// Two exports do the work on rectangles of a layout's rows, which src/quant/kernels.ts lays out in linear memory
// and describes to them in descriptors (their layouts, and the modes below, in assembly/boundary/quant.ts):
//
// - unpackCodes: the one unpack of n-bit codes. A row's codes are a dense LSB-first bitstream of 1 to 8-bit codes
//   in 32-bit little-endian words (code i at bits i*bits.. of the stream, so 3-, 5-, 6- and 7-bit codes straddle
//   words), the words `wordStride` words apart (1: contiguous; GPTQ packs a column's codes down its qweight
//   column, one word per row of words). Two orders permute the 4-bit codes of a word: AWQ interleaves them
//   (column 8c + j is nibble [0, 4, 1, 5, 2, 6, 3, 7][j] of word c), and bitsandbytes puts the even code in the
//   high nibble of each byte. Signed 8-bit codes (I8 weights) come out offset by 128, as unsigned ones.
// - dequantRows: rows of codes to values. Per element, in F32 arithmetic, each step rounded as the reference
//   rounds it (one F32 operation in JS or here is correctly rounded; torch computes a BF16 or F16 operation in
//   F32 and rounds the result):
//     q     = code                                      affine (integer codes)
//           | table[code]                               4-bit code tables (E2M1, NF4, bitsandbytes' FP4)
//           | f8(code)                                  F8_E4M3 and F8_E5M2 codes, decoded by the conversion kernels
//     value = q * scale                                 no zero point, no bias
//           | (q - zero) * scale                        with zero points (times postMultiplier with FLAG_POST_MULTIPLY:
//                                                       bitsandbytes 8-bit's 1/127)
//           | ref(q * scale) + bias                     with biases (MLX's T(T(q * s) + b))
//     out   = to(ref(value))                            the reference dtype's rounding, then the dtype asked for
//   `ref` is the reference's compute dtype (F32, F16, BF16); `to` (F32, F16, BF16) is reached from ref's value in
//   one more rounding, exact when `to` is as wide. The scale, zero and bias of an element come from its row's
//   parameter row (paramRowOf[row]) and its group (column / groupSize, or groupOf[column] where a g_idx says).
//   The rows' codes may also run down the columns of words (FLAG_COLUMN_CODES: AWQ's qweight is [in, out / 8], the
//   logical tensor's row n a column of its codes), eight rows unpacked together.
//
// Nothing is allocated; the kernels use only the scratch below heapBase.

import { BF16, F16, F32, F8_E4M3, F8_E5M2 } from './boundary/dtypes';
import {
  DEQUANT_BIASES, DEQUANT_BITS, DEQUANT_CODE_ROW_BYTES, DEQUANT_CODES, DEQUANT_COL_OFFSET, DEQUANT_COLS, DEQUANT_FLAGS,
  DEQUANT_GROUP_OF, DEQUANT_GROUP_SIZE, DEQUANT_GROUP_STRIDE, DEQUANT_ORDER, DEQUANT_OUT, DEQUANT_PARAM_ROW_OF,
  DEQUANT_PARAM_ROW_STRIDE, DEQUANT_POST_MULTIPLIER, DEQUANT_REF, DEQUANT_ROWS, DEQUANT_SCALES, DEQUANT_TABLE, DEQUANT_TO,
  DEQUANT_VALUE, DEQUANT_WORD_STRIDE, DEQUANT_ZEROS, FLAG_COLUMN_CODES, FLAG_POST_MULTIPLY, FLAG_SIGNED_CODES,
  ORDER_AWQ, ORDER_HIGH_NIBBLE_FIRST, ORDER_LSB_FIRST, UNPACK_BITS, UNPACK_COUNT, UNPACK_ORDER, UNPACK_OUT,
  UNPACK_SIGNED, UNPACK_WORD_STRIDE, UNPACK_WORDS, VALUE_AFFINE, VALUE_TABLE,
} from './boundary/quant';
import { biasOf, byteCodeBits, byteCodeBitsX4, mantBitsOf, outShift, prepareByteCodes, prepareTarget, store8, storeElement } from './convert';

// Inside the loop, `value` may also be a group's 16 results (no VALUE_ of the contract, and no F8 dtype number, is
// 2 or 3).
const VALUE_RESULTS: u32 = 3;
// F8_E4M3 codes times one scale in a BF16 reference, their results looked up by the low nibble and shifted in
// exponent by the high one (see e4m3Piece).
const VALUE_E4M3_BF16: u32 = 2;

// Groups of at least this many codes below 16 compute their 16 results first (16 finished values and a transpose
// into byte planes cost about what four runs of 16 do; each run is then a lookup: measured on 16M elements, GPTQ
// 4-bit, group 128, F16 to F32, 8.4 ms instead of 12.8).
const GROUP_TABLE_MIN: usize = 64;


// Codes are unpacked a piece at a time into CODES (a multiple of 32, so that every piece starts on a word for any
// bit width; twice as much for the streams of rows unpacked together, see rowsLoop); 16 bytes of slack let a
// vector loop's last load run past the piece.
const PIECE: usize = 4096;
const CODES = memory.data(<i32>(PIECE << 1) + 16, 16);

// The AWQ order as a lane map, and a 16-entry table as its four byte planes (TABLE_PLANES, filled per call).
const TABLE_PLANES = memory.data(64, 16);
// What dequantRows found of its 16-entry table: every entry a BF16 value (its lower half zero: E2M1's), so that
// the upper halves' two planes give it; entries 8-15 the negatives of entries 0-7 (E2M1, bitsandbytes' FP4).
let tableHalves = false;
let tableSymmetric = false;

// A group's 16 results in a 16-bit output dtype, on their way to byte planes; and the byte planes of 16 results.
const RESULTS = memory.data(32, 16);
const PLANES = memory.data(64, 16);

// Constants the vector loops load (see SPLATS in convert.ts for why they are not literals); the conversion
// kernels' own slots hold what their decoders and encoders need, so these have a region of their own.
const QS = memory.data(20 << 4, 16);
const Q_ABS: u32 = 0;
const Q_BF16_ROUNDING: u32 = 1; // 0x7fff
const Q_ONE: u32 = 2;
const Q_BF16_MASK: u32 = 3; // 0xffff0000
const Q_F16_ROUNDING: u32 = 4; // 0xfff
const Q_F16_MASK: u32 = 5; // 0xffffe000
const Q_HALF: u32 = 6; // the F32 0.5, whose ulp is the F16 subnormal step 2^-24
const Q_INFINITY: u32 = 7;
const Q_F16_NORMAL_LESS_ONE: u32 = 8; // the F32 bits of 2^-14, the smallest normal F16, minus one
const Q_F16_OVERFLOW: u32 = 9; // 65520: it and every larger magnitude round to infinity
const Q_QUIET: u32 = 10; // the quiet bit of an F32 NaN
const Q_E4M3_MAGNITUDE: u32 = 11; // 0x7f
const Q_E4M3_SIGN: u32 = 12; // 0x80
const Q_E4M3_REBIAS: u32 = 13; // the F32 2^(127 - 7)
// Bytes, for the F8_E4M3 results of e4m3Piece: the low nibble, one and nine (e4m3AllNormal), what a high nibble
// adds, the magnitude's bits.
const Q_NIBBLE_BYTES: u32 = 14;
const Q_ONE_BYTES: u32 = 15;
const Q_NINE_BYTES: u32 = 16;
const Q_E4M3_STEPS: u32 = 17;
const Q_E4M3_MAGNITUDE_BYTES: u32 = 18;
const Q_SIGN: u32 = 19; // 0x80000000

@inline function qs(slot: u32): v128 {
  return v128.load(QS + (<usize>slot << 4));
}

@inline function setQs(slot: u32, value: u32): void {
  v128.store(QS + (<usize>slot << 4), i32x4.splat(value));
}

function prepareRounding(): void {
  setQs(Q_ABS, 0x7fffffff);
  setQs(Q_BF16_ROUNDING, 0x7fff);
  setQs(Q_ONE, 1);
  setQs(Q_BF16_MASK, 0xffff0000);
  setQs(Q_F16_ROUNDING, 0xfff);
  setQs(Q_F16_MASK, 0xffffe000);
  setQs(Q_HALF, 0x3f000000);
  setQs(Q_INFINITY, 0x7f800000);
  setQs(Q_F16_NORMAL_LESS_ONE, 0x387fffff);
  setQs(Q_F16_OVERFLOW, 0x477ff000);
  setQs(Q_QUIET, 0x00400000);
  setQs(Q_E4M3_MAGNITUDE, 0x7f);
  setQs(Q_E4M3_SIGN, 0x80);
  setQs(Q_E4M3_REBIAS, (254 - biasOf(F8_E4M3)) << 23);
  setQs(Q_NIBBLE_BYTES, 0x0f0f0f0f);
  setQs(Q_ONE_BYTES, 0x01010101);
  setQs(Q_NINE_BYTES, 0x09090909);
  // High nibble h (sign and the exponent's upper three bits) of a code adds its exponent steps from exponent 2 (a
  // step of two is one in the high byte) and its sign to the high byte of the results of codes 0x10-0x1f.
  v128.store(QS + (Q_E4M3_STEPS << 4), i8x16(-1, 0, 1, 2, 3, 4, 5, 6, 127, -128, -127, -126, -125, -124, -123, -122));
  setQs(Q_E4M3_MAGNITUDE_BYTES, 0x7f7f7f7f);
  setQs(Q_SIGN, 0x80000000);
}

// ---- Rounding to the reference's dtype, keeping the result as F32 bits ----

// F32 bits rounded to the nearest BF16 (ties to even); a NaN stays a NaN.
@inline function roundBf16(x: u32): u32 {
  if ((x & 0x7fffffff) > 0x7f800000) return x | 0x00400000;
  return (x + 0x7fff + ((x >> 16) & 1)) & 0xffff0000;
}

// F32 bits rounded to the nearest F16 (ties to even), as F32 bits: infinity past the largest F16, the F16
// subnormal steps below 2^-14; a NaN stays a NaN.
@inline function roundF16(x: u32): u32 {
  let sign = x & 0x80000000;
  let magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000) return x | 0x00400000;
  // 65520 is halfway between 65504, the largest F16, and 65536: ties to even take it up, to infinity.
  if (magnitude >= 0x477ff000) return sign | 0x7f800000;
  if (magnitude >= 0x38800000) return sign | ((magnitude + 0xfff + ((magnitude >> 13) & 1)) & 0xffffe000);
  // Adding 0.5, whose ulp is 2^-24 (the F16 subnormal step), rounds to even there.
  return sign | reinterpret<u32>(reinterpret<f32>(magnitude) + 0.5 - 0.5);
}

@inline function roundTo(ref: u32, x: u32): u32 {
  return ref == BF16 ? roundBf16(x) : ref == F16 ? roundF16(x) : x;
}

// No NaN check, unlike roundBf16: what it rounds is always the result of an arithmetic operation, whose NaNs wasm
// makes quiet (bit 22 set), which the addition cannot carry into infinity.
@inline function roundBf16X4(x: v128): v128 {
  return v128.and(i32x4.add(x, i32x4.add(qs(Q_BF16_ROUNDING), v128.and(i32x4.shr_u(x, 16), qs(Q_ONE)))), qs(Q_BF16_MASK));
}

@inline function roundF16X4(x: v128): v128 {
  let magnitude = v128.and(x, qs(Q_ABS));
  let rounded = v128.and(i32x4.add(magnitude, i32x4.add(qs(Q_F16_ROUNDING), v128.and(i32x4.shr_u(magnitude, 13), qs(Q_ONE)))), qs(Q_F16_MASK));
  // Zero and the normal F16 range round as above. The rest (below 2^-14, from 65520 on, NaN) is rare in weights:
  // a branch takes it (as the conversion kernels' BF16 to F16 does).
  let subnormal = i32x4.lt_u(i32x4.sub(magnitude, qs(Q_ONE)), qs(Q_F16_NORMAL_LESS_ONE));
  let large = i32x4.ge_s(magnitude, qs(Q_F16_OVERFLOW));
  if (v128.any_true(v128.or(subnormal, large))) {
    rounded = v128.bitselect(f32x4.sub(f32x4.add(magnitude, qs(Q_HALF)), qs(Q_HALF)), rounded, subnormal);
    rounded = v128.bitselect(qs(Q_INFINITY), rounded, large);
    rounded = v128.bitselect(v128.or(magnitude, qs(Q_QUIET)), rounded, i32x4.gt_s(magnitude, qs(Q_INFINITY)));
  }
  return v128.or(rounded, v128.andnot(x, qs(Q_ABS)));
}

@inline function roundToX4(ref: u32, x: v128): v128 {
  return ref == BF16 ? roundBf16X4(x) : ref == F16 ? roundF16X4(x) : x;
}

// ---- The unpack ----

// Code `i` of the stream in the order `order` (4-bit codes only are reordered).
@inline function positionOf(order: u32, i: usize): usize {
  if (order == ORDER_AWQ) return (i & ~7) | ((i & 1) << 2) | ((i >> 1) & 3);
  if (order == ORDER_HIGH_NIBBLE_FIRST) return i ^ 1;
  return i;
}

@inline function wordAt(words: usize, wordStride: usize, w: usize): u32 {
  return load<u32>(words + ((w * wordStride) << 2));
}

// 16 codes from 8 bytes of 4-bit codes (their first byte's low nibble first), in the order asked for.
@inline function nibbles16(order: u32, packed: v128): v128 {
  let low = v128.and(packed, i8x16.splat(0x0f));
  let high = i8x16.shr_u(packed, 4);
  if (order == ORDER_HIGH_NIBBLE_FIRST) return i8x16.shuffle(high, low, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  let codes = i8x16.shuffle(low, high, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  if (order == ORDER_AWQ) return i8x16.shuffle(codes, codes, 0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  return codes;
}

/** Unpacks the stream an UNPACK_ descriptor describes (unpackStream). */
export function unpackCodes(descriptor: usize): void {
  unpackStream(
    load<u32>(descriptor + UNPACK_WORDS), load<u32>(descriptor + UNPACK_WORD_STRIDE), load<u32>(descriptor + UNPACK_BITS),
    load<u32>(descriptor + UNPACK_ORDER), load<u32>(descriptor + UNPACK_SIGNED) != 0, load<u32>(descriptor + UNPACK_COUNT),
    load<u32>(descriptor + UNPACK_OUT),
  );
}

/**
 * Writes `count` codes of the stream whose first word is at `words` (its words `wordStride` words apart) to the
 * bytes at `out`, one a byte, in `order`; with `signed` (8-bit codes) each is offset by 128, so that the I8 value
 * v comes out as v + 128.
 */
function unpackStream(words: usize, wordStride: usize, bits: u32, order: u32, signed: bool, count: usize, out: usize): void {
  let i: usize = 0;
  if (bits == 4 && wordStride == 1) {
    for (; i + 16 <= count; i += 16) v128.store(out + i, nibbles16(order, v128.load64_zero(words + (i >> 1))));
  } else if (bits == 4) {
    for (; i + 16 <= count; i += 16) {
      let w = i >> 3;
      v128.store(out + i, nibbles16(order, i32x4.replace_lane(i32x4.splat(wordAt(words, wordStride, w)), 1, wordAt(words, wordStride, w + 1))));
    }
  } else if (bits == 8) {
    let offset = signed ? i8x16.splat(-128) : i8x16.splat(0);
    if (wordStride == 1) {
      for (; i + 16 <= count; i += 16) v128.store(out + i, v128.xor(v128.load(words + i), offset));
    } else {
      for (; i + 16 <= count; i += 16) {
        let w = i >> 2;
        let v = i32x4.splat(wordAt(words, wordStride, w));
        v = i32x4.replace_lane(v, 1, wordAt(words, wordStride, w + 1));
        v = i32x4.replace_lane(v, 2, wordAt(words, wordStride, w + 2));
        v = i32x4.replace_lane(v, 3, wordAt(words, wordStride, w + 3));
        v128.store(out + i, v128.xor(v, offset));
      }
    }
  }
  let mask: u32 = (1 << bits) - 1;
  let flip: u32 = signed ? 0x80 : 0;
  for (; i < count; i++) {
    let at = positionOf(order, i) * bits;
    let w = at >> 5;
    let shift = <u32>(at & 31);
    let v = wordAt(words, wordStride, w) >>> shift;
    if (shift + bits > 32) v |= wordAt(words, wordStride, w + 1) << (32 - shift);
    store<u8>(out + i, (v & mask) ^ flip);
  }
}

// The 4- or 8-bit codes of 16 rows whose words interleave (word w of row j at words + (w * wordStride + j) * 4:
// GPTQ's qweight, its columns read as rows): `count` codes of each (rounded up to whole words), stream j at
// out + j * outStride. The 16 rows' words of a row of words are one cache line, read once for all of them (row by
// row, a line is read again for each, the rows' words far enough apart to evict it in between).
function unpackInterleaved(words: usize, wordStride: usize, bits: u32, signed: bool, count: usize, out: usize, outStride: usize): void {
  let perWord: usize = 32 / bits;
  let offset = signed ? i8x16.splat(-128) : i8x16.splat(0);
  for (let w: usize = 0; w * perWord < count; w++) {
    let at = words + ((w * wordStride) << 2);
    for (let quad: usize = 0; quad < 4; quad++) {
      let v = v128.load(at + (quad << 4));
      let row = out + w * perWord + (quad << 2) * outStride;
      if (bits == 4) {
        let low = v128.and(v, i8x16.splat(0x0f));
        let high = i8x16.shr_u(v, 4);
        let first = i8x16.shuffle(low, high, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let second = i8x16.shuffle(low, high, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        v128.store64_lane(row, first, 0);
        v128.store64_lane(row + outStride, first, 1);
        v128.store64_lane(row + 2 * outStride, second, 0);
        v128.store64_lane(row + 3 * outStride, second, 1);
      } else {
        v = v128.xor(v, offset);
        v128.store32_lane(row, v, 0);
        v128.store32_lane(row + outStride, v, 1);
        v128.store32_lane(row + 2 * outStride, v, 2);
        v128.store32_lane(row + 3 * outStride, v, 3);
      }
    }
  }
}

// The 4-bit codes of four words a row, rows `rowBytes` bytes apart: `count` rows of 32 streams, stream j (at
// out + j * outStride) code j % 8 in `order` of word j / 8 of each row. Sixteen rows at a time are loaded whole
// (a vector each) and transposed into 16 byte planes (plane b: byte b of each row), each plane two nibbles; four
// rounds of zips, each an instruction on x86 and ARM. A vector load may read past the rows' last word: callers
// leave 16 bytes of slack after the codes, and the streams of rows past the words are not used.
function unpackColumns(words: usize, rowBytes: usize, order: u32, count: usize, out: usize, outStride: usize): void {
  let i: usize = 0;
  for (; i + 16 <= count; i += 16) {
    let at = words + i * rowBytes;
    let r0 = v128.load(at);
    let r1 = v128.load(at + rowBytes);
    let r2 = v128.load(at + 2 * rowBytes);
    let r3 = v128.load(at + 3 * rowBytes);
    let r4 = v128.load(at + 4 * rowBytes);
    let r5 = v128.load(at + 5 * rowBytes);
    let r6 = v128.load(at + 6 * rowBytes);
    let r7 = v128.load(at + 7 * rowBytes);
    let r8 = v128.load(at + 8 * rowBytes);
    let r9 = v128.load(at + 9 * rowBytes);
    let r10 = v128.load(at + 10 * rowBytes);
    let r11 = v128.load(at + 11 * rowBytes);
    let r12 = v128.load(at + 12 * rowBytes);
    let r13 = v128.load(at + 13 * rowBytes);
    let r14 = v128.load(at + 14 * rowBytes);
    let r15 = v128.load(at + 15 * rowBytes);
    // Bytes of rows 2m and 2m + 1 side by side: a16 bytes 0-7, b16 bytes 8-15 (16-bit units).
    let a0 = zip8(r0, r1, false), b0 = zip8(r0, r1, true);
    let a1 = zip8(r2, r3, false), b1 = zip8(r2, r3, true);
    let a2 = zip8(r4, r5, false), b2 = zip8(r4, r5, true);
    let a3 = zip8(r6, r7, false), b3 = zip8(r6, r7, true);
    let a4 = zip8(r8, r9, false), b4 = zip8(r8, r9, true);
    let a5 = zip8(r10, r11, false), b5 = zip8(r10, r11, true);
    let a6 = zip8(r12, r13, false), b6 = zip8(r12, r13, true);
    let a7 = zip8(r14, r15, false), b7 = zip8(r14, r15, true);
    // Rows 4m .. 4m + 3 (32-bit units): qN_k bytes 4k .. 4k + 3.
    let q0_0 = zip16(a0, a1, false), q0_1 = zip16(a0, a1, true), q0_2 = zip16(b0, b1, false), q0_3 = zip16(b0, b1, true);
    let q1_0 = zip16(a2, a3, false), q1_1 = zip16(a2, a3, true), q1_2 = zip16(b2, b3, false), q1_3 = zip16(b2, b3, true);
    let q2_0 = zip16(a4, a5, false), q2_1 = zip16(a4, a5, true), q2_2 = zip16(b4, b5, false), q2_3 = zip16(b4, b5, true);
    let q3_0 = zip16(a6, a7, false), q3_1 = zip16(a6, a7, true), q3_2 = zip16(b6, b7, false), q3_3 = zip16(b6, b7, true);
    // Rows 8h .. 8h + 7 (64-bit units): oN_k bytes 2k, 2k + 1.
    let o0_0 = zip32(q0_0, q1_0, false), o0_1 = zip32(q0_0, q1_0, true), o0_2 = zip32(q0_1, q1_1, false), o0_3 = zip32(q0_1, q1_1, true);
    let o0_4 = zip32(q0_2, q1_2, false), o0_5 = zip32(q0_2, q1_2, true), o0_6 = zip32(q0_3, q1_3, false), o0_7 = zip32(q0_3, q1_3, true);
    let o1_0 = zip32(q2_0, q3_0, false), o1_1 = zip32(q2_0, q3_0, true), o1_2 = zip32(q2_1, q3_1, false), o1_3 = zip32(q2_1, q3_1, true);
    let o1_4 = zip32(q2_2, q3_2, false), o1_5 = zip32(q2_2, q3_2, true), o1_6 = zip32(q2_3, q3_3, false), o1_7 = zip32(q2_3, q3_3, true);
    // Byte b of all 16 rows: word b / 4's codes 2 (b % 4) and 2 (b % 4) + 1.
    let dst = out + i;
    storePlanes(order, o0_0, o1_0, 0, dst, outStride);
    storePlanes(order, o0_1, o1_1, 2, dst, outStride);
    storePlanes(order, o0_2, o1_2, 4, dst, outStride);
    storePlanes(order, o0_3, o1_3, 6, dst, outStride);
    storePlanes(order, o0_4, o1_4, 8, dst, outStride);
    storePlanes(order, o0_5, o1_5, 10, dst, outStride);
    storePlanes(order, o0_6, o1_6, 12, dst, outStride);
    storePlanes(order, o0_7, o1_7, 14, dst, outStride);
  }
  for (; i < count; i++) {
    for (let w: usize = 0; w < 4; w++) {
      let word = load<u32>(words + i * rowBytes + (w << 2));
      for (let j: usize = 0; j < 8; j++) store<u8>(out + ((w << 3) + j) * outStride + i, (word >> (<u32>positionOf(order, j) << 2)) & 15);
    }
  }
}

// Byte b of 16 four-byte values (r0: values 0-3, ..., r3: 12-15) to plane b at `at` + 16 b, for b 0-3: two rounds
// of unzips (even bytes, odd bytes), which V8 compiles to a few instructions each with no table of indices.
@inline function storeBytePlanes(r0: v128, r1: v128, r2: v128, r3: v128, at: usize): void {
  let even01 = unzip8(r0, r1, false);
  let odd01 = unzip8(r0, r1, true);
  let even23 = unzip8(r2, r3, false);
  let odd23 = unzip8(r2, r3, true);
  v128.store(at, unzip8(even01, even23, false));
  v128.store(at, unzip8(odd01, odd23, false), 16);
  v128.store(at, unzip8(even01, even23, true), 32);
  v128.store(at, unzip8(odd01, odd23, true), 48);
}

// The upper 16-bit halves of a's four lanes, then b's.
@inline function upperHalves(a: v128, b: v128): v128 {
  return i16x8.shuffle(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
}

// The even (or odd) bytes of a, then b's: the low (or high) byte plane of 16-bit values. V8 compiles these
// patterns (and upperHalves) to a few instructions with no table of indices.
@inline function unzip8(a: v128, b: v128, high: bool): v128 {
  return high
    ? i8x16.shuffle(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
    : i8x16.shuffle(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}

@inline function zip8(a: v128, b: v128, high: bool): v128 {
  return high
    ? i8x16.shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
    : i8x16.shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}

@inline function zip16(a: v128, b: v128, high: bool): v128 {
  return high ? i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15) : i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
}

@inline function zip32(a: v128, b: v128, high: bool): v128 {
  return high ? i32x4.shuffle(a, b, 2, 6, 3, 7) : i32x4.shuffle(a, b, 0, 4, 1, 5);
}

// Bytes b and b + 1 of 16 rows, from the 64-bit units of rows 0-7 (`low`) and 8-15 (`high`): two planes.
@inline function storePlanes(order: u32, low: v128, high: v128, b: usize, out: usize, outStride: usize): void {
  storeNibbles(order, i64x2.shuffle(low, high, 0, 2), b, out, outStride);
  storeNibbles(order, i64x2.shuffle(low, high, 1, 3), b + 1, out, outStride);
}

// Plane b's low nibbles (code 2 (b % 4) of word b / 4) and high nibbles (the next code), each to its stream.
@inline function storeNibbles(order: u32, plane: v128, b: usize, out: usize, outStride: usize): void {
  let word = out + ((b >> 2) << 3) * outStride;
  let position = (b & 3) << 1;
  v128.store(word + streamOf(order, position) * outStride, v128.and(plane, i8x16.splat(0x0f)));
  v128.store(word + streamOf(order, position + 1) * outStride, i8x16.shr_u(plane, 4));
}

// The column (0-7) of a word's code at `position`: positionOf's inverse for a word's eight codes.
@inline function streamOf(order: u32, position: usize): usize {
  return order == ORDER_AWQ ? ((position & 3) << 1) | (position >> 2) : position;
}

// ---- Values ----

@inline function valueOf(value: u32, code: u32, table: usize): u32 {
  if (value == VALUE_AFFINE) return reinterpret<u32>(<f32>code);
  if (value == VALUE_TABLE) return load<u32>(table + (<usize>code << 2));
  return byteCodeBits(value, code);
}

// Whether 16 F8_E4M3 codes hold a NaN or a subnormal (codes 0x01-0x07 and their negatives), which the conversion
// kernels' decoder takes (e4m3X4 would multiply a subnormal F32 there: on x86 a microcode assist of a hundred
// cycles or so). Quantized weights' codes are rarely subnormal: the scale puts the largest magnitude at 448.
@inline function hasE4m3Edges(codes: v128): bool {
  let magnitude = v128.and(codes, i8x16.splat(0x7f));
  return v128.any_true(v128.or(i8x16.lt_u(i8x16.sub(magnitude, i8x16.splat(1)), i8x16.splat(7)), i8x16.eq(magnitude, i8x16.splat(0x7f))));
}

// Whether 16 F8_E4M3 codes are all normal numbers: their magnitudes (0x08-0x7e) plus one, as signed bytes, are at
// least 9 (zero and the subnormals are less; the NaN, 0x7f, wraps to -128).
@inline function e4m3AllNormal(codes: v128): bool {
  return !v128.any_true(i8x16.gt_s(qs(Q_NINE_BYTES), i8x16.add(v128.and(codes, qs(Q_E4M3_MAGNITUDE_BYTES)), qs(Q_ONE_BYTES))));
}

// Whether every normal F8_E4M3 code times `scale` (F32 bits) is a normal F32 whose BF16 rounding is finite: a
// magnitude from 2^-120 (the smallest code, 2^-6, times it is 2^-126) to below 2^119 (448 times it stays below
// 1.75 x 2^127, finite in BF16).
@inline function e4m3ScaleFits(scale: u32): bool {
  return ((scale >> 23) & 0xff) - 7 < 239;
}

// Four normal (or zero) F8_E4M3 codes as F32: the magnitude's bits moved to the top of the F32 mantissa make an F32
// whose exponent is the code's less the F32 bias, which the power of two between the two biases scales exactly;
// then the sign. Five instructions where the conversion kernels' decoder, which handles every code, takes about
// fifteen (measured on 16M codes of weights: FP8 dequantization to F32 in 5.5 ms instead of 15).
@inline function e4m3X4(codes: v128): v128 {
  let magnitude = i32x4.shl(v128.and(codes, qs(Q_E4M3_MAGNITUDE)), 23 - mantBitsOf(F8_E4M3));
  let value = f32x4.mul(magnitude, qs(Q_E4M3_REBIAS));
  return v128.or(value, i32x4.shl(v128.and(codes, qs(Q_E4M3_SIGN)), 24));
}

// The values (before scaling) of codes first .. first + 3.
@inline function codeValues(value: u32, first: u32, table: usize): v128 {
  if (value == VALUE_TABLE) return v128.load(table + (<usize>first << 2));
  return f32x4.convert_i32x4_s(i32x4.add(i32x4(0, 1, 2, 3), i32x4.splat(first)));
}

// How a run of 16 columns finds its parameters (a compile-time constant in each loop): all 16 in one group, each
// its own and consecutive (groupSize 1, groupStride 1: AWQ's rows, as the kernel reads them), or gathered.
const PARAMS_SPLAT: u32 = 0;
const PARAMS_EACH: u32 = 1;
const PARAMS_VECTOR: u32 = 2;

// The formula after the value (a compile-time constant in each loop): value * scale, (value - zero) * scale
// (then times postMultiplier where POST_MULTIPLY says), or ref(value * scale) + bias.
const FORMULA_SCALE: u32 = 0;
const FORMULA_ZERO: u32 = 1;
const FORMULA_BIAS: u32 = 2;

@inline function groupAt(column: usize, groupSize: usize, groupOf: usize): usize {
  return groupSize != 0 ? column / groupSize : <usize>load<u32>(groupOf + (column << 2));
}

// The parameters of columns column .. column + 3 from the parameter row at `row`.
@inline function paramsX4(mode: u32, row: usize, column: usize, groupSize: usize, groupOf: usize, groupStride: usize): v128 {
  if (mode == PARAMS_VECTOR) return v128.load(row + (column << 2));
  let v = v128.load32_splat(row + (groupAt(column, groupSize, groupOf) * groupStride << 2));
  v = v128.load32_lane(row + (groupAt(column + 1, groupSize, groupOf) * groupStride << 2), v, 1);
  v = v128.load32_lane(row + (groupAt(column + 2, groupSize, groupOf) * groupStride << 2), v, 2);
  return v128.load32_lane(row + (groupAt(column + 3, groupSize, groupOf) * groupStride << 2), v, 3);
}

// Four values (F32) from their scale and zero or bias: the formula of the file's top, rounded to `ref`.
@inline function finishX4(formula: u32, ref: u32, x: v128, scale: v128, other: v128, post: v128, postMultiply: bool): v128 {
  if (formula == FORMULA_ZERO) {
    x = f32x4.mul(f32x4.sub(x, other), scale);
    if (postMultiply) x = f32x4.mul(x, post);
  } else if (formula == FORMULA_BIAS) x = f32x4.add(roundToX4(ref, f32x4.mul(x, scale)), other);
  else x = f32x4.mul(x, scale);
  return roundToX4(ref, x);
}

@inline function finish(formula: u32, ref: u32, x: f32, scale: f32, other: f32, post: f32, postMultiply: bool): u32 {
  if (formula == FORMULA_ZERO) {
    x = (x - other) * scale;
    if (postMultiply) x *= post;
  } else if (formula == FORMULA_BIAS) x = reinterpret<f32>(roundTo(ref, reinterpret<u32>(x * scale))) + other;
  else x *= scale;
  return roundTo(ref, reinterpret<u32>(x));
}

// F8_E4M3 codes times a scale per group (whole runs of 16), rounded to BF16, as `to`. Where every product and
// result is a normal number, multiplying a code by 2^k moves its BF16 result k steps in exponent, exactly. So the
// results of codes 0x10-0x1f (exponents 2 and 3, every mantissa) make the others: their low and high bytes are two
// planes that a code's low nibble (its mantissa and its exponent's low bit) picks from, and its high nibble adds its
// other exponent steps (two apiece, from exponent 2) and its sign to the high byte. Runs with a zero, subnormal or
// NaN code, and groups whose scale is out of that range, are computed an element at a time (rare in weights).
@inline function e4m3Piece(to: u32, codes: usize, first: usize, count: usize, out: usize, scales: usize, groupSize: usize, groupStride: usize): void {
  let i: usize = 0;
  let group = first / groupSize;
  for (; i + 16 <= count; group++) {
    let end = min(count, (group + 1) * groupSize - first);
    let param = group * groupStride << 2;
    let fits = e4m3ScaleFits(load<u32>(scales + param));
    let s = v128.load32_splat(scales + param);
    // Assigned under a condition (over a load the compilers cannot see through), so that they do not move the work
    // into the loop below.
    let low = v128.load(PLANES), high = low;
    if (fits) {
      let r0 = roundBf16X4(f32x4.mul(e4m3X4(i32x4(0x10, 0x11, 0x12, 0x13)), s));
      let r1 = roundBf16X4(f32x4.mul(e4m3X4(i32x4(0x14, 0x15, 0x16, 0x17)), s));
      let r2 = roundBf16X4(f32x4.mul(e4m3X4(i32x4(0x18, 0x19, 0x1a, 0x1b)), s));
      let r3 = roundBf16X4(f32x4.mul(e4m3X4(i32x4(0x1c, 0x1d, 0x1e, 0x1f)), s));
      let halves0 = upperHalves(r0, r1);
      let halves1 = upperHalves(r2, r3);
      low = unzip8(halves0, halves1, false);
      high = unzip8(halves0, halves1, true);
    }
    for (; i + 16 <= end; i += 16) {
      if (fits && e4m3AllNormal(v128.load(codes + i))) {
        run16(PARAMS_SPLAT, FORMULA_SCALE, to, VALUE_E4M3_BF16, BF16, false, codes, first, i, out, s, s, low, high, low, high, scales, 0, 0, 0, 0, 0);
      } else {
        for (let j = i; j < i + 16; j++) element(FORMULA_SCALE, to, F8_E4M3, BF16, false, codes, first, j, out, scales, 0, groupSize, 0, groupStride, 0, 0);
      }
    }
  }
  for (; i < count; i++) element(FORMULA_SCALE, to, F8_E4M3, BF16, false, codes, first, i, out, scales, 0, groupSize, 0, groupStride, 0, 0);
}

// Columns [first, first + count) of one row (codes at `codes`, one a byte), into `out` as `to`. The parameter
// mode, the formula and `to` are constants in each copy of this loop; the value kind and `ref` are the same all
// along it, branches the processor predicts.
@inline function piece(
  mode: u32, formula: u32, to: u32, value: u32, ref: u32, postMultiply: bool, small: bool,
  codes: usize, first: usize, count: usize, out: usize,
  scales: usize, others: usize, groupSize: usize, groupOf: usize, groupStride: usize, table: usize, post: f32,
): void {
  let i: usize = 0;
  let p0 = v128.load(TABLE_PLANES);
  let p1 = v128.load(TABLE_PLANES, 16);
  let p2 = v128.load(TABLE_PLANES, 32);
  let p3 = v128.load(TABLE_PLANES, 48);
  if (mode == PARAMS_SPLAT) {
    // Group by group (whole runs of 16): its scale and zero or bias are loaded once, with no division per run
    // (nor per group: each group ends where the next begins).
    let group = first / groupSize;
    for (; i + 16 <= count; group++) {
      let end = min(count, (group + 1) * groupSize - first);
      let param = group * groupStride << 2;
      let s = v128.load32_splat(scales + param);
      let o = formula != FORMULA_SCALE ? v128.load32_splat(others + param) : s;
      // A symmetric table times a scale has symmetric results: half of them are computed, the rest negated. That
      // makes the results pay in a group of 16 already where they are two planes (BF16 ones).
      let symmetric = value == VALUE_TABLE && formula == FORMULA_SCALE && tableSymmetric;
      if (small && (end - i >= GROUP_TABLE_MIN || (symmetric && ref == BF16 && end - i >= 16))) {
        // Codes below 16 have 16 results in a group: computed once, then looked up as a table's entries are.
        let postX4 = f32x4.splat(post);
        let r0 = finishX4(formula, ref, codeValues(value, 0, table), s, o, postX4, postMultiply);
        let r1 = finishX4(formula, ref, codeValues(value, 4, table), s, o, postX4, postMultiply);
        let g0: v128, g1: v128, g2: v128, g3: v128;
        if (to == F32 && ref == BF16) {
          // BF16 results: the two planes of their upper halves (see run16).
          let halves0 = upperHalves(r0, r1);
          let halves1 = symmetric
            ? v128.xor(halves0, i16x8.splat(-0x8000))
            : upperHalves(finishX4(formula, ref, codeValues(value, 8, table), s, o, postX4, postMultiply), finishX4(formula, ref, codeValues(value, 12, table), s, o, postX4, postMultiply));
          g0 = unzip8(halves0, halves1, false);
          g1 = unzip8(halves0, halves1, true);
          g2 = g0;
          g3 = g1;
        } else {
          let r2: v128, r3: v128;
          if (symmetric) {
            r2 = v128.xor(r0, qs(Q_SIGN));
            r3 = v128.xor(r1, qs(Q_SIGN));
          } else {
            r2 = finishX4(formula, ref, codeValues(value, 8, table), s, o, postX4, postMultiply);
            r3 = finishX4(formula, ref, codeValues(value, 12, table), s, o, postX4, postMultiply);
          }
          if (to == F32) {
            storeBytePlanes(r0, r1, r2, r3, PLANES);
            g0 = v128.load(PLANES);
            g1 = v128.load(PLANES, 16);
            g2 = v128.load(PLANES, 32);
            g3 = v128.load(PLANES, 48);
          } else {
            // A 16-bit `to`: the results converted once, here, rather than at every run; two byte planes.
            store8(to, r0, r1, RESULTS);
            store8(to, r2, r3, RESULTS + 16);
            g0 = unzip8(v128.load(RESULTS), v128.load(RESULTS, 16), false);
            g1 = unzip8(v128.load(RESULTS), v128.load(RESULTS, 16), true);
            g2 = g0;
            g3 = g1;
          }
        }
        for (; i + 16 <= end; i += 16) run16(mode, formula, to, VALUE_RESULTS, ref, postMultiply, codes, first, i, out, s, o, g0, g1, g2, g3, scales, others, 0, 0, 0, post);
      } else {
        for (; i + 16 <= end; i += 16) run16(mode, formula, to, value, ref, postMultiply, codes, first, i, out, s, o, p0, p1, p2, p3, scales, others, 0, 0, 0, post);
      }
    }
  } else {
    let none = i32x4.splat(0);
    for (; i + 16 <= count; i += 16)
      run16(mode, formula, to, value, ref, postMultiply, codes, first, i, out, none, none, p0, p1, p2, p3, scales, others, groupSize, groupOf, groupStride, post);
  }
  for (; i < count; i++) element(formula, to, value, ref, postMultiply, codes, first, i, out, scales, others, groupSize, groupOf, groupStride, table, post);
}

// Column first + i, one element at a time.
@inline function element(
  formula: u32, to: u32, value: u32, ref: u32, postMultiply: bool, codes: usize, first: usize, i: usize, out: usize,
  scales: usize, others: usize, groupSize: usize, groupOf: usize, groupStride: usize, table: usize, post: f32,
): void {
  let g = groupAt(first + i, groupSize, groupOf) * groupStride << 2;
  let x = reinterpret<f32>(valueOf(value, load<u8>(codes + i), table));
  let other = formula != FORMULA_SCALE ? load<f32>(others + g) : 0;
  storeElement(to, out, i, finish(formula, ref, x, load<f32>(scales + g), other, post, postMultiply));
}

// Columns first + i .. first + i + 15: their values, finished with the parameters (`s` and `o` where the mode
// is PARAMS_SPLAT), stored. A table's entries (value VALUE_TABLE) or a group's results (VALUE_RESULTS) are the
// byte planes p0-p3.
@inline function run16(
  mode: u32, formula: u32, to: u32, value: u32, ref: u32, postMultiply: bool,
  codes: usize, first: usize, i: usize, out: usize, s: v128, o: v128, p0: v128, p1: v128, p2: v128, p3: v128,
  scales: usize, others: usize, groupSize: usize, groupOf: usize, groupStride: usize, post: f32,
): void {
  let c = v128.load(codes + i);
  let q0: v128, q1: v128, q2: v128, q3: v128;
  if (value == VALUE_E4M3_BF16 || (value == VALUE_RESULTS && (to != F32 || ref == BF16)) || (value == VALUE_TABLE && tableHalves)) {
    // 16-bit values in two byte planes: BF16 values (a table's upper halves are planes 2 and 3), or a group's
    // results in a 16-bit `to` already. An F8_E4M3 code picks by its low nibble, and its high nibble adds to the
    // high byte (see e4m3Piece).
    let k = value == VALUE_E4M3_BF16 ? v128.and(c, qs(Q_NIBBLE_BYTES)) : c;
    let low = i8x16.swizzle(value == VALUE_TABLE ? p2 : p0, k);
    let high = i8x16.swizzle(value == VALUE_TABLE ? p3 : p1, k);
    if (value == VALUE_E4M3_BF16) high = i8x16.add(high, i8x16.swizzle(qs(Q_E4M3_STEPS), i8x16.shr_u(c, 4)));
    let h0 = zip8(low, high, false);
    let h1 = zip8(low, high, true);
    if ((value == VALUE_RESULTS && to != F32) || (value == VALUE_E4M3_BF16 && to == BF16)) {
      v128.store(out + (i << 1), h0);
      v128.store(out + (i << 1), h1, 16);
      return;
    }
    // As F32: each BF16 the upper half of a word.
    let zero = i32x4.splat(0);
    q0 = i16x8.shuffle(zero, h0, 0, 8, 1, 9, 2, 10, 3, 11);
    q1 = i16x8.shuffle(zero, h0, 4, 12, 5, 13, 6, 14, 7, 15);
    q2 = i16x8.shuffle(zero, h1, 0, 8, 1, 9, 2, 10, 3, 11);
    q3 = i16x8.shuffle(zero, h1, 4, 12, 5, 13, 6, 14, 7, 15);
  } else if (value == VALUE_TABLE || value == VALUE_RESULTS) {
    // Each code picks its entry's four bytes, a byte plane at a time; then the bytes are put back in order.
    let b0 = i8x16.swizzle(p0, c);
    let b1 = i8x16.swizzle(p1, c);
    let b2 = i8x16.swizzle(p2, c);
    let b3 = i8x16.swizzle(p3, c);
    let low01 = i8x16.shuffle(b0, b1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let high01 = i8x16.shuffle(b0, b1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    let low23 = i8x16.shuffle(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let high23 = i8x16.shuffle(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    q0 = i16x8.shuffle(low01, low23, 0, 8, 1, 9, 2, 10, 3, 11);
    q1 = i16x8.shuffle(low01, low23, 4, 12, 5, 13, 6, 14, 7, 15);
    q2 = i16x8.shuffle(high01, high23, 0, 8, 1, 9, 2, 10, 3, 11);
    q3 = i16x8.shuffle(high01, high23, 4, 12, 5, 13, 6, 14, 7, 15);
  } else {
    let low = i16x8.extend_low_i8x16_u(c);
    let high = i16x8.extend_high_i8x16_u(c);
    q0 = i32x4.extend_low_i16x8_u(low);
    q1 = i32x4.extend_high_i16x8_u(low);
    q2 = i32x4.extend_low_i16x8_u(high);
    q3 = i32x4.extend_high_i16x8_u(high);
    if (value == VALUE_AFFINE) {
      // Codes are below 256: the signed conversion is exact, and one instruction where the unsigned is several.
      q0 = f32x4.convert_i32x4_s(q0);
      q1 = f32x4.convert_i32x4_s(q1);
      q2 = f32x4.convert_i32x4_s(q2);
      q3 = f32x4.convert_i32x4_s(q3);
    } else if (value == F8_E4M3 && !hasE4m3Edges(c)) {
      q0 = e4m3X4(q0);
      q1 = e4m3X4(q1);
      q2 = e4m3X4(q2);
      q3 = e4m3X4(q3);
    } else {
      q0 = byteCodeBitsX4(value, q0);
      q1 = byteCodeBitsX4(value, q1);
      q2 = byteCodeBitsX4(value, q2);
      q3 = byteCodeBitsX4(value, q3);
    }
  }
  let postX4 = f32x4.splat(post);
  if (value == VALUE_RESULTS || value == VALUE_E4M3_BF16) {
    // Finished already.
  } else if (mode == PARAMS_SPLAT) {
    q0 = finishX4(formula, ref, q0, s, o, postX4, postMultiply);
    q1 = finishX4(formula, ref, q1, s, o, postX4, postMultiply);
    q2 = finishX4(formula, ref, q2, s, o, postX4, postMultiply);
    q3 = finishX4(formula, ref, q3, s, o, postX4, postMultiply);
  } else {
    let column = first + i;
    q0 = quarter(mode, formula, ref, q0, column, scales, others, groupSize, groupOf, groupStride, postX4, postMultiply);
    q1 = quarter(mode, formula, ref, q1, column + 4, scales, others, groupSize, groupOf, groupStride, postX4, postMultiply);
    q2 = quarter(mode, formula, ref, q2, column + 8, scales, others, groupSize, groupOf, groupStride, postX4, postMultiply);
    q3 = quarter(mode, formula, ref, q3, column + 12, scales, others, groupSize, groupOf, groupStride, postX4, postMultiply);
  }
  let at = out + (i << outShift(to));
  storeResults(to, ref, q0, q1, at);
  storeResults(to, ref, q2, q3, at + (8 << outShift(to)));
}

// Eight results at `at` as `to`. A BF16 result of a BF16 reference is already a BF16 value: its upper half.
@inline function storeResults(to: u32, ref: u32, low: v128, high: v128, at: usize): void {
  if (to == BF16 && ref == BF16) v128.store(at, i8x16.shuffle(low, high, 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31));
  else store8(to, low, high, at);
}

@inline function quarter(
  mode: u32, formula: u32, ref: u32, x: v128, column: usize,
  scales: usize, others: usize, groupSize: usize, groupOf: usize, groupStride: usize, post: v128, postMultiply: bool,
): v128 {
  let s = paramsX4(mode, scales, column, groupSize, groupOf, groupStride);
  let o = formula != FORMULA_SCALE ? paramsX4(mode, others, column, groupSize, groupOf, groupStride) : s;
  return finishX4(formula, ref, x, s, o, post, postMultiply);
}

/** Dequantizes the rectangle a DEQUANT_ descriptor describes (assembly/boundary/quant.ts says what each field is). */
export function dequantRows(descriptor: usize): void {
  let codes: usize = load<u32>(descriptor + DEQUANT_CODES);
  let codeRowBytes: usize = load<u32>(descriptor + DEQUANT_CODE_ROW_BYTES);
  let wordStride: usize = load<u32>(descriptor + DEQUANT_WORD_STRIDE);
  let bits = load<u32>(descriptor + DEQUANT_BITS);
  let order = load<u32>(descriptor + DEQUANT_ORDER);
  let rows: usize = load<u32>(descriptor + DEQUANT_ROWS);
  let cols: usize = load<u32>(descriptor + DEQUANT_COLS);
  let colOffset: usize = load<u32>(descriptor + DEQUANT_COL_OFFSET);
  let scales: usize = load<u32>(descriptor + DEQUANT_SCALES);
  let zeros: usize = load<u32>(descriptor + DEQUANT_ZEROS);
  let biases: usize = load<u32>(descriptor + DEQUANT_BIASES);
  let paramRowOf: usize = load<u32>(descriptor + DEQUANT_PARAM_ROW_OF);
  let paramRowStride: usize = load<u32>(descriptor + DEQUANT_PARAM_ROW_STRIDE);
  let groupSize: usize = load<u32>(descriptor + DEQUANT_GROUP_SIZE);
  let groupOf: usize = load<u32>(descriptor + DEQUANT_GROUP_OF);
  let groupStride: usize = load<u32>(descriptor + DEQUANT_GROUP_STRIDE);
  let value = load<u32>(descriptor + DEQUANT_VALUE);
  let table: usize = load<u32>(descriptor + DEQUANT_TABLE);
  let flags = load<u32>(descriptor + DEQUANT_FLAGS);
  let postMultiplier = load<f32>(descriptor + DEQUANT_POST_MULTIPLIER);
  let ref = load<u32>(descriptor + DEQUANT_REF);
  let to = load<u32>(descriptor + DEQUANT_TO);
  let out: usize = load<u32>(descriptor + DEQUANT_OUT);
  prepareRounding();
  prepareTarget(to);
  if (value == F8_E4M3 || value == F8_E5M2) prepareByteCodes(value);
  if (value == VALUE_TABLE) {
    tableHalves = true;
    tableSymmetric = true;
    for (let code: usize = 0; code < 16; code++) {
      for (let b: usize = 0; b < 4; b++) store<u8>(TABLE_PLANES + (b << 4) + code, load<u8>(table + (code << 2) + b));
      let entry = load<u32>(table + (code << 2));
      if ((entry & 0xffff) != 0) tableHalves = false;
      if (code < 8 && load<u32>(table + ((code + 8) << 2)) != (entry ^ 0x80000000)) tableSymmetric = false;
    }
  }
  if (to == F32) rowsF32(codes, codeRowBytes, wordStride, bits, order, rows, cols, colOffset, scales, zeros, biases, paramRowOf, paramRowStride, groupSize, groupOf, groupStride, value, table, flags, postMultiplier, ref, out);
  else if (to == F16) rowsF16(codes, codeRowBytes, wordStride, bits, order, rows, cols, colOffset, scales, zeros, biases, paramRowOf, paramRowStride, groupSize, groupOf, groupStride, value, table, flags, postMultiplier, ref, out);
  else rowsBF16(codes, codeRowBytes, wordStride, bits, order, rows, cols, colOffset, scales, zeros, biases, paramRowOf, paramRowStride, groupSize, groupOf, groupStride, value, table, flags, postMultiplier, ref, out);
}

// The rows' loop compiled once per output dtype and, inside, once per parameter mode (the choices that weigh most in
// it), each dtype a function of its own: as one function, binaryen took 80 s to optimize the module (now 25 s).
// The layouts' common cases run copies of their own in which every choice is fixed (`common`).
function rowsF32(
  codes: usize, codeRowBytes: usize, wordStride: usize, bits: u32, order: u32,
  rows: usize, cols: usize, colOffset: usize,
  scales: usize, zeros: usize, biases: usize, paramRowOf: usize, paramRowStride: usize,
  groupSize: usize, groupOf: usize, groupStride: usize,
  value: u32, table: usize, flags: u32, postMultiplier: f32, ref: u32,
  out: usize,
): void {
  rowsLoop(codes, codeRowBytes, wordStride, bits, order, rows, cols, colOffset, scales, zeros, biases, paramRowOf, paramRowStride, groupSize, groupOf, groupStride, value, table, flags, postMultiplier, ref, F32, out);
}

function rowsF16(
  codes: usize, codeRowBytes: usize, wordStride: usize, bits: u32, order: u32,
  rows: usize, cols: usize, colOffset: usize,
  scales: usize, zeros: usize, biases: usize, paramRowOf: usize, paramRowStride: usize,
  groupSize: usize, groupOf: usize, groupStride: usize,
  value: u32, table: usize, flags: u32, postMultiplier: f32, ref: u32,
  out: usize,
): void {
  rowsLoop(codes, codeRowBytes, wordStride, bits, order, rows, cols, colOffset, scales, zeros, biases, paramRowOf, paramRowStride, groupSize, groupOf, groupStride, value, table, flags, postMultiplier, ref, F16, out);
}

function rowsBF16(
  codes: usize, codeRowBytes: usize, wordStride: usize, bits: u32, order: u32,
  rows: usize, cols: usize, colOffset: usize,
  scales: usize, zeros: usize, biases: usize, paramRowOf: usize, paramRowStride: usize,
  groupSize: usize, groupOf: usize, groupStride: usize,
  value: u32, table: usize, flags: u32, postMultiplier: f32, ref: u32,
  out: usize,
): void {
  rowsLoop(codes, codeRowBytes, wordStride, bits, order, rows, cols, colOffset, scales, zeros, biases, paramRowOf, paramRowStride, groupSize, groupOf, groupStride, value, table, flags, postMultiplier, ref, BF16, out);
}

@inline function rowsLoop(
  codes: usize, codeRowBytes: usize, wordStride: usize, bits: u32, order: u32,
  rows: usize, cols: usize, colOffset: usize,
  scales: usize, zeros: usize, biases: usize, paramRowOf: usize, paramRowStride: usize,
  groupSize: usize, groupOf: usize, groupStride: usize,
  value: u32, table: usize, flags: u32, postMultiplier: f32, ref: u32,
  to: u32, out: usize,
): void {
  let signed = (flags & FLAG_SIGNED_CODES) != 0;
  let postMultiply = (flags & FLAG_POST_MULTIPLY) != 0;
  // No layout has both zero points and biases.
  let formula = biases != 0 ? FORMULA_BIAS : zeros != 0 ? FORMULA_ZERO : FORMULA_SCALE;
  // Codes used where they lie (8-bit, unsigned, contiguous), else unpacked a piece at a time.
  let inPlace = bits == 8 && !signed && wordStride == 1;
  let small = bits <= 4;
  // Codes down the columns of words are unpacked 32 rows (four columns of words) at a time, interleaved rows' 16
  // at a time, in pieces of 256 and 512 columns (CODES holds two pieces' worth: measured on AWQ, 16M elements to
  // F32, 7.4-7.7 ms instead of 8.1-8.8 with half that, the per-row work spread over twice the codes).
  let columnCodes = (flags & FLAG_COLUMN_CODES) != 0;
  let interleaved = !columnCodes && wordStride != 1 && codeRowBytes == 4 && (bits == 4 || bits == 8) && order == ORDER_LSB_FIRST;
  let pieceCols: usize = columnCodes ? PIECE >> 4 : interleaved ? PIECE >> 3 : PIECE;
  for (let first: usize = 0; first < cols; first += pieceCols) {
    let count = min(pieceCols, cols - first);
    let column = colOffset + first;
    for (let r0: usize = 0; r0 < rows; ) {
      let row = codes + r0 * codeRowBytes;
      let at = row + first;
      let block: usize = 1;
      if (columnCodes) {
        unpackColumns(codes + (r0 >> 1) + first * codeRowBytes, codeRowBytes, order, count, CODES, pieceCols);
        at = CODES;
        block = 32;
      } else if (interleaved && rows - r0 >= 16) {
        unpackInterleaved(row + (((first * bits) >> 5) * wordStride << 2), wordStride, bits, signed, count, CODES, pieceCols);
        at = CODES;
        block = 16;
      } else if (!inPlace) {
        unpackStream(row + (((first * bits) >> 5) * wordStride << 2), wordStride, bits, order, signed, count, CODES);
        at = CODES;
      }
      for (let r = r0; r < min(rows, r0 + block); r++) {
        let params = (<usize>load<u32>(paramRowOf + (r << 2)) * paramRowStride) << 2;
        let s = scales + params;
        let o = formula == FORMULA_BIAS ? biases + params : formula == FORMULA_ZERO ? zeros + params : 0;
        let dst = out + ((r * cols + first) << outShift(to));
        let src = at + (r - r0) * pieceCols;
        // A run of 16 columns stays in one group when groups are whole runs and the runs start on one.
        let mode = groupSize != 0 && groupSize % 16 == 0 && column % 16 == 0 ? PARAMS_SPLAT : groupSize == 1 && groupStride == 1 ? PARAMS_VECTOR : PARAMS_EACH;
        if (common(mode, formula, to, value, ref, postMultiply, small, src, column, count, dst, s, o, groupSize, groupStride, table, postMultiplier)) {
          // Done by a copy of its own.
        } else if (mode == PARAMS_SPLAT) {
          piece(PARAMS_SPLAT, formula, to, value, ref, postMultiply, small, src, column, count, dst, s, o, groupSize, groupOf, groupStride, table, postMultiplier);
        } else if (mode == PARAMS_VECTOR) {
          piece(PARAMS_VECTOR, formula, to, value, ref, postMultiply, small, src, column, count, dst, s, o, groupSize, groupOf, groupStride, table, postMultiplier);
        } else {
          piece(PARAMS_EACH, formula, to, value, ref, postMultiply, small, src, column, count, dst, s, o, groupSize, groupOf, groupStride, table, postMultiplier);
        }
      }
      r0 += block;
    }
  }
}

// The layouts' common cases, each a copy of the loop whose every choice is a constant, in a function of its own
// (FP8's in every output dtype, the others as F32). Runtime choices cost the loop branches and registers: measured on
// 16M elements, MXFP4 to F32 in 5.1 ms instead of 8.3, bitsandbytes 8-bit in 4.4 instead of 6.0. (Copies for every
// output dtype tripled the module's build time.) Returns whether it did the work.
@inline function common(
  mode: u32, formula: u32, to: u32, value: u32, ref: u32, postMultiply: bool, small: bool,
  codes: usize, first: usize, count: usize, out: usize,
  scales: usize, others: usize, groupSize: usize, groupStride: usize, table: usize, post: f32,
): bool {
  if (mode == PARAMS_SPLAT && value == F8_E4M3 && ref == BF16 && formula == FORMULA_SCALE) {
    // FP8 (DeepSeek, Qwen3), in every dtype.
    if (to == F32) e4m3Bf16F32(codes, first, count, out, scales, groupSize, groupStride);
    else if (to == F16) e4m3Bf16F16(codes, first, count, out, scales, groupSize, groupStride);
    else e4m3Bf16BF16(codes, first, count, out, scales, groupSize, groupStride);
    return true;
  }
  if (to != F32) return false;
  if (mode == PARAMS_VECTOR && value == VALUE_TABLE && formula == FORMULA_SCALE && ref == F32) {
    vectorTableF32(codes, first, count, out, scales, table); // MXFP4 (gpt-oss), its experts transposed
  } else if (mode == PARAMS_SPLAT && value == VALUE_AFFINE && formula == FORMULA_ZERO && ref == F32 && postMultiply) {
    splatAffineZeroPostF32(small, codes, first, count, out, scales, others, groupSize, groupStride, post); // bitsandbytes 8-bit
  } else if (mode == PARAMS_SPLAT && value == VALUE_TABLE && formula == FORMULA_SCALE && ref == BF16) {
    splatTableBf16F32(small, codes, first, count, out, scales, groupSize, groupStride, table); // NVFP4, bitsandbytes NF4
  } else {
    return false;
  }
  return true;
}

// One function per output dtype: the compilers merge copies that differ by a constant in one function, the
// constant then a variable that the loop tests.
@noinline function e4m3Bf16F32(codes: usize, first: usize, count: usize, out: usize, scales: usize, groupSize: usize, groupStride: usize): void {
  e4m3Piece(F32, codes, first, count, out, scales, groupSize, groupStride);
}

@noinline function e4m3Bf16F16(codes: usize, first: usize, count: usize, out: usize, scales: usize, groupSize: usize, groupStride: usize): void {
  e4m3Piece(F16, codes, first, count, out, scales, groupSize, groupStride);
}

@noinline function e4m3Bf16BF16(codes: usize, first: usize, count: usize, out: usize, scales: usize, groupSize: usize, groupStride: usize): void {
  e4m3Piece(BF16, codes, first, count, out, scales, groupSize, groupStride);
}

@noinline function vectorTableF32(codes: usize, first: usize, count: usize, out: usize, scales: usize, table: usize): void {
  piece(PARAMS_VECTOR, FORMULA_SCALE, F32, VALUE_TABLE, F32, false, true, codes, first, count, out, scales, 0, 1, 0, 1, table, 0);
}

@noinline function splatAffineZeroPostF32(
  small: bool, codes: usize, first: usize, count: usize, out: usize, scales: usize, zeros: usize, groupSize: usize, groupStride: usize, post: f32,
): void {
  piece(PARAMS_SPLAT, FORMULA_ZERO, F32, VALUE_AFFINE, F32, true, small, codes, first, count, out, scales, zeros, groupSize, 0, groupStride, 0, post);
}

@noinline function splatTableBf16F32(
  small: bool, codes: usize, first: usize, count: usize, out: usize, scales: usize, groupSize: usize, groupStride: usize, table: usize,
): void {
  piece(PARAMS_SPLAT, FORMULA_SCALE, F32, VALUE_TABLE, BF16, false, small, codes, first, count, out, scales, 0, groupSize, 0, groupStride, table, 0);
}
