// Tensor statistics: build/stats.wasm, used by src/core/stats.ts.
export { statsPtr, statsReset, statsFirstPass, statsSecondPass } from '../stats';
export { heapBase } from '../heap';
