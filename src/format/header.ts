// parseHeader: the length prefix is checked here, everything after it by the wasm scanner
// (assembly/header.ts), whose table this module decodes into a Header; the table's layout and the
// scanner's codes are defined once, in assembly/boundary/header.ts, and imported from there by name.
// runScanner and syntaxMessage serve the index scanner too (src/format/model-index.ts).
import * as boundary from '../../assembly/boundary/header.ts?constants'
import { DTYPE_INFO, DTYPES, type DType } from '../core/dtypes.ts'
import { reserveMemory, type WasmInstance, WasmModule } from '../core/wasm.ts'
import { scannerWasm } from '../core/wasm-code.ts'
import { type ErrorCode, SafetensorsError } from '../errors.ts'

/** The scanner module's functions (assembly/modules/header.ts). */
interface ScannerExports {
  heapBase(): number
  resultPtr(): number
  dtypeTable(count: number): number
  scanHeader(input: number, length: number, fileSize: number): number
  scanIndex(input: number, length: number): number
}

/** Entry i of the scanner's dtype table (16 bytes): name length, bits per element, 2 unused, the name. */
function writeDtypeTable({ exports, memory }: WasmInstance<ScannerExports>): void {
  const table = new Uint8Array(memory.buffer, exports.dtypeTable(DTYPES.length), DTYPES.length * 16)
  DTYPES.forEach((name, i) => {
    table[i * 16] = name.length
    table[i * 16 + 1] = DTYPE_INFO[name].bits
    for (let j = 0; j < name.length; j++) table[i * 16 + 4 + j] = name.charCodeAt(j)
  })
}

export const scannerModule = /* @__PURE__ */ new WasmModule<ScannerExports>(scannerWasm, writeDtypeTable)

/** The reference implementation's limit on the JSON header length. */
export const MAX_HEADER_SIZE = 100_000_000

/** One tensor's entry in a header. */
export interface TensorInfo {
  /** The tensor's name (its key in the header). */
  readonly name: string
  /** The dtype of its elements. */
  readonly dtype: DType
  /** Its dimensions; `[]` for a scalar. */
  readonly shape: number[]
  /** [begin, end) relative to the start of the data section (Header.dataStart). */
  readonly dataOffsets: [number, number]
  /** end - begin of dataOffsets: the tensor's size in the file. */
  readonly byteLength: number
}

/** The number of elements of a shape, or of a tensor's: their product (1 for a scalar's `[]`). */
export function elementsOf(of: readonly number[] | Pick<TensorInfo, 'shape'>): number {
  const shape = 'shape' in of ? of.shape : of
  return shape.reduce((a, b) => a * b, 1)
}

/**
 * Metadata as a file or a model states it, one type for both: a header's `__metadata__`, whose values are
 * strings (`Metadata`), or a model index's `metadata`, whose values are any JSON (`Metadata<unknown>`, e.g.
 * `{ total_size: 1234 }`).
 */
export type Metadata<Value = string> = Record<string, Value>

/** A validated header: the tensor table and the metadata, from {@link parseHeader} or {@link SafetensorsFile.header}. */
export class Header {
  /** File offset of the data section: 8 + headerSize. */
  readonly dataStart: number
  readonly #index = new Map<string, TensorInfo>()

  /** @internal made by the header scanner */
  constructor(
    /** N: the JSON header's length in bytes. */
    readonly headerSize: number,
    /** The file's size in bytes: 8 + headerSize + the data. */
    readonly fileSize: number,
    /** The `__metadata__` strings, or null when the header has none. */
    readonly metadata: Metadata | null,
    /** In data order (sorted by offsets), which is not always the order of the JSON. */
    readonly tensors: TensorInfo[],
  ) {
    this.dataStart = 8 + headerSize
  }

  /**
   * The tensor called `name`.
   * @throws {@link SafetensorsError} `TensorNotFound`
   */
  tensor(name: string): TensorInfo {
    const info = this.#byName().get(name)
    if (!info) throw new SafetensorsError('TensorNotFound', `no tensor named ${JSON.stringify(name)} in this file (it has ${this.tensors.length})`)
    return info
  }

  /** Whether the header has a tensor called `name`. */
  has(name: string): boolean {
    return this.#byName().has(name)
  }

  #byName(): Map<string, TensorInfo> {
    if (this.#index.size < this.tensors.length) for (const info of this.tensors) this.#index.set(info.name, info)
    return this.#index
  }
}

