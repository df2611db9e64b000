// The mutant generator of the model-folder property test (test/integration/fuzz-folders.test.ts): the JSON files
// of the test models (test/fixtures/gguf, test/fixtures/quantized) mutated where their values are read.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type ModelFolder, memorySource, SafetensorsError } from '../src/node.ts'
import { utf8 } from './helpers.ts'
import { type Rng, rngFor } from './mutants.ts'
import { byteLevelTokenizer, FOLDERS, QUANTIZED, referenceOf } from './quant-fixtures.ts'

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
