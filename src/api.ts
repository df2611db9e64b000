// The public API that every package entry shares; the Node entry adds local files (src/node.ts).

// First, so that a bundle puts the wasm ahead of the JS (src/wasm-code.ts says why).
import './wasm-code.ts'

export { type CacheOptions, createCache, type RangeCache } from './cache.ts'
export { byteSwap, type ConvertTarget, convert } from './convert.ts'
export { DTYPE_INFO, DTYPES, type DType, type DTypeInfo, type Float16Array, type Float16ArrayBase, type TypedArray } from './dtypes.ts'
export { type ErrorCode, SafetensorsError } from './errors.ts'
export { type DataFor, type OpenOptions, open, type ReadOptions, SafetensorsFile, type Source, type Tensor } from './file.ts'
export { type GgufDtype, type GgufOptions, type GgufStream, ggufStream } from './gguf/index.ts'
export { Header, MAX_HEADER_SIZE, parseHeader, readHeader, readHeaderSize, type TensorInfo } from './header.ts'
export { type HttpOptions, httpSource } from './http.ts'
export { type Layout, type LayoutEntry, planLayout, type TensorDeclaration } from './layout.ts'
export { type ModelFiles, type ModelFolder, type ModelIndex, type OpenModelOptions, openModel, SafetensorsModel } from './model.ts'
export type { Progress, ProgressCallback } from './progress.ts'
export { type R2Bucket, type R2Object, type R2ObjectBody, type R2SourceOptions, r2Model, r2Source } from './r2.ts'
export type { SliceRange } from './slice.ts'
export { blobSource, memorySource, type OnBytes, type RangeSource } from './source.ts'
export { type TensorStats, tensorStats } from './stats.ts'
export { type ConvertStreamOptions, convertStream, type StreamOptions, type ValidateStreamOptions, validateStream } from './stream.ts'
export { SafetensorsWriter, serialize, streamSink, type TensorCollection, type TensorInput, type WriteOptions, type WriterSink } from './writer.ts'