/**
 * Checks the 8-byte length prefix against the file size and returns N, the header length.
 * `prefix` must hold the file's first 8 bytes when the file has that many.
 * @throws {@link SafetensorsError} `HeaderTooSmall`, `HeaderTooLarge`, `InvalidHeaderLength`
 */
export function readHeaderSize(prefix: Uint8Array, fileSize: number): number {
  if (fileSize < 8) throw notSafetensors('HeaderTooSmall', `the file is ${fileSize} bytes; a SafeTensors file starts with an 8-byte header length`)
  if (prefix.length < 8) throw new SafetensorsError('HeaderTooSmall', `only ${prefix.length} bytes were given; the 8-byte header length comes first`)
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true)
  if (n > MAX_HEADER_SIZE) throw notSafetensors('HeaderTooLarge', `the header length is ${n} bytes, above the limit of ${MAX_HEADER_SIZE}`, '', prefix)
  if (8 + Number(n) > fileSize) {
    throw notSafetensors(
      'InvalidHeaderLength',
      `the header length is ${n} bytes, but the file has only ${fileSize - 8} bytes after the 8-byte prefix`,
      ' (or a truncated one)',
      prefix,
    )
  }
  return Number(n)
}

/**
 * A length prefix that cannot start this file: a PNG, a text file or random bytes read as a length. The code
 * stays the reference's, and the message says first what a person needs to hear: what the file is, where its
 * first bytes say so, else that a prefix longer than the file is just as likely a download cut short.
 */
export function notSafetensors(code: ErrorCode, detail: string, alternative = '', prefix?: Uint8Array): SafetensorsError {
  const kind = prefix && whatItIs(prefix)
  return new SafetensorsError(code, kind ? `not a SafeTensors file: it is ${kind}; ${detail}` : `not a SafeTensors file${alternative}: ${detail}`)
}

/** What a file that is not SafeTensors is, from its first bytes, where they tell: the files people mistake for one. */
function whatItIs(prefix: Uint8Array): string | undefined {
  const text = String.fromCharCode(...prefix.subarray(0, 8)).replace(/^(\uFEFF|\xEF\xBB\xBF)?[\t\n\r ]*/, '')
  if (text.startsWith('GGUF')) return 'a GGUF file (openGguf of safetensors-wasm/gguf reads it)'
  if (text.startsWith('{')) return 'JSON, such as a model index (openModel opens those)'
  if (text.startsWith('<')) return 'HTML or XML, such as a web page'
  return undefined
}

/** The error each status of the scanner gives, by the status's number (assembly/boundary/header.ts). */
export const STATUS_ERRORS: Readonly<Record<number, ErrorCode>> = {
  [boundary.STATUS_INVALID_HEADER]: 'InvalidHeader',
  [boundary.STATUS_INVALID_HEADER_DESERIALIZATION]: 'InvalidHeaderDeserialization',
  [boundary.STATUS_INVALID_OFFSET]: 'InvalidOffset',
  [boundary.STATUS_VALIDATION_OVERFLOW]: 'ValidationOverflow',
  [boundary.STATUS_MISALIGNED_SLICE]: 'MisalignedSlice',
  [boundary.STATUS_TENSOR_INVALID_INFO]: 'TensorInvalidInfo',
  [boundary.STATUS_METADATA_INCOMPLETE_BUFFER]: 'MetadataIncompleteBuffer',
  [boundary.STATUS_OUT_OF_MEMORY]: 'HeaderTooLarge',
}

