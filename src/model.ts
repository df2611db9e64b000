// openModel(): a sharded model (model.safetensors.index.json and its shards) behind the same reading API
// as one file. Every weight_map entry is checked against its shard's header when the model opens.
import type { DType } from './dtypes.ts'
import { SafetensorsError } from './errors.ts'
import { type DataFor, type OpenOptions, openMetered, type ReadOptions, type SafetensorsFile, type Source, type Tensor, toRangeSource } from './file.ts'
import type { TensorInfo } from './header.ts'
import { requireLocalFiles } from './local-files.ts'
import { readingAhead, runPool } from './pool.ts'
import { metered, ProgressMeter } from './progress.ts'
import type { SliceRange } from './slice.ts'
import { type RangeSource, readInto } from './source.ts'

export const DEFAULT_INDEX = 'model.safetensors.index.json'
const MAX_INDEX_SIZE = 100_000_000

export interface ModelIndex {
  metadata?: Record<string, unknown>
  weight_map: Record<string, string>
}

function indexError(where: string, message: string): SafetensorsError {
  return new SafetensorsError('InvalidHeaderDeserialization', `${where}: ${message}`)
}

/** Shard names are plain file names beside the index: nothing that could reach outside its folder. */
function checkShardName(where: string, shard: string): void {
  if (shard === '' || shard === '.' || shard === '..' || /[/\\:\0]/.test(shard) || /%(2f|5c|2e)/i.test(shard)) {
    throw indexError(where, `shard name ${JSON.stringify(shard)} is not a plain file name in the index's folder`)
  }
}

/**
 * The first key that an object of this (valid) JSON text repeats. JSON.parse keeps the last one
 * silently, so a tensor listed twice would open from whichever shard came last.
 */
function repeatedKey(text: string): string | undefined {
  // Alternately a whole string token and a run between strings (which holds no quote).
  const token = /"(?:[^"\\]|\\.)*"|[^"]+/gy
  const keys: Array<Set<string> | undefined> = [] // one per open container; arrays have none
  let lastString = ''
  for (let match: RegExpExecArray | null; (match = token.exec(text)); ) {
    const t = match[0]
    if (t[0] === '"') {
      lastString = t
      continue
    }
    for (const c of t) {
      if (c === '{') keys.push(new Set())
      else if (c === '[') keys.push(undefined)
      else if (c === '}' || c === ']') keys.pop()
      else if (c === ':') {
        const key = JSON.parse(lastString) as string
        const seen = keys[keys.length - 1]!
        if (seen.has(key)) return key
        seen.add(key)
      }
    }
  }
  return undefined
}

/** How many ':' a string holds: in a text with no escapes, the ':' inside its strings are theirs. */
const colonsIn = (s: string) => (s.includes(':') ? s.split(':').length - 1 : 0)

/** Keys minus the ':' inside strings, over every value in `value`; a stack, not recursion, for any nesting depth. */
function keysLessColons(value: unknown): number {
  let counted = 0
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v === 'string') counted -= colonsIn(v)
    else if (Array.isArray(v)) for (const item of v) stack.push(item)
    else if (typeof v === 'object' && v !== null) {
      for (const key of Object.keys(v)) {
        counted += 1 - colonsIn(key)
        stack.push((v as Record<string, unknown>)[key])
      }
    }
  }
  return counted
}

/** The index, its number of weight_map entries, and its distinct shard names in order of first appearance. */
interface ParsedIndex extends ModelIndex {
  entries: number
  shards: string[]
  /** The weight_map's keys in their order; its runs of entries of one shard, and each shard's first. */
  names: string[]
  runs: Run[]
  firstRuns: Map<string, Run>
  /** Shards whose entries come in more than one run, and (once the check needs them) their entries in order. */
  scattered: Set<string>
  gathered?: Map<string, string[]>
}

interface Run {
  shard: string
  start: number
  end: number
}

