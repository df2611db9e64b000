// The conversion and byte-swap kernels: build/convert.wasm, used by src/core/convert.ts.
export { convertKernel, byteSwap16, byteSwap32, byteSwap64 } from '../convert';
export { heapBase } from '../heap';
