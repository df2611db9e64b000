// The GGUF container read back (src/gguf/format.ts writes it): "GGUF", the version (2 or 3), the tensor and
// key-value counts, the key-value pairs, the tensor infos, padding to the alignment, then the data. A file whose
// version reads with its low 16 bits zero is big-endian and read as such, as gguf-py's GGUFReader does; v2 is v3
// without big-endian files. Every count and length is checked against the bytes the file has left before
// anything is made for it, so a header claiming more than its file holds is an error, never an allocation.
// The header is parsed from a prefix of the file that grows as the parser asks: an entry that runs past the
// prefix is parsed again once more bytes are read (readGgufHeader), so only the header is ever read.
import type { ByteOrder } from '../core/byte-order.ts'
import { swapElements } from '../core/convert.ts'
import { DTYPE_INFO, type DType, type TypedArray } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { readFirst } from '../read/file.ts'
import { type RangeSource, readInto } from '../sources/source.ts'
import { GGML_TYPES, type GgmlType } from './ggml-types.ts'

/** A metadata array: numbers in the typed array of their GGUF type, booleans, strings, or arrays of arrays. */
export type GgufArray = TypedArray | boolean[] | string[] | GgufArray[]

/** A metadata value: a number (8- to 32-bit integers, floats), a bigint (64-bit integers), a boolean, a string or an array. */
export type GgufValue = number | bigint | boolean | string | GgufArray

/** A tensor as a GGUF header describes it. */
export interface GgufTensorInfo {
  /** Its name. */
  readonly name: string
  /** Its ggml type, as gguf-py names it ('F32', 'Q4_K', ...). */
  readonly type: GgmlType
  /** Its dimensions, outermost first (the reverse of GGUF's ne); `[]` for a scalar. */
  readonly shape: number[]
  /** Its bytes in the file. */
  readonly byteLength: number
  /** The file offset of its first byte. */
  readonly offset: number
}

/** What a GGUF header says: the file's layout, its metadata and its tensors. */
export interface GgufHeader {
  /** The GGUF version: 2 or 3. */
  readonly version: number
  /** The byte order of every number in the file. */
  readonly byteOrder: ByteOrder
  /** general.alignment, else 32: the data section and every tensor start at a multiple of it. */
  readonly alignment: number
  /** Every key-value pair, in file order. */
  readonly metadata: Record<string, GgufValue>
  /** Each key's GGUF type, as gguf-py names it: 'UINT32', 'STRING', 'ARRAY[FLOAT32]', 'ARRAY[ARRAY]'... */
  readonly metadataTypes: Record<string, string>
  /** The tensors, in file order. */
  readonly tensors: GgufTensorInfo[]
  /** The file offset of the data section. */
  readonly dataStart: number
  /** The file's size in bytes. */
  readonly fileSize: number
}

/** GGUF's value types by id: the name gguf-py gives each, and the dtype of a number's bytes. */
const VALUE_TYPES: ReadonlyArray<{ name: string; dtype?: DType }> = [
  { name: 'UINT8', dtype: 'U8' },
  { name: 'INT8', dtype: 'I8' },
  { name: 'UINT16', dtype: 'U16' },
  { name: 'INT16', dtype: 'I16' },
  { name: 'UINT32', dtype: 'U32' },
  { name: 'INT32', dtype: 'I32' },
  { name: 'FLOAT32', dtype: 'F32' },
  { name: 'BOOL' },
  { name: 'STRING' },
  { name: 'ARRAY' },
  { name: 'UINT64', dtype: 'U64' },
  { name: 'INT64', dtype: 'I64' },
  { name: 'FLOAT64', dtype: 'F64' },
]
const BOOL = 7
const STRING = 8
const ARRAY = 9

/** The fewest bytes a value of each type takes: a string its length, an array its element type and count. */
const MIN_BYTES = VALUE_TYPES.map(({ dtype }, id) => (dtype ? DTYPE_INFO[dtype].bits / 8 : id === BOOL ? 1 : id === STRING ? 8 : 12))

/** ggml's types by id. */
const TYPE_BY_ID = new Map<number, GgmlType>(Object.entries(GGML_TYPES).map(([name, { id }]) => [id, name as GgmlType]))

