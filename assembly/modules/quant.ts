// The dequantization kernels of quantized checkpoints: build/quant.wasm, used by src/quant/kernels.ts, which only a
// quantized model loads.
export { dequantRows, unpackCodes } from '../quant';
export { heapBase } from '../heap';
