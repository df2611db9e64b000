// The public API, shared by every package entry.
export { SafetensorsError, type ErrorCode } from './errors.ts'
export { DTYPES, DTYPE_INFO, type DType, type DTypeInfo, type TypedArray } from './dtypes.ts'
export { parseHeader, readHeader, readHeaderSize, Header, MAX_HEADER_SIZE, type TensorInfo } from './header.ts'
export { blobSource, fileSource, memorySource, type RangeSource } from './source.ts'
export { httpSource, type HttpOptions } from './http.ts'
export { convert, byteSwap } from './convert.ts'
