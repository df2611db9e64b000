// Small helpers shared by the header tests: building files from header text, listing fixtures,
// printing bytes readably. Nothing here knows about the implementation.
import { readdirSync } from 'node:fs'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Header } from '../src/index.ts'

export const FIXTURES_REAL = fileURLToPath(new URL('./fixtures/real/', import.meta.url))
export const FIXTURES_GOLDEN = fileURLToPath(new URL('./fixtures/golden/', import.meta.url))
/** The reference's verdicts on JSON numbers about the largest double (fixtures/numbers/make_numbers.py). */
export const FIXTURES_NUMBERS = fileURLToPath(new URL('./fixtures/numbers/', import.meta.url))

const encoder = new TextEncoder()

/** A parsed header's tensors as plain data (arrays for shape and offsets), as a reference or golden file has them. */
export function plainTensors(header: Header) {
  return header.tensors.map((t) => ({
    name: t.name,
    dtype: t.dtype,
    shape: Array.from(t.shape),
    dataOffsets: [t.dataOffsets[0], t.dataOffsets[1]] as [number, number],
    byteLength: t.byteLength,
  }))
}

/** UTF-8 bytes of a string. */
export function utf8(s: string): Uint8Array {
  return encoder.encode(s)
}

/** Concatenates byte arrays. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}

/**
 * A file: 8-byte little-endian N | header | dataLength zero bytes.
 * N defaults to the header's byte length; pass `n` to lie about it.
 */
export function makeFile(header: string | Uint8Array, dataLength = 0, n?: number | bigint): Uint8Array {
  const h = typeof header === 'string' ? utf8(header) : header
  const out = new Uint8Array(8 + h.length + dataLength)
  new DataView(out.buffer).setBigUint64(0, BigInt(n ?? h.length), true)
  out.set(h, 8)
  return out
}

/** One tensor entry as JSON text: "name":{"dtype":..,"shape":[..],"data_offsets":[b,e]}. */
export function entry(name: string, dtype: string, shape: Array<number | string>, begin: number | string, end: number | string): string {
  return `${JSON.stringify(name)}:{"dtype":${JSON.stringify(dtype)},"shape":[${shape.join(',')}],"data_offsets":[${begin},${end}]}`
}

/** A header object from entry() strings. */
export function obj(...entries: string[]): string {
  return `{${entries.join(',')}}`
}

/** Every .safetensors file under test/fixtures/real, as paths relative to it ("/"-separated). */
export function realFixtures(): { valid: string[]; invalid: string[] } {
  const all: string[] = []
  const walk = (dir: string) => {
    for (const d of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, d.name)
      if (d.isDirectory()) walk(p)
      else if (d.name.endsWith('.safetensors')) all.push(relative(FIXTURES_REAL, p).split(sep).join('/'))
    }
  }
  walk(FIXTURES_REAL)
  all.sort()
  return {
    valid: all.filter((f) => !f.startsWith('invalid/')),
    invalid: all.filter((f) => f.startsWith('invalid/')),
  }
}

/** The golden file name for a fixture path, of its header table or its values (as written by make_golden.py). */
export function goldenName(fixture: string, kind: 'header' | 'values' = 'header'): string {
  return `${fixture.split('/').join('__')}.${kind}.json`
}

/** The golden files of one kind in FIXTURES_GOLDEN, sorted. */
export function goldenFiles(kind: 'header' | 'values'): string[] {
  return readdirSync(FIXTURES_GOLDEN)
    .filter((g) => g.endsWith(`.${kind}.json`))
    .sort()
}

/** Bytes as readable text: printable ASCII as is, everything else as \xNN (for failure messages). */
export function escapeBytes(b: Uint8Array, max = 20000): string {
  let s = ''
  const n = Math.min(b.length, max)
  for (let i = 0; i < n; i++) {
    const c = b[i]
    if (c === 0x5c) s += '\\\\'
    else if (c >= 0x20 && c < 0x7f) s += String.fromCharCode(c)
    else s += `\\x${c.toString(16).padStart(2, '0')}`
  }
  return b.length > max ? `${s}... (${b.length - max} more bytes)` : s
}
