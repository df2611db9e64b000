// The public API that every package entry shares; the Node entry adds local files (src/node.ts).

// First, so that a bundle puts the wasm ahead of the JS (src/core/wasm-code.ts says why).
import './core/wasm-code.ts'

export { type CacheOptions, createCache } from './cache/cache.ts'
export type { RangeCache } from './cache/hook.ts'
export { byteSwap, type ConvertTarget, convert } from './core/convert.ts'
export { DTYPE_INFO, DTYPES, type DType, type DTypeInfo, type Float16Array, type Float16ArrayBase, type TypedArray } from './core/dtypes.ts'
export { type TensorStats, tensorStats } from './core/stats.ts'
export { type ErrorCode, type ErrorFacts, SafetensorsError } from './errors.ts'
export { Header, MAX_HEADER_SIZE, type Metadata, parseHeader, readHeaderSize, type TensorInfo } from './format/header.ts'
export { type Layout, type LayoutEntry, planLayout, type TensorDeclaration } from './format/layout.ts'
export type { ModelIndex } from './format/model-index.ts'
export type { SliceRange } from './format/slice.ts'
export type { LogicalTensorInfo, Quantization, QuantizationMethod } from './quant/logical.ts'
export { type DataFor, type OpenOptions, open, type ReadOptions, readHeader, SafetensorsFile, type Source, type Tensor } from './read/file.ts'
export { type ModelReadOptions, type OpenModelOptions, openModel, SafetensorsModel } from './read/model.ts'
export type { StreamOptions } from './read/tensor-stream.ts'
export { type ValidateStreamOptions, validateStream } from './read/validate-stream.ts'
export { type HttpOptions, httpSource } from './sources/http/source.ts'
export type { Progress, ProgressCallback } from './sources/progress.ts'
export { type R2Bucket, type R2Object, type R2ObjectBody, type R2SourceOptions, r2Model, r2Source } from './sources/r2.ts'
export { blobSource, type ModelFiles, type ModelFolder, memorySource, type OnBytes, type RangeSource } from './sources/source.ts'
export { type ConvertStreamOptions, convertStream } from './write/convert-stream.ts'
export {
  SafetensorsWriter,
  serialize,
  streamSink,
  type TensorCollection,
  type TensorInput,
  type WriteOptions,
  type WriterOptions,
  type WriterSink,
} from './write/writer.ts'
