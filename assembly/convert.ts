// Conversion kernels: every SafeTensors number format but C64 to F32, every float format to F16 and BF16,
// byte swaps.
//
// One export, convertKernel(from, to, src, dst, count), takes dtype indices, pointers into linear memory
// and an element count, and inlines a kernel compiled for each pair. Nothing is allocated. The vector
// loops leave the remaining elements to the scalar loop after them.
//
// In-place contract (src/core/convert.ts and README.md, "Memory model" rely on it): every kernel walks the
// elements front to back and loads a block's input before it stores that block's output. That makes a
// kernel correct on overlapping buffers laid out as JS lays them out: when the output is wider than the
// input, the input sits at the end of the output region (src = dst + outBytes - inBytes), so each store
// lands on input already read; when it is narrower or as wide, src = dst. A vector load may read input
// bytes beyond its block (never beyond the input's end): that is harmless, reads change nothing.
//
// NaN rules (README.md, "Number formats"): widening BF16/F16 keeps every bit of the payload (a lossless bit
// extension); F8 NaNs become the quiet NaN with the source's sign bit (F8_E8M0, which has no sign: the
// positive one), as do F64 NaNs to F32; narrowing to F16/BF16 (from F32, F64, and between F16 and BF16)
// keeps the sign and the top payload bits and sets the quiet bit, so a NaN stays a NaN.

import {
  BF16, BOOL, F16, F32, F4, F6_E2M3, F6_E3M2, F64, F8_E4M3, F8_E4M3FNUZ, F8_E5M2, F8_E5M2FNUZ, F8_E8M0,
  I16, I32, I64, I8, U16, U32, U64, U8,
} from './boundary/dtypes';

const QUIET_NAN: u32 = 0x7fc00000;
const F32_INFINITY: u32 = 0x7f800000;
const SIGN: u32 = 0x80000000;

// ---- Scalar element conversions (the tails of the vector loops, and the lookup tables) ----

// The f32 bits of a finite sign-exponent-mantissa code. Its magnitude shifted into the f32 layout has
// the right mantissa; a normal code then needs only its exponent rebiased (an integer add). A subnormal
// code is rebuilt as 2^(1-bias) * (1 + m) minus 2^(1-bias), an exact FP subtraction of normal numbers:
// arithmetic on subnormal operands would be exact too, but costs a microcode assist on x86
// (measured: F16 -> F32 and F8 -> F32 were 3 to 4 times slower).
@inline function scaledFloatBits(code: u32, expBits: u32, mantBits: u32, bias: u32): u32 {
  let width = expBits + mantBits;
  let shifted = (code & ((1 << width) - 1)) << (23 - mantBits);
  let rebias = (127 - bias) << 23;
  let bits = shifted + rebias;
  if (shifted < 1 << 23) bits = reinterpret<u32>(reinterpret<f32>(bits + (1 << 23)) - reinterpret<f32>(rebias + (1 << 23)));
  return bits | (((code >> width) & 1) << 31);
}

// Exponent bits, mantissa bits and bias of the formats decoded from their fields: F16, F8, F6, F4. A
// mirror of DTYPE_INFO's `float` in src/core/dtypes.ts, kept here as constants so that they fold into the
// loops; test/core/convert.test.ts checks every code of each format against an independent reference.
@inline function expBitsOf(kind: u32): u32 {
  return kind == F8_E8M0 ? 8 : kind == F8_E4M3 || kind == F8_E4M3FNUZ ? 4 : kind == F8_E5M2 || kind == F8_E5M2FNUZ || kind == F16 ? 5 : kind == F6_E3M2 ? 3 : 2;
}
@inline export function mantBitsOf(kind: u32): u32 {
  return kind == F8_E8M0 ? 0 : kind == F16 ? 10 : kind == F8_E4M3 || kind == F8_E4M3FNUZ || kind == F6_E2M3 ? 3 : kind == F4 ? 1 : 2;
}
@inline export function biasOf(kind: u32): u32 {
  return kind == F8_E8M0 ? 127 : kind == F8_E4M3 ? 7 : kind == F8_E5M2 || kind == F16 ? 15 : kind == F8_E4M3FNUZ ? 8 : kind == F8_E5M2FNUZ ? 16 : kind == F6_E3M2 ? 3 : 1;
}

@inline function finiteBits(kind: u32, code: u32): u32 {
  return scaledFloatBits(code, expBitsOf(kind), mantBitsOf(kind), biasOf(kind));
}

// The byte-code kinds (one code a byte once F4/F6 are unpacked) that are floats, not integers or BOOL.
@inline function isMinifloat(kind: u32): bool {
  return kind == F4 || kind == F6_E2M3 || kind == F6_E3M2 || (kind >= F8_E5M2 && kind <= F8_E5M2FNUZ);
}

