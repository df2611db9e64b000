// The Q8_0 kernel: build/q8_0.wasm, used by src/gguf/q8_0.ts.
export { quantizeQ8_0 } from '../q8_0';
export { heapBase } from '../heap';
