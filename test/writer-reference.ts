// Independent references for the writer tests (issue 5). Nothing here imports the library: the file layout
// of the reference writer (Rust safetensors + serde_json), Python's json.dumps(indent=2, sort_keys=True) as
// transformers writes model.safetensors.index.json, round-to-nearest-even float encoders written with
// plain double arithmetic, and small decoders. Written from the format description, not from src/.
import { mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** The format's dtype list, in the format's order, with bits per element (DESIGN.md, "The format"). */
export const REF_DTYPES: ReadonlyArray<readonly [string, number]> = [
  ['BOOL', 8],
  ['F4', 4],
  ['F6_E2M3', 6],
  ['F6_E3M2', 6],
  ['U8', 8],
  ['I8', 8],
  ['F8_E5M2', 8],
  ['F8_E4M3', 8],
  ['F8_E8M0', 8],
  ['F8_E4M3FNUZ', 8],
  ['F8_E5M2FNUZ', 8],
  ['I16', 16],
  ['U16', 16],
  ['F16', 16],
  ['BF16', 16],
  ['I32', 32],
  ['U32', 32],
  ['F32', 32],
  ['C64', 64],
  ['F64', 64],
  ['I64', 64],
  ['U64', 64],
]
const RANK = new Map(REF_DTYPES.map(([d], i) => [d, i]))
const BITS = new Map(REF_DTYPES)

export function dtypeRank(dtype: string): number {
  const r = RANK.get(dtype)
  if (r === undefined) throw new Error(`reference: unknown dtype ${dtype}`)
  return r
}

export function dtypeBits(dtype: string): number {
  const b = BITS.get(dtype)
  if (b === undefined) throw new Error(`reference: unknown dtype ${dtype}`)
  return b
}

/** Bytes of a tensor: product of the shape times bits / 8 (the caller makes it whole). */
export function byteSize(dtype: string, shape: readonly number[]): number {
  return (shape.reduce((a, b) => a * b, 1) * dtypeBits(dtype)) / 8
}

const utf8Encoder = new TextEncoder()
export const utf8 = (s: string): Uint8Array => utf8Encoder.encode(s)

/** Byte order of the UTF-8 encodings (what Rust's String Ord does). */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'))
}

/**
 * A JSON string literal as serde_json writes it: `"` and `\` escaped, \b \f \n \r \t short forms, other
 * control characters below 0x20 as \u00XX with lowercase hex, everything else (DEL, '/', non-ASCII) raw.
 */
export function serdeString(s: string): string {
  let out = '"'
  for (const ch of s) {
    const c = ch.codePointAt(0)!
    if (ch === '"') out += '\\"'
    else if (ch === '\\') out += '\\\\'
    else if (c === 0x08) out += '\\b'
    else if (c === 0x0c) out += '\\f'
    else if (c === 0x0a) out += '\\n'
    else if (c === 0x0d) out += '\\r'
    else if (c === 0x09) out += '\\t'
    else if (c < 0x20) out += `\\u00${c.toString(16).padStart(2, '0')}`
    else out += ch
  }
  return `${out}"`
}

export interface RefTensor {
  name: string
  dtype: string
  shape: number[]
  /** Raw little-endian bytes. */
  bytes: Uint8Array
}

/** Tensors in the reference writer's order: dtype descending in the format's list, then UTF-8 bytes of the name. */
export function referenceOrder<T extends { name: string; dtype: string }>(tensors: readonly T[]): T[] {
  return [...tensors].sort((a, b) => dtypeRank(b.dtype) - dtypeRank(a.dtype) || compareUtf8(a.name, b.name))
}

/**
 * The header text the reference writer produces (before padding). `metadata` is a list of pairs so the
 * order is explicit; the Rust writer keeps metadata in a HashMap, so only a single key has a defined order.
 */
export function referenceHeaderText(
  tensors: ReadonlyArray<{ name: string; dtype: string; shape: number[] }>,
  metadata?: ReadonlyArray<readonly [string, string]>,
): string {
  const parts: string[] = []
  if (metadata) parts.push(`"__metadata__":{${metadata.map(([k, v]) => `${serdeString(k)}:${serdeString(v)}`).join(',')}}`)
  let offset = 0
  for (const t of referenceOrder(tensors)) {
    const size = byteSize(t.dtype, t.shape)
    parts.push(`${serdeString(t.name)}:{"dtype":"${t.dtype}","shape":[${t.shape.join(',')}],"data_offsets":[${offset},${offset + size}]}`)
    offset += size
  }
  return `{${parts.join(',')}}`
}

