// The mutant generator of the GGUF property test (test/integration/fuzz-gguf.test.ts).
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ByteWriter, ggufBytes, type Value } from './gguf-bytes.ts'
import { rngFor } from './mutants.ts'

// ---- GGUF headers -------------------------------------------------------------------------------
// Mutants of GGUF files for openGguf (test/integration/fuzz-gguf.test.ts): the reader fixtures (gguf-py's and llama.cpp's files)
// and a few made here, changed where a GGUF's rules live: its numbers (counts, lengths, types, dims, offsets,
// the version, the alignment) set to values at and past every limit, bytes of the header replaced, flipped,
// deleted, inserted or repeated, and the file cut or extended.

/** A field of a GGUF header: where its number is, and what it is. */
interface GgufField {
  at: number
  kind: 'version' | 'count' | 'length' | 'valueType' | 'arrayType' | 'arrayCount' | 'dims' | 'dim' | 'tensorType' | 'offset' | 'alignment'
  bytes: 4 | 8
}

export interface GgufSeed {
  name: string
  bytes: Uint8Array
  little: boolean
  /** Where the tensor infos end: the mutations of bytes stay before it. */
  headerEnd: number
  /** The fields by kind. */
  fields: Map<GgufField['kind'], GgufField[]>
}

const GGUF_FIXTURES = fileURLToPath(new URL('./fixtures/gguf/reader/', import.meta.url))
/** Bytes of each GGUF value type id but string and array. */
const VALUE_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8]

/** The fields of a valid GGUF file, found by walking it as the format says. */
function ggufFields(bytes: Uint8Array): Pick<GgufSeed, 'little' | 'headerEnd' | 'fields'> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const little = (view.getUint32(4, true) & 0xffff) !== 0
  const fields = new Map<GgufField['kind'], GgufField[]>()
  let p = 4
  const field = (kind: GgufField['kind'], size: 4 | 8) => {
    let list = fields.get(kind)
    if (!list) fields.set(kind, (list = []))
    list.push({ at: p, kind, bytes: size })
    const value = size === 4 ? view.getUint32(p, little) : Number(view.getBigUint64(p, little))
    p += size
    return value
  }
  const string = () => {
    const n = field('length', 8)
    p += n
    return new TextDecoder().decode(bytes.subarray(p - n, p))
  }
  const value = (type: number): void => {
    if (type === 8) string()
    else if (type !== 9) p += VALUE_BYTES[type]
    else {
      const of = field('arrayType', 4)
      for (let n = field('arrayCount', 8); n > 0; n--) value(of)
    }
  }
  field('version', 4)
  const tensors = field('count', 8)
  const keyValues = field('count', 8)
  for (let i = 0; i < keyValues; i++) {
    const key = string()
    const type = field('valueType', 4)
    if (key === 'general.alignment') fields.set('alignment', [{ at: p, kind: 'alignment', bytes: 4 }])
    value(type)
  }
  for (let i = 0; i < tensors; i++) {
    string()
    for (let d = field('dims', 4); d > 0; d--) field('dim', 8)
    field('tensorType', 4)
    field('offset', 8)
  }
  return { little, headerEnd: p, fields }
}

export function ggufSeeds(): GgufSeed[] {
  const files: Array<{ name: string; bytes: Uint8Array }> = readdirSync(GGUF_FIXTURES)
    .filter((f) => f.endsWith('.gguf'))
    .sort()
    .map((name) => ({ name, bytes: new Uint8Array(readFileSync(GGUF_FIXTURES + name)) }))
  // 63 arrays in arrays: as deep as they go.
  const nested = (depth: number): Value =>
    depth === 0 ? { type: 'ARRAY', of: 'UINT8', values: [1, 2] } : { type: 'ARRAY', of: 'ARRAY', values: [nested(depth - 1)] }
  const q = { name: 'q', ne: [32, 2], type: 'Q8_0' as const, data: new Uint8Array(68) }
  files.push(
    { name: 'empty', bytes: ggufBytes({}) },
    {
      name: 'nested 62 deep, an empty tensor',
      bytes: ggufBytes({ metadata: [['deep', nested(62)]], tensors: [{ ...q, ne: [0, 2], data: new Uint8Array(0) }] }),
    },
    {
      name: 'big-endian, alignment 1, a scalar',
      bytes: ggufBytes({
        bigEndian: true,
        alignment: 1,
        metadata: [['general.alignment', { type: 'UINT32', value: 1 }]],
        tensors: [q, { name: 's', ne: [], type: 'F32', data: new Uint8Array(4) }],
      }),
    },
  )
  return files.map((f) => ({ ...f, ...ggufFields(f.bytes) }))
}

const U32_VALUES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 23, 24, 28, 30, 31, 36, 39, 43, 64, 255, 0x10000, 0x03000000, 0x7fffffff, 0x80000000, 0xffffffff]
const U64_VALUES = [0n, 1n, 2n, 31n, 32n, 33n, 2n ** 30n, 2n ** 30n + 1n, 2n ** 32n, 2n ** 40n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 62n, 2n ** 63n, 2n ** 64n - 1n]

