// The scalar steps every ggml quantizer shares, each as ggml's C code computes it on x86-64 (ggml-quants.c at
// llama.cpp's release that node-llama-cpp 3.21.1 ships, built for baseline x86-64: SSE2, no FMA, so every float
// operation is one correctly rounded F32 operation, as here).

import { toF16Bits } from './convert';

const ROUNDING_MAGIC: f32 = 12582912; // 1.5 * 2^23: adding it leaves the integer in the low mantissa bits

/**
 * ggml's nearest_int: v rounded to nearest (ties to even) by adding 1.5 * 2^23 and reading the low mantissa
 * bits. Exact for |v| <= 2^22; beyond that (which ggml only asserts in debug builds) it gives the same bits as C.
 */
@inline export function nearestInt(v: f32): i32 {
  return (reinterpret<i32>(v + ROUNDING_MAGIC) & 0x7fffff) - 0x400000;
}

/** ggml's FP32 to FP16 (ggml_compute_fp32_to_fp16): nearest even, overflow to infinity, a NaN as sign | 0x7e00. */
@inline export function halfBits(v: f32): u16 {
  let bits = reinterpret<u32>(v);
  if (v != v) return <u16>(((bits >> 16) & 0x8000) | 0x7e00);
  return <u16>toF16Bits(bits);
}

/** An FP16 value as F32 (exact). */
@inline export function halfValue(h: u16): f32 {
  let sign = (<u32>h & 0x8000) << 16;
  let exponent = (<u32>h >> 10) & 0x1f;
  let mantissa = <u32>h & 0x3ff;
  if (exponent == 0) return reinterpret<f32>(reinterpret<u32>(<f32>mantissa * 5.9604644775390625e-8) | sign);
  if (exponent == 31) return reinterpret<f32>(sign | 0x7f800000 | (mantissa << 13));
  return reinterpret<f32>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/** ggml's GROUP_MAX_EPS (1e-15f): below it a group's largest magnitude counts as all zero. */
export const GROUP_MAX_EPS: f32 = 1e-15;
