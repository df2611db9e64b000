// openModel(): a sharded model (model.safetensors.index.json and its shards) behind the same reading API
// as one file. Every weight_map entry is checked against its shard's header when the model opens.

import { localFiles } from '#platform'
import { convertOverlapping } from '../core/convert.ts'
import { type DType, dtypeIndex } from '../core/dtypes.ts'
import { reserveMemory, WasmModule } from '../core/wasm.ts'
import { inContext, SafetensorsError } from '../errors.ts'
import { elementsOf, type Header, type Metadata, type TensorInfo } from '../format/header.ts'
import { type JsonValue, parseJson } from '../format/json-values.ts'
import { DEFAULT_INDEX, type ParsedIndex, parseIndex, SINGLE_FILE } from '../format/model-index.ts'
import { planSlice, type SliceRange } from '../format/slice.ts'
import { requireLocalFiles } from '../platform/platform.ts'
import type { QuantizedTensors } from '../quant/index.ts'
import type { LogicalTensorInfo, Quantization, QuantRuntime } from '../quant/logical.ts'
import { readingAhead, runPool } from '../sources/pool.ts'
import { metered, ProgressMeter } from '../sources/progress.ts'
import { isMissingFile, type ModelFiles, type ModelFolder } from '../sources/source.ts'
import {
  allocate,
  type DataFor,
  float16ArrayFor,
  type OpenOptions,
  openMetered,
  outputIn,
  type ReadOptions,
  type SafetensorsFile,
  type Source,
  type Tensor,
  toRangeSource,
  urlOf,
} from './file.ts'
import { readSmallFile } from './small-file.ts'
import { pulledStream } from './streams.ts'

/**
 * The model's file `name` beside its weights (config.json, the tokenizer's files), whole, its reads counted by
 * `meter`: its bytes, or where it is missing, `where` it was looked for (its path or URL, else `name`) and the
 * error that says so (none where the input lists no such file).
 */
export async function readBeside(
  located: Located,
  name: string,
  options: OpenOptions,
  meter?: ProgressMeter,
): Promise<{ bytes: Uint8Array } | { bytes?: undefined; where: string; missing?: SafetensorsError }> {
  const found = await located.beside(name)
  const where = found instanceof URL || typeof found === 'string' ? String(found) : name
  if (found === undefined) return { where }
  try {
    const opened = await toRangeSource(found, options)
    const source = meter ? metered(opened, meter, (opened as { url?: string }).url) : opened
    try {
      return { bytes: await readSmallFile(source, where, options.signal, name) }
    } finally {
      await source.close?.()
    }
  } catch (error) {
    if (isMissingFile(error)) return { where, missing: error as SafetensorsError }
    throw error
  }
}

/**
 * config.json's object; undefined for none, and for one that is not a JSON object, which is not this library's
 * to judge (and is what a dev server's fallback page gives for a missing file).
 */
function configOf(file: { bytes?: Uint8Array }): JsonValue | undefined {
  if (!file.bytes) return undefined
  try {
    const config = parseJson(new TextDecoder().decode(file.bytes), 'config.json')
    return config.isObject ? config : undefined
  } catch (error) {
    if (error instanceof SafetensorsError) return undefined
    throw error
  }
}

/** What the quantization code (src/quant/, loaded on demand) borrows of the library: see QuantRuntime. */
const QUANT_RUNTIME: QuantRuntime = {
  SafetensorsError,
  parseJson,
  WasmModule,
  reserveMemory,
  convertOverlapping,
  planSlice,
  elementsOf,
  dtypeIndex,
  output: (name, dtype, bytes, out) => (out === undefined ? allocate({ name }, dtype, bytes) : outputIn(out, { name }, dtype, bytes)),
  float16Array: float16ArrayFor,
  pulledStream,
}

/** A model's entry of this name is its one file; of any other name, its index. */
function isOneFile(name: string): boolean {
  return /\.safetensors$/i.test(name)
}

