// The wasm core's exports. Every function takes pointers and lengths into linear memory; JS owns
// everything above heapBase().
export { scanHeader, scanIndex, resultPtr } from './header';
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
// The layout of the scanner's results and its codes, as wasm globals that src/header.ts reads by name.
export * from './boundary';
export { xxh64 } from './hash';
export { quantizeQ8_0 } from './q8_0';
