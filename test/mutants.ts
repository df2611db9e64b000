// The mutant generator of the header property tests (test/integration/fuzz.test.ts against the reference
// validator, test/read/validate-stream.test.ts against parseHeader): valid seed files, mutated at random where the
// format's rules live. Each mutant has its own random stream, so one can be replayed alone. It runs in browsers
// too (the browser run takes fuzz.test.ts): nothing here needs Node but reading fixtures.
import { readFileSync } from 'node:fs'
import { DTYPE_BITS } from './dtype-table.ts'
import { entry, FIXTURES_REAL, obj, realFixtures, utf8 } from './helpers.ts'
import { prng } from './random.ts'

/** The seed of every property test's mutants: FUZZ_SEED, a number or 'random'; fixed by default, for CI. */
export const SEED = process.env.FUZZ_SEED === 'random' ? (Math.random() * 2 ** 32) >>> 0 : Number(process.env.FUZZ_SEED ?? 20250101) >>> 0

/** A mutant built from seed file `pick(corpus)` with 1 to 3 mutations, from its own stream. */
export function mutant(seed: number, index: number, corpus: Seed[]): { from: Seed; m: Mutant; bytes: Uint8Array } {
  const r = rngFor(seed, index)
  const from = r.pick(corpus)
  const m: Mutant = { header: from.header, dataLength: from.dataLength, log: [] }
  for (let k = 1 + r.int(3); k > 0; k--) mutate(m, r)
  return { from, m, bytes: build(m) }
}

/** Each mutant gets its own stream, so one mutant can be replayed alone (FUZZ_ONLY). */
export function rngFor(seed: number, index: number) {
  const next = prng(seed ^ Math.imul(index + 1, 0x9e3779b1))
  const int = (n: number) => Math.floor(next() * n) // 0 .. n-1
  const pick = <T>(a: readonly T[]): T => a[int(a.length)]
  return { next, int, pick }
}
export type Rng = ReturnType<typeof rngFor>

// ---- seed files ---------------------------------------------------------------------------------

export interface Seed {
  name: string
  header: string // one char per byte (latin1 view), so any byte survives mutation
  dataLength: number
}

export function bytesToLatin1(b: Uint8Array): string {
  let s = ''
  for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode(...b.subarray(i, i + 8192))
  return s
}
export const latin1ToBytes = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0))
const utf8Latin1 = (s: string) => bytesToLatin1(utf8(s))