// F32 bits of one byte code of the given kind.
@inline export function byteCodeBits(kind: u32, code: u32): u32 {
  let sign = (code & 0x80) << 24;
  if (kind == F8_E4M3) return (code & 0x7f) == 0x7f ? sign | QUIET_NAN : finiteBits(kind, code);
  if (kind == F8_E5M2) {
    let magnitude = code & 0x7f;
    if (magnitude >= 0x7c) return sign | (magnitude == 0x7c ? F32_INFINITY : QUIET_NAN);
    return finiteBits(kind, code);
  }
  if (kind == F8_E4M3FNUZ || kind == F8_E5M2FNUZ) return code == 0x80 ? sign | QUIET_NAN : finiteBits(kind, code);
  // 2^(code - 127): code 0 is the f32 subnormal 2^-127, 255 is NaN.
  if (kind == F8_E8M0) return code == 0xff ? QUIET_NAN : code == 0 ? 0x00400000 : code << 23;
  if (kind == F4 || kind == F6_E2M3 || kind == F6_E3M2) return finiteBits(kind, code);
  if (kind == U8) return reinterpret<u32>(<f32>code);
  if (kind == I8) return reinterpret<u32>(<f32><i8>code);
  return code != 0 ? 0x3f800000 : 0; // BOOL: any non-zero byte is true
}

@inline export function f16Bits(h: u32): u32 {
  let magnitude = h & 0x7fff;
  // Infinity and NaN: all exponent bits set, the payload moved up as is.
  if (magnitude >= 0x7c00) return ((h & 0x8000) << 16) | F32_INFINITY | (magnitude << 13);
  return finiteBits(F16, h);
}

// Every source reaches F16 and BF16 through F32 bits in a register, never through memory. That rounds
// once: F32 holds every BF16, F16, F8, F6 and F4 value exactly, and F64 arrives rounded to odd (f64Bits).
@inline export function toF16Bits(x: u32): u32 {
  let sign = (x >> 16) & 0x8000;
  let magnitude = x & 0x7fffffff;
  if (magnitude > F32_INFINITY) return sign | 0x7e00 | ((magnitude >> 13) & 0x3ff);
  // 65520 is halfway between 65504, the largest F16, and 65536: ties to even round it up, to infinity.
  if (magnitude >= 0x477ff000) return sign | 0x7c00;
  // Normal F16 (at least 2^-14): rebias the exponent (127 -> 15), round the 13 dropped bits to even.
  if (magnitude >= 0x38800000) return sign | ((magnitude - 0x38000000 + 0xfff + ((magnitude >> 13) & 1)) >> 13);
  // Subnormal F16: adding 0.5, whose ulp is 2^-24 (the F16 subnormal step), makes the FPU round to even.
  return sign | (reinterpret<u32>(reinterpret<f32>(magnitude) + 0.5) - 0x3f000000);
}

@inline function toBf16Bits(x: u32): u32 {
  if ((x & 0x7fffffff) > F32_INFINITY) return (x >> 16) | 0x40;
  // Round the 16 dropped bits to even; a carry into the exponent is the right result, up to infinity.
  return (x + 0x7fff + ((x >> 16) & 1)) >> 16;
}

// F32 bits of an F64 on the way to `to`. To F32: demotion rounds to nearest even; the sign of a demoted
// NaN is not specified by wasm, so the canonical NaN takes the source's. To F16 and BF16: rounded to odd
// (truncated, then the last bit set if anything was dropped), which keeps the information that decides
// every later rounding to 10 or fewer mantissa bits, so the RNE that follows is the only rounding. A NaN
// keeps its sign and top payload bits there, as narrowing does everywhere.
@inline function f64Bits(to: u32, x: f64): u32 {
  let raw = reinterpret<u64>(x);
  let sign = <u32>(raw >> 32) & SIGN;
  if (x != x) return sign | QUIET_NAN | (to == F32 ? 0 : <u32>(raw >> 29) & 0x7fffff);
  let demoted = <f32>x;
  let bits = reinterpret<u32>(demoted);
  let back = <f64>demoted;
  if (to != F32 && back != x) bits = (abs(back) > abs(x) ? bits - 1 : bits) | 1;
  return bits;
}

// Output elements are 4 bytes (F32) or 2 (F16, BF16).
@inline export function outShift(to: u32): usize {
  return to == F32 ? 2 : 1;
}

// Stores F32 bits as output element i in the format `to`.
@inline export function storeElement(to: u32, dst: usize, i: usize, bits: u32): void {
  if (to == F32) store<u32>(dst + (i << 2), bits);
  else store<u16>(dst + (i << 1), <u16>(to == F16 ? toF16Bits(bits) : toBf16Bits(bits)));
}

// ---- Vector element conversions: the same rules as above, four lanes at a time ----

// V8 rebuilds a v128 constant at each use inside a loop (three instructions; it does not hoist them), and
// binaryen folds constants kept in locals back into their uses. So the vector loops read their constants
// from SPLATS, which each kernel fills before its loop: a load from a fixed address is one instruction,
// often folded into the operation (measured on 16M elements: F16 -> F32 11.2 ms -> 8.1 ms). Decoders use
// slots 0 to 7 and encoders (to F16, BF16) the slots from ENCODER on, so that one kernel can use both.
const SPLATS = memory.data(18 << 4, 16);

@inline export function splat(slot: u32): v128 {
  return v128.load(SPLATS + (<usize>slot << 4));
}

