// ggml's quantization types: build/ggml-quant.wasm, used by src/gguf/ggml-quantizers.ts.
export { descriptor, quantizeRows } from '../ggml-quant';
export { heapBase } from '../heap';
