// The mutant generators of the property tests: SafeTensors headers (test/integration/fuzz.test.ts against the reference
// validator, test/read/validate-stream.test.ts against parseHeader), model folders' JSON files and GGUF headers
// (test/integration/fuzz.test.ts): valid seed files, mutated at random where the format's rules live. Each mutant has its
// own random stream, so one can be replayed alone.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type ModelFolder, memorySource, SafetensorsError } from '../src/node.ts'
import { DTYPE_BITS } from './dtype-table.ts'
import { ByteWriter, ggufBytes, type Value } from './gguf-bytes.ts'
import { entry, FIXTURES_REAL, obj, realFixtures, utf8 } from './helpers.ts'
import { byteLevelTokenizer, FOLDERS, QUANTIZED, referenceOf } from './quant-fixtures.ts'
import { prng } from './random.ts'

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

// ---- model folders ------------------------------------------------------------------------------
// The JSON files of the test models (test/fixtures/gguf, test/fixtures/quantized) mutated where their values are
// read: config.json and its quantization block, tokenizer.json, tokenizer_config.json, the model index. A value
// becomes another type, null, an absurd number, a deep nesting or a "re:" pattern; a key goes or comes; a file
// is cut or goes. Each folder mutant has its own random stream, so one can be replayed alone.

/** The files of a model folder that the library reads, by name. */
export type FolderFiles = Map<string, Uint8Array<ArrayBufferLike>>

/** The folder of `files`, as openModel and ggufStream take it (a shard it lacks fails when read, as a 404 does). */
export function memoryFolder(files: FolderFiles, where: string): ModelFolder {
  const missing = (name: string) => new SafetensorsError('Io', `${where}/${name}: HTTP 404`, { status: 404 })
  return {
    where,
    find: async (name) => (files.has(name) ? memorySource(files.get(name)!) : undefined),
    open: (name) => (files.has(name) ? memorySource(files.get(name)!) : { read: () => Promise.reject(missing(name)) }),
  }
}

export interface FolderSeed {
  name: string
  files: FolderFiles
}

const FIXTURES_GGUF = fileURLToPath(new URL('./fixtures/gguf/', import.meta.url))

/** The files of a folder the library reads: its JSON files, tokenizer.model, chat_template.jinja and weights. */
const READ = /^(config\.json|tokenizer\.json|tokenizer_config\.json|tokenizer\.model|chat_template\.jinja|model.*\.safetensors(\.index\.json)?)$/

/** The files mutated, and how often (the quantization block is config.json's, walked to first a third of the time). */
const JSON_FILES = ['config.json', 'config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors.index.json']

/**
 * The test models as folders: each of test/fixtures/gguf, and each of test/fixtures/quantized with the byte-level
 * tokenizer and the architecture a GGUF needs (as test/integration/quant-cli.test.ts converts them).
 */
export function folderSeeds(): FolderSeed[] {
  const seeds: FolderSeed[] = []
  const read = (dir: string): FolderFiles =>
    new Map(
      readdirSync(dir)
        .filter((f) => READ.test(f) && f !== 'golden.safetensors')
        .map((f) => [f, new Uint8Array(readFileSync(join(dir, f)))]),
    )
  for (const name of readdirSync(FIXTURES_GGUF))
    if (existsSync(join(FIXTURES_GGUF, name, 'config.json'))) seeds.push({ name, files: read(join(FIXTURES_GGUF, name)) })
  for (const name of FOLDERS) {
    const files = read(join(QUANTIZED, name))
    const config = JSON.parse(new TextDecoder().decode(files.get('config.json')))
    config.architectures = [referenceOf(name).architecture]
    files.set('config.json', utf8(JSON.stringify(config, null, 2)))
    files.set('tokenizer.json', utf8(byteLevelTokenizer()))
    seeds.push({ name: `quantized/${name}`, files })
  }
  return seeds
}

/** Values put in place of a value: every JSON type, the edges of numbers, nestings, patterns. Raw JSON text. */
const HOSTILE_VALUES = [
  'null',
  'true',
  'false',
  '0',
  '-1',
  '1.5',
  '-0',
  '2147483648',
  '4294967296',
  '9007199254740993',
  '1e30',
  '3.5e38',
  '1e300',
  '1e400',
  '-1e400',
  '5000000',
  '50000000',
  '""',
  '"x"',
  '"float16"',
  '"yarn"',
  '"llama3"',
  '"Linear"',
  '"re:(.|.)*X"',
  '"re:("',
  '"re:.*"',
  '"re:.*q_proj$"',
  '"re:.*(q|k)_proj$"',
  '{}',
  '[]',
  '[{}]',
  '[null]',
  '{"toString":1,"valueOf":1}',
  '{"type":"yarn","factor":4}',
  '{"quant_method":"gptq","bits":{}}',
  '["re:(.|.)*X","Linear"]',
]

/** A nesting `depth` deep, around `inner`. */
const nesting = (depth: number, inner = '1') => '['.repeat(depth) + inner + ']'.repeat(depth)