@inline export function setSplat(slot: u32, value: u32): void {
  v128.store(SPLATS + (<usize>slot << 4), i32x4.splat(value));
}

// Slots of the minifloat and F16 decoders.
const K_MAGNITUDE: u32 = 0; // (1 << width) - 1
const K_REBIAS: u32 = 1; // (127 - bias) << 23
const K_IMPLICIT_ONE: u32 = 2; // 1 << 23
const K_SUBNORMAL_BASE: u32 = 3; // the F32 2^(1 - bias)
const K_QUIET_NAN: u32 = 4;
const K_INFINITY: u32 = 5;
const K_A: u32 = 6; // kind-specific, see prepareByteCodes
const K_B: u32 = 7;

@inline function prepareScaledFloat(kind: u32): void {
  let rebias = (127 - biasOf(kind)) << 23;
  setSplat(K_MAGNITUDE, (1 << (expBitsOf(kind) + mantBitsOf(kind))) - 1);
  setSplat(K_REBIAS, rebias);
  setSplat(K_IMPLICIT_ONE, 1 << 23);
  setSplat(K_SUBNORMAL_BASE, rebias + (1 << 23));
}

@inline function scaledFloatBitsX4(kind: u32, codes: v128): v128 {
  let width = expBitsOf(kind) + mantBitsOf(kind);
  let shifted = i32x4.shl(v128.and(codes, splat(K_MAGNITUDE)), 23 - mantBitsOf(kind));
  let normal = i32x4.add(shifted, splat(K_REBIAS));
  let subnormal = f32x4.sub(i32x4.add(normal, splat(K_IMPLICIT_ONE)), splat(K_SUBNORMAL_BASE));
  let magnitude = v128.bitselect(subnormal, normal, i32x4.lt_s(shifted, splat(K_IMPLICIT_ONE)));
  return v128.or(magnitude, i32x4.shl(i32x4.shr_u(codes, width), 31));
}

// Lanes of `x` where `mask` is set get the quiet NaN with the sign bit of `code` (bit 7).
@inline function nanWhereX4(x: v128, codes: v128, mask: v128): v128 {
  let nan = v128.or(i32x4.shl(i32x4.shr_u(codes, 7), 31), splat(K_QUIET_NAN));
  return v128.bitselect(nan, x, mask);
}

@inline export function prepareByteCodes(kind: u32): void {
  if (isMinifloat(kind) && kind != F8_E8M0) prepareScaledFloat(kind);
  setSplat(K_QUIET_NAN, QUIET_NAN);
  setSplat(K_INFINITY, F32_INFINITY);
  if (kind == F8_E4M3 || kind == F8_E5M2) setSplat(K_A, 0x7f);
  if (kind == F8_E5M2) setSplat(K_B, 0x7c);
  if (kind == F8_E4M3FNUZ || kind == F8_E5M2FNUZ) setSplat(K_A, 0x80);
  if (kind == F8_E8M0) {
    setSplat(K_A, 0xff);
    setSplat(K_B, 0x00400000);
  }
  if (kind == BOOL) setSplat(K_A, 0x3f800000);
}

// F32 bits of four byte codes (zero-extended into i32 lanes) of the given kind.
@inline export function byteCodeBitsX4(kind: u32, codes: v128): v128 {
  if (kind == F8_E4M3) {
    let isNaN = i32x4.eq(v128.and(codes, splat(K_A)), splat(K_A));
    return nanWhereX4(scaledFloatBitsX4(kind, codes), codes, isNaN);
  }
  if (kind == F8_E5M2) {
    let magnitude = v128.and(codes, splat(K_A));
    let sign = i32x4.shl(i32x4.shr_u(codes, 7), 31);
    let infinity = v128.or(sign, splat(K_INFINITY));
    let withInfinity = v128.bitselect(infinity, scaledFloatBitsX4(kind, codes), i32x4.eq(magnitude, splat(K_B)));
    return nanWhereX4(withInfinity, codes, i32x4.gt_s(magnitude, splat(K_B)));
  }
  if (kind == F8_E4M3FNUZ || kind == F8_E5M2FNUZ) {
    return nanWhereX4(scaledFloatBitsX4(kind, codes), codes, i32x4.eq(codes, splat(K_A)));
  }
  if (kind == F8_E8M0) {
    let power = v128.bitselect(splat(K_B), i32x4.shl(codes, 23), i32x4.eq(codes, i32x4.splat(0)));
    return v128.bitselect(splat(K_QUIET_NAN), power, i32x4.eq(codes, splat(K_A)));
  }
  if (kind == F4 || kind == F6_E2M3 || kind == F6_E3M2) return scaledFloatBitsX4(kind, codes);
  if (kind == U8) return f32x4.convert_i32x4_u(codes);
  if (kind == I8) return f32x4.convert_i32x4_s(i32x4.shr_s(i32x4.shl(codes, 24), 24));
  return v128.and(i32x4.ne(codes, i32x4.splat(0)), splat(K_A)); // BOOL: 1.0 where non-zero
}