function isModelFolder(input: unknown): input is ModelFolder {
  return typeof input === 'object' && input !== null && typeof (input as ModelFolder).find === 'function' && typeof (input as ModelFolder).open === 'function'
}

/** What a folder's model is read from, the first there of these (the order transformers follows). */
const FOLDER_ENTRIES = [SINGLE_FILE, DEFAULT_INDEX]

function noModelIn(folder: string, path?: string): SafetensorsError {
  return new SafetensorsError('Io', `${folder} is a folder with no model in it: neither ${SINGLE_FILE} nor ${DEFAULT_INDEX} is there`, { path })
}

/**
 * What a model is read from: its index or its one file (`name`: its file name), what to call it in
 * messages, how to find a shard beside it, and another file beside it (config.json, tokenizer.json):
 * undefined where it is known to be missing, else a source that fails as a missing file does when read.
 */
export interface Located {
  entry: Source
  name: string
  where: string
  shard: (name: string) => Source
  beside: (name: string) => Promise<Source | undefined>
}

/** Where the model `input` (what openModel takes) is. */
export async function locate(input: string | URL | ModelFiles | ModelFolder): Promise<Located> {
  if (isModelFolder(input)) {
    for (const name of FOLDER_ENTRIES) {
      const entry = await input.find(name)
      if (entry) return { entry, name, where: `${input.where}: ${name}`, shard: (shard) => input.open(shard), beside: (other) => input.find(other) }
    }
    throw noModelIn(input.where)
  }
  if (typeof input !== 'string' && !(input instanceof URL)) return locateFiles(input)
  const url = urlOf(input)
  if (url && url.protocol !== 'file:') {
    const entry = url.pathname.endsWith('/') ? new URL(DEFAULT_INDEX, url) : url
    const name = entry.pathname.slice(entry.pathname.lastIndexOf('/') + 1)
    const shard = (name: string) => new URL(name, entry)
    return { entry, name, where: String(entry), shard, beside: async (name) => shard(name) }
  }
  const local = requireLocalFiles(localFiles, `openModel(${JSON.stringify(String(input))})`)
  const path = url ? local.pathOf(url) : (input as string)
  const found = await local.locateModel(path, FOLDER_ENTRIES)
  if (!found) throw noModelIn(path, path)
  return { entry: found.file, name: found.name, where: found.file, shard: found.shard, beside: async (name) => found.shard(name) }
}

/**
 * The model among `files`, in this order: model.safetensors, model.safetensors.index.json, the one
 * *.index.json, the one *.safetensors file.
 */
function locateFiles(input: ModelFiles): Located {
  if (typeof input !== 'object' || input === null || typeof (input as Partial<ModelFiles>)[Symbol.iterator] !== 'function') {
    throw new TypeError(
      `openModel takes a path, a URL, the model's files (File objects) or a ModelFolder (r2Model), got ${Object.prototype.toString.call(input)}`,
    )
  }
  const files = new Map<string, File>()
  for (const file of input) {
    if (typeof Blob === 'undefined' || !(file instanceof Blob) || typeof (file as Partial<File>).name !== 'string')
      throw new TypeError(`openModel: every file must be a File, got ${Object.prototype.toString.call(file)}`)
    if (files.has(file.name)) throw new TypeError(`openModel: two files are named ${JSON.stringify(file.name)}`)
    files.set(file.name, file)
  }
  const names = [...files.keys()]
  const indexes = names.filter((name) => name.endsWith('.index.json'))
  const single = names.filter(isOneFile)
  const entry =
    files.get(SINGLE_FILE) ??
    files.get(DEFAULT_INDEX) ??
    (indexes.length === 1 ? files.get(indexes[0]) : undefined) ??
    (indexes.length === 0 && single.length === 1 ? files.get(single[0]) : undefined)
  if (!entry) {
    const found = indexes.length === 0 ? 'none' : indexes.map((name) => JSON.stringify(name)).join(', ')
    throw new SafetensorsError(
      'Io',
      `no model among the ${files.size} files given: expected ${SINGLE_FILE}, ${DEFAULT_INDEX}, one *.index.json or one *.safetensors file (found ${found})`,
    )
  }
  const shard = (name: string) => {
    const file = files.get(name)
    if (!file) throw new SafetensorsError('Io', `not among the ${files.size} files given`)
    return file
  }
  return { entry, name: entry.name, where: entry.name, shard, beside: async (name) => files.get(name) }
}

