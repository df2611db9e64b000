// openModel(): a sharded model (model.safetensors.index.json and its shards) behind the same reading API
// as one file. Every weight_map entry is checked against its shard's header when the model opens.
import type { DType } from './dtypes.ts'
import { SafetensorsError } from './errors.ts'
import { type DataFor, type OpenOptions, openMetered, type ReadOptions, type SafetensorsFile, type Source, type Tensor, toRangeSource } from './file.ts'
import type { TensorInfo } from './header.ts'
import { requireLocalFiles } from './local-files.ts'
import { type ParsedIndex, parseIndex, readIndex } from './model-index.ts'
import { readingAhead, runPool } from './pool.ts'
import { metered, ProgressMeter } from './progress.ts'
import type { SliceRange } from './slice.ts'
import type { RangeSource } from './source.ts'

export const DEFAULT_INDEX = 'model.safetensors.index.json'

/** The JSON of model.safetensors.index.json. */
export interface ModelIndex {
  /** Whatever the writer put there, e.g. `{ total_size }`. */
  metadata?: Record<string, unknown>
  /** The shard file of each tensor, by tensor name. */
  weight_map: Record<string, string>
}

/**
 * The files of a model picked or dropped in a page (a folder's files, or several files): the index and
 * its shards, found by file name. Files that are neither (a README, config.json) are ignored.
 */
export type ModelFiles = Iterable<File>

/**
 * A model's folder in storage that has neither paths nor URLs (an R2 bucket's key prefix, from
 * {@link r2Model}): openModel looks in it for the model as in a folder on disk, and beside that for the shards.
 */
export interface ModelFolder {
  /** The folder, as messages name it. */
  readonly where: string
  /** The file `name` of the folder, or undefined when it has none. */
  find(name: string): Promise<RangeSource | undefined>
  /** The file `name` of the folder, which should be there (a shard): a missing one fails when read. */
  open(name: string): RangeSource
}

function isModelFolder(input: unknown): input is ModelFolder {
  return typeof input === 'object' && input !== null && typeof (input as ModelFolder).find === 'function' && typeof (input as ModelFolder).open === 'function'
}

