// The writer's layout, byte for byte the reference writer's: tensors sorted by dtype (descending in the
// format's dtype order) then by name, packed with no gaps; a compact JSON header with __metadata__ first,
// padded with spaces to a multiple of 8. With the widest dtypes first and the data section 8-aligned,
// every tensor starts aligned to its own element size.
import { DTYPE_INFO, DTYPES, type DType, isDType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { MAX_HEADER_SIZE } from './header.ts'

/** A tensor to be written, before its data: what {@link planLayout} and {@link SafetensorsWriter.create} take. */
export interface TensorDeclaration {
  /** Its name in the file; unique, not `__metadata__`. */
  readonly name: string
  /** The dtype of its elements. */
  readonly dtype: DType
  /** Its dimensions; `[]` for a scalar. */
  readonly shape: readonly number[]
}

/** A tensor's place in a planned file. */
export interface LayoutEntry extends TensorDeclaration {
  /** [begin, end) relative to the data section. */
  readonly dataOffsets: [number, number]
}

/** A planned file, from {@link planLayout}: its first bytes, and where each tensor's data goes. */
export interface Layout {
  /** The 8-byte length prefix and the padded header: the file's first `dataStart` bytes. */
  readonly head: Uint8Array
  /** File offset of the data section: the length of `head`. */
  readonly dataStart: number
  /** The whole file's size in bytes. */
  readonly fileSize: number
  /** In layout (file) order. */
  readonly entries: LayoutEntry[]
}

const RANK = new Map<string, number>(DTYPES.map((d, i) => [d, i]))

function invalid(message: string): SafetensorsError {
  return new SafetensorsError('InvalidHeaderDeserialization', message)
}

/** Byte length of a tensor, checked as a reader would check it. */
export function tensorByteLength(t: TensorDeclaration): number {
  const where = `tensor ${JSON.stringify(t.name)}`
  if (!isDType(t.dtype)) throw invalid(`${where}: unknown dtype ${JSON.stringify(t.dtype)} (expected one of ${DTYPES.join(', ')})`)
  if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw invalid(`${where}: shape must be an array of non-negative integers, got ${JSON.stringify(t.shape)}`)
  }
  const elements = t.shape.reduce((a, b) => a * b, 1)
  const bits = elements * DTYPE_INFO[t.dtype].bits
  if (!Number.isSafeInteger(bits)) throw new SafetensorsError('ValidationOverflow', `${where}: shape [${t.shape.join(', ')}] is too large`)
  if (bits % 8 !== 0)
    throw new SafetensorsError('MisalignedSlice', `${where}: ${elements} elements of ${t.dtype} take ${bits} bits, not a whole number of bytes`)
  return bits / 8
}

/**
 * Plans the file for these tensors, laid out as the reference writer lays them out (sorted by dtype, widest
 * first, then by name; or in the order given with `keepOrder`); validates everything a reader will check,
 * before any byte is written.
 * @throws {@link SafetensorsError} `InvalidHeaderDeserialization` (a duplicate or reserved
 * name, a name or metadata that is not a well-formed string, an unknown dtype, a bad shape), `ValidationOverflow`
 * (a shape too large), `MisalignedSlice` (F4 or F6 elements that are not whole bytes), `HeaderTooLarge` (the header would pass 100,000,000 bytes).
 */
export function planLayout(tensors: readonly TensorDeclaration[], metadata?: Record<string, string> | null, keepOrder = false): Layout {
  const names = new Set<string>()
  for (const t of tensors) {
    if (typeof t.name !== 'string' || !t.name.isWellFormed()) throw invalid(`tensor name ${JSON.stringify(t.name)} must be a well-formed string`)
    if (t.name === '__metadata__') throw invalid('"__metadata__" is reserved and cannot name a tensor')
    if (names.has(t.name)) throw invalid(`duplicate tensor name ${JSON.stringify(t.name)}`)
    names.add(t.name)
  }
  if (metadata != null) {
    if (typeof metadata !== 'object' || Array.isArray(metadata)) throw invalid('metadata must be an object of strings')
    for (const [key, value] of Object.entries(metadata)) {
      if (typeof value !== 'string') throw invalid(`metadata ${JSON.stringify(key)} must be a string, got ${typeof value}`)
      if (!key.isWellFormed() || !value.isWellFormed()) throw invalid(`metadata ${JSON.stringify(key)} is not a well-formed string`)
    }
  }
  const sizes = new Map(tensors.map((t) => [t, tensorByteLength(t)]))
  const sorted = keepOrder ? tensors : [...tensors].sort((a, b) => RANK.get(b.dtype)! - RANK.get(a.dtype)! || compareCodePoints(a.name, b.name))
  let offset = 0
  const entries = sorted.map((t): LayoutEntry => {
    const begin = offset
    offset += sizes.get(t)!
    return { name: t.name, dtype: t.dtype, shape: [...t.shape], dataOffsets: [begin, offset] }
  })

  const parts: string[] = []
  if (metadata != null) parts.push(`"__metadata__":${JSON.stringify(metadata)}`)
  for (const e of entries)
    parts.push(`${JSON.stringify(e.name)}:{"dtype":"${e.dtype}","shape":[${e.shape.join(',')}],"data_offsets":[${e.dataOffsets[0]},${e.dataOffsets[1]}]}`)
  const json = new TextEncoder().encode(`{${parts.join(',')}}`)
  const n = json.length + ((8 - (json.length % 8)) % 8)
  if (n > MAX_HEADER_SIZE) throw new SafetensorsError('HeaderTooLarge', `the header would be ${n} bytes, above the limit of ${MAX_HEADER_SIZE}`)
  const head = new Uint8Array(8 + n).fill(0x20, 8 + json.length)
  new DataView(head.buffer).setBigUint64(0, BigInt(n), true)
  head.set(json, 8)
  return { head, dataStart: 8 + n, fileSize: 8 + n + offset, entries }
}

/** Orders names by their UTF-8 bytes (code point order), as the reference writer's Rust String order does. */
export function compareCodePoints(a: string, b: string): number {
  let k = 0
  while (k < a.length && k < b.length && a.charCodeAt(k) === b.charCodeAt(k)) k++
  if (k === a.length || k === b.length) return a.length - b.length
  return codePointRank(a.charCodeAt(k)) - codePointRank(b.charCodeAt(k))
}

// UTF-16 order differs from code point order only in that surrogates (code points above U+FFFF) sort
// below U+E000..U+FFFF: move them above.
function codePointRank(unit: number): number {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000
  if (unit >= 0xe000) return unit - 0x800
  return unit
}