/** What a model needs of its index: a model of one file has every tensor of the file and no metadata. */
type WeightMap = Pick<ParsedIndex, 'metadata' | 'shardOf' | 'listedIn'>

function oneFile(shard: string, header: Header): WeightMap {
  return {
    metadata: undefined,
    shardOf: (name) => (header.has(name) ? shard : undefined),
    listedIn: (name, tensors) => (name === shard ? tensors.length : 0),
  }
}

/** Opens one file of a model; its errors say which (`what`), finding it included. */
async function openPart(what: string, source: () => Source, options: OpenModelOptions, meter: ProgressMeter | undefined): Promise<SafetensorsFile> {
  try {
    return await openMetered(source(), options, meter)
  } catch (error) {
    throw error instanceof SafetensorsError ? inContext(error, what) : error
  }
}

/** Options of {@link openModel}: those of {@link open}, applied to the index and every shard, and `concurrency`. */
export interface OpenModelOptions extends OpenOptions {
  /**
   * Shard headers read at once (default 16): enough to hide a network round trip, few enough for any server.
   * @defaultValue 16
   */
  concurrency?: number
  /**
   * false: a quantized model is opened as its stored tensors, each part under its own name, config.json's
   * quantization block not read (as the CLI's validate and inspect do for a method this library does not read).
   * @defaultValue true
   */
  quantization?: boolean
}

const DEFAULT_CONCURRENCY = 16

/**
 * Opens a model: a sharded one from its index (a path or a URL), a model of one file from that
 * .safetensors file, a folder holding model.safetensors or else model.safetensors.index.json (the order
 * transformers follows), the model's files picked or dropped in a page (ModelFiles), or such a folder in
 * other storage (a {@link ModelFolder}: an R2 prefix, from {@link r2Model}). Every weight_map entry is
 * checked against its shard's header before it resolves.
 * @throws {@link SafetensorsError} `InvalidHeaderDeserialization` for an index that is not valid JSON of the
 * schema (a repeated key included); `TensorNotFound` when the index puts a tensor in a shard without it (the
 * message says where it is); any code of {@link open} for a shard or the one file, its message naming it; `Io`
 * for an index or shard that cannot be read (missing, not among the files given) and for a folder holding
 * neither model.safetensors nor an index; `UnsupportedQuantization` for a config.json whose quantization block
 * this library does not read (a method, an option, a value of the wrong type: the message names the key) and
 * `InvalidQuantization` for a quantized model's parts (neither unless `quantization` is false); `Aborted`.
 * @throws TypeError for an input that is neither a path, a URL, File objects nor a ModelFolder, two files of one
 * name, a path in the browser entry, or a `quantization` that is not a boolean; RangeError for a `concurrency`
 * that is not a positive integer.
 */
export async function openModel(input: string | URL | ModelFiles | ModelFolder, options: OpenModelOptions = {}): Promise<SafetensorsModel> {
  checkConcurrency(options)
  checkQuantization(options)
  return openLocated(await locate(input), options)
}

function checkQuantization({ quantization }: OpenModelOptions): void {
  if (quantization !== undefined && typeof quantization !== 'boolean') throw new TypeError(`quantization must be a boolean, got ${typeof quantization}`)
}

