// convertFile / convertModel (Node entry): rewrite a file or a sharded model with its floating-point
// tensors in another dtype, and optionally in other shards, streaming so that memory stays bounded
// whatever the size. Every chunk is read straight into a fixed working set in wasm memory, converted
// there in place and written from a view of it: nothing is allocated per chunk. The output files appear
// only once all of them are complete (src/node/atomic-files.ts, fileSet).
import { readdir, stat } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { byteLengthOf, type ConvertTarget, type Core, convertedDtypeOf, convertInto, instantiate, swapElementsInCore } from '../core/convert.ts'
import { DTYPE_INFO, type DType } from '../core/dtypes.ts'
import type { TensorInfo } from '../format/header.ts'
import { tensorByteLength } from '../format/layout.ts'
import { checkConfigSize, withDtype, withoutQuantization } from '../format/model-config.ts'
import { DEFAULT_INDEX, SINGLE_FILE } from '../format/model-index.ts'
import { fileError, fileSource, nodeFiles } from '../platform/node-files.ts'
import { loadPool, type OpenOptions, open, type SafetensorsFile, type Source, urlOf } from '../read/file.ts'
import { openModel } from '../read/model.ts'
import { type SequentialReader, sequentialReader } from '../sources/downloads.ts'
import { type ProgressCallback, ProgressMeter } from '../sources/progress.ts'
import { linkedAbort, memorySource, type RangeSource, readInto } from '../sources/source.ts'
import { planShards } from '../write/model-files.ts'
import { SafetensorsWriter } from '../write/writer.ts'
import { type FileSet, writeSet } from './atomic-files.ts'
import { isSaveLeftover, writeModel } from './save-model.ts'

/** Options of convertFile and convertModel: those of {@link open} for the input, and what the output is. */
export interface ConvertFileOptions extends OpenOptions {
  /**
   * Floating-point tensors become this dtype; the others (integers, BOOL, C64) are copied. Omitted: every dtype is kept.
   * @defaultValue none: every dtype is kept
   */
  dtype?: ConvertTarget
  /**
   * Reshard: the output is a folder of shards of at most this many bytes of tensor data each, named
   * and indexed as transformers does (model-0000i-of-0000n.safetensors and model.safetensors.index.json).
   * @defaultValue none: one file (convertFile), the input's shards (convertModel)
   */
  maxShardSize?: number
  /**
   * One series for the whole conversion: `total` is the bytes of tensor data to read, the same in every
   * event from the first (which comes before any byte); `loaded` the bytes read so far, never less than
   * before; the last event has loaded === total.
   */
  onProgress?: ProgressCallback
  /**
   * convertModel of a GGUF: every tensor under its GGUF name and shape as stored (as F32, or `dtype`), nothing
   * undone, the GGUF's keys in __metadata__, no config or tokenizer files; for an architecture it does not map.
   * @defaultValue false
   */
  raw?: boolean
}

/**
 * Bytes of one slot, the most a chunk takes (input or output, whichever is wider). Large writes matter:
 * measured here, writing 2 GiB from wasm memory took 2.5 s in 16 MiB writes and 3 to 7 s in 4 MiB ones.
 */
const SLOT_BYTES = 16 << 20

/**
 * The working set: two slots in a wasm memory sized once (it never grows, so its views stay valid). One
 * slot is written out while the next chunk is read into the other, so reading and writing overlap.
 */
class ChunkPipeline {
  readonly #core: Core = instantiate(2 * SLOT_BYTES, false)
  #slot = 0
  #writing: Promise<void> = Promise.resolve()
  /**
   * The reads' signal: the caller's, and aborted too by the first write that fails, so that the read in
   * flight stops at once rather than filling a slot for a dead file. close() drops its listener.
   */
  readonly #reads: ReturnType<typeof linkedAbort>
  /** The first failed write's error, once there is one. */
  #writeFailure: { error: unknown } | undefined
  readonly #meter: ProgressMeter | undefined
  /** The `workers` option: chunks of local files are read and converted on the pool unless it is 0. */
  readonly #workers: number | undefined
  /** The pool's two slots: shared memory that its workers write, one written out while the other fills. */
  #shared: [Uint8Array, Uint8Array] | undefined

