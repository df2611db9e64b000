// The wasm core's exports. Every function takes pointers and lengths into linear memory; JS owns
// everything above heapBase().
export { scanHeader, resultPtr } from './header';
export { dtypeTable } from './dtypes';

/** Which build this is: tests check that selectBackend really switched. */
export function simdBuild(): bool {
  return ASC_FEATURE_SIMD;
}

export function heapBase(): usize {
  return __heap_base;
}
export {
  bf16ToF32, f16ToF32, f8E4m3ToF32, f8E5m2ToF32, f8E4m3fnuzToF32, f8E5m2fnuzToF32, f8E8m0ToF32,
  f4ToF32, f6E2m3ToF32, f6E3m2ToF32, f64ToF32, i8ToF32, i16ToF32, i32ToF32, i64ToF32,
  u8ToF32, u16ToF32, u32ToF32, u64ToF32, boolToF32, f32ToF16, f32ToBf16, byteSwap16, byteSwap32, byteSwap64,
} from './convert';
export { statsPtr, statsReset, statsFirstPass, statsSecondPass } from './stats';
