// The GGUF v3 container, as ggml's gguf.cpp reads it: "GGUF", version 3, the tensor and key-value counts,
// the key-value pairs, the tensor infos, zero padding to the alignment, then each tensor's data at its
// offset, padded to the alignment. Numbers are little-endian; a string is its UTF-8 length as a u64, then
// its bytes.
import { GGML_TYPES, type GgmlType, ggmlByteLength } from './ggml-types.ts'

/** GGUF's ids of the value types the converter writes (an array is 9, then its element type and count). */
const VALUE_TYPES = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8 } as const

type Scalar = keyof typeof VALUE_TYPES

/** One metadata entry: its key, its type (a scalar, or an array of strings, i32 or f32), its value. */
export type KeyValue = [key: string, type: Scalar | 'string[]' | 'i32[]' | 'f32[]', value: number | boolean | string | ArrayLike<string | number>]

/** The alignment of the data section and of every tensor in it: ggml's default, also written as general.alignment. */
export const ALIGNMENT = 32

export const alignUp = (n: number) => Math.ceil(n / ALIGNMENT) * ALIGNMENT

/** A tensor as the header describes it: dims in ggml's order (the innermost, a row's length, first). */
export interface TensorEntry {
  name: string
  dims: readonly number[]
  type: GgmlType
}

/** The header, each tensor's data size and the file's size; the data section starts at `head.length`, the tensors at alignUp of the sizes before them. */
export interface EncodedHeader {
  head: Uint8Array
  sizes: number[]
  fileSize: number
}

const encoder = new TextEncoder()

/**
 * A growing buffer of little-endian numbers and strings. A vocabulary writes 10^5 strings here: each is encoded in
 * place, with no array, view or BigInt made for it.
 */
class Bytes {
  buffer = new Uint8Array(1 << 16)
  view = new DataView(this.buffer.buffer)
  length = 0

  /** Where the next `n` bytes go, which it takes. A write takes its bytes before it reads this.view, which taking may replace. */
  take(n: number): number {
    const at = this.length
    if ((this.length += n) > this.buffer.length) {
      const bigger = new Uint8Array(2 * this.length)
      bigger.set(this.buffer)
      this.buffer = bigger
      this.view = new DataView(bigger.buffer)
    }
    return at
  }

  u64(v: number, at = this.take(8)): void {
    this.view.setUint32(at, v % 2 ** 32, true)
    this.view.setUint32(at + 4, v / 2 ** 32, true)
  }

  scalar(type: Scalar, v: unknown): void {
    if (type === 'string') {
      const text = v as string
      // Room for its longest UTF-8 (3 bytes a UTF-16 unit), then only what it took; its length goes before it.
      const at = this.take(8 + 3 * text.length)
      this.length = at + 8 + encoder.encodeInto(text, this.buffer.subarray(at + 8)).written
      this.u64(this.length - at - 8, at)
    } else {
      const at = this.take(type === 'bool' ? 1 : 4)
      // A bool's byte: true is 1.
      if (type === 'bool') this.buffer[at] = v as number
      else if (type === 'f32') this.view.setFloat32(at, v as number, true)
      else this.view[type === 'u32' ? 'setUint32' : 'setInt32'](at, v as number, true)
    }
  }
}

/** The header of a GGUF v3 file of `metadata` and `tensors`: every offset follows from the shapes and types, before any data. */
export function encodeHeader(metadata: readonly KeyValue[], tensors: readonly TensorEntry[]): EncodedHeader {
  const out = new Bytes()
  out.scalar('u32', 0x46554747) // "GGUF"
  out.scalar('u32', 3)
  out.u64(tensors.length)
  out.u64(metadata.length)
  for (const [key, type, value] of metadata) {
    out.scalar('string', key)
    if (type.endsWith('[]')) {
      const element = type.slice(0, -2) as Scalar
      const values = value as ArrayLike<unknown>
      out.scalar('u32', 9)
      out.scalar('u32', VALUE_TYPES[element])
      out.u64(values.length)
      for (let i = 0; i < values.length; i++) out.scalar(element, values[i])
    } else {
      out.scalar('u32', VALUE_TYPES[type as Scalar])
      out.scalar(type as Scalar, value)
    }
  }
  const sizes: number[] = []
  let offset = 0
  for (const { name, dims, type } of tensors) {
    out.scalar('string', name)
    out.scalar('u32', dims.length)
    for (const d of dims) out.u64(d)
    out.scalar('u32', GGML_TYPES[type].id)
    out.u64(offset)
    const size = ggmlByteLength(
      type,
      dims.reduce((a, b) => a * b, 1),
    )
    sizes.push(size)
    offset = alignUp(offset + size)
  }
  const head = new Uint8Array(alignUp(out.length))
  head.set(out.buffer.subarray(0, out.length))
  return { head, sizes, fileSize: head.length + offset }
}