/** Where the index is, what to call it in messages, and how to find a shard beside it. */
async function locate(input: string | URL | ModelFiles | ModelFolder): Promise<{ index: Source; where: string; shard: (name: string) => Source }> {
  if (isModelFolder(input)) {
    const index = await input.find(DEFAULT_INDEX)
    if (!index) throw new SafetensorsError('Io', `${input.where} holds no model: no ${DEFAULT_INDEX} there`)
    return { index, where: `${input.where}: ${DEFAULT_INDEX}`, shard: (name) => input.open(name) }
  }
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

/** Options of {@link openModel}: those of {@link open}, applied to the index and every shard, and `concurrency`. */
export interface OpenModelOptions extends OpenOptions {
  /**
   * Shard headers read at once (default 16): enough to hide a network round trip, few enough for any server.
   * @defaultValue 16
   */
  concurrency?: number
}

const DEFAULT_CONCURRENCY = 16

/**
 * Opens a sharded model from its index: a path, a folder holding model.safetensors.index.json, a URL, or
 * the model's files picked or dropped in a page (ModelFiles). Every weight_map entry is checked against its
 * shard's header before it resolves.
 * @throws {@link SafetensorsError} `InvalidHeaderDeserialization` for an index that is not valid JSON of the
 * schema (a repeated key included); `TensorNotFound` when the index puts a tensor in a shard without it (the
 * message says where it is); any code of {@link open} for a shard, its message naming the shard; `Io` for an
 * index or shard that cannot be read (missing, not among the files given); `Aborted`.
 * @throws TypeError for an input that is neither a path, a URL nor File objects, two files of one name, or a
 * path in the browser entry; RangeError for a `concurrency` that is not a positive integer.
 */
export async function openModel(input: string | URL | ModelFiles | ModelFolder, options: OpenModelOptions = {}): Promise<SafetensorsModel> {
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`)
  const { index: location, where, shard } = await locate(input)
  // One meter for the index and every shard: the model's progress is their sum.
  const meter = options.onProgress && new ProgressMeter(options.onProgress)
  const opened = await toRangeSource(location, options)
  const source = meter ? metered(opened, meter, (opened as { url?: string }).url) : opened
  let bytes: Uint8Array
  try {
    bytes = await readIndex(source, where, options.signal)
  } finally {
    await source.close?.()
  }
  const index = parseIndex(where, bytes)
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
    for (const [name, file] of files) listed += index.listedIn(name, file.header.tensors)
    if (listed !== index.entries) {
      const [tensor, name] = [...index.weightMap()].find(([tensor, name]) => !files.get(name)!.header.has(tensor))!
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
  return new SafetensorsModel(index, files)
}

/** A sharded model, from {@link openModel}: the reading API of {@link SafetensorsFile}, over every shard. */
export class SafetensorsModel {
  readonly #index: ParsedIndex
  readonly #files: Map<string, SafetensorsFile>

  /** @internal openModel makes a model, once every entry of the index is found in its shard. */
  constructor(index: ParsedIndex, files: Map<string, SafetensorsFile>) {
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

  /**
   * The header entry of a tensor, from its shard.
   * @throws {@link SafetensorsError} `TensorNotFound`
   */
  info(name: string): TensorInfo {
    return this.#fileOf(name).info(name)
  }

  /**
   * Reads one tensor from its shard: see {@link SafetensorsFile.getTensor}.
   * @throws {@link SafetensorsError} as {@link SafetensorsFile.getTensor} does.
   */
  getTensor<D extends DType, H extends boolean = false>(name: string, options?: ReadOptions<D, H>): Promise<Tensor<DataFor<D, H>>> {
    return this.#fileOf(name).getTensor(name, options)
  }

  /**
   * Reads a slice of one tensor from its shard: see {@link SafetensorsFile.getSlice}.
   * @throws {@link SafetensorsError} as {@link SafetensorsFile.getSlice} does.
   */
  getSlice<D extends DType, H extends boolean = false>(
    name: string,
    ranges: readonly SliceRange[],
    options?: ReadOptions<D, H>,
  ): Promise<Tensor<DataFor<D, H>>> {
    return this.#fileOf(name).getSlice(name, ranges, options)
  }

  /**
   * One tensor or slice as a stream, from its shard: see SafetensorsFile.stream.
   * @throws {@link SafetensorsError} as {@link SafetensorsFile.stream} does.
   */
  stream(name: string, options?: Parameters<SafetensorsFile['stream']>[1]): ReadableStream<Uint8Array> {
    return this.#fileOf(name).stream(name, options)
  }

  /**
   * Every tensor, shard by shard in data order; the next one (when small) is read while this one is handled.
   * @throws {@link SafetensorsError} as {@link SafetensorsFile.getTensor} does, from the iteration.
   */
  tensors<D extends DType, H extends boolean = false>(options?: ReadOptions<D, H>): AsyncGenerator<Tensor<DataFor<D, H>>> {
    return readingAhead(this.#listed().map(([file, info]) => ({ bytes: info.byteLength, read: () => file.getTensor(info.name, options) })))
  }

  /**
   * The file name of the shard that holds tensor `name`.
   * @throws {@link SafetensorsError} `TensorNotFound`
   */
  shardOf(name: string): string {
    const shard = this.#index.shardOf(name)
    if (shard === undefined) throw new SafetensorsError('TensorNotFound', `no tensor named ${JSON.stringify(name)} in this model's weight_map`)
    return shard
  }

  /** Tensors a shard holds that the index does not list there (the model does not include them). */
  unlisted(): Array<{
    /** The tensor's name. */
    tensor: string
    /** The shard that holds it. */
    shard: string
  }> {
    return [...this.#files].flatMap(([shard, file]) => this.#unlistedIn(shard, file).map((t) => ({ tensor: t.name, shard })))
  }

  /** Closes every shard. */
  async close(): Promise<void> {
    await Promise.all([...this.#files.values()].map((f) => f.close()))
  }

  // The tensors the index lists, in shard order then data order (a shard's unlisted tensors are not the model's).
  #listed(): Array<[SafetensorsFile, TensorInfo]> {
    return [...this.#files].flatMap(([shard, file]) => {
      const { tensors } = file.header
      const listed = this.#index.listedIn(shard, tensors) === tensors.length ? tensors : tensors.filter((t) => this.#index.shardOf(t.name) === shard)
      return listed.map((t): [SafetensorsFile, TensorInfo] => [file, t])
    })
  }

  #unlistedIn(shard: string, file: SafetensorsFile): TensorInfo[] {
    const { tensors } = file.header
    return this.#index.listedIn(shard, tensors) === tensors.length ? [] : tensors.filter((t) => this.#index.shardOf(t.name) !== shard)
  }

  #fileOf(name: string): SafetensorsFile {
    return this.#files.get(this.shardOf(name))!
  }
}