/** A whole file as the reference writer lays it out: u64 LE N | header padded with spaces to 8 | data. */
export function referenceFile(tensors: readonly RefTensor[], metadata?: ReadonlyArray<readonly [string, string]>): Uint8Array {
  const json = utf8(referenceHeaderText(tensors, metadata))
  const n = Math.ceil(json.length / 8) * 8
  const ordered = referenceOrder(tensors)
  const dataSize = ordered.reduce((s, t) => s + t.bytes.length, 0)
  const out = new Uint8Array(8 + n + dataSize)
  new DataView(out.buffer).setBigUint64(0, BigInt(n), true)
  out.set(json, 8)
  out.fill(0x20, 8 + json.length, 8 + n)
  let at = 8 + n
  for (const t of ordered) {
    if (t.bytes.length !== byteSize(t.dtype, t.shape))
      throw new Error(`reference: ${t.name} has ${t.bytes.length} bytes, expected ${byteSize(t.dtype, t.shape)}`)
    out.set(t.bytes, at)
    at += t.bytes.length
  }
  return out
}

/** N, the header text (untrimmed) and the data start of a file. */
export function splitFile(bytes: Uint8Array): { n: number; text: string; dataStart: number } {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true))
  return { n, text: new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n)), dataStart: 8 + n }
}

/**
 * The top-level entries of a header object in the order they appear in the text (JSON.parse would put
 * integer-like keys first). Each value is returned as parsed JSON.
 */
export function orderedEntries(text: string): Array<[string, unknown]> {
  let i = 0
  const ws = () => {
    while (i < text.length && ' \t\r\n'.includes(text[i])) i++
  }
  const stringEnd = (from: number): number => {
    let j = from + 1
    while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1
    return j + 1
  }
  const valueEnd = (from: number): number => {
    const c = text[from]
    if (c === '"') return stringEnd(from)
    if (c !== '{' && c !== '[') {
      let j = from
      while (j < text.length && !',}] \t\r\n'.includes(text[j])) j++
      return j
    }
    let depth = 0
    let j = from
    do {
      if (text[j] === '"') {
        j = stringEnd(j)
        continue
      }
      if (text[j] === '{' || text[j] === '[') depth++
      else if (text[j] === '}' || text[j] === ']') depth--
      j++
    } while (depth > 0)
    return j
  }
  const out: Array<[string, unknown]> = []
  ws()
  if (text[i] !== '{') throw new Error('not an object')
  i++
  ws()
  if (text[i] === '}') return out
  for (;;) {
    ws()
    const keyEnd = stringEnd(i)
    const key = JSON.parse(text.slice(i, keyEnd)) as string
    i = keyEnd
    ws()
    if (text[i] !== ':') throw new Error(`expected : at ${i}`)
    i++
    ws()
    const end = valueEnd(i)
    out.push([key, JSON.parse(text.slice(i, end))])
    i = end
    ws()
    if (text[i] === ',') {
      i++
      continue
    }
    if (text[i] === '}') return out
    throw new Error(`expected , or } at ${i}`)
  }
}

/** Python's json.dumps(value, indent=2, sort_keys=True) (ensure_ascii on, as by default), for str/int/dict. */
export function pythonJsonDumps(value: unknown, indent = 0): string {
  const pad = (k: number) => ' '.repeat(k)
  if (typeof value === 'string') {
    let out = '"'
    for (let k = 0; k < value.length; k++) {
      const c = value.charCodeAt(k) // UTF-16 units: Python writes astral characters as surrogate-pair escapes
      if (value[k] === '"') out += '\\"'
      else if (value[k] === '\\') out += '\\\\'
      else if (c === 0x0a) out += '\\n'
      else if (c === 0x0d) out += '\\r'
      else if (c === 0x09) out += '\\t'
      else if (c === 0x08) out += '\\b'
      else if (c === 0x0c) out += '\\f'
      else if (c < 0x20 || c > 0x7e) out += `\\u${c.toString(16).padStart(4, '0')}`
      else out += value[k]
    }
    return `${out}"`
  }
  if (typeof value === 'number') return String(value)
  if (value && typeof value === 'object') {
    // sort_keys: Python compares str by code point
    const keys = Object.keys(value).sort((a, b) => compareUtf8(a, b))
    if (keys.length === 0) return '{}'
    const items = keys.map((k) => `${pad(indent + 2)}${pythonJsonDumps(k)}: ${pythonJsonDumps((value as Record<string, unknown>)[k], indent + 2)}`)
    return `{\n${items.join(',\n')}\n${pad(indent)}}`
  }
  throw new Error(`pythonJsonDumps: unsupported ${typeof value}`)
}