/** Where a mutation writes raw JSON text that JSON.stringify cannot make (1e400, a nesting 300,000 deep). */
const RAW = '\u0000raw\u0000'

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** A container and key on the way from the top of `value`: a random walk, stopping a quarter of the time at each step. */
function randomPlace(r: Rng, root: Json, start: string[]): { parent: Json[] | Record<string, Json>; key: string | number; path: string } | undefined {
  let parent: Json = root
  let path = ''
  let key: string | number | undefined
  for (const step of start) {
    if (!isContainer(parent) || Array.isArray(parent) || !Object.hasOwn(parent, step) || !isContainer(parent[step])) break
    parent = parent[step]
    path += `.${step}`
  }
  for (;;) {
    if (!isContainer(parent)) return undefined
    const keys: Array<string | number> = Array.isArray(parent) ? parent.map((_, i) => i) : Object.keys(parent)
    if (keys.length === 0) return undefined
    key = r.pick(keys)
    const child: Json = (parent as Record<string, Json>)[key]
    if (!isContainer(child) || r.next() < 0.25) return { parent, key, path: `${path}.${key}` }
    parent = child
    path += `.${key}`
  }
}

const isContainer = (value: Json): value is Json[] | Record<string, Json> => typeof value === 'object' && value !== null

/** Keys the readers look for, added where a mutation adds one. */
const KEYS = [
  'quantization_config',
  'quantization',
  'rope_scaling',
  'rope_parameters',
  'head_dim',
  'vocab_size',
  'num_key_value_heads',
  'layer_types',
  'sliding_window',
  'max_position_embeddings',
  'original_max_position_embeddings',
  'partial_rotary_factor',
  'targets',
  'config_groups',
  'weights',
  'format',
  'num_bits',
  'bits',
  'group_size',
  'added_tokens',
  'added_tokens_decoder',
  'chat_template',
  'bos_token',
  'post_processor',
  'pre_tokenizer',
  'weight_map',
  'metadata',
]

/** Mutates one JSON file of `files` (or cuts it, or drops it); logs what it did. */
function mutateFolder(files: FolderFiles, r: Rng, log: string[]): void {
  const present = JSON_FILES.filter((name) => files.has(name))
  const name = r.pick(present)
  const text = new TextDecoder().decode(files.get(name))
  const kind = r.int(20)
  if (kind === 0) {
    files.delete(name)
    log.push(`remove ${name}`)
    return
  }
  let root: Json = null
  try {
    // A nesting an earlier mutation made, which JSON.stringify cannot write again, is cut instead.
    if (kind !== 1 && !/\[{1000}/.test(text)) root = JSON.parse(text)
  } catch {}
  if (!isContainer(root)) {
    const at = r.int(text.length + 1)
    files.set(name, utf8(text.slice(0, at)))
    log.push(`cut ${name} to ${at} characters`)
    return
  }
  const start = name === 'config.json' && r.next() < 0.4 ? [r.pick(['quantization_config', 'quantization', 'rope_scaling', 'rope_parameters'])] : []
  const place = randomPlace(r, root, start)
  let raw = r.pick(HOSTILE_VALUES)
  if (r.next() < 0.05) raw = nesting(r.pick([70, 300_000]))
  if (!place || kind === 2) {
    // A key the readers look for, with a hostile value, in the top object or where the walk stopped.
    const target = place && isContainer(place.parent) && !Array.isArray(place.parent) ? place.parent : root
    if (!isContainer(target) || Array.isArray(target)) return
    const key = r.pick(KEYS)
    target[key] = RAW
    log.push(`${name}: add ${key} = ${raw.slice(0, 60)} at ${place?.path ?? 'the top'}`)
  } else if (kind === 3) {
    if (Array.isArray(place.parent)) place.parent.splice(place.key as number, 1)
    else delete place.parent[place.key]
    log.push(`${name}: remove ${place.path}`)
  } else {
    const old = (place.parent as Record<string, Json>)[place.key]
    if (kind === 4 && isContainer(old)) {
      // An array for an object, an object for an array.
      ;(place.parent as Record<string, Json>)[place.key] = Array.isArray(old) ? Object.fromEntries(old.map((v, i) => [String(i), v])) : Object.values(old)
      log.push(`${name}: ${place.path} as ${Array.isArray(old) ? 'an object' : 'an array'}`)
    } else if (kind === 5 && typeof old === 'number') {
      const value = r.pick([old * 2, old + 1, old - 1, -old, old * 1000, old / 2, 0])
      ;(place.parent as Record<string, Json>)[place.key] = value
      log.push(`${name}: ${place.path} = ${value}`)
    } else if (kind === 6) {
      ;(place.parent as Record<string, Json>)[place.key] = r.next() < 0.5 ? [old] : { value: old }
      log.push(`${name}: ${place.path} wrapped`)
    } else {
      ;(place.parent as Record<string, Json>)[place.key] = RAW
      log.push(`${name}: ${place.path} = ${raw.slice(0, 60)}`)
    }
  }
  files.set(name, utf8(JSON.stringify(root).replace(JSON.stringify(RAW), () => raw)))
}

/** A model folder made from `pick(corpus)` with 1 to 3 mutations of its JSON files, from its own stream. */
export function folderMutant(seed: number, index: number, corpus: FolderSeed[]): { from: FolderSeed; log: string[]; files: FolderFiles } {
  const r = rngFor(seed, index)
  const from = r.pick(corpus)
  const files = new Map(from.files)
  const log: string[] = []
  for (let k = 1 + r.int(3); k > 0; k--) mutateFolder(files, r, log)
  return { from, log, files }
}

// ---- GGUF headers -------------------------------------------------------------------------------
// Mutants of GGUF files for openGguf (test/integration/fuzz.test.ts): the reader fixtures (gguf-py's and llama.cpp's files)
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