/** What each reason of the scanner says, by the reason's number (assembly/boundary/header.ts). */
export const REASON_TEXT: Readonly<Record<number, string>> = {
  [boundary.R_EXPECTED_OBJECT]: 'expected the header to be a JSON object',
  [boundary.R_EXPECTED_KEY]: 'expected a string key',
  [boundary.R_EXPECTED_COLON]: "expected ':' after the key",
  [boundary.R_EXPECTED_COMMA_OR_BRACE]: "expected ',' or '}'",
  [boundary.R_EXPECTED_COMMA_OR_BRACKET]: "expected ',' or ']'",
  [boundary.R_TRAILING]: 'unexpected characters after the JSON object',
  [boundary.R_CONTROL_CHAR]: 'control character in a string (it must be escaped)',
  [boundary.R_BAD_ESCAPE]: 'invalid escape sequence',
  [boundary.R_LONE_SURROGATE]: 'lone surrogate escape (\\uD800-\\uDFFF must form a pair)',
  [boundary.R_BAD_VALUE]: 'invalid JSON value',
  [boundary.R_EXPECTED_UINT]: 'expected a non-negative integer',
  [boundary.R_NOT_PLAIN_INT]: 'not a plain integer (no sign, fraction, exponent or leading zero)',
  [boundary.R_INT_TOO_LARGE]: 'integer does not fit in 64 bits',
  [boundary.R_NUMBER_OUT_OF_RANGE]: 'number out of range (it overflows a double, which the reference refuses)',
  [boundary.R_TOO_DEEP]: 'values nested deeper than 64 levels',
  [boundary.R_METADATA_NOT_OBJECT]: '__metadata__ must be null or an object',
  [boundary.R_METADATA_VALUE_NOT_STRING]: '__metadata__ values must be strings',
  [boundary.R_TENSOR_NOT_OBJECT]: 'a tensor entry must be an object',
  [boundary.R_DTYPE_NOT_STRING]: 'dtype must be a string',
  [boundary.R_UNKNOWN_DTYPE]: `unknown dtype (expected one of ${DTYPES.join(', ')})`,
  [boundary.R_SHAPE_NOT_ARRAY]: 'shape must be an array of integers',
  [boundary.R_OFFSETS_NOT_ARRAY]: 'data_offsets must be an array',
  [boundary.R_OFFSETS_NOT_TWO]: 'data_offsets must hold exactly two integers',
  [boundary.R_MISSING_FIELD]: 'missing field',
  [boundary.R_DUPLICATE_KEY]: 'duplicate key',
  [boundary.R_INVALID_UTF8]: 'invalid UTF-8',
  [boundary.R_SHAPE_PRODUCT]: "the shape's element count overflows 64 bits",
  [boundary.R_BIT_COUNT]: 'the bit count overflows 64 bits',
  [boundary.R_NOT_SAFE_INTEGER]: 'a number is larger than a JavaScript safe integer (2^53 - 1)',
  [boundary.R_INDEX_NOT_OBJECT]: 'expected an object with a "weight_map" object',
  [boundary.R_WEIGHT_MAP_MISSING]: 'expected an object with a "weight_map" object',
  [boundary.R_WEIGHT_MAP_NOT_OBJECT]: '"weight_map" must be an object',
  [boundary.R_SHARD_NOT_STRING]: 'a weight_map value must be a file name',
  [boundary.R_INDEX_METADATA_NOT_OBJECT]: '"metadata" must be an object',
}

const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

/**
 * Validates a SafeTensors header and returns its tensor table. `bytes` is the start of the file: at least
 * the 8-byte prefix and the N header bytes. `options.fileSize` (default: `bytes.length`) is checked against
 * the offsets.
 * @throws {@link SafetensorsError} `HeaderTooSmall`, `HeaderTooLarge`, `InvalidHeaderLength`, `InvalidHeader`,
 * `InvalidHeaderDeserialization`, `InvalidOffset`, `ValidationOverflow`, `MisalignedSlice`, `TensorInvalidInfo`,
 * `MetadataIncompleteBuffer`: the first check the header fails, in this order (see {@link ErrorCode});
 * `InvalidHeaderLength` also when `bytes` holds less than the 8 + N bytes.
 * @throws RangeError for a `fileSize` that is not a non-negative safe integer.
 */
export function parseHeader(bytes: Uint8Array, options: { fileSize?: number } = {}): Header {
  const fileSize = options.fileSize ?? bytes.length
  if (!Number.isSafeInteger(fileSize) || fileSize < 0) throw new RangeError(`fileSize must be a non-negative safe integer, got ${fileSize}`)
  const n = readHeaderSize(bytes, fileSize)
  if (bytes.length < 8 + n)
    throw new SafetensorsError(
      'InvalidHeaderLength',
      `the header length is ${n} bytes, but only ${bytes.length - 8} header bytes were given (pass the file's first ${8 + n} bytes)`,
    )
  return scan(bytes.subarray(8, 8 + n), fileSize)
}

/**
 * The scanner never accepts this file size: it checks that every offset is a JS safe integer before the
 * size, so the end of the data (at most 2^53 + 8 + MAX_HEADER_SIZE) cannot reach 2^63.
 */
const SIZE_NOT_KNOWN = 2 ** 63

/**
 * The header of a file whose size is not known yet, such as a stream's: `bytes` is the length prefix and
 * the N header bytes, already checked by readHeaderSize. Every rule of parseHeader is checked but the last
 * (MetadataIncompleteBuffer), which needs the size; the Header's fileSize is the size its offsets imply,
 * for the caller to check against the bytes that follow.
 */
