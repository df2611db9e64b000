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
export { convertKernel, floatFormat, byteSwap16, byteSwap32, byteSwap64 } from './convert';
export { statsPtr, statsReset, statsFirstPass, statsSecondPass } from './stats';
export { xxh64 } from './hash';