export function seeds(): Seed[] {
  const out: Seed[] = []
  for (const f of realFixtures().valid) {
    const b = new Uint8Array(readFileSync(FIXTURES_REAL + f))
    const n = Number(new DataView(b.buffer, b.byteOffset).getBigUint64(0, true))
    out.push({ name: f, header: bytesToLatin1(b.subarray(8, 8 + n)), dataLength: b.length - 8 - n })
  }
  const synth = (name: string, header: string, dataLength: number) => out.push({ name, header: utf8Latin1(header), dataLength })
  synth('empty', '{}', 0)
  synth('padded empty', ' \t{ }\r\n    ', 0)
  synth(
    'metadata, escapes, zero-size, F4/F6',
    '{"__metadata__":{"format":"pt","k\\u00e9y":"v\\"al","emoji":"\\ud83d\\ude00"},' +
      '"a\\u0062c":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]},' +
      '"zero":{"dtype":"F32","shape":[0,5],"data_offsets":[3,3]},' +
      '"f6":{"dtype":"F6_E2M3","shape":[8],"data_offsets":[3,9]},' +
      '"😀":{"dtype":"BF16","shape":[],"data_offsets":[9,11]},' +
      '"f6b":{"dtype":"F6_E3M2","shape":[4,1],"data_offsets":[11,14]},' +
      '"last0":{"dtype":"U64","shape":[3,0],"data_offsets":[14,14]}}   ',
    14,
  )
  // Every dtype, header order the reverse of data order, unknown extra fields.
  const dts = [...DTYPE_BITS]
  let off = 0
  const entries = dts.map(([dt, bits]) => {
    const e = `"t_${dt}":{"dtype":"${dt}","shape":[2,4],"data_offsets":[${off},${off + bits}],"extra":{"n":[1,-2.5e3,true,null],"s":"x"}}`
    off += bits
    return e
  })
  synth('all dtypes, reversed', `{"__metadata__":null,${entries.reverse().join(',')}}`, off)
  synth(
    'scalars and names',
    obj(entry('a"b', 'I64', [], 0, 8), entry('é', 'U8', [1], 8, 9), entry('\\', 'F16', [1, 1, 1], 9, 11), entry('', 'BOOL', [0], 11, 11)),
    11,
  )
  synth('big dims, tiny data', obj(entry('w', 'U8', [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 0, 1), entry('z', 'F64', [100000, 0], 1, 1)), 1)
  return out
}

// ---- mutations ----------------------------------------------------------------------------------

export interface Mutant {
  header: string // latin1 view
  dataLength: number
  n?: bigint // header length field; default: header byte length
  cut?: number // truncate the whole file to this many bytes
  log: string[]
}

const INTERESTING_BYTES = [
  0x00, 0x09, 0x0a, 0x0c, 0x0d, 0x20, 0x22, 0x2c, 0x2d, 0x2e, 0x30, 0x31, 0x3a, 0x5b, 0x5c, 0x5d, 0x65, 0x7b, 0x7d, 0x75, 0x7f, 0x80, 0xa0, 0xbf, 0xc0, 0xc2,
  0xe0, 0xed, 0xef, 0xf4, 0xf5, 0xff,
]
const NUMBERS = [
  '0',
  '1',
  '2',
  '7',
  '8',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '18446744073709551615',
  '18446744073709551616',
  '4294967296',
  '1000000000000000000000000000000',
  '-1',
  '-0',
  '1.0',
  '1e0',
  '01',
  '1E3',
  '0.5',
  // About the largest double: out of range for the reference's parser, or just inside.
  '1e309',
  '-1e400',
  '1.7976931348623159e308',
  '1.7976931348623157e308',
  '1e-400',
]
const SNIPPETS = [
  '"__metadata__":null',
  '"__metadata__":{"a":"b"}',
  '"__metadata__":{"a":1}',
  '"__metadata__":{}',
  '"x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}',
  '"y":{"dtype":"F4","shape":[1],"data_offsets":[0,0]}',
  '"deep":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"e":[[[[{"a":[]}]]]]}',
  '"big":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"e":[1.7976931348623157e308,{"f":1e-400}]}',
  '"d\\u0075p":{"dtype":"U8","shape":[],"data_offsets":[0,1]}',
  '"q":1',
  '"q":null',
]
const WHITESPACE = [' ', '\t', '\n', '\r', '\f', '\v', '\u00c2\u00a0' /* NBSP */, '\u00ef\u00bb\u00bf' /* BOM */]

/** Spans [start, end) of the top-level members of an object, best effort on broken text. */
function topLevelMembers(s: string): Array<[number, number]> {
  const spans: Array<[number, number]> = []
  let depth = 0
  let inStr = false
  let start = -1
  for (let i = 0; i < s.length; i++) {
    const c = s[i]
    if (inStr) {
      if (c === '\\') i++
      else if (c === '"') inStr = false
      continue
    }
    if (c === '"') {
      inStr = true
      if (depth === 1 && start < 0) start = i
    } else if (c === '{' || c === '[') {
      depth++
    } else if (c === '}' || c === ']') {
      if (depth === 1 && start >= 0) {
        spans.push([start, i])
        start = -1
      }
      depth--
    } else if (c === ',' && depth === 1 && start >= 0) {
      spans.push([start, i])
      start = -1
    }
  }
  return spans.map(([a, b]) => [a, a + s.slice(a, b).trimEnd().length])
}

/** Positions of characters inside JSON strings. */
function stringPositions(s: string): number[] {
  const pos: number[] = []
  let inStr = false
  for (let i = 0; i < s.length; i++) {
    if (inStr) {
      if (s[i] === '\\') {
        i++
        continue
      }
      if (s[i] === '"') {
        inStr = false
        continue
      }
      pos.push(i)
    } else if (s[i] === '"') inStr = true
  }
  return pos
}

const splice = (s: string, at: number, del: number, ins: string) => s.slice(0, at) + ins + s.slice(at + del)

export function mutate(m: Mutant, r: Rng): void {
  const h = m.header
  const at = () => r.int(h.length + 1)
  switch (r.int(15)) {
    case 0: {
      // replace a byte
      const p = r.int(Math.max(h.length, 1))
      const b = r.next() < 0.6 ? r.pick(INTERESTING_BYTES) : r.int(256)
      m.header = splice(h, p, 1, String.fromCharCode(b))
      m.log.push(`replace byte ${p} with 0x${b.toString(16)}`)
      break
    }
    case 1: {
      // flip one bit
      if (!h.length) break
      const p = r.int(h.length)
      const b = h.charCodeAt(p) ^ (1 << r.int(8))
      m.header = splice(h, p, 1, String.fromCharCode(b))
      m.log.push(`flip bit at ${p}`)
      break
    }
    case 2: {
      // delete bytes
      const p = r.int(Math.max(h.length, 1))
      const k = 1 + r.int(4)
      m.header = splice(h, p, k, '')
      m.log.push(`delete ${k} bytes at ${p}`)
      break
    }
    case 3: {
      // insert bytes
      const p = at()
      let ins = ''
      for (let k = 1 + r.int(3); k > 0; k--) ins += String.fromCharCode(r.next() < 0.7 ? r.pick(INTERESTING_BYTES) : r.int(256))
      m.header = splice(h, p, 0, ins)
      m.log.push(`insert ${JSON.stringify(ins)} at ${p}`)
      break
    }
    case 4:
    case 5: {
      // change a number (twice as likely: this is where the size rules live)
      const nums = [...h.matchAll(/-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/g)]
      if (!nums.length) break
      const found = r.pick(nums)
      const old = found[0]
      let v: string
      if (r.next() < 0.5 && /^[0-9]+$/.test(old)) {
        const n = BigInt(old)
        v = String(r.pick([n + 1n, n > 0n ? n - 1n : 0n, n * 2n, n / 2n, n + 8n]))
      } else {
        v = r.pick(NUMBERS)
      }
      m.header = splice(h, found.index!, old.length, v)
      m.log.push(`number ${old} -> ${v} at ${found.index}`)
      break
    }
    case 6: {
      // duplicate a top-level entry, sometimes under a new name
      const spans = topLevelMembers(h)
      if (!spans.length) break
      const [a, b] = r.pick(spans)
      let copy = h.slice(a, b)
      if (r.next() < 0.4) copy = `"dup${r.int(100)}${copy.slice(1)}`
      m.header = splice(h, b, 0, `,${copy}`)
      m.log.push(`duplicate entry ${JSON.stringify(h.slice(a, Math.min(b, a + 40)))}${copy[1] === 'd' ? ' renamed' : ''}`)
      break
    }
    case 7: {
      // remove a top-level entry
      const spans = topLevelMembers(h)
      if (!spans.length) break
      const [a, b] = r.pick(spans)
      const end = h[b] === ',' ? b + 1 : b
      m.header = splice(h, a, end - a, '')
      m.log.push(`remove entry at ${a}`)
      break
    }
    case 8: {
      // change a dtype
      const dts = [...h.matchAll(/"dtype"\s*:\s*"([^"\\]*)"/g)]
      if (!dts.length) break
      const found = r.pick(dts)
      const v = r.next() < 0.8 ? r.pick([...DTYPE_BITS.keys()]) : r.pick(['f32', 'F128', '', 'F32 ', 'f4'])
      const p = found.index! + found[0].lastIndexOf(`"${found[1]}"`)
      m.header = splice(h, p, found[1].length + 2, `"${v}"`)
      m.log.push(`dtype ${found[1]} -> ${v}`)
      break
    }
    case 9: {
      // insert a snippet at the start of the object or after an entry
      const spans = topLevelMembers(h)
      const s = r.pick(SNIPPETS)
      if (!spans.length || r.next() < 0.3) {
        const p = h.indexOf('{')
        if (p < 0) break
        m.header = splice(h, p + 1, 0, s + (spans.length ? ',' : ''))
      } else {
        m.header = splice(h, r.pick(spans)[1], 0, `,${s}`)
      }
      m.log.push(`insert snippet ${s}`)
      break
    }
    case 10: {
      // whitespace, valid or not, at the start, the end or anywhere
      const w = r.pick(WHITESPACE)
      const p = r.pick([0, h.length, at()])
      m.header = splice(h, p, 0, w)
      m.log.push(`whitespace ${JSON.stringify(w)} at ${p}`)
      break
    }
    case 11: {
      // escapes inside strings: an equivalent \u escape, a surrogate pair, or a lone surrogate
      const pos = stringPositions(h).filter((i) => /[A-Za-z0-9_.]/.test(h[i]))
      if (!pos.length) break
      const p = r.pick(pos)
      const hex = h.charCodeAt(p).toString(16).padStart(4, '0')
      const v = r.pick([`\\u${hex}`, `\\u${hex.toUpperCase()}`, `${h[p]}\\ud83d\\ude00`, `${h[p]}\\ud800`, `${h[p]}\\udfff`, `${h[p]}\\"`, `${h[p]}\\x`])
      m.header = splice(h, p, 1, v)
      m.log.push(`escape ${JSON.stringify(v)} at ${p}`)
      break
    }
    case 12: {
      // change the data length (truncated or extended file)
      const d = r.pick([-1, 1, -8, 8, -m.dataLength, m.dataLength, r.int(1000) - 500])
      m.dataLength = Math.max(0, m.dataLength + d)
      m.log.push(`data length ${d >= 0 ? '+' : ''}${d}`)
      break
    }
    case 14: {
      // set one shape entry (shapes feed the overflow and alignment rules)
      const shapes = [...h.matchAll(/"shape"\s*:\s*\[([0-9, ]*)\]/g)].filter((f) => f[1].trim() !== '')
      if (!shapes.length) break
      const found = r.pick(shapes)
      const dims = found[1].split(',')
      const k = r.int(dims.length)
      dims[k] = r.pick([
        '0',
        '1',
        '2',
        '3',
        '9007199254740991',
        '9007199254740992',
        '4294967296',
        '18446744073709551615',
        '18446744073709551616',
        `${dims[k].trim()}1`,
      ])
      const p = found.index! + found[0].indexOf('[') + 1
      m.header = splice(h, p, found[1].length, dims.join(','))
      m.log.push(`shape [${found[1]}] -> [${dims.join(',')}]`)
      break
    }
    case 13: {
      // lie in the header length field, or cut the file anywhere
      if (r.next() < 0.6) {
        const len = BigInt(h.length)
        m.n = r.pick([
          len + 1n,
          len - 1n,
          len + 8n,
          len > 8n ? len - 8n : 0n,
          0n,
          100_000_000n,
          100_000_001n,
          2n ** 32n + len,
          2n ** 64n - 1n,
          BigInt(r.int(2 ** 31)),
        ])
        if (m.n < 0n) m.n = 0n
        m.log.push(`header length field = ${m.n}`)
      } else {
        const total = 8 + h.length + m.dataLength
        m.cut = r.pick([r.int(8), r.int(total + 1), 8 + r.int(h.length + 1)])
        m.log.push(`cut file to ${m.cut} bytes`)
      }
      break
    }
  }
}

export function build(m: Mutant): Uint8Array {
  const h = latin1ToBytes(m.header)
  const out = new Uint8Array(8 + h.length + m.dataLength)
  new DataView(out.buffer).setBigUint64(0, m.n ?? BigInt(h.length), true)
  out.set(h, 8)
  return m.cut === undefined ? out : out.slice(0, m.cut)
}

/** Every verdict a header can get, in the rules' order: the mutants must reach each, or agreement on them says little. */
export const EVERY_OUTCOME = [
  'ok',
  'HeaderTooSmall',
  'HeaderTooLarge',
  'InvalidHeaderLength',
  'InvalidHeader',
  'InvalidHeaderDeserialization',
  'InvalidOffset',
  'ValidationOverflow',
  'MisalignedSlice',
  'TensorInvalidInfo',
  'MetadataIncompleteBuffer',
] as const
