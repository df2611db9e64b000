/**
 * `safetensors-wasm/gguf`, the portable entry (browsers, workerd, the `default` condition): a Hugging Face
 * model (a folder's files, a URL, a {@link index!ModelFolder}) converted to GGUF for llama.cpp, as a stream. The
 * Node entry (src/gguf-node.ts) adds writeGguf and local paths.
 * @packageDocumentation
 */

// First, so that a bundle puts the wasm ahead of the JS (src/core/wasm-code.ts says why).
import './core/wasm-code.ts'

export type { GgufDtype, GgufTensorType } from './gguf/format.ts'
export { type GgufOptions, type GgufStream, ggufStream } from './gguf/index.ts'
