// The GGUF v3 container, as ggml's gguf.cpp reads it (docs/gguf.md): "GGUF", version 3, the tensor and
// key-value counts, the key-value pairs, the tensor infos, zero padding to the alignment, then each
// tensor's data at its offset, padded to the alignment. Every number is little-endian; a string is its
// UTF-8 byte length as a u64, then its bytes.

import { Q8_0_BLOCK, Q8_0_BLOCK_BYTES } from './q8_0.ts'

/** GGUF's value types, by the ids the format gives them. */
const VALUE_TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const

/** One metadata entry: its key, and a value of one of the types the converter writes. */
export type KeyValue =
  | { key: string; type: 'u32' | 'i32' | 'f32'; value: number }
  | { key: string; type: 'bool'; value: boolean }
  | { key: string; type: 'string'; value: string }
  | { key: string; type: 'string[]'; value: readonly string[] }
  | { key: string; type: 'i32[]'; value: ArrayLike<number> }

/** A ggml tensor type a GGUF of this converter holds (ggml.h's enum ggml_type). */
export type GgmlType = 'F32' | 'F16' | 'BF16' | 'Q8_0'

/** The ggml tensor types the converter writes, with their ids and their block size and bytes. */
export const GGML_TYPES: Readonly<Record<GgmlType, { id: number; block: number; bytes: number }>> = {
  F32: { id: 0, block: 1, bytes: 4 },
  F16: { id: 1, block: 1, bytes: 2 },
  Q8_0: { id: 8, block: Q8_0_BLOCK, bytes: Q8_0_BLOCK_BYTES },
  BF16: { id: 30, block: 1, bytes: 2 },
}

/** The alignment of the data section and of every tensor in it: ggml's default, also written as general.alignment. */
export const ALIGNMENT = 32

/** A tensor as the header describes it: dims in ggml's order (the innermost, a row's length, first). */
export interface TensorEntry {
  name: string
  dims: readonly number[]
  type: GgmlType
}

/** The bytes of `count` elements of `type`; count must be whole blocks. */
export function ggmlByteLength(type: GgmlType, count: number): number {
  const { block, bytes } = GGML_TYPES[type]
  return (count / block) * bytes
}

export function alignUp(n: number): number {
  return Math.ceil(n / ALIGNMENT) * ALIGNMENT
}

/** The header and where each tensor's data goes: `offsets` from the start of the data section, which begins at `head.length`. */
export interface EncodedHeader {
  head: Uint8Array
  offsets: number[]
  /** Byte length of each tensor's data, unpadded. */
  sizes: number[]
  fileSize: number
}

const encoder = new TextEncoder()

/** A growing little-endian byte buffer. */
class Bytes {
  #buffer = new Uint8Array(1 << 16)
  #view = new DataView(this.#buffer.buffer)
  length = 0

  #reserve(n: number): void {
    if (this.length + n <= this.#buffer.length) return
    const bigger = new Uint8Array(Math.max(this.#buffer.length * 2, this.length + n))
    bigger.set(this.#buffer.subarray(0, this.length))
    this.#buffer = bigger
    this.#view = new DataView(bigger.buffer)
  }

  u8(v: number): void {
    this.#reserve(1)
    this.#view.setUint8(this.length, v)
    this.length += 1
  }

  u32(v: number): void {
    this.#reserve(4)
    this.#view.setUint32(this.length, v, true)
    this.length += 4
  }

  i32(v: number): void {
    this.#reserve(4)
    this.#view.setInt32(this.length, v, true)
    this.length += 4
  }

  f32(v: number): void {
    this.#reserve(4)
    this.#view.setFloat32(this.length, v, true)
    this.length += 4
  }

  u64(v: number): void {
    this.#reserve(8)
    this.#view.setBigUint64(this.length, BigInt(v), true)
    this.length += 8
  }

  string(s: string): void {
    const bytes = encoder.encode(s)
    this.u64(bytes.length)
    this.#reserve(bytes.length)
    this.#buffer.set(bytes, this.length)
    this.length += bytes.length
  }

  /** The bytes so far, zero-padded to `size`. */
  take(size: number): Uint8Array {
    this.#reserve(size - this.length)
    return this.#buffer.slice(0, size)
  }
}

function writeValue(out: Bytes, kv: KeyValue): void {
  switch (kv.type) {
    case 'u32':
      out.u32(VALUE_TYPE.u32)
      return out.u32(kv.value)
    case 'i32':
      out.u32(VALUE_TYPE.i32)
      return out.i32(kv.value)
    case 'f32':
      out.u32(VALUE_TYPE.f32)
      return out.f32(kv.value)
    case 'bool':
      out.u32(VALUE_TYPE.bool)
      return out.u8(kv.value ? 1 : 0)
    case 'string':
      out.u32(VALUE_TYPE.string)
      return out.string(kv.value)
    case 'string[]':
      out.u32(VALUE_TYPE.array)
      out.u32(VALUE_TYPE.string)
      out.u64(kv.value.length)
      for (const s of kv.value) out.string(s)
      return
    case 'i32[]':
      out.u32(VALUE_TYPE.array)
      out.u32(VALUE_TYPE.i32)
      out.u64(kv.value.length)
      for (let i = 0; i < kv.value.length; i++) out.i32(kv.value[i])
      return
  }
}

/** The header of a GGUF v3 file holding `metadata` and `tensors`, in that order, with every offset known before any data. */
export function encodeHeader(metadata: readonly KeyValue[], tensors: readonly TensorEntry[]): EncodedHeader {
  const out = new Bytes()
  for (const c of 'GGUF') out.u8(c.charCodeAt(0))
  out.u32(3)
  out.u64(tensors.length)
  out.u64(metadata.length)
  for (const kv of metadata) {
    out.string(kv.key)
    writeValue(out, kv)
  }
  const offsets: number[] = []
  const sizes: number[] = []
  let offset = 0
  for (const t of tensors) {
    const size = ggmlByteLength(
      t.type,
      t.dims.reduce((a, b) => a * b, 1),
    )
    out.string(t.name)
    out.u32(t.dims.length)
    for (const d of t.dims) out.u64(d)
    out.u32(GGML_TYPES[t.type].id)
    out.u64(offset)
    offsets.push(offset)
    sizes.push(size)
    offset = alignUp(offset + size)
  }
  const head = out.take(alignUp(out.length))
  return { head, offsets, sizes, fileSize: head.length + offset }
}