/** A GGUF mutant of `pick(corpus)` with 1 to 3 mutations, from its own stream (replayable alone). */
export function ggufMutant(seed: number, index: number, corpus: GgufSeed[]): { from: GgufSeed; log: string[]; bytes: Uint8Array } {
  const r = rngFor(seed, index)
  const from = r.pick(corpus)
  let bytes = from.bytes
  let headerEnd = from.headerEnd
  // The seed's bytes are shared by every mutant: changed only in a copy of a mutant's own.
  let owned = false
  const log: string[] = []
  const splice = (at: number, remove: number, insert: Uint8Array) => {
    const out = new Uint8Array(bytes.length - remove + insert.length)
    out.set(bytes.subarray(0, at))
    out.set(insert, at)
    out.set(bytes.subarray(at + remove), at + insert.length)
    headerEnd += insert.length - remove
    bytes = out
    owned = true
  }
  const own = () => {
    if (!owned) bytes = bytes.slice()
    owned = true
    return bytes
  }
  const viewOf = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength)
  for (let k = 1 + r.int(3); k > 0; k--) {
    const inHeader = () => r.int(Math.max(1, Math.min(headerEnd, bytes.length)))
    switch (r.int(9)) {
      case 0:
      case 1:
      case 2: {
        // a number of the header set at or past a limit (three times as likely: this is where the rules are)
        const kinds = [...from.fields.keys()]
        const { at, kind, bytes: size } = r.pick(from.fields.get(r.pick(kinds))!)
        if (at + size > bytes.length) break
        const view = viewOf(own())
        const old = size === 4 ? BigInt(view.getUint32(at, from.little)) : view.getBigUint64(at, from.little)
        const near = [old + 1n, old > 0n ? old - 1n : 0n, old * 2n, old / 2n, old + 8n, BigInt(bytes.length), BigInt(bytes.length - at)]
        const value = r.next() < 0.4 ? r.pick(near) : size === 4 ? BigInt(r.pick(U32_VALUES)) : r.pick(U64_VALUES)
        if (size === 4) view.setUint32(at, Number(value & 0xffffffffn), from.little)
        else view.setBigUint64(at, value & (2n ** 64n - 1n), from.little)
        log.push(`${kind} at ${at}: ${old} -> ${value}`)
        break
      }
      case 3: {
        const p = inHeader()
        const b = r.next() < 0.5 ? r.pick([0x00, 0x01, 0x02, 0x03, 0x07, 0x08, 0x09, 0x0c, 0x0d, 0x20, 0x7f, 0x80, 0xc0, 0xe0, 0xff]) : r.int(256)
        own()[p] = b
        log.push(`byte ${p} = 0x${b.toString(16)}`)
        break
      }
      case 4: {
        const p = inHeader()
        own()[p] ^= 1 << r.int(8)
        log.push(`flip a bit at ${p}`)
        break
      }
      case 5: {
        // delete, insert or repeat bytes of the header
        const p = inHeader()
        const n = 1 + r.int(r.next() < 0.8 ? 8 : 64)
        const what = r.int(3)
        if (what === 0) splice(p, Math.min(n, bytes.length - p), new Uint8Array(0))
        else if (what === 1)
          splice(
            p,
            0,
            Uint8Array.from({ length: n }, () => r.int(256)),
          )
        else splice(p, 0, bytes.slice(p, p + n))
        log.push(`${['delete', 'insert', 'repeat'][what]} ${n} bytes at ${p}`)
        break
      }
      case 6: {
        // cut the file: in the header mostly
        const at = r.next() < 0.7 ? inHeader() : r.int(bytes.length + 1)
        bytes = bytes.subarray(0, at)
        log.push(`cut to ${at} bytes`)
        break
      }
      case 7: {
        const n = r.pick([1, 31, 32, 4096])
        splice(bytes.length, 0, new Uint8Array(n))
        log.push(`append ${n} bytes`)
        break
      }
      case 8: {
        // an array of arrays nested deeper: each level more, an array of one element around it
        const arrays = (from.fields.get('arrayType') ?? []).filter(({ at }) => at + 12 <= bytes.length && viewOf(bytes).getUint32(at, from.little) === 9)
        if (!arrays.length) break
        const { at } = r.pick(arrays)
        const levels = r.pick([1, 2, 8])
        const level = new ByteWriter(from.little)
        level.u32(9)
        level.u64(1)
        const wrap = level.done()
        for (let i = 0; i < levels; i++) splice(at + 12, 0, wrap)
        log.push(`${levels} more levels of arrays at ${at}`)
        break
      }
    }
  }
  return { from, log, bytes }
}

/** What a GGUF mutant can come to, told by its message: each rule the mutants must reach. */
export const GGUF_OUTCOMES: ReadonlyArray<[string, RegExp]> = [
  ['not GGUF', /not a GGUF file/],
  ['version', /GGUF version \d+ is not supported/],
  ['truncated', /a truncated file/],
  ['counts', /claims \d+ tensors and \d+ key-value pairs/],
  ['string length', /the string at byte \d+ claims/],
  ['array count', /the array at byte \d+ claims/],
  ['value type', /unknown value type/],
  ['nesting', /nested deeper/],
  ['UTF-8', /not UTF-8/],
  ['duplicate', /a duplicate/],
  ['alignment', /alignment/],
  ['dimensions', /dimensions, more than|dimension \d+ is/],
  ['tensor type', /unknown ggml type/],
  ['blocks', /not whole .* blocks/],
  ['past the end', /run past the end/],
  ['overlap', /overlaps tensor/],
]