function parseIndex(where: string, text: string): ParsedIndex {
  let index: unknown
  try {
    index = JSON.parse(text)
  } catch (cause) {
    throw new SafetensorsError('InvalidHeaderDeserialization', `${where}: not valid JSON: ${(cause as Error).message}`, { cause })
  }
  const { weight_map: map, metadata } = (index ?? {}) as Partial<ModelIndex>
  const isMap = typeof index === 'object' && !Array.isArray(index) && typeof map === 'object' && map !== null && !Array.isArray(map)
  // One pass over the weight_map (91,280 entries in the largest models; Object.keys and a lookup, as
  // Object.entries' pairs cost more than JSON.parse): the shard names, the first entry that is not a
  // name, the runs of entries of one shard (see listedIn), and its part of the key count below.
  const names = isMap ? Object.keys(map) : []
  const runs: Run[] = []
  const firstRuns = new Map<string, Run>()
  const scattered = new Set<string>()
  let last: string | undefined
  let run: Run = { shard: '', start: 0, end: 0 }
  let notAName: string | undefined
  let counted = 0
  for (let i = 0; i < names.length; i++) {
    const name = names[i]
    const shard = map![name]
    if (typeof shard !== 'string') {
      notAName ??= name
      counted += 1 - colonsIn(name) + keysLessColons(shard)
      continue
    }
    counted += 1 - colonsIn(name) - colonsIn(shard)
    // Entries of one shard mostly come together: the Map sees each run once.
    if (shard !== last) {
      run.end = i
      runs.push((run = { shard, start: i, end: i }))
      if (firstRuns.has(shard)) scattered.add(shard)
      else firstRuns.set(shard, run)
      last = shard
    }
  }
  run.end = names.length
  // Repeated keys: JSON.parse keeps one of each silently, so the parsed keys are fewer than the text's.
  // Each key is one ':' outside the strings, and with no backslash in the text the strings are their raw
  // text: counting tells without tokenizing megabytes of text. Any backslash, or a count that differs: the full scan.
  if (isMap) {
    const rest = { ...(index as Record<string, unknown>) }
    delete rest.weight_map
    counted += 1 - colonsIn('weight_map') + keysLessColons(rest)
  } else counted = keysLessColons(index)
  let colons = 0
  for (let at = text.indexOf(':'); at !== -1; at = text.indexOf(':', at + 1)) colons++
  const repeated = text.includes('\\') || colons !== counted ? repeatedKey(text) : undefined
  if (repeated !== undefined) throw indexError(where, `the key ${JSON.stringify(repeated)} appears twice in one object`)
  if (!isMap) throw indexError(where, 'expected an object with a "weight_map" object')
  if (metadata !== undefined && (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)))
    throw indexError(where, '"metadata" must be an object')
  if (notAName !== undefined) throw indexError(where, `weight_map[${JSON.stringify(notAName)}] must be a file name`)
  for (const shard of firstRuns.keys()) checkShardName(where, shard)
  return { metadata, weight_map: map!, entries: names.length, shards: [...firstRuns.keys()], names, runs, firstRuns, scattered }
}

/**
 * The files of a model picked or dropped in a page (a folder's files, or several files): the index and
 * its shards, found by file name. Files that are neither (a README, config.json) are ignored.
 */
export type ModelFiles = Iterable<File>

/** Where the index is, what to call it in messages, and how to find a shard beside it. */
async function locate(input: string | URL | ModelFiles): Promise<{ index: Source; where: string; shard: (name: string) => Source }> {
  if (typeof input !== 'string' && !(input instanceof URL)) return locateFiles(input)
  const url = input instanceof URL ? input : /^https?:\/\//i.test(input) ? new URL(input) : undefined
  if (url && url.protocol !== 'file:') {
    const index = url.pathname.endsWith('/') ? new URL(DEFAULT_INDEX, url) : url
    return { index, where: String(index), shard: (name) => new URL(name, index) }
  }
  const local = requireLocalFiles(`openModel(${JSON.stringify(String(input))})`)
  const { index, shard } = await local.locateIndex(url ? local.pathOf(url) : (input as string), DEFAULT_INDEX)
  return { index, where: index, shard }
}

/** The index among `files`: model.safetensors.index.json, else the one file named *.index.json. */
function locateFiles(input: ModelFiles): { index: File; where: string; shard: (name: string) => File } {
  if (typeof input !== 'object' || input === null || typeof (input as Partial<ModelFiles>)[Symbol.iterator] !== 'function') {
    throw new TypeError(`openModel takes a path, a URL or the model's files (File objects), got ${Object.prototype.toString.call(input)}`)
  }
  const files = new Map<string, File>()
  for (const file of input) {
    if (typeof Blob === 'undefined' || !(file instanceof Blob) || typeof (file as Partial<File>).name !== 'string')
      throw new TypeError(`openModel: every file must be a File, got ${Object.prototype.toString.call(file)}`)
    if (files.has(file.name)) throw new TypeError(`openModel: two files are named ${JSON.stringify(file.name)}`)
    files.set(file.name, file)
  }
  const indexes = [...files.keys()].filter((name) => name.endsWith('.index.json'))
  const index = files.get(DEFAULT_INDEX) ?? (indexes.length === 1 ? files.get(indexes[0]) : undefined)
  if (!index) {
    const found = indexes.length === 0 ? 'none' : indexes.map((name) => JSON.stringify(name)).join(', ')
    throw new SafetensorsError('Io', `no model index among the ${files.size} files given: expected ${DEFAULT_INDEX} or one *.index.json (found ${found})`)
  }
  const shard = (name: string) => {
    const file = files.get(name)
    if (!file) throw new SafetensorsError('Io', `not among the ${files.size} files given`)
    return file
  }
  return { index, where: index.name, shard }
}

