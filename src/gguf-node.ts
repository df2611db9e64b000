/**
 * `safetensors-wasm/gguf` under Node, Deno and Bun: {@link ggufStream} with local paths, and writeGguf, which
 * writes the file atomically.
 * @packageDocumentation
 */
export * from './gguf.ts'
export { type GgufWritten, writeGguf } from './node/gguf.ts'
