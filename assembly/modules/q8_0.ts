// Q8_0 quantization: build/q8_0.wasm, used by src/gguf/q8_0.ts (so only a GGUF conversion carries it).
export { quantizeQ8_0 } from '../q8_0';
export { heapBase } from '../heap';