@inline function prepareF16(): void {
  prepareScaledFloat(F16);
  setSplat(K_A, 0x7bff);
  setSplat(K_INFINITY, F32_INFINITY);
}

@inline function f16BitsX4(h: v128): v128 {
  // Exponent 31 (infinity, NaN) comes out of the rebias as 143: OR-ing in all exponent bits makes it 255
  // and keeps the payload.
  let isInfinityOrNaN = i32x4.gt_s(v128.and(h, splat(K_MAGNITUDE)), splat(K_A));
  return v128.or(scaledFloatBitsX4(F16, h), v128.and(isInfinityOrNaN, splat(K_INFINITY)));
}

// Slots of the F64 decoder (the scalar f64Bits, four lanes at a time).
const D_SIGN: u32 = 0;
const D_QUIET_NAN: u32 = 1;
const D_ONE: u32 = 2;
const D_PAYLOAD: u32 = 3;

@inline function prepareF64(): void {
  setSplat(D_SIGN, SIGN);
  setSplat(D_QUIET_NAN, QUIET_NAN);
  setSplat(D_ONE, 1);
  setSplat(D_PAYLOAD, 0x7fffff);
}

// The low 32 bits of each 64-bit lane of a and b: masks of f64 comparisons become masks of 32-bit lanes.
@inline function lowHalves(a: v128, b: v128): v128 {
  return i32x4.shuffle(a, b, 0, 2, 4, 6);
}

@inline function f64BitsX4(to: u32, a: v128, b: v128): v128 {
  let demotedA = f32x4.demote_f64x2_zero(a);
  let demotedB = f32x4.demote_f64x2_zero(b);
  let bits = i64x2.shuffle(demotedA, demotedB, 0, 2);
  let nan = v128.or(v128.and(i32x4.shuffle(a, b, 1, 3, 5, 7), splat(D_SIGN)), splat(D_QUIET_NAN));
  if (to != F32) {
    let backA = f64x2.promote_low_f32x4(demotedA);
    let backB = f64x2.promote_low_f32x4(demotedB);
    let inexact = lowHalves(f64x2.ne(backA, a), f64x2.ne(backB, b));
    let rounded = lowHalves(f64x2.gt(f64x2.abs(backA), f64x2.abs(a)), f64x2.gt(f64x2.abs(backB), f64x2.abs(b)));
    // Adding the all-ones mask subtracts 1: truncation where the demotion rounded away from zero.
    bits = v128.or(i32x4.add(bits, rounded), v128.and(inexact, splat(D_ONE)));
    let payload = lowHalves(i64x2.shr_u(a, 29), i64x2.shr_u(b, 29));
    nan = v128.or(nan, v128.and(payload, splat(D_PAYLOAD)));
  }
  return v128.bitselect(nan, bits, f32x4.ne(bits, bits));
}

// Slots of the F32 -> F16 encoder.
export const ENCODER: u32 = 8;
const H_SIGN: u32 = ENCODER;
const H_ABS: u32 = ENCODER + 1;
const H_ROUNDING: u32 = ENCODER + 2; // 0xfff minus the rebias (127 -> 15) of the exponent
const H_ONE: u32 = ENCODER + 3;
const H_INFINITY: u32 = ENCODER + 4; // F16 0x7c00
const H_HALF: u32 = ENCODER + 5; // the F32 0.5, whose bits 0x3f000000 are also what the subnormal trick subtracts
const H_BELOW_NORMAL: u32 = ENCODER + 6; // the F32 bits just below 2^-14
const H_F32_INFINITY: u32 = ENCODER + 7;
const H_QUIET: u32 = ENCODER + 8;
const H_PAYLOAD: u32 = ENCODER + 9;

@inline function prepareToF16(): void {
  setSplat(H_SIGN, SIGN);
  setSplat(H_ABS, 0x7fffffff);
  setSplat(H_ROUNDING, 0xfff - 0x38000000);
  setSplat(H_ONE, 1);
  setSplat(H_INFINITY, 0x7c00);
  setSplat(H_HALF, 0x3f000000);
  setSplat(H_BELOW_NORMAL, 0x387fffff);
  setSplat(H_F32_INFINITY, F32_INFINITY);
  setSplat(H_QUIET, 0x200);
  setSplat(H_PAYLOAD, 0x3ff);
}

@inline function toF16BitsX4(x: v128): v128 {
  let sign = i32x4.shr_u(v128.and(x, splat(H_SIGN)), 16);
  let magnitude = v128.and(x, splat(H_ABS));
  let dropped = i32x4.shr_u(magnitude, 13);
  // Normal path as in toF16Bits; the unsigned min turns every overflow (and infinity, NaN) into 0x7c00.
  let rounded = i32x4.add(magnitude, i32x4.add(splat(H_ROUNDING), v128.and(dropped, splat(H_ONE))));
  let normal = i32x4.min_u(i32x4.shr_u(rounded, 13), splat(H_INFINITY));
  let subnormal = i32x4.sub(f32x4.add(magnitude, splat(H_HALF)), splat(H_HALF));
  let result = v128.bitselect(normal, subnormal, i32x4.gt_s(magnitude, splat(H_BELOW_NORMAL)));
  // NaN: 0x7c00 | quiet bit | top payload bits.
  let isNaN = i32x4.gt_s(magnitude, splat(H_F32_INFINITY));
  let nanBits = v128.and(isNaN, v128.or(splat(H_QUIET), v128.and(dropped, splat(H_PAYLOAD))));
  return v128.or(v128.or(result, nanBits), sign);
}