/** ggml's and gguf-py's limits on one string's bytes and one array's elements. */
const MAX_STRING_BYTES = 2 ** 30
const MAX_ARRAY_ELEMENTS = 2 ** 30
/** Arrays of arrays nest at most this deep (each level costs a call). */
const MAX_DEPTH = 64
/** ggml's GGML_MAX_DIMS. */
const MAX_DIMS = 4
const DEFAULT_ALIGNMENT = 32
/** The bytes before the key-value pairs: magic, version, the two counts. */
const PREAMBLE = 24
/** The fewest bytes of a key-value pair (an empty key, a type, one byte) and of a tensor info (an empty name, no dims, type, offset). */
const MIN_KEY_VALUE = 13
const MIN_TENSOR_INFO = 24

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Thrown inside the parser when an entry runs past the bytes it has: parse again from that entry with at least `end` bytes. */
class NeedBytes {
  constructor(readonly end: number) {}
}

/** An error of a GGUF file: InvalidGguf, its message led by "GGUF:". */
export function ggufError(message: string): SafetensorsError {
  return new SafetensorsError('InvalidGguf', `GGUF: ${message}`)
}

interface RawTensor {
  name: string
  ne: number[]
  type: GgmlType
  offset: number
  /** Where its info starts, and where its offset is. */
  entry: number
  offsetAt: number
}

/**
 * A GGUF header parser over a prefix of a file of `fileSize` bytes, resumable: parse() returns the header, or
 * the number of bytes it needs to go on, and continues from the entry it stopped in when called again with more.
 */
class GgufParser {
  #bytes: Uint8Array = new Uint8Array(0)
  #view: DataView = new DataView(this.#bytes.buffer)
  #little = true
  #pos = 0
  /** Where the entry being read starts, and what it is (for messages). */
  #entry = 0
  #what = 'the header'
  #version = 0
  #keyValues = -1
  #keyValuesRead = 0
  #tensorCount = -1
  readonly #metadata: Record<string, GgufValue> = Object.create(null)
  readonly #types: Record<string, string> = Object.create(null)
  readonly #raw: RawTensor[] = []
  readonly #names = new Set<string>()
  #alignment = DEFAULT_ALIGNMENT

  constructor(readonly fileSize: number) {}

  parse(bytes: Uint8Array): GgufHeader | number {
    this.#bytes = bytes
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    try {
      if (this.#keyValues < 0) this.#entry = 0
      this.#pos = this.#entry
      if (this.#keyValues < 0) this.#preamble()
      while (this.#keyValuesRead < this.#keyValues) {
        this.#entry = this.#pos
        this.#keyValue()
      }
      while (this.#raw.length < this.#tensorCount) {
        this.#entry = this.#pos
        this.#tensorInfo()
      }
    } catch (error) {
      if (error instanceof NeedBytes) return error.end
      throw error
    }
    return this.#finish()
  }

  #fail(message: string): never {
    throw ggufError(`${this.#what} (at byte ${this.#entry}): ${message}`)
  }

  /** The position of the next `n` bytes, which it takes. */
  #take(n: number): number {
    const at = this.#pos
    const end = at + n
    if (end > this.fileSize) this.#fail(`the file ends at byte ${this.fileSize}, inside it (a truncated file)`)
    if (end > this.#bytes.length) throw new NeedBytes(end)
    this.#pos = end
    return at
  }

  #u32(): number {
    return this.#view.getUint32(this.#take(4), this.#little)
  }