/** The whole index file as text: it is small (bounded by MAX_INDEX_SIZE), and read in at most two reads. */
async function readIndexText(source: RangeSource, where: string, signal?: AbortSignal): Promise<string> {
  const head = await source.read(0, Math.min(source.size ?? MAX_INDEX_SIZE, 64 * 1024), signal)
  const size = source.size ?? head.length
  if (size > MAX_INDEX_SIZE) throw indexError(where, `the index is ${size} bytes, above the limit of ${MAX_INDEX_SIZE}`)
  const bytes = new Uint8Array(size)
  bytes.set(head)
  await readInto(source, head.length, bytes.subarray(head.length), signal)
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    throw indexError(where, 'the index is not UTF-8 text')
  }
}

export interface OpenModelOptions extends OpenOptions {
  /** Shard headers read at once (default 16): enough to hide a network round trip, few enough for any server. */
  concurrency?: number
}

const DEFAULT_CONCURRENCY = 16

/**
 * Opens a sharded model from its index: a path, a folder holding model.safetensors.index.json, a URL, or
 * the model's files picked or dropped in a page (ModelFiles).
 */
export async function openModel(input: string | URL | ModelFiles, options: OpenModelOptions = {}): Promise<SafetensorsModel> {
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`)
  const { index: location, where, shard } = await locate(input)
  // One meter for the index and every shard: the model's progress is their sum.
  const meter = options.onProgress && new ProgressMeter(options.onProgress)
  const opened = await toRangeSource(location, options)
  const source = meter ? metered(opened, meter, (opened as { url?: string }).url) : opened
  let text: string
  try {
    text = await readIndexText(source, where, options.signal)
  } finally {
    await source.close?.()
  }
  const index = parseIndex(where, text)
  const shardNames = index.shards
  const shards: Array<SafetensorsFile | undefined> = []
  let files: Map<string, SafetensorsFile>
  try {
    await runPool(shardNames, concurrency, async (name, i) => {
      try {
        shards[i] = await openMetered(shard(name), options, meter)
      } catch (error) {
        throw error instanceof SafetensorsError ? new SafetensorsError(error.code, `shard ${name}: ${error.message}`, { cause: error }) : error
      }
    })
    // In index order, whatever order the reads finished in.
    files = new Map(shardNames.map((name, i) => [name, shards[i]!]))
    // Every entry is in its shard when the shards' tensors the index lists there are as many as its
    // entries (names are unique in a shard).
    let listed = 0
    for (const [name, file] of files) listed += listedIn(index, name, file.header.tensors)
    if (listed !== index.entries) {
      const [tensor, name] = Object.entries(index.weight_map).find(([tensor, name]) => !files.get(name)!.header.has(tensor))!
      const holder = [...files].find(([, file]) => file.header.has(tensor))?.[0]
      const found = holder === undefined ? 'no shard has it' : `it is in ${holder}`
      throw new SafetensorsError(
        'TensorNotFound',
        `${where}: weight_map puts ${JSON.stringify(tensor)} in ${name}, which has no tensor of that name (${found})`,
      )
    }
  } catch (error) {
    await Promise.all(shards.map((f) => f?.close()))
    throw error
  }
  return new SafetensorsModel({ metadata: index.metadata, weight_map: index.weight_map }, files)
}

/**
 * How many of `tensors` (shard `shard`'s) the index lists in that shard. Where the index lists exactly
 * them, in their order, each is listed there: comparing names tells without a lookup per tensor, which
 * costs several times more (it hashes 91,280 new strings in the largest models). That holds for an index
 * written in the order of the shards (one run each), and for a sorted one, as transformers writes, over
 * shards that safetensors laid out by name (one dtype each): their runs, gathered once, are in order.
 * Otherwise, a lookup each.
 */
function listedIn(index: ParsedIndex, shard: string, tensors: readonly TensorInfo[]): number {
  const run = index.firstRuns.get(shard)!
  const same = (names: readonly string[], start: number, end: number) => {
    if (end - start !== tensors.length) return false
    for (let i = 0; i < tensors.length; i++) if (tensors[i].name !== names[start + i]) return false
    return true
  }
  if (index.scattered.has(shard)) {
    index.gathered ??= gather(index)
    const names = index.gathered.get(shard)!
    if (same(names, 0, names.length)) return tensors.length
  } else if (same(index.names, run.start, run.end)) return tensors.length
  let listed = 0
  for (const t of tensors) if (index.weight_map[t.name] === shard) listed++
  return listed
}

/** The entries of each scattered shard, in index order: one pass over the runs. */
function gather(index: ParsedIndex): Map<string, string[]> {
  const gathered = new Map<string, string[]>()
  for (const { shard, start, end } of index.runs) {
    if (!index.scattered.has(shard)) continue
    let names = gathered.get(shard)
    if (names === undefined) gathered.set(shard, (names = []))
    for (let i = start; i < end; i++) names.push(index.names[i])
  }
  return gathered
}

export class SafetensorsModel {
  readonly #index: ModelIndex
  readonly #files: Map<string, SafetensorsFile>

  constructor(index: ModelIndex, files: Map<string, SafetensorsFile>) {
    this.#index = index
    this.#files = files
  }

  /** The index's metadata (e.g. { total_size }), not a shard's. */
  get metadata(): Record<string, unknown> | null {
    return this.#index.metadata ?? null
  }

  /** The open shards, by file name. */
  get shards(): ReadonlyMap<string, SafetensorsFile> {
    return this.#files
  }

  /** Tensor names, shard by shard in data order. */
  names(): string[] {
    return this.#listed().map(([, info]) => info.name)
  }

  info(name: string): TensorInfo {
    return this.#fileOf(name).info(name)
  }

  getTensor<D extends DType, H extends boolean = false>(name: string, options?: ReadOptions<D, H>): Promise<Tensor<DataFor<D, H>>> {
    return this.#fileOf(name).getTensor(name, options)
  }

  getSlice<D extends DType, H extends boolean = false>(
    name: string,
    ranges: readonly SliceRange[],
    options?: ReadOptions<D, H>,
  ): Promise<Tensor<DataFor<D, H>>> {
    return this.#fileOf(name).getSlice(name, ranges, options)
  }

  /** One tensor or slice as a stream, from its shard: see SafetensorsFile.stream. */
  stream(name: string, options?: Parameters<SafetensorsFile['stream']>[1]): ReadableStream<Uint8Array> {
    return this.#fileOf(name).stream(name, options)
  }

  /** Every tensor, shard by shard in data order; the next one (when small) is read while this one is handled. */
  tensors<D extends DType, H extends boolean = false>(options?: ReadOptions<D, H>): AsyncGenerator<Tensor<DataFor<D, H>>> {
    return readingAhead(this.#listed().map(([file, info]) => ({ bytes: info.byteLength, read: () => file.getTensor(info.name, options) })))
  }

  /** The file name of the shard that holds tensor `name`; throws TensorNotFound. */
  shardOf(name: string): string {
    const shard = Object.hasOwn(this.#index.weight_map, name) ? this.#index.weight_map[name] : undefined
    if (shard === undefined) throw new SafetensorsError('TensorNotFound', `no tensor named ${JSON.stringify(name)} in this model's weight_map`)
    return shard
  }

  /** Tensors a shard holds that the index does not list there (the model does not include them). */
  unlisted(): Array<{ tensor: string; shard: string }> {
    const map = this.#index.weight_map
    return [...this.#files].flatMap(([shard, file]) => file.header.tensors.filter((t) => map[t.name] !== shard).map((t) => ({ tensor: t.name, shard })))
  }

  async close(): Promise<void> {
    await Promise.all([...this.#files.values()].map((f) => f.close()))
  }

  // The tensors the index lists, in shard order then data order (a shard's unlisted tensors are not the model's).
  #listed(): Array<[SafetensorsFile, TensorInfo]> {
    const map = this.#index.weight_map
    return [...this.#files].flatMap(([name, file]) =>
      file.header.tensors.filter((t) => map[t.name] === name).map((t): [SafetensorsFile, TensorInfo] => [file, t]),
    )
  }

  #fileOf(name: string): SafetensorsFile {
    return this.#files.get(this.shardOf(name))!
  }
}
