// GGUF files byte by byte, for the tests of the GGUF reader and its fuzzing: a writer of the tests' own, from the
// format's definition (ggml's docs/gguf.md, gguf-py's GGUFWriter), that writes what it is told, lies included:
// counts, lengths, types, offsets and the version are the caller's to set. It knows nothing of the library.
import { GGML_TYPES, type GgmlTypeName } from './ggml.ts'

/** GGUF's value type ids (gguf-py's GGUFValueType). */
export const VALUE_TYPE = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const
export type ValueTypeName = keyof typeof VALUE_TYPE

/** A scalar of one of GGUF's types, or an array: of scalars of `of`, or of arrays. */
export type Value =
  | { type: Exclude<ValueTypeName, 'ARRAY'>; value: number | bigint | boolean | string }
  | { type: 'ARRAY'; of: ValueTypeName; values: Array<number | bigint | boolean | string | Value>; count?: bigint }

export interface TensorSpec {
  name: string
  /** Dims in ggml's order: a row's length first. */
  ne: Array<number | bigint>
  /** A type name, or any id (an unknown one). */
  type: GgmlTypeName | number
  /** The tensor's data, as stored. */
  data: Uint8Array
  /** Its offset in the data section; default: after the previous tensor, aligned. */
  offset?: bigint
}

export interface GgufSpec {
  version?: number
  bigEndian?: boolean
  /** The alignment the layout uses (write general.alignment in `metadata` yourself); default 32. */
  alignment?: number
  metadata?: Array<[string, Value]>
  tensors?: TensorSpec[]
  /** Counts to claim instead of the real ones. */
  tensorCount?: bigint
  keyValueCount?: bigint
}

/** A growing byte buffer of numbers in one byte order. */
export class ByteWriter {
  bytes = new Uint8Array(256)
  length = 0
  constructor(readonly little = true) {}

  #view(n: number): DataView {
    if (this.length + n > this.bytes.length) {
      const bigger = new Uint8Array(Math.max(2 * this.bytes.length, this.length + n))
      bigger.set(this.bytes)
      this.bytes = bigger
    }
    this.length += n
    return new DataView(this.bytes.buffer, this.length - n, n)
  }

  raw(bytes: Uint8Array): void {
    const at = this.#view(bytes.length).byteOffset
    this.bytes.set(bytes, at)
  }
  u8 = (v: number) => this.#view(1).setUint8(0, v)
  u32 = (v: number) => this.#view(4).setUint32(0, v, this.little)
  u64 = (v: number | bigint) => this.#view(8).setBigUint64(0, BigInt(v), this.little)
  string(s: string, claimed?: bigint): void {
    const bytes = new TextEncoder().encode(s)
    this.u64(claimed ?? BigInt(bytes.length))
    this.raw(bytes)
  }
  pad(alignment: number): void {
    while (this.length % alignment !== 0) this.u8(0)
  }
  done(): Uint8Array {
    return this.bytes.slice(0, this.length)
  }
}

function scalar(out: ByteWriter, type: ValueTypeName, v: number | bigint | boolean | string | Value): void {
  const view = (n: number) => {
    const at = out.length
    out.raw(new Uint8Array(n))
    return new DataView(out.bytes.buffer, at, n)
  }
  const le = out.little
  switch (type) {
    case 'UINT8':
      return view(1).setUint8(0, v as number)
    case 'INT8':
      return view(1).setInt8(0, v as number)
    case 'UINT16':
      return view(2).setUint16(0, v as number, le)
    case 'INT16':
      return view(2).setInt16(0, v as number, le)
    case 'UINT32':
      return view(4).setUint32(0, v as number, le)
    case 'INT32':
      return view(4).setInt32(0, v as number, le)
    case 'FLOAT32':
      return view(4).setFloat32(0, v as number, le)
    case 'BOOL':
      return view(1).setUint8(0, typeof v === 'number' ? v : v ? 1 : 0)
    case 'STRING':
      return out.string(v as string)
    case 'UINT64':
      return view(8).setBigUint64(0, BigInt(v as bigint), le)
    case 'INT64':
      return view(8).setBigInt64(0, BigInt(v as bigint), le)
    case 'FLOAT64':
      return view(8).setFloat64(0, v as number, le)
    case 'ARRAY': {
      const a = v as Extract<Value, { type: 'ARRAY' }>
      out.u32(VALUE_TYPE[a.of])
      out.u64(a.count ?? BigInt(a.values.length))
      for (const item of a.values) scalar(out, a.of, item)
    }
  }
}

/** A value as GGUF stores it after its key: its type id, then the value. */
export function writeValue(out: ByteWriter, value: Value): void {
  out.u32(VALUE_TYPE[value.type])
  scalar(out, value.type, value.type === 'ARRAY' ? value : value.value)
}

/** A GGUF file of `spec`: the header, padding, then each tensor's data at its offset. */
export function ggufBytes(spec: GgufSpec): Uint8Array {
  const out = new ByteWriter(!spec.bigEndian)
  const alignment = spec.alignment ?? 32
  const metadata = spec.metadata ?? []
  const tensors = spec.tensors ?? []
  out.raw(new TextEncoder().encode('GGUF'))
  out.u32(spec.version ?? 3)
  out.u64(spec.tensorCount ?? BigInt(tensors.length))
  out.u64(spec.keyValueCount ?? BigInt(metadata.length))
  for (const [key, value] of metadata) {
    out.string(key)
    writeValue(out, value)
  }
  let next = 0n
  const offsets = tensors.map((t) => {
    const offset = t.offset ?? next
    next = ((offset + BigInt(t.data.length) + BigInt(alignment) - 1n) / BigInt(alignment)) * BigInt(alignment)
    return offset
  })
  tensors.forEach((t, i) => {
    out.string(t.name)
    out.u32(t.ne.length)
    for (const n of t.ne) out.u64(n)
    out.u32(typeof t.type === 'number' ? t.type : GGML_TYPES[t.type])
    out.u64(offsets[i])
  })
  out.pad(alignment)
  const dataStart = out.length
  for (const [i, t] of tensors.entries()) {
    const at = dataStart + Number(offsets[i])
    while (out.length < at) out.u8(0)
    if (out.length === at) out.raw(t.data)
  }
  return out.done()
}