  /** A u64 as a number: exact up to 2^53, and above it larger than any file, which is all the checks need. */
  #u64(): number {
    const at = this.#take(8)
    const [low, high] = this.#little ? [at, at + 4] : [at + 4, at]
    return this.#view.getUint32(high, this.#little) * 2 ** 32 + this.#view.getUint32(low, this.#little)
  }

  /** The u64 at `at` exactly, for a message. */
  #exact(at: number): bigint {
    return this.#view.getBigUint64(at, this.#little)
  }

  #left(): number {
    return this.fileSize - this.#pos
  }

  #preamble(): void {
    const magic = this.#bytes.subarray(this.#take(4), this.#pos)
    if (String.fromCharCode(...magic) !== 'GGUF')
      this.#fail(`not a GGUF file: it starts with ${[...magic].map((b) => b.toString(16).padStart(2, '0')).join(' ')}, not "GGUF"`)
    let version = this.#u32()
    if ((version & 0xffff) === 0) {
      // Read in the wrong order: a big-endian file (gguf-py's test, which ggml's reader leaves to the host).
      this.#little = false
      version = this.#view.getUint32(4, false)
    }
    if (version !== 2 && version !== 3) this.#fail(`GGUF version ${version} is not supported (versions 2 and 3 are)`)
    this.#version = version
    const countsAt = this.#pos
    const tensors = this.#u64()
    const keyValues = this.#u64()
    if (tensors * MIN_TENSOR_INFO + keyValues * MIN_KEY_VALUE > this.fileSize - PREAMBLE)
      this.#fail(
        `it claims ${this.#exact(countsAt)} tensors and ${this.#exact(countsAt + 8)} key-value pairs, more than the ${this.fileSize}-byte file can hold`,
      )
    this.#tensorCount = tensors
    this.#keyValues = keyValues
  }

  #string(): string {
    const at = this.#pos
    const length = this.#u64()
    if (length > this.#left() || length > MAX_STRING_BYTES)
      this.#fail(
        `the string at byte ${at} claims ${this.#exact(at)} bytes, more than ${length > MAX_STRING_BYTES ? `GGUF's limit of ${MAX_STRING_BYTES}` : `the ${this.#left()} left in the file`}`,
      )
    const start = this.#take(length)
    try {
      return utf8.decode(this.#bytes.subarray(start, this.#pos))
    } catch {
      this.#fail(`the string at byte ${at} is not UTF-8`)
    }
  }

  #keyValue(): void {
    this.#what = `key-value pair ${this.#keyValuesRead}`
    const key = this.#string()
    this.#what = `key ${JSON.stringify(key)}`
    if (Object.hasOwn(this.#types, key)) this.#fail('a duplicate key')
    const type = this.#u32()
    const { value, name } = this.#value(type, 0)
    if (key === 'general.alignment') {
      if (type !== 4) this.#fail(`general.alignment must be a UINT32, not a ${name}`)
      const alignment = value as number
      if (alignment === 0 || (alignment & (alignment - 1)) !== 0) this.#fail(`the alignment ${alignment} is not a power of two`)
      this.#alignment = alignment
    }
    // Last, so that an entry parsed again after more bytes arrive is added once.
    this.#metadata[key] = value
    this.#types[key] = name
    this.#keyValuesRead++
  }

  /** A value of type `type`, and the name of its type. */
  #value(type: number, depth: number): { value: GgufValue; name: string } {
    const spec = VALUE_TYPES[type]
    if (!spec) this.#fail(`unknown value type ${type} (GGUF's are 0 to ${VALUE_TYPES.length - 1})`)
    if (type === ARRAY) return this.#array(depth)
    if (type === STRING) return { value: this.#string(), name: spec.name }
    if (type === BOOL) return { value: this.#bytes[this.#take(1)] !== 0, name: spec.name }
    const size = DTYPE_INFO[spec.dtype!].bits / 8
    const at = this.#take(size)
    const view = this.#view
    const little = this.#little
    const value =
      spec.dtype === 'U64'
        ? view.getBigUint64(at, little)
        : spec.dtype === 'I64'
          ? view.getBigInt64(at, little)
          : spec.dtype === 'F64'
            ? view.getFloat64(at, little)
            : spec.dtype === 'F32'
              ? view.getFloat32(at, little)
              : this.#number(at, size, spec.dtype!.startsWith('I'))
    return { value, name: spec.name }
  }

  #number(at: number, size: number, signed: boolean): number {
    const view = this.#view
    if (size === 1) return signed ? view.getInt8(at) : view.getUint8(at)
    if (size === 2) return signed ? view.getInt16(at, this.#little) : view.getUint16(at, this.#little)
    return signed ? view.getInt32(at, this.#little) : view.getUint32(at, this.#little)
  }

  #array(depth: number): { value: GgufArray; name: string } {
    const type = this.#u32()
    const countAt = this.#pos
    const count = this.#u64()
    const spec = VALUE_TYPES[type]
    if (!spec) this.#fail(`an array of unknown value type ${type} (GGUF's are 0 to ${VALUE_TYPES.length - 1})`)
    if (depth + 1 >= MAX_DEPTH) this.#fail(`arrays nested deeper than ${MAX_DEPTH}`)
    if (count * MIN_BYTES[type] > this.#left() || count > MAX_ARRAY_ELEMENTS)
      this.#fail(
        `the array at byte ${countAt - 4} claims ${this.#exact(countAt)} elements of ${spec.name}, more than ${count > MAX_ARRAY_ELEMENTS ? `GGUF's limit of ${MAX_ARRAY_ELEMENTS}` : `the ${this.#left()} bytes left in the file hold`}`,
      )
    const name = `ARRAY[${spec.name}]`
    if (spec.dtype) {
      const Natural = DTYPE_INFO[spec.dtype].array
      const at = this.#take(count * Natural.BYTES_PER_ELEMENT)
      const bytes = this.#bytes.slice(at, this.#pos)
      if (!this.#little) swapElements(bytes, spec.dtype)
      return { value: new Natural(bytes.buffer) as GgufArray, name }
    }
    if (type === BOOL) {
      const at = this.#take(count)
      return { value: Array.from(this.#bytes.subarray(at, this.#pos), (b) => b !== 0), name }
    }
    const values: GgufValue[] = []
    for (let i = 0; i < count; i++) values.push(type === STRING ? this.#string() : this.#array(depth + 1).value)
    return { value: values as GgufArray, name }
  }

  #tensorInfo(): void {
    const index = this.#raw.length
    this.#what = `tensor info ${index}`
    const name = this.#string()
    this.#what = `tensor ${JSON.stringify(name)}`
    if (this.#names.has(name)) this.#fail('a duplicate tensor name')
    const dims = this.#u32()
    if (dims > MAX_DIMS) this.#fail(`${dims} dimensions, more than ggml's ${MAX_DIMS}`)
    const ne: number[] = []
    for (let d = 0; d < dims; d++) {
      const at = this.#pos
      const n = this.#u64()
      if (n > Number.MAX_SAFE_INTEGER) this.#fail(`dimension ${d} is ${this.#exact(at)}, above 2^53 - 1`)
      ne.push(n)
    }
    const id = this.#u32()
    const type = TYPE_BY_ID.get(id)
    if (type === undefined) this.#fail(`unknown ggml type ${id}`)
    const offsetAt = this.#pos
    const offset = this.#u64()
    this.#names.add(name)
    this.#raw.push({ name, ne, type, offset, entry: this.#entry, offsetAt })
  }

  /** The tensors checked against each other and the file, now that the data section's start is known. */
  #finish(): GgufHeader {
    const alignment = this.#alignment
    const dataStart = Math.ceil(this.#pos / alignment) * alignment
    const tensors = this.#raw.map(({ name, ne, type, offset, entry, offsetAt }) => {
      this.#what = `tensor ${JSON.stringify(name)}`
      this.#entry = entry
      const { block, bytes } = GGML_TYPES[type]
      const row = ne[0] ?? 1
      if (row % block !== 0) this.#fail(`rows of ${row} elements are not whole ${type} blocks of ${block}`)
      const elements = ne.reduce((a, b) => a * BigInt(b), 1n)
      const byteLength = (elements / BigInt(block)) * BigInt(bytes)
      if (offset % alignment !== 0) this.#fail(`its data offset ${this.#exact(offsetAt)} is not a multiple of the alignment ${alignment}`)
      const end = BigInt(dataStart + offset) + byteLength
      if (end > BigInt(this.fileSize))
        this.#fail(`its ${byteLength} bytes at byte ${dataStart + offset} run past the end of the ${this.fileSize}-byte file (to byte ${end})`)
      return { name, type, shape: [...ne].reverse(), byteLength: Number(byteLength), offset: dataStart + offset }
    })
    // Empty tensors hold no bytes to share.
    const byOffset = tensors.filter((t) => t.byteLength > 0).sort((a, b) => a.offset - b.offset)
    for (let i = 1; i < byOffset.length; i++) {
      const [before, after] = [byOffset[i - 1], byOffset[i]]
      if (after.offset < before.offset + before.byteLength)
        throw ggufError(
          `tensor ${JSON.stringify(after.name)} (bytes ${after.offset} to ${after.offset + after.byteLength}) overlaps tensor ${JSON.stringify(before.name)} (bytes ${before.offset} to ${before.offset + before.byteLength})`,
        )
    }
    return {
      version: this.#version,
      byteOrder: this.#little ? 'little' : 'big',
      alignment,
      metadata: this.#metadata,
      metadataTypes: this.#types,
      tensors,
      dataStart,
      fileSize: this.fileSize,
    }
  }
}

/**
 * Reads and checks a GGUF header from `source`: the first 64 KiB, then more as the parser needs, never past the
 * header.
 * @throws {@link index!SafetensorsError} `InvalidGguf` for a file that is not a GGUF this library reads; `Io`; `Aborted`.
 */
export async function readGgufHeader(source: RangeSource, signal?: AbortSignal): Promise<GgufHeader> {
  const { first, size } = await readFirst(source, signal)
  let bytes = first
  const parser = new GgufParser(size)
  for (;;) {
    const parsed = parser.parse(bytes)
    if (typeof parsed !== 'number') return parsed
    const grown = new Uint8Array(Math.min(size, Math.max(parsed, 2 * bytes.length)))
    grown.set(bytes)
    await readInto(source, bytes.length, grown.subarray(bytes.length), signal)
    bytes = grown
  }
}

/**
 * The header of a GGUF file held whole in `bytes`.
 * @throws {@link index!SafetensorsError} `InvalidGguf`
 */
export function parseGgufHeader(bytes: Uint8Array): GgufHeader {
  return new GgufParser(bytes.length).parse(bytes) as GgufHeader
}
