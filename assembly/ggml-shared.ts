// What the ggml block kernels (ggml-legacy.ts, ggml-kquants.ts, ggml-iquants.ts) share: scales read as ggml reads
// them, and stores of 16 codes times a scale. Every kernel writes F32 and computes each value with the F32
// operations of ggml's dequantize_row_<type>, in its order (a product rounded, then a sum rounded: wasm has no
// fused multiply-add), so that the results are ggml's bit for bit.

import { f16Bits } from './convert';

// The F32 value of F16 bits, and of the F16 at `at`: exact, as ggml's GGML_FP16_TO_FP32 is.
@inline export function half(bits: u32): f32 {
  return reinterpret<f32>(f16Bits(bits));
}
@inline export function halfAt(at: usize): f32 {
  return half(<u32>load<u16>(at));
}

// Four lanes of 16 signed 8-bit codes (lanes `part * 4` to `part * 4 + 3`) as F32.
@inline function codesToF32(codes: v128, part: u32): v128 {
  let half = part < 2 ? i16x8.extend_low_i8x16_s(codes) : i16x8.extend_high_i8x16_s(codes);
  return f32x4.convert_i32x4_s((part & 1) == 0 ? i32x4.extend_low_i16x8_s(half) : i32x4.extend_high_i16x8_s(half));
}

// Stores q * d for 16 signed 8-bit codes q, as ggml's `q * d` (or `d * q`: one rounded product either way).
@inline export function storeScaled(codes: v128, d: v128, dst: usize): void {
  v128.store(dst, f32x4.mul(codesToF32(codes, 0), d));
  v128.store(dst, f32x4.mul(codesToF32(codes, 1), d), 16);
  v128.store(dst, f32x4.mul(codesToF32(codes, 2), d), 32);
  v128.store(dst, f32x4.mul(codesToF32(codes, 3), d), 48);
}

// Stores d * q - m for 16 signed 8-bit codes q: the product rounded, then the difference (the K-quants).
@inline export function storeScaledMinus(codes: v128, d: v128, m: v128, dst: usize): void {
  v128.store(dst, f32x4.sub(f32x4.mul(codesToF32(codes, 0), d), m));
  v128.store(dst, f32x4.sub(f32x4.mul(codesToF32(codes, 1), d), m), 16);
  v128.store(dst, f32x4.sub(f32x4.mul(codesToF32(codes, 2), d), m), 32);
  v128.store(dst, f32x4.sub(f32x4.mul(codesToF32(codes, 3), d), m), 48);
}

// Stores q * d + m for 16 signed 8-bit codes q (Q4_1, Q5_1).
@inline export function storeScaledPlus(codes: v128, d: v128, m: v128, dst: usize): void {
  v128.store(dst, f32x4.add(f32x4.mul(codesToF32(codes, 0), d), m));
  v128.store(dst, f32x4.add(f32x4.mul(codesToF32(codes, 1), d), m), 16);
  v128.store(dst, f32x4.add(f32x4.mul(codesToF32(codes, 2), d), m), 32);
  v128.store(dst, f32x4.add(f32x4.mul(codesToF32(codes, 3), d), m), 48);
}

// The low and high nibbles of 16 bytes, each as 16 byte lanes.
@inline export function lowNibbles(bytes: v128): v128 {
  return v128.and(bytes, i8x16.splat(0x0f));
}
@inline export function highNibbles(bytes: v128): v128 {
  return i8x16.shr_u(bytes, 4);
}

// Lane j (0-15) is all ones where bit j of `bits` is set, else 0.
@inline export function bitLanes(bits: u32): v128 {
  let spread = i8x16.swizzle(i32x4.splat(bits), i8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  let lane = i8x16(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return i8x16.eq(v128.and(spread, lane), lane);
}