  constructor(signal: AbortSignal | undefined, meter: ProgressMeter | undefined, workers: number | undefined) {
    this.#reads = linkedAbort(signal, () => {})
    this.#meter = meter
    this.#workers = workers
  }

  close(): void {
    this.#reads.release()
  }

  /** Streams one tensor of `file` into `writer` as `to`: on the pool where its workers read the file themselves. */
  async copy(file: SafetensorsFile, info: TensorInfo, to: DType, writer: SafetensorsWriter): Promise<void> {
    if (this.#workers !== 0 && (file.source as { forWorkers?: unknown }).forWorkers && (await this.#copyOnPool(file, info, to, writer))) return
    const from = info.dtype
    const start = file.header.dataStart + info.dataOffsets[0]
    const elements = info.shape.reduce((a, b) => a * b, 1)
    const buffer = this.#core.memory.buffer
    // Elements per chunk: as many as the slot holds, a multiple of 8 so F4 and F6 chunks are whole bytes.
    const perChunk = Math.floor((SLOT_BYTES * 8) / Math.max(DTYPE_INFO[from].bits, DTYPE_INFO[to].bits) / 8) * 8
    // Over HTTP, the tensor's chunks are fetched ahead in parallel (src/sources/downloads.ts).
    const input = sequentialReader([{ source: file.source, offset: start, length: info.byteLength }], this.#reads.signal)
    try {
      for (let first = 0; first < elements; first += perChunk) {
        const count = Math.min(perChunk, elements - first)
        const inBytes = byteLengthOf(from, count)
        const outBytes = byteLengthOf(to, count)
        const dst = this.#core.heapBase + this.#slot * SLOT_BYTES
        // The kernels' in-place layout: a wider output has the input at its end, a narrower one at its start.
        const src = dst + Math.max(0, outBytes - inBytes)
        await this.#read(input, new Uint8Array(buffer, src, inBytes))
        // The kernels read little-endian data, and the output file is little-endian.
        if (file.byteOrder === 'big') swapElementsInCore(this.#core, src, inBytes, from)
        convertInto(this.#core, src, dst, count, from, to)
        await this.#writing
        this.#writing = this.#write(writer, info.name, new Uint8Array(buffer, dst, outBytes))
        this.#slot ^= 1
      }
    } finally {
      input.close()
    }
  }

  /** copy() a chunk at a time on the pool's workers; false, having done nothing, where there is no pool. */
  async #copyOnPool(file: SafetensorsFile, info: TensorInfo, to: DType, writer: SafetensorsWriter): Promise<boolean> {
    const reads = await loadPool()
    if (!reads) return false
    const from = info.dtype
    const elements = info.shape.reduce((a, b) => a * b, 1)
    const perChunk = Math.floor((SLOT_BYTES * 8) / Math.max(DTYPE_INFO[from].bits, DTYPE_INFO[to].bits) / 8) * 8
    this.#shared ??= [new Uint8Array(new SharedArrayBuffer(SLOT_BYTES)), new Uint8Array(new SharedArrayBuffer(SLOT_BYTES))]
    const meter = this.#meter
    for (let first = 0; first < elements; first += perChunk) {
      const count = Math.min(perChunk, elements - first)
      const out = this.#shared[this.#slot].subarray(0, byteLengthOf(to, count))
      const read = {
        name: info.name,
        from,
        to,
        byteOrder: file.byteOrder,
        start: file.header.dataStart + info.dataOffsets[0],
        runs: [[byteLengthOf(from, first), byteLengthOf(from, count)]] as const,
        outBytes: out.length,
        out: { data: out, bytes: out },
        signal: this.#reads.signal,
        onBytes: meter && ((bytes: number) => meter.arrived(bytes)),
      }
      // The other slot is being written meanwhile; this one's write was awaited before that one began.
      if (!(await this.#readOrWriteFailure(reads.readOnPool(file.source, this.#workers, read)))) return false
      await this.#writing
      this.#writing = this.#write(writer, info.name, out)
      this.#slot ^= 1
    }
    return true
  }

  /** A read's result; a read stopped by a failed write fails with the write's error, the one that happened. */
  async #readOrWriteFailure<T>(reading: Promise<T>): Promise<T> {
    try {
      return await reading
    } catch (error) {
      throw this.#writeFailure ? this.#writeFailure.error : error
    }
  }

  /** Writes a logical tensor's values, as its stream gives them, into tensor `name` of `writer`. */
  async dequantize(logical: { stream: () => ReadableStream<Uint8Array>; bytes: number }, name: string, writer: SafetensorsWriter): Promise<void> {
    await this.drain()
    const reader = logical.stream().getReader()
    try {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) await writer.write(name, chunk.value)
    } finally {
      reader.releaseLock()
    }
    this.#meter?.arrived(logical.bytes)
  }

  /** Waits for the last write; a failed write rejects here if no later step has seen it. */
  async drain(): Promise<void> {
    const writing = this.#writing
    this.#writing = Promise.resolve()
    await writing
  }

  async #read(input: SequentialReader, target: Uint8Array): Promise<void> {
    let arrived = 0
    const meter = this.#meter
    const onBytes =
      meter &&
      ((bytes: number) => {
        arrived += bytes
        meter.arrived(bytes)
      })
    await this.#readOrWriteFailure(input.read(target, onBytes))
    // A source that does not stream tells of its bytes only now.
    if (arrived < target.length) meter?.arrived(target.length - arrived)
  }

  #write(writer: SafetensorsWriter, name: string, bytes: Uint8Array): Promise<void> {
    const writing = writer.write(name, bytes)
    // Handled at once, not only when the next chunk is read: a failure while a read is in flight is no
    // unhandled rejection, and that read stops.
    writing.catch((error: unknown) => {
      this.#writeFailure ??= { error }
      this.#reads.abort(error)
    })
    return writing
  }
}

interface Planned {
  file: string
  tensors: Array<{
    source: SafetensorsFile
    info: TensorInfo
    to: DType
    /** A quantized model's logical tensor: its values as `to`, streamed, and the stored bytes they are read from. */
    logical?: { stream: () => ReadableStream<Uint8Array>; bytes: number }
  }>
  metadata: Record<string, string> | null
}

/** The conversion's progress, over the input bytes of `tensors`: the first event tells the total, before any byte. */
function startProgress(meter: ProgressMeter | undefined, tensors: Planned['tensors']): void {
  if (!meter) return
  meter.asked(tensors.reduce((sum, t) => sum + (t.logical?.bytes ?? t.info.byteLength), 0))
  meter.arrived(0)
}

/** Writes each planned shard into the set, tensor by tensor through one pipeline; returns the bytes of tensor data written. */
async function writeShards(folder: string, set: FileSet, shards: Planned[], options: ConvertFileOptions, meter: ProgressMeter | undefined): Promise<number> {
  const pipeline = new ChunkPipeline(options.signal, meter, options.workers)
  let written = 0
  try {
    for (const shard of shards) {
      const declarations = shard.tensors.map(({ info, to }) => ({ name: info.name, dtype: to, shape: info.shape }))
      const writer = SafetensorsWriter.create(await set.sink(join(folder, shard.file)), declarations, { metadata: shard.metadata })
      try {
        for (const { source, info, to, logical } of shard.tensors) {
          if (logical) await pipeline.dequantize(logical, info.name, writer)
          else await pipeline.copy(source, info, to, writer)
        }
        await pipeline.drain()
        await writer.close()
      } catch (error) {
        await pipeline.drain().catch(() => {})
        await writer.abort(error)
        throw error
      }
      written += writer.layout.fileSize - writer.layout.dataStart
    }
  } finally {
    pipeline.close()
  }
  return written
}

/** Plans the output shards of `tensors` (in model order) under `maxShardSize`, each with the metadata of the input holding its first tensor. */
function reshard(tensors: Planned['tensors'], maxShardSize: number): Planned[] {
  const sized = (t: Planned['tensors'][number]) => tensorByteLength({ name: t.info.name, dtype: t.to, shape: t.info.shape })
  return planShards(tensors, sized, maxShardSize).map(({ file, tensors }) => ({ file, tensors, metadata: tensors[0]?.source.metadata ?? null }))
}

/** The conversion's own meter, made before anything is opened so that a bad onProgress is a TypeError at once. */
function meterOf(options: ConvertFileOptions): ProgressMeter | undefined {
  return options.onProgress === undefined ? undefined : new ProgressMeter(options.onProgress)
}

/** The input's options without onProgress: the conversion reports one series of its own, not the reads' own meter. */
function inputOptions({ onProgress: _, ...options }: ConvertFileOptions): OpenOptions {
  return options
}

/**
 * Writes `output` as `input` with every floating-point tensor in `options.dtype`. With
 * `options.maxShardSize`, `output` is a folder that gets the shards and their index.
 * Resolves to the names of the files written, in `output`'s folder (or in `output` when it is one).
 * @throws {@link SafetensorsError} any code of {@link open} (or {@link openModel}) for the input;
 * `UnsupportedConversion`; `Io` when the output cannot be written (the message names it), with the target
 * left untouched; `Aborted`.
 * @throws TypeError or RangeError for options of the wrong type or out of range; RangeError for an output that is
 * the input (the same file, or with `maxShardSize` the folder it is in), before anything is written.
 */
export async function convertFile(input: Source, output: string, options: ConvertFileOptions = {}): Promise<string[]> {
  const path = localPathOf(input)
  if (path !== undefined) {
    if (options.maxShardSize === undefined) await refuseSame(path, output, 'convertFile: the output is the input')
    else await refuseSame(dirname(path), output, "convertFile: the output folder is the input's")
  }
  const meter = meterOf(options)
  const file = await open(input, inputOptions(options))
  try {
    const tensors = file.header.tensors.map((info) => ({ source: file, info, to: convertedDtypeOf(info, options.dtype) }))
    startProgress(meter, tensors)
    if (options.maxShardSize === undefined) {
      await writeSet(output, (set) => writeShards(dirname(output), set, [{ file: basename(output), tensors, metadata: file.metadata }], options, meter))
      return [basename(output)]
    }
    const shards = reshard(tensors, options.maxShardSize)
    return await writeModel(output, { shards: shardNames(shards) }, async (set) => ({ totalSize: await writeShards(output, set, shards, options, meter) }))
  } finally {
    await file.close()
  }
}

function shardNames(shards: Planned[]): Array<{ file: string; names: string[] }> {
  return shards.map((s) => ({ file: s.file, names: s.tensors.map((t) => t.info.name) }))
}

/**
 * Converts a sharded model into `folder`: shard by shard under the same names and the same index name,
 * or, with `options.maxShardSize`, into new shards named as transformers names them. The index's
 * total_size and weight_map describe the new shards; its other metadata is kept. The other files of a
 * local model's folder come along (see otherFiles), config.json naming the new dtype. All files appear at
 * once, when every one is complete. Resolves to the names of the files written in `folder`: the shards,
 * the index (none for a model of one file, unless resharded into several), then the other files.
 *
 * A GGUF file (a path or URL ending in `.gguf`) becomes the Hugging Face model it was converted from (docs/gguf.md,
 * "GGUF to a Hugging Face folder"): its parameters as transformers names and shapes them, each the values ggml
 * dequantizes (F32 by default, or `dtype`) with llama.cpp's changes undone, config.json, generation_config.json
 * and the tokenizer's files rebuilt from its keys.
 * @throws {@link SafetensorsError} any code of {@link open} (or {@link openModel}, or for a GGUF openGguf and
 * getTensor) for the input; `InvalidGguf` for a GGUF without a key config.json needs;
 * `InvalidHeaderDeserialization` for a config.json that is not a JSON object; `UnsupportedConversion` (for a GGUF:
 * an architecture, tensor, RoPE scaling or tokenizer it cannot map, named);
 * `Io` when the output cannot be written (the message names it), with the target left untouched; `Aborted`.
 * @throws TypeError or RangeError for options of the wrong type or out of range; RangeError for an output folder
 * that is the model's own, before anything is written.
 */
export async function convertModel(index: string | URL, folder: string, options: ConvertFileOptions = {}): Promise<string[]> {
  if (isGgufName(index)) {
    const { convertGguf } = await import('./gguf-model.ts')
    return convertGguf(index, folder, options)
  }
  const entry = await localEntry(index)
  if (entry) await refuseSame(dirname(entry.file), folder, "convertModel: the output folder is the model's")
  const meter = meterOf(options)
  const model = await openModel(index, inputOptions(options))
  try {
    const inputs = [...model.shards]
    const listed = model.names().map((name) => {
      const source = model.shards.get(model.shardOf(name))!
      const info = model.info(name)
      const to = convertedDtypeOf(info, options.dtype)
      // A quantized module's logical tensor is written as its values, read from its parts.
      const parts = info.quantized?.parts
      const logical = parts && {
        stream: () => model.stream(name, { dtype: to, signal: options.signal }),
        bytes: parts.reduce((sum, part) => sum + model.info(part, { stored: true }).byteLength, 0),
      }
      return { source, info, to, logical }
    })
    const shards: Planned[] =
      options.maxShardSize === undefined
        ? inputs.map(([file, source]) => ({ file, tensors: listed.filter((t) => t.source === source), metadata: source.metadata }))
        : reshard(listed, options.maxShardSize)
    const { total_size: _, ...metadata } = model.metadata ?? {}
    const quantized = model.quantization !== null
    // A quantized model's own config files (AutoGPTQ's, ModelOpt's) would pass the plain model off as quantized.
    const others = (entry ? await otherFiles(entry, model.shards.keys()) : []).filter((f) => !quantized || !QUANTIZATION_FILES.has(basename(f)))
    // Rewritten before any tensor is converted: a broken config.json fails at once.
    const config = others.find((f) => basename(f) === 'config.json')
    const configBytes = config !== undefined && (options.dtype !== undefined || quantized) ? await readConfig(config, options.dtype, quantized) : undefined
    startProgress(meter, listed)
    // The same layout keeps the index's name too, and a model of one file stays one, with no index beside it.
    const entryName = entry?.name ?? basename(String(index))
    const indexName = options.maxShardSize === undefined && entryName.endsWith('.json') ? entryName : undefined
    const written = await writeModel(folder, { shards: shardNames(shards), index: indexName }, async (set) => {
      const totalSize = await writeShards(folder, set, shards, options, meter)
      for (const from of others)
        await copyInto(set, configBytes && from === config ? memorySource(configBytes) : await fileSource(from), join(folder, basename(from)))
      return { totalSize, metadata }
    })
    return [...written, ...others.map((from) => basename(from))]
  } finally {
    await model.close()
  }
}

/** Whether an input names a GGUF file: its path or URL ends in .gguf. */
export const isGgufName = (input: string | URL) => /\.gguf$/i.test(String(input).replace(/[?#].*$/, ''))

/** The local path an input names (a path, or a file: URL); undefined for any other input. */
function localPathOf(input: Source): string | undefined {
  if (typeof input !== 'string' && !(input instanceof URL)) return undefined
  const url = urlOf(input)
  return url === undefined ? String(input) : url.protocol === 'file:' ? fileURLToPath(url) : undefined
}

/** A local model's index or single file, as openModel found it (the path, or the entry in its folder); none over HTTP. */
async function localEntry(index: string | URL): Promise<{ file: string; name: string } | undefined> {
  const path = localPathOf(index)
  return path === undefined ? undefined : await nodeFiles.locateModel(path, [SINGLE_FILE, DEFAULT_INDEX])
}

/**
 * A RangeError when `output` is `input`, the same file or folder (the same device and inode, whatever the path
 * says): a write into what it reads would replace the input by a conversion of itself, lossily.
 */
async function refuseSame(input: string, output: string, what: string): Promise<void> {
  const [a, b] = await Promise.all([stat(input).catch(() => undefined), stat(output).catch(() => undefined)])
  if (a && b && a.dev === b.dev && a.ino === b.ino) throw new RangeError(`${what} (${output}); write to another ${a.isDirectory() ? 'folder' : 'file'}`)
}

/**
 * The paths of the files of a local model's folder other than its weights: config.json,
 * generation_config.json, the tokenizer's files, README.md and whatever else is there. Files only, not
 * subfolders: transformers reads a model's files from its folder alone, and what subfolders hold
 * (original/ or onnx/ weights in other formats, .cache/, .git/) is not the model being converted. Not
 * other SafeTensors files either: they would be weights in the old dtype beside the new ones, and a stale
 * model.safetensors is loaded in place of the index. Local models only: over HTTP a folder cannot be listed.
 */
async function otherFiles(entry: { file: string; name: string }, shards: Iterable<string>): Promise<string[]> {
  const folder = dirname(entry.file)
  const weights = new Set([entry.name, ...shards])
  const names = await readdir(folder).catch((cause) => {
    throw fileError('list', folder, cause)
  })
  const files: string[] = []
  for (const name of names.sort()) {
    if (weights.has(name) || /\.safetensors(\.index\.json)?$/.test(name) || isSaveLeftover(name)) continue
    // stat follows links: a Hugging Face cache's snapshot folder is links to its blobs.
    if ((await stat(join(folder, name)).catch(() => undefined))?.isFile()) files.push(join(folder, name))
  }
  return files
}

/** The files beside a quantized model's weights that say how it is quantized (AutoGPTQ's, ModelOpt's). */
const QUANTIZATION_FILES = new Set(['quantize_config.json', 'hf_quant_config.json'])

/** Bytes of each read and write of a copied file. */
const COPY_BYTES = 16 << 20

/** Copies `source` (and closes it) into the set as the file `to`, in bounded memory. */
async function copyInto(set: FileSet, source: RangeSource & { size: number }, to: string): Promise<void> {
  try {
    const sink = await set.sink(to)
    try {
      const buffer = new Uint8Array(Math.min(COPY_BYTES, source.size))
      for (let at = 0; at < source.size; at += buffer.length) {
        const part = buffer.subarray(0, Math.min(buffer.length, source.size - at))
        await readInto(source, at, part)
        await sink.write(part, at)
      }
      await sink.commit()
    } catch (error) {
      await sink.abort(error)
      throw error
    }
  } finally {
    await source.close?.()
  }
}

/** The bytes of the config.json at `path` naming `dtype` (if given), without its quantization block for a quantized model. */
async function readConfig(path: string, dtype: ConvertTarget | undefined, quantized: boolean): Promise<Uint8Array> {
  const source = await fileSource(path)
  try {
    checkConfigSize(path, source.size)
    const bytes = await source.read(0, source.size)
    const plain = quantized ? withoutQuantization(bytes, path) : bytes
    return dtype === undefined ? plain : withDtype(plain, dtype, path)
  } finally {
    await source.close?.()
  }
}