// Slots of the F32 -> BF16 encoder.
const B_ROUNDING: u32 = ENCODER;
const B_ONE: u32 = ENCODER + 1;
const B_ABS: u32 = ENCODER + 2;
const B_INFINITY: u32 = ENCODER + 3;
const B_QUIET: u32 = ENCODER + 4;

@inline function prepareToBf16(): void {
  setSplat(B_ROUNDING, 0x7fff);
  setSplat(B_ONE, 1);
  setSplat(B_ABS, 0x7fffffff);
  setSplat(B_INFINITY, F32_INFINITY);
  setSplat(B_QUIET, 0x00400000);
}

// The BF16 result in the high half of each lane (the caller keeps only the high halves).
@inline function toBf16HighX4(x: v128): v128 {
  let rounded = i32x4.add(x, i32x4.add(splat(B_ROUNDING), v128.and(i32x4.shr_u(x, 16), splat(B_ONE))));
  let isNaN = i32x4.gt_s(v128.and(x, splat(B_ABS)), splat(B_INFINITY));
  return v128.bitselect(v128.or(x, splat(B_QUIET)), rounded, isNaN);
}

@inline export function prepareTarget(to: u32): void {
  if (to == F16) prepareToF16();
  if (to == BF16) prepareToBf16();
}

// Stores eight F32 bit patterns (low: elements 0-3, high: 4-7) at `at` in the format `to`.
@inline export function store8(to: u32, low: v128, high: v128, at: usize): void {
  if (to == F32) {
    v128.store(at, low);
    v128.store(at, high, 16);
  } else if (to == F16) {
    v128.store(at, i16x8.narrow_i32x4_u(toF16BitsX4(low), toF16BitsX4(high)));
  } else {
    v128.store(at, i8x16.shuffle(toBf16HighX4(low), toBf16HighX4(high), 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31));
  }
}

// Converts 16 byte codes and stores the 16 F32 results at `at`.
@inline function storeByteCodes16(kind: u32, codes: v128, at: usize): void {
  let low = i16x8.extend_low_i8x16_u(codes);
  let high = i16x8.extend_high_i8x16_u(codes);
  v128.store(at, byteCodeBitsX4(kind, i32x4.extend_low_i16x8_u(low)));
  v128.store(at, byteCodeBitsX4(kind, i32x4.extend_high_i16x8_u(low)), 16);
  v128.store(at, byteCodeBitsX4(kind, i32x4.extend_low_i16x8_u(high)), 32);
  v128.store(at, byteCodeBitsX4(kind, i32x4.extend_high_i16x8_u(high)), 48);
}

// ---- Kernels ----
//
// Each takes its formats as compile-time constants and is inlined into convertKernel once per pair.

// Tables of the minifloat codes, filled on first use: per kind 256 entries of F32 bits, then 256 of F16
// bits and 256 of BF16 bits. The scalar loops look codes up (measured 3x faster than decoding each code).
// To F32 the vector loops decode 16 codes at once; to F16 and BF16 a lookup is faster (measured on 16M
// F8_E4M3 codes: 12 ms, against 27 ms decoding to F32 bits and encoding).
const TABLE_BYTES: usize = 2048;
const TABLES = memory.data((F8_E5M2FNUZ + 1) * 2048, 16);
let tablesFilled: u32 = 0;

// Fills the three tables of `kind` at its first use. Not inlined, and `kind` is not a constant here: the
// fill runs once per kind, so the module holds one copy of it rather than one in each kernel.
function fillTables(kind: u32): void {
  if ((tablesFilled & (1 << kind)) != 0) return;
  let table = TABLES + <usize>kind * TABLE_BYTES;
  for (let code: u32 = 0; code < 256; code++) {
    let bits = byteCodeBits(kind, code);
    store<u32>(table + (<usize>code << 2), bits);
    store<u16>(table + 1024 + (<usize>code << 1), <u16>toF16Bits(bits));
    store<u16>(table + 1536 + (<usize>code << 1), <u16>toBf16Bits(bits));
  }
  tablesFilled |= 1 << kind;
}

// The lookups stay in each kernel, with the table's address a constant there (measured: one lookup loop
// shared by every kind, given the address as a value, made F8_E4M3 -> F16 1.8 times slower).
@inline function tableOf(kind: u32, to: u32): usize {
  fillTables(kind);
  return TABLES + <usize>kind * TABLE_BYTES + (to == F32 ? 0 : to == F16 ? 1024 : 1536);
}

// Stores output element i for a code of the given kind: a table entry for minifloats, a conversion for
// integers (to F32 only).
@inline function storeCode(kind: u32, to: u32, table: usize, dst: usize, i: usize, code: u32): void {
  if (!isMinifloat(kind)) storeElement(to, dst, i, byteCodeBits(kind, code));
  else if (to == F32) store<u32>(dst + (i << 2), load<u32>(table + (<usize>code << 2)));
  else store<u16>(dst + (i << 1), load<u16>(table + (<usize>code << 1)));
}