// ---- floats ----

function roundHalfEven(x: number): number {
  const r = Math.floor(x)
  const d = x - r
  if (d > 0.5 || (d === 0.5 && r % 2 === 1)) return r + 1
  return r
}

/**
 * Encodes a double as an IEEE-style binary format with `expBits`/`manBits`, rounding to nearest, ties to
 * even, overflowing to infinity; NaN becomes the canonical quiet NaN. Exact for inputs that are floats of
 * at most 53 significant bits (scaling by powers of two is exact in double arithmetic).
 */
export function encodeIeee(x: number, expBits: number, manBits: number): number {
  const signBit = 2 ** (expBits + manBits)
  const expAll = 2 ** expBits - 1
  if (Number.isNaN(x)) return expAll * 2 ** manBits + 2 ** (manBits - 1)
  const sign = x < 0 || Object.is(x, -0) ? signBit : 0
  const a = Math.abs(x)
  if (a === Infinity) return sign + expAll * 2 ** manBits
  if (a === 0) return sign
  const bias = 2 ** (expBits - 1) - 1
  const emin = 1 - bias
  if (a < 2 ** emin) {
    const q = roundHalfEven(a / 2 ** (emin - manBits))
    return sign + q // q === 2^manBits is the smallest normal, as it should be
  }
  let e = Math.floor(Math.log2(a))
  while (2 ** e > a) e--
  while (2 ** (e + 1) <= a) e++
  let m = roundHalfEven(a / 2 ** (e - manBits))
  if (m === 2 ** (manBits + 1)) {
    m = 2 ** manBits
    e++
  }
  const biased = e + bias
  if (biased >= expAll) return sign + expAll * 2 ** manBits
  return sign + biased * 2 ** manBits + (m - 2 ** manBits)
}

/** Float32 bits -> float16 bits, round to nearest even. */
export const f32ToF16 = (x: number): number => encodeIeee(x, 5, 10)
/** Float32 bits -> bfloat16 bits, round to nearest even. */
export const f32ToBF16 = (x: number): number => encodeIeee(x, 8, 7)

/** Decodes an IEEE-style binary format (with infinities and NaNs at the top exponent). */
export function decodeIeee(bits: number, expBits: number, manBits: number): number {
  const sign = Math.floor(bits / 2 ** (expBits + manBits)) % 2 ? -1 : 1
  const exp = Math.floor(bits / 2 ** manBits) % 2 ** expBits
  const man = bits % 2 ** manBits
  const bias = 2 ** (expBits - 1) - 1
  if (exp === 2 ** expBits - 1) return man === 0 ? sign * Infinity : NaN
  if (exp === 0) return sign * man * 2 ** (1 - bias - manBits)
  return sign * (1 + man / 2 ** manBits) * 2 ** (exp - bias)
}

export const decodeF16 = (bits: number): number => decodeIeee(bits, 5, 10)
export const decodeBF16 = (bits: number): number => decodeIeee(bits, 8, 7)
export const decodeF8E5M2 = (bits: number): number => decodeIeee(bits, 5, 2)
/** F8_E4M3 (the "fn" variant): no infinities, NaN only at S.1111.111, max 448. */
export function decodeF8E4M3(bits: number): number {
  const sign = bits & 0x80 ? -1 : 1
  const exp = (bits >> 3) & 0xf
  const man = bits & 7
  if (exp === 15 && man === 7) return NaN
  if (exp === 0) return sign * man * 2 ** -9
  return sign * (1 + man / 8) * 2 ** (exp - 7)
}

// ---- misc ----

export function randomBytes(n: number, next: () => number): Uint8Array {
  const out = new Uint8Array(n)
  for (let i = 0; i < n; i++) out[i] = (next() * 256) | 0
  return out
}

/** A fresh empty directory under the OS temp folder. */
export function tempDir(prefix = 'st-writer-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

/** Sorted directory listing. */
export function ls(dir: string): string[] {
  return readdirSync(dir).sort()
}

export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** First index where two byte arrays differ, or -1. */
export function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i
  return a.length === b.length ? -1 : n
}
