// ggml's tensor types to F32, F16 and BF16: build/ggml.wasm, used by src/gguf/dequantize.ts, which only GGUF reads load.
export { dequantize } from '../ggml';
export { heapBase } from '../heap';