// F8, U8, I8, BOOL: one code a byte.
@inline export function byteCodesTo(kind: u32, to: u32, src: usize, dst: usize, count: usize): void {
  let i: usize = 0;
  if (to == F32) {
    prepareByteCodes(kind);
    for (; i + 16 <= count; i += 16) storeByteCodes16(kind, v128.load(src + i), dst + (i << 2));
  }
  let table = isMinifloat(kind) ? tableOf(kind, to) : 0;
  for (; i < count; i++) storeCode(kind, to, table, dst, i, load<u8>(src + i));
}

// F4 (E2M1): two codes a byte, element 0 in the low nibble. `count` is even.
@inline function f4To(to: u32, src: usize, dst: usize, count: usize): void {
  let i: usize = 0;
  if (to == F32) {
    prepareByteCodes(F4);
    for (; i + 16 <= count; i += 16) {
      let packed = v128.load64_zero(src + (i >> 1));
      let low = v128.and(packed, i8x16.splat(0x0f));
      let high = i8x16.shr_u(packed, 4);
      let codes = i8x16.shuffle(low, high, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      storeByteCodes16(F4, codes, dst + (i << 2));
    }
  }
  let table = tableOf(F4, to);
  for (; i < count; i += 2) {
    let packed = <u32>load<u8>(src + (i >> 1));
    storeCode(F4, to, table, dst, i, packed & 0x0f);
    storeCode(F4, to, table, dst, i + 1, packed >> 4);
  }
}

// F6: four codes in each 3 bytes, element i in bits 6i..6i+5 of the little-endian 24-bit group.
// `count` is a multiple of 4.
@inline function f6To(kind: u32, to: u32, src: usize, dst: usize, count: usize): void {
  let i: usize = 0;
  if (to == F32) {
    // 12 bytes (four groups) give 16 codes; the 16-byte load must stay inside the input.
    prepareByteCodes(kind);
    let inputBytes = (count >> 2) * 3;
    for (; (i >> 2) * 3 + 16 <= inputBytes; i += 16) {
      let packed = v128.load(src + (i >> 2) * 3);
      // Each 16-bit lane holds the two bytes that contain one code: group bytes (0,1) for codes 0 and 1,
      // (1,2) for codes 2 and 3. The multiply shifts each code to bits 10..15 (no per-lane shift exists).
      let windowsA = i8x16.shuffle(packed, packed, 0, 1, 0, 1, 1, 2, 1, 2, 3, 4, 3, 4, 4, 5, 4, 5);
      let windowsB = i8x16.shuffle(packed, packed, 6, 7, 6, 7, 7, 8, 7, 8, 9, 10, 9, 10, 10, 11, 10, 11);
      let toTop = i16x8(1 << 10, 1 << 4, 1 << 6, 1, 1 << 10, 1 << 4, 1 << 6, 1);
      let codesA = i16x8.shr_u(i16x8.mul(windowsA, toTop), 10);
      let codesB = i16x8.shr_u(i16x8.mul(windowsB, toTop), 10);
      storeByteCodes16(kind, i8x16.narrow_i16x8_u(codesA, codesB), dst + (i << 2));
    }
  }
  let table = tableOf(kind, to);
  for (; i < count; i += 4) {
    let at = src + (i >> 2) * 3;
    let group = <u32>load<u8>(at) | (<u32>load<u8>(at, 1) << 8) | (<u32>load<u8>(at, 2) << 16);
    storeCode(kind, to, table, dst, i, group & 0x3f);
    storeCode(kind, to, table, dst, i + 1, (group >> 6) & 0x3f);
    storeCode(kind, to, table, dst, i + 2, (group >> 12) & 0x3f);
    storeCode(kind, to, table, dst, i + 3, group >> 18);
  }
}

// Interleave two zero bytes below each BF16 of `bits` (elements 0-3, or 4-7 with `high`): that is the
// F32 with the same bits on top.
@inline function bf16LowHalf(bits: v128): v128 {
  return i8x16.shuffle(i32x4.splat(0), bits, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
}
@inline function bf16HighHalf(bits: v128): v128 {
  return i8x16.shuffle(i32x4.splat(0), bits, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
}

// Slots of the BF16 -> F16 encoder, which works on 16-bit lanes.
const W_ABS: u32 = 0;
const W_REBIAS: u32 = 1; // 112 << 7: the exponent 127 -> 15
const W_OVERFLOW: u32 = 2; // 0x4780, 2^16: it and every larger BF16 overflow F16
const W_INFINITY: u32 = 3; // 0x7f80
const W_SMALLEST_NORMAL: u32 = 4; // 0x3880, 2^-14
const W_PAYLOAD: u32 = 5; // 0x3f8: the 7 BF16 payload bits, moved up 3
const W_QUIET: u32 = 6;
const W_HALF: u32 = 7; // the F32 0.5 (32-bit lanes), as in toF16BitsX4

@inline function setSplat16(slot: u32, value: u32): void {
  setSplat(slot, value | (value << 16));
}

@inline function prepareBf16ToF16(): void {
  setSplat16(W_ABS, 0x7fff);
  setSplat16(W_REBIAS, 0x3800);
  setSplat16(W_OVERFLOW, 0x4780);
  setSplat16(W_INFINITY, 0x7f80);
  setSplat16(W_SMALLEST_NORMAL, 0x3880);
  setSplat16(W_PAYLOAD, 0x3f8);
  setSplat16(W_QUIET, 0x200);
  setSplat(W_HALF, 0x3f000000);
}

// Eight BF16 to F16, the rules of toF16Bits in 16-bit lanes: the F32 route (twice the lanes, and its
// rounding) ran at a third of memory bandwidth. F16's normal range needs no rounding, as BF16 has 7
// mantissa bits and F16 10: rebias and shift, with the magnitude capped at 2^16 so that every overflow
// lands on infinity. Results below 2^-14 (rounded through the F32 trick of toF16BitsX4) and NaNs are rare
// in real weights: a branch skips them (measured 8% faster on normally distributed BF16).
@inline function bf16ToF16X8(bits: v128): v128 {
  let magnitude = v128.and(bits, splat(W_ABS));
  let result = i16x8.shl(i16x8.sub(i16x8.min_u(magnitude, splat(W_OVERFLOW)), splat(W_REBIAS)), 3);
  let small = i16x8.lt_s(magnitude, splat(W_SMALLEST_NORMAL));
  let isNaN = i16x8.gt_s(magnitude, splat(W_INFINITY));
  if (v128.any_true(v128.or(small, isNaN))) {
    let payload = v128.and(i16x8.shl(magnitude, 3), splat(W_PAYLOAD));
    result = v128.or(result, v128.and(isNaN, v128.or(splat(W_QUIET), payload)));
    let low = i32x4.sub(f32x4.add(bf16LowHalf(magnitude), splat(W_HALF)), splat(W_HALF));
    let high = i32x4.sub(f32x4.add(bf16HighHalf(magnitude), splat(W_HALF)), splat(W_HALF));
    result = v128.bitselect(i16x8.narrow_i32x4_u(low, high), result, small);
  }
  return v128.or(result, v128.andnot(bits, splat(W_ABS)));
}

// The F32 bits of elements i..i+3 (`high` false) or i+4..i+7 (`high` true) of BF16, F16, F32 or F64.
@inline function ieeeBitsX4(from: u32, to: u32, src: usize, i: usize, high: bool): v128 {
  if (from == F64) {
    let at = src + (i << 3) + (high ? 32 : 0);
    return f64BitsX4(to, v128.load(at), v128.load(at, 16));
  }
  if (from == F32) return v128.load(src + (i << 2) + (high ? 16 : 0));
  let bits = v128.load(src + (i << 1));
  if (from == F16) return f16BitsX4(high ? i32x4.extend_high_i16x8_u(bits) : i32x4.extend_low_i16x8_u(bits));
  return high ? bf16HighHalf(bits) : bf16LowHalf(bits);
}

@inline function ieeeBits(from: u32, to: u32, src: usize, i: usize): u32 {
  if (from == F64) return f64Bits(to, load<f64>(src + (i << 3)));
  if (from == F32) return load<u32>(src + (i << 2));
  let h = <u32>load<u16>(src + (i << 1));
  return from == F16 ? f16Bits(h) : h << 16;
}

// BF16, F16, F32, F64: eight elements a step, all loaded before any is stored.
@inline export function ieeeTo(from: u32, to: u32, src: usize, dst: usize, count: usize): void {
  let i: usize = 0;
  let direct = from == BF16 && to == F16;
  if (from == F16) prepareF16();
  if (from == F64) prepareF64();
  if (direct) prepareBf16ToF16();
  else prepareTarget(to);
  for (; i + 8 <= count; i += 8) {
    let at = dst + (i << outShift(to));
    if (direct) v128.store(at, bf16ToF16X8(v128.load(src + (i << 1))));
    else store8(to, ieeeBitsX4(from, to, src, i, false), ieeeBitsX4(from, to, src, i, true), at);
  }
  for (; i < count; i++) storeElement(to, dst, i, ieeeBits(from, to, src, i));
}

// 16-bit integers; `signed` is a compile-time constant after inlining.
@inline export function int16ToF32(signed: bool, src: usize, dst: usize, count: usize): void {
  let i: usize = 0;
  for (; i + 8 <= count; i += 8) {
    let values = v128.load(src + (i << 1));
    let low = signed ? f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(values)) : f32x4.convert_i32x4_u(i32x4.extend_low_i16x8_u(values));
    let high = signed ? f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(values)) : f32x4.convert_i32x4_u(i32x4.extend_high_i16x8_u(values));
    v128.store(dst + (i << 2), low);
    v128.store(dst + (i << 2), high, 16);
  }
  for (; i < count; i++) {
    store<f32>(dst + (i << 2), signed ? <f32>load<i16>(src + (i << 1)) : <f32>load<u16>(src + (i << 1)));
  }
}

// 32-bit integers: the conversion instructions round to nearest even.
@inline export function int32ToF32(signed: bool, src: usize, dst: usize, count: usize): void {
  let i: usize = 0;
  for (; i + 4 <= count; i += 4) {
    let values = v128.load(src + (i << 2));
    v128.store(dst + (i << 2), signed ? f32x4.convert_i32x4_s(values) : f32x4.convert_i32x4_u(values));
  }
  for (; i < count; i++) {
    store<f32>(dst + (i << 2), signed ? <f32>load<i32>(src + (i << 2)) : <f32>load<u32>(src + (i << 2)));
  }
}

// 64-bit integers: wasm has no vector i64 -> f32 conversion; the scalar one rounds once, to nearest even.
@inline export function int64ToF32(signed: bool, src: usize, dst: usize, count: usize): void {
  for (let i: usize = 0; i < count; i++) {
    store<f32>(dst + (i << 2), signed ? <f32>load<i64>(src + (i << 3)) : <f32>load<u64>(src + (i << 3)));
  }
}

// Every float source to `to` (F32, F16 or BF16; identities are the caller's copy); false if `from` is not
// a float. Each branch passes its kind as a literal so that the kernel is compiled for it.
@inline function floatTo(to: u32, from: u32, src: usize, dst: usize, count: usize): bool {
  if (from == BF16 && to != BF16) ieeeTo(BF16, to, src, dst, count);
  else if (from == F16 && to != F16) ieeeTo(F16, to, src, dst, count);
  else if (from == F32 && to != F32) ieeeTo(F32, to, src, dst, count);
  else if (from == F64) ieeeTo(F64, to, src, dst, count);
  else if (from == F4) f4To(to, src, dst, count);
  else if (from == F6_E2M3) f6To(F6_E2M3, to, src, dst, count);
  else if (from == F6_E3M2) f6To(F6_E3M2, to, src, dst, count);
  else if (from == F8_E4M3) byteCodesTo(F8_E4M3, to, src, dst, count);
  else if (from == F8_E5M2) byteCodesTo(F8_E5M2, to, src, dst, count);
  else if (from == F8_E4M3FNUZ) byteCodesTo(F8_E4M3FNUZ, to, src, dst, count);
  else if (from == F8_E5M2FNUZ) byteCodesTo(F8_E5M2FNUZ, to, src, dst, count);
  else if (from == F8_E8M0) byteCodesTo(F8_E8M0, to, src, dst, count);
  else return false;
  return true;
}

@inline function integerToF32(from: u32, src: usize, dst: usize, count: usize): bool {
  if (from == U8) byteCodesTo(U8, F32, src, dst, count);
  else if (from == I8) byteCodesTo(I8, F32, src, dst, count);
  else if (from == BOOL) byteCodesTo(BOOL, F32, src, dst, count);
  else if (from == I16) int16ToF32(true, src, dst, count);
  else if (from == U16) int16ToF32(false, src, dst, count);
  else if (from == I32) int32ToF32(true, src, dst, count);
  else if (from == U32) int32ToF32(false, src, dst, count);
  else if (from == I64) int64ToF32(true, src, dst, count);
  else if (from == U64) int64ToF32(false, src, dst, count);
  else return false;
  return true;
}

/**
 * Converts `count` elements at `src` from dtype `from` to dtype `to` at `dst` (indices in DTYPES); see the
 * in-place contract above. Returns false, touching nothing, for a pair with no kernel: every float to
 * F32, F16 and BF16 (but itself), and every integer and BOOL to F32.
 */
export function convertKernel(from: u32, to: u32, src: usize, dst: usize, count: usize): bool {
  if (to == F32) return floatTo(F32, from, src, dst, count) || integerToF32(from, src, dst, count);
  if (to == F16) return floatTo(F16, from, src, dst, count);
  if (to == BF16) return floatTo(BF16, from, src, dst, count);
  return false;
}

// ---- Byte swaps, in place ----

// `width` (2, 4 or 8) is a compile-time constant after inlining.
@inline function swapBytes(width: usize, ptr: usize, count: usize): void {
  let i: usize = 0;
  let reversed = width == 2 ? i8x16(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
    : width == 4 ? i8x16(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12)
    : i8x16(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8);
  let perVector = <usize>16 / width;
  for (; i + perVector <= count; i += perVector) {
    let at = ptr + i * width;
    v128.store(at, i8x16.swizzle(v128.load(at), reversed));
  }
  for (; i < count; i++) {
    let at = ptr + i * width;
    if (width == 2) store<u16>(at, bswap<u16>(load<u16>(at)));
    else if (width == 4) store<u32>(at, bswap<u32>(load<u32>(at)));
    else store<u64>(at, bswap<u64>(load<u64>(at)));
  }
}

export function byteSwap16(ptr: usize, count: usize): void {
  swapBytes(2, ptr, count);
}

export function byteSwap32(ptr: usize, count: usize): void {
  swapBytes(4, ptr, count);
}

export function byteSwap64(ptr: usize, count: usize): void {
  swapBytes(8, ptr, count);
}