export function parseHeaderOfUnknownSize(bytes: Uint8Array): Header {
  return scan(bytes.subarray(8), undefined)
}

/** What a scanner left in the shared core: its status, the result table's address, and a view of its memory. */
interface ScanResult {
  readonly status: number
  readonly result: number
  readonly view: DataView
}

/**
 * Copies `bytes` into the shared core, runs a scanner over them and hands its result to `read`, which must
 * copy out what it keeps: the core is reused, and dropped past a size (wasm memory never shrinks).
 */
export function runScanner<T>(
  bytes: Uint8Array,
  what: string,
  scanner: (exports: ScannerExports, input: number, n: number) => number,
  read: (scan: ScanResult) => T,
): T {
  const n = bytes.length
  const core = scannerModule.shared()
  try {
    const input = core.heapBase
    try {
      reserveMemory(core, input + n + 64)
    } catch {
      throw new SafetensorsError('HeaderTooLarge', `${what} of ${n} bytes does not fit in wasm memory`)
    }
    new Uint8Array(core.memory.buffer, input, n).set(bytes)
    const status = scanner(core.exports, input, n)
    // The scanner may have grown memory: take views only now.
    return read({ status, result: core.exports.resultPtr() >>> 0, view: new DataView(core.memory.buffer) })
  } finally {
    scannerModule.trimShared()
  }
}

function scan(headerBytes: Uint8Array, knownSize: number | undefined): Header {
  const n = headerBytes.length
  return runScanner(
    headerBytes,
    'a header',
    (exports, input, n) => exports.scanHeader(input, n, knownSize ?? SIZE_NOT_KNOWN),
    (scan) => {
      const { status, result, view } = scan
      const u32At = (at: number) => view.getUint32(at, true)
      // Only the size disagrees: the end of the data it found is the size the file must have.
      const sizeOnly = knownSize === undefined && STATUS_ERRORS[status] === 'MetadataIncompleteBuffer'
      if (status !== boundary.STATUS_OK && !sizeOnly) throw scanError(scan, headerBytes, knownSize ?? SIZE_NOT_KNOWN)
      const fileSize = knownSize ?? Number(view.getBigUint64(result + boundary.RESULT_A, true))

      const count = u32At(result + boundary.RESULT_TENSOR_COUNT)
      const order = u32At(result + boundary.RESULT_ORDER)
      const text = n > 0 ? decoder.decode(headerBytes) : ''
      const tensors = new Array<TensorInfo>(count)
      for (let i = 0; i < count; i++) {
        const entry = u32At(order + 4 * i)
        const raw = text.slice(u32At(entry + boundary.TENSOR_KEY16_START), u32At(entry + boundary.TENSOR_KEY16_END))
        const dims = u32At(entry + boundary.TENSOR_DIMS)
        const ndim = u32At(dims + boundary.DIMS_COUNT)
        const shape = new Array<number>(ndim)
        for (let d = 0; d < ndim; d++) shape[d] = view.getFloat64(dims + boundary.DIMS_VALUES + 8 * d, true)
        const begin = view.getFloat64(entry + boundary.TENSOR_BEGIN, true)
        const end = view.getFloat64(entry + boundary.TENSOR_END, true)
        tensors[i] = {
          name: u32At(entry + boundary.ENTRY_KEY_END) & boundary.ESCAPED ? JSON.parse(`"${raw}"`) : raw,
          dtype: DTYPES[u32At(entry + boundary.TENSOR_DTYPE)],
          shape,
          dataOffsets: [begin, end],
          byteLength: end - begin,
        }
      }
      const hasMetadata = u32At(result + boundary.RESULT_METADATA_START) !== 0xffffffff
      const metadata = hasMetadata
        ? JSON.parse(text.slice(u32At(result + boundary.RESULT_METADATA_START16), u32At(result + boundary.RESULT_METADATA_END16)))
        : null
      return new Header(n, fileSize, metadata, tensors)
    },
  )
}

/**
 * Where and why a scan found the text malformed (InvalidHeader and InvalidHeaderDeserialization), from the
 * result table: `byte N ...: why, near "..."`. `offset` is where the text starts in its file.
 */
