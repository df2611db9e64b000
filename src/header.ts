// parseHeader: the length prefix is checked here, everything after it by the wasm scanner
// (assembly/header.ts), whose table this module decodes into a Header.
import { DTYPES, type DType } from './dtypes.ts'
import { SafetensorsError, type ErrorCode } from './errors.ts'
import { readInto, type RangeSource } from './source.ts'
import { reserveMemory, sharedCore, trimSharedCore } from './wasm.ts'

/** The reference implementation's limit on the JSON header length. */
export const MAX_HEADER_SIZE = 100_000_000

export interface TensorInfo {
  readonly name: string
  readonly dtype: DType
  readonly shape: number[]
  /** [begin, end) relative to the start of the data section (Header.dataStart). */
  readonly dataOffsets: [number, number]
  readonly byteLength: number
}

export class Header {
  /** File offset of the data section: 8 + headerSize. */
  readonly dataStart: number
  readonly #index = new Map<string, TensorInfo>()

  constructor(
    /** N: the JSON header's length in bytes. */
    readonly headerSize: number,
    readonly fileSize: number,
    readonly metadata: Record<string, string> | null,
    /** In data order (sorted by offsets), which is not always the order of the JSON. */
    readonly tensors: TensorInfo[],
  ) {
    this.dataStart = 8 + headerSize
  }

  /** The tensor called `name`; throws TensorNotFound. */
  tensor(name: string): TensorInfo {
    const info = this.#byName().get(name)
    if (!info) throw new SafetensorsError('TensorNotFound', `no tensor named ${JSON.stringify(name)} in this file (it has ${this.tensors.length})`)
    return info
  }

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
 */
export function readHeaderSize(prefix: Uint8Array, fileSize: number): number {
  if (fileSize < 8) throw new SafetensorsError('HeaderTooSmall', `the file is ${fileSize} bytes; a SafeTensors file starts with an 8-byte header length`)
  if (prefix.length < 8) throw new SafetensorsError('HeaderTooSmall', `only ${prefix.length} bytes were given; the 8-byte header length comes first`)
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true)
  if (n > MAX_HEADER_SIZE) {
    throw new SafetensorsError('HeaderTooLarge', `the header length is ${n} bytes, above the limit of ${MAX_HEADER_SIZE}`)
  }
  if (8 + Number(n) > fileSize) {
    throw new SafetensorsError('InvalidHeaderLength', `the header length is ${n} bytes, but the file has only ${fileSize - 8} bytes after the 8-byte prefix`)
  }
  return Number(n)
}

const STATUS: ErrorCode[] = [
  'InvalidHeader',
  'InvalidHeader',
  'InvalidHeaderDeserialization',
  'InvalidOffset',
  'ValidationOverflow',
  'MisalignedSlice',
  'TensorInvalidInfo',
  'MetadataIncompleteBuffer',
  'HeaderTooLarge',
]
const OUT_OF_MEMORY = 8

// Indexed by the scanner's R_* constants.
const REASONS = [
  '',
  'expected the header to be a JSON object',
  'expected a string key',
  "expected ':' after the key",
  "expected ',' or '}'",
  "expected ',' or ']'",
  'unexpected characters after the header object',
  'control character in a string (it must be escaped)',
  'invalid escape sequence',
  'lone surrogate escape (\\uD800-\\uDFFF must form a pair)',
  'invalid JSON value',
  'expected a non-negative integer',
  'not a plain integer (no sign, fraction, exponent or leading zero)',
  'integer does not fit in 64 bits',
  'values nested deeper than 64 levels',
  '__metadata__ must be null or an object',
  '__metadata__ values must be strings',
  'a tensor entry must be an object',
  'dtype must be a string',
  `unknown dtype (expected one of ${DTYPES.join(', ')})`,
  'shape must be an array of integers',
  'data_offsets must be an array',
  'data_offsets must hold exactly two integers',
  'missing field',
  'duplicate key',
  'invalid UTF-8',
]
const R_MISSING_FIELD = 23
const R_DUPLICATE_KEY = 24
const R_SHAPE_PRODUCT = 26
const R_BIT_COUNT = 27

const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

