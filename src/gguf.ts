/**
 * `safetensors-wasm/gguf`, the portable entry (browsers, workerd, the `default` condition): a Hugging Face
 * model (a folder's files, a URL, a {@link index!ModelFolder}) converted to GGUF for llama.cpp, as a stream; GGUF
 * files read back ({@link openGguf}); ggml's tensor types read as floats ({@link dequantizeGgml}). The Node entry
 * (src/gguf-node.ts) adds writeGguf and local paths; TypeScript under `moduleResolution: "bundler"` takes these
 * types unless the project names the Node condition: `"customConditions": ["node"]`.
 * @packageDocumentation
 */

// First, so that a bundle puts the wasm ahead of the JS (src/core/wasm-code.ts says why).
import './core/wasm-code.ts'

export { type DequantizeOptions, dequantizeGgml } from './gguf/dequantize.ts'
export { GgufFile, type GgufOpenOptions, openGguf } from './gguf/file.ts'
export type { GgufDtype } from './gguf/file-types.ts'
export type { GgmlType } from './gguf/ggml-types.ts'
export { type GgufOptions, type GgufStream, ggufStream } from './gguf/index.ts'
export type { GgufArray, GgufHeader, GgufTensorInfo, GgufValue } from './gguf/reader.ts'