export function syntaxMessage(scan: ScanResult, text: Uint8Array, offset: number, what: 'header' | 'index'): string {
  const { view, result } = scan
  const reason = view.getInt32(result + boundary.RESULT_REASON, true)
  const at = view.getUint32(result + boundary.RESULT_AT, true)
  const a = Number(view.getBigUint64(result + boundary.RESULT_A, true))
  const end = Number(view.getBigUint64(result + boundary.RESULT_B, true))
  const n = text.length
  const where = `byte ${at}${offset === 0 ? '' : ` (file offset ${offset + at})`}`
  if (STATUS_ERRORS[scan.status] === 'InvalidHeader') return `not valid UTF-8 at ${where}`
  let why = REASON_TEXT[reason]
  if (reason === boundary.R_MISSING_FIELD) why = `tensor entry lacks ${['dtype', 'shape', 'data_offsets'].filter((_, i) => !(a & (1 << i))).join(', ')}`
  if (reason === boundary.R_DUPLICATE_KEY && a < end) why = `the key ${JSON.stringify(keyText(text, a, end))} appears twice in one object`
  if (reason === boundary.R_SHARD_NOT_STRING) why = `weight_map[${JSON.stringify(keyText(text, a, end))}] must be a file name`
  return `${where}: ${why}${at >= n ? ` (the ${what} ended)` : `, near ${excerpt(text, at)}`}`
}

function scanError(scan: ScanResult, header: Uint8Array, fileSize: number): SafetensorsError {
  const { status, view, result } = scan
  const code = STATUS_ERRORS[status]
  const reason = view.getInt32(result + boundary.RESULT_REASON, true)
  const a = view.getBigUint64(result + boundary.RESULT_A, true)
  const b = view.getBigUint64(result + boundary.RESULT_B, true)
  const c = view.getBigUint64(result + boundary.RESULT_C, true)
  if (status === boundary.STATUS_OUT_OF_MEMORY)
    return new SafetensorsError(code, `validating a header of ${header.length} bytes needs more wasm memory than could be allocated`)
  if (code === 'InvalidHeader') return new SafetensorsError(code, `the header is ${syntaxMessage(scan, header, 8, 'header')}`)
  if (code === 'InvalidHeaderDeserialization') return new SafetensorsError(code, `invalid header at ${syntaxMessage(scan, header, 8, 'header')}`)
  if (code === 'MetadataIncompleteBuffer') {
    const why = a < BigInt(fileSize) ? `${BigInt(fileSize) - a} trailing bytes` : `${a - BigInt(fileSize)} bytes missing`
    return new SafetensorsError(code, `the tensors end at file offset ${a}, but the file has ${fileSize} bytes (${why})`)
  }
  const entry = view.getUint32(result + boundary.RESULT_TENSOR, true)
  const keyEnd = view.getUint32(entry + boundary.ENTRY_KEY_END, true) & ~boundary.ESCAPED
  const name = JSON.stringify(keyText(header, view.getUint32(entry + boundary.ENTRY_KEY_START, true), keyEnd))
  const dtype = DTYPES[view.getUint32(entry + boundary.TENSOR_DTYPE, true)]
  switch (code) {
    case 'InvalidOffset':
      return new SafetensorsError(
        code,
        b < a
          ? `tensor ${name}: data_offsets [${a}, ${b}] end before they begin`
          : `tensor ${name}: data_offsets [${a}, ${b}] should begin at ${c}, where the ${c === 0n ? 'data section starts' : 'previous tensor ends'}`,
      )
    case 'ValidationOverflow': {
      const detail = reason === boundary.R_SHAPE_PRODUCT ? `${a} × ${b}` : reason === boundary.R_BIT_COUNT ? `${a} elements of ${dtype}` : `${a}`
      return new SafetensorsError(code, `tensor ${name}: ${REASON_TEXT[reason]} (${detail})`)
    }
    case 'MisalignedSlice':
      return new SafetensorsError(code, `tensor ${name}: ${a} elements of ${dtype} take ${a * b} bits, not a whole number of bytes`)
    default:
      return new SafetensorsError(code, `tensor ${name}: data_offsets span ${a} bytes, but ${c} elements of ${dtype} take ${b}`)
  }
}

function keyText(header: Uint8Array, start: number, end: number): string {
  const raw = decoder.decode(header.subarray(start, end))
  try {
    return JSON.parse(`"${raw}"`)
  } catch {
    return raw
  }
}

function excerpt(header: Uint8Array, at: number): string {
  const from = Math.max(0, at - 24)
  return JSON.stringify(decoder.decode(header.subarray(from, Math.min(header.length, at + 24))))
}
