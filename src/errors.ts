/**
 * Every failure this library reports on purpose is a SafetensorsError with one of these codes. The first ten
 * are the header's checks, made in this order (the reference implementation's names):
 *
 * - `HeaderTooSmall`: fewer than 8 bytes.
 * - `HeaderTooLarge`: the header length N is above 100,000,000 ({@link MAX_HEADER_SIZE}).
 * - `InvalidHeaderLength`: 8 + N is more than the file's size.
 * - `InvalidHeader`: the header is not strict UTF-8.
 * - `InvalidHeaderDeserialization`: the header (or a model index) is not one JSON object of the schema: bad
 *   JSON, wrong types, an unknown dtype, a missing field, a number that is not a plain u64 integer, a
 *   duplicate key, nesting deeper than 64. Also a model's config.json, tokenizer.json or tokenizer_config.json
 *   that holds a value of the wrong type or range where it is read, or nests deeper than 64 (the message names
 *   the file and the key).
 * - `InvalidOffset`: a tensor does not begin where the previous one ends (the first at 0), or ends before it begins.
 * - `ValidationOverflow`: an element or bit count overflows 64 bits, or a value is above 2^53 - 1.
 * - `MisalignedSlice`: a tensor's (or a slice's) bits are not a whole number of bytes (F4, F6).
 * - `TensorInvalidInfo`: a tensor's offsets do not span its byte size; a byte length that holds no whole
 *   number of elements.
 * - `MetadataIncompleteBuffer`: the data does not end where the file (or stream) ends.
 *
 * Then the reads and writes:
 *
 * - `TensorNotFound`: no tensor of that name (in a model: not where the index says).
 * - `SliceOutOfRange`: a slice range outside the tensor's shape.
 * - `TooManySlices`: more slice ranges than the tensor has dimensions.
 * - `UnsupportedConversion`: no conversion between these dtypes.
 * - `Io`: the bytes could not be read or written: a missing file, an HTTP error, a file that changed while
 *   read, a full disk.
 * - `Aborted`: the caller's `signal` aborted.
 *
 * And a quantized model's (its config.json's quantization block and the parts of its modules):
 *
 * - `UnsupportedQuantization`: a method, bit width or option this library does not read (the message names it
 *   and those it reads).
 * - `InvalidQuantization`: parts that do not fit together: a scale of the wrong shape, a g_idx out of range, a
 *   missing part (the message names the module).
 *
 * And a GGUF file's (`safetensors-wasm/gguf`'s openGguf):
 *
 * - `InvalidGguf`: not a GGUF this library reads: another magic, a version other than 2 and 3, a truncated
 *   header, a count or length that claims more than the file holds, an unknown value or tensor type, a shape
 *   that is not whole blocks, a tensor past the end of the file or overlapping another (the message names the
 *   key or tensor and the byte offset).
 */
export type ErrorCode =
  | 'HeaderTooSmall'
  | 'HeaderTooLarge'
  | 'InvalidHeaderLength'
  | 'InvalidHeader'
  | 'InvalidHeaderDeserialization'
  | 'InvalidOffset'
  | 'ValidationOverflow'
  | 'MisalignedSlice'
  | 'TensorInvalidInfo'
  | 'MetadataIncompleteBuffer'
  | 'TensorNotFound'
  | 'SliceOutOfRange'
  | 'TooManySlices'
  | 'UnsupportedConversion'
  | 'Io'
  | 'Aborted'
  | 'UnsupportedQuantization'
  | 'InvalidQuantization'
  | 'InvalidGguf'

/** The facts an error carries besides its code and message, as fields; each is set where it applies. */
export interface ErrorFacts {
  /** The cause, as in `Error`: the platform's error, or the error this one wraps. */
  cause?: unknown
  /** The status of the HTTP response that failed (404, 503, ...). */
  status?: number
  /** The http(s) URL read. */
  url?: string
  /** The local file or folder read or written (never a temporary file beside it). */
  path?: string
}

/**
 * What this library throws for bad data, files or network: `instanceof SafetensorsError` works in every
 * entry, and the message names the tensor, offset, byte position, path or URL involved; `status`, `url` and
 * `path` carry an HTTP status, the URL and the local path as fields, kept by every layer that rethrows. A
 * mistake of the calling code (an argument of the wrong type, an option out of range) is a TypeError or
 * RangeError instead.
 */
export class SafetensorsError extends Error {
  /** What went wrong, as one of the {@link ErrorCode}s. */
  readonly code: ErrorCode
  /** The HTTP status of the response that failed, when a response did. */
  readonly status?: number
  /** The http(s) URL whose read failed, when one did. */
  readonly url?: string
  /** The local file or folder involved, when one is. */
  readonly path?: string

  constructor(code: ErrorCode, message: string, facts?: ErrorFacts) {
    // Error takes the cause from the facts, and nothing else.
    super(message, facts)
    this.name = 'SafetensorsError'
    this.code = code
    this.status = facts?.status
    this.url = facts?.url
    this.path = facts?.path
  }
}

/** `error` again, its message led by `context` (the shard or file it is about): the same code and facts, and `more`. */
export function inContext(error: SafetensorsError, context: string, more?: ErrorFacts): SafetensorsError {
  return new SafetensorsError(error.code, `${context}: ${error.message}`, { status: error.status, url: error.url, path: error.path, ...more, cause: error })
}