/**
 * Validates a SafeTensors header and returns its tensor table. `bytes` is the start of the file: at least
 * the 8-byte prefix and the N header bytes. `fileSize` (default: bytes.length) is checked against the offsets.
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
  const headerBytes = bytes.subarray(8, 8 + n)

  const core = sharedCore()
  // A huge header grows the shared core; past a threshold it is dropped afterwards (wasm memory never shrinks).
  try {
    const input = core.heapBase
    try {
      reserveMemory(core, input + n + 64)
    } catch {
      throw new SafetensorsError('HeaderTooLarge', `a header of ${n} bytes does not fit in wasm memory`)
    }
    new Uint8Array(core.memory.buffer, input, n).set(headerBytes)
    const status = core.exports.scanHeader(input, n, fileSize)

    // The scanner may have grown memory: take views only now.
    const memory = core.memory.buffer
    const u32 = new Uint32Array(memory)
    const f64 = new Float64Array(memory)
    const result = core.exports.resultPtr() >>> 2
    if (status !== 0) throw scanError(status, new DataView(memory), result << 2, u32, headerBytes, fileSize)

    const count = u32[result + 4]
    const order = u32[result + 5] >>> 2
    const text = n > 0 ? decoder.decode(headerBytes) : ''
    const tensors = new Array<TensorInfo>(count)
    for (let i = 0; i < count; i++) {
      // Tensor entry (see assembly/header.ts): u32 [tag, object, keyStart, keyEnd|escaped, key16Start,
      // key16End, dtype, dims] then f64 [begin, end]; dims entry: u32 [tag, ndim] then f64 dims.
      const entry = u32[order + i] >>> 2
      const raw = text.slice(u32[entry + 4], u32[entry + 5])
      const dims = u32[entry + 7] >>> 2
      const ndim = u32[dims + 1]
      const shape = new Array<number>(ndim)
      for (let d = 0; d < ndim; d++) shape[d] = f64[(dims >>> 1) + 1 + d]
      const begin = f64[(entry >>> 1) + 4]
      const end = f64[(entry >>> 1) + 5]
      tensors[i] = {
        name: u32[entry + 3] & 0x80000000 ? JSON.parse(`"${raw}"`) : raw,
        dtype: DTYPES[u32[entry + 6]],
        shape,
        dataOffsets: [begin, end],
        byteLength: end - begin,
      }
    }
    const metaEnd16 = u32[result + 9]
    const metadata = u32[result + 6] === 0xffffffff ? null : JSON.parse(text.slice(u32[result + 8], metaEnd16))
    return new Header(n, fileSize, metadata, tensors)
  } finally {
    trimSharedCore()
  }
}

function scanError(status: number, view: DataView, result: number, u32: Uint32Array, header: Uint8Array, fileSize: number): SafetensorsError {
  const code = STATUS[status]
  const reason = view.getInt32(result + 4, true)
  const at = view.getUint32(result + 8, true)
  const a = view.getBigUint64(result + 48, true)
  const b = view.getBigUint64(result + 56, true)
  const c = view.getBigUint64(result + 64, true)
  const n = header.length
  if (status === OUT_OF_MEMORY) return new SafetensorsError(code, `validating a header of ${n} bytes needs more wasm memory than could be allocated`)
  if (code === 'InvalidHeader') return new SafetensorsError(code, `the header is not valid UTF-8 at byte ${at} (file offset ${8 + at})`)
  if (code === 'InvalidHeaderDeserialization') {
    let why = REASONS[reason]
    if (reason === R_MISSING_FIELD) why = `tensor entry lacks ${['dtype', 'shape', 'data_offsets'].filter((_, i) => !(Number(a) & (1 << i))).join(', ')}`
    if (reason === R_DUPLICATE_KEY && a < b) why = `duplicate key ${JSON.stringify(keyText(header, Number(a), Number(b)))}`
    return new SafetensorsError(
      code,
      `invalid header at byte ${at} (file offset ${8 + at}): ${why}${at >= n ? ' (the header ended)' : `, near ${excerpt(header, at)}`}`,
    )
  }
  if (code === 'MetadataIncompleteBuffer') {
    const why = a < BigInt(fileSize) ? `${BigInt(fileSize) - a} trailing bytes` : `${a - BigInt(fileSize)} bytes missing`
    return new SafetensorsError(code, `the tensors end at file offset ${a}, but the file has ${fileSize} bytes (${why})`)
  }
  const entry = u32[(result + 12) >>> 2] >>> 2
  const name = JSON.stringify(keyText(header, u32[entry + 2], u32[entry + 3] & 0x7fffffff))
  const dtype = DTYPES[u32[entry + 6]]
  switch (code) {
    case 'InvalidOffset':
      return new SafetensorsError(
        code,
        b < a
          ? `tensor ${name}: data_offsets [${a}, ${b}] end before they begin`
          : `tensor ${name}: data_offsets [${a}, ${b}] should begin at ${c}, where the ${c === 0n ? 'data section starts' : 'previous tensor ends'}`,
      )
    case 'ValidationOverflow':
      return new SafetensorsError(
        code,
        reason === R_SHAPE_PRODUCT
          ? `tensor ${name}: the shape's element count overflows 64 bits (${a} × ${b})`
          : reason === R_BIT_COUNT
            ? `tensor ${name}: ${a} elements of ${dtype} overflow a 64-bit bit count`
            : `tensor ${name}: ${a} is larger than a JavaScript safe integer (2^53 - 1)`,
      )
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

/** Bytes read first: most real headers (up to several hundred tensors) arrive in this one read. */
export const FIRST_READ = 64 * 1024

/** Reads and validates a source's header, reading only the length prefix and the header bytes. */
export async function readHeader(source: RangeSource, signal?: AbortSignal): Promise<Header> {
  const first = await source.read(0, source.size === undefined ? FIRST_READ : Math.min(source.size, FIRST_READ), signal)
  const size = source.size
  if (size === undefined) throw new SafetensorsError('Io', 'the source did not report its size after the first read')
  const n = readHeaderSize(first, size)
  let bytes = first
  if (first.length < 8 + n) {
    bytes = new Uint8Array(8 + n)
    bytes.set(first)
    await readInto(source, first.length, bytes.subarray(first.length), signal)
  }
  return parseHeader(bytes.subarray(0, 8 + n), { fileSize: size })
}