function checkConcurrency(options: OpenModelOptions): number {
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`)
  return concurrency
}

/** openModel() of a model already located. */
export async function openLocated(located: Located, options: OpenModelOptions): Promise<SafetensorsModel> {
  // config.json says whether the model is quantized; it is read beside the shards' headers, once the index is
  // known to be good, and the code that reads quantized models is loaded only for one.
  let beside: ReturnType<typeof readBeside> | undefined
  const readConfig = (meter: ProgressMeter | undefined) => {
    if (options.quantization === false) return
    beside = readBeside(located, 'config.json', options, meter)
    // Handled here too: the weights may fail first, and then nobody waits for it.
    beside.catch(() => {})
  }
  const model = await openWeights(located, options, readConfig)
  try {
    // openWeights started it, whichever the model's kind, unless the quantization is not to be read.
    const config = beside && configOf(await beside)
    // The quantization code says what its keys hold.
    if (config && ['quantization_config', 'quantization'].some((key) => config.get(key).present)) {
      const { quantizedTensors } = await import('../quant/index.ts')
      model.quantized = await quantizedTensors(model, model.names(), config, QUANT_RUNTIME)
    }
  } catch (error) {
    await model.close()
    throw error
  }
  return model
}

/**
 * The model's weights: its one file, or its index and every shard; `beside` starts once the index checks out, its
 * reads counted with theirs.
 */
async function openWeights(
  { entry, name, where, shard }: Located,
  options: OpenModelOptions,
  beside: (meter: ProgressMeter | undefined) => void,
): Promise<SafetensorsModel> {
  const concurrency = checkConcurrency(options)
  // One meter for the index and every shard: the model's progress is their sum.
  const meter = options.onProgress && new ProgressMeter(options.onProgress)
  if (isOneFile(name)) {
    beside(meter)
    const file = await openPart(where, () => entry, options, meter)
    return new SafetensorsModel(oneFile(name, file.header), new Map([[name, file]]))
  }
  const opened = await toRangeSource(entry, options)
  const source = meter ? metered(opened, meter, (opened as { url?: string }).url) : opened
  let bytes: Uint8Array
  try {
    bytes = await readSmallFile(source, where, options.signal)
  } finally {
    await source.close?.()
  }
  const index = parseIndex(where, bytes)
  beside(meter)
  const shardNames = index.shards
  const shards: Array<SafetensorsFile | undefined> = []
  let files: Map<string, SafetensorsFile>
  try {
    await runPool(shardNames, concurrency, async (name, i) => {
      shards[i] = await openPart(`shard ${name}`, () => shard(name), options, meter)
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

/**
 * Options of a model's reads: those of {@link SafetensorsFile}'s, and `stored`, for a quantized model's stored
 * tensor whose name is also a logical tensor's (MLX's and bitsandbytes' `<module>.weight`).
 */
export interface ModelReadOptions<D extends DType = DType, H extends boolean = boolean> extends ReadOptions<D, H> {
  /**
   * Read the stored tensor of this name, not the logical tensor of a quantized module named alike.
   * @defaultValue false
   */
  stored?: boolean
}

/**
 * A sharded model, from {@link openModel}: the reading API of {@link SafetensorsFile}, over every shard. In a
 * quantized model (docs/quantized.md), each quantized module is its logical tensor: the dequantized weight, under
 * the name and shape transformers gives it, read as the layout's reference computes it.
 */
export class SafetensorsModel {
  readonly #index: WeightMap
  readonly #files: Map<string, SafetensorsFile>
  /** @internal openModel sets it for a quantized model. */
  quantized: QuantizedTensors | undefined

  /** @internal openModel makes a model, once every entry of the index is found in its shard. */
  constructor(index: WeightMap, files: Map<string, SafetensorsFile>) {
    this.#index = index
    this.#files = files
  }

  /** The index's metadata (e.g. { total_size }), not a shard's; null for a model of one file. */
  get metadata(): Metadata<unknown> | null {
    return this.#index.metadata ?? null
  }

  /** How the model is quantized (config.json's quantization block), or null for a model that is not. */
  get quantization(): Quantization | null {
    return this.quantized?.quantization ?? null
  }

  /** The open shards, by file name. */
  get shards(): ReadonlyMap<string, SafetensorsFile> {
    return this.#files
  }

  /**
   * Tensor names, shard by shard in data order; in a quantized model, each module's logical tensor where its
   * first stored part is, and the parts left out (each is still read by its own name).
   */
  names(): string[] {
    return this.quantized?.names ?? this.#listed().map(([, info]) => info.name)
  }

  /**
   * The header entry of a tensor, from its shard; a logical tensor's says its dtype, shape and parts in
   * `quantized`, which a stored tensor's leaves undefined.
   * @throws {@link SafetensorsError} `TensorNotFound`
   */
  info(
    name: string,
    options?: { stored?: boolean },
  ):
    | (TensorInfo & {
        /** None: the tensor is stored as it is read. */
        readonly quantized?: undefined
      })
    | LogicalTensorInfo {
    return this.#logical(name, options)?.info(name) ?? this.#fileOf(name).info(name)
  }

  /**
   * Reads one tensor from its shard: see {@link SafetensorsFile.getTensor}. A logical tensor is read from its parts
   * and dequantized, in the reference's dtype unless `dtype` says otherwise (F32, F16 or BF16).
   * @throws {@link SafetensorsError} as {@link SafetensorsFile.getTensor} does, and `InvalidQuantization` or
   * `UnsupportedQuantization` for parts that do not fit together or are not read.
   */
  getTensor<D extends DType, H extends boolean = false>(name: string, options: ModelReadOptions<D, H> = {}): Promise<Tensor<DataFor<D, H>>> {
    const quantized = this.#logical(name, options)
    return (quantized ? quantized.read(name, undefined, options) : this.#fileOf(name).getTensor(name, options)) as Promise<Tensor<DataFor<D, H>>>
  }

  /**
   * Reads a slice of one tensor from its shard: see {@link SafetensorsFile.getSlice}. A slice of a logical tensor
   * reads the parts of its rows of the first dimension only, where the layout stores them apart.
   * @throws {@link SafetensorsError} as {@link SafetensorsModel.getTensor} does, and `SliceOutOfRange`,
   * `TooManySlices`, `MisalignedSlice`.
   */
  getSlice<D extends DType, H extends boolean = false>(
    name: string,
    ranges: readonly SliceRange[],
    options: ModelReadOptions<D, H> = {},
  ): Promise<Tensor<DataFor<D, H>>> {
    const quantized = this.#logical(name, options)
    return (quantized ? quantized.read(name, ranges, options) : this.#fileOf(name).getSlice(name, ranges, options)) as Promise<Tensor<DataFor<D, H>>>
  }

  /**
   * One tensor or slice as a stream, from its shard: see SafetensorsFile.stream; a logical tensor comes in blocks
   * of rows of its first dimension.
   * @throws {@link SafetensorsError} as {@link SafetensorsFile.stream} does.
   */
  stream(name: string, options: Parameters<SafetensorsFile['stream']>[1] & { stored?: boolean } = {}): ReadableStream<Uint8Array> {
    return this.#logical(name, options)?.stream(name, options) ?? this.#fileOf(name).stream(name, options)
  }

  /**
   * Every tensor of {@link SafetensorsModel.names}, in its order; the next one (when small) is read while this one is handled.
   * @throws {@link SafetensorsError} as {@link SafetensorsModel.getTensor} does, from the iteration.
   */
  tensors<D extends DType, H extends boolean = false>(options?: ReadOptions<D, H>): AsyncGenerator<Tensor<DataFor<D, H>>> {
    return readingAhead(this.names().map((name) => ({ bytes: this.info(name).byteLength, read: () => this.getTensor(name, options) })))
  }

  /**
   * The file name of the shard that holds tensor `name`.
   * @throws {@link SafetensorsError} `TensorNotFound`
   */
  shardOf(name: string): string {
    const shard = this.#index.shardOf(this.quantized?.has(name) ? this.quantized.firstPart(name) : name)
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

  /** close(), for `await using model = await openModel(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
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
    return this.#files.get(this.#index.shardOf(name) ?? this.shardOf(name))!
  }

  /** The logical tensors, where `name` is one of them (and the read is not of the stored tensor of that name). */
  #logical(name: string, options?: { stored?: boolean }): QuantizedTensors | undefined {
    return !options?.stored && this.quantized?.has(name) ? this.quantized : undefined
  }
}
