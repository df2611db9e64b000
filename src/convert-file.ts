// convertFile / convertModel (Node entry): rewrite a file or a sharded model with its floating-point
// tensors in another dtype, and optionally in other shards, streaming so that memory stays bounded
// whatever the size. Every chunk is read straight into a fixed working set in wasm memory, converted
// there in place and written from a view of it: nothing is allocated per chunk. The output files appear
// only once all of them are complete (src/node-writer.ts, fileSet).
import { mkdir } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { byteLengthOf, type ConvertTarget, convertInto, swapElementsInCore, targetOf } from './convert.ts'
import { sequentialReader } from './downloads.ts'
import { DTYPE_INFO, type DType } from './dtypes.ts'
import { type OpenOptions, open, type SafetensorsFile, type Source } from './file.ts'
import type { TensorInfo } from './header.ts'
import { tensorByteLength } from './layout.ts'
import { DEFAULT_INDEX, openModel } from './model.ts'
import { type FileSet, finishModel, planShards, writeSet } from './node-writer.ts'
import type { ProgressCallback } from './progress.ts'
import { type Core, instantiate } from './wasm.ts'
import { SafetensorsWriter } from './writer.ts'

export interface ConvertFileOptions extends OpenOptions {
  /** Floating-point tensors become this dtype; the others (integers, BOOL, C64) are copied. Omitted: every dtype is kept. */
  dtype?: ConvertTarget
  /**
   * Reshard: the output is a folder of shards of at most this many bytes of tensor data each, named
   * and indexed as transformers does (model-0000i-of-0000n.safetensors and model.safetensors.index.json).
   */
  maxShardSize?: number
  /** Input bytes of tensor data done so far and in all, after each chunk; ends at loaded === total. */
  onProgress?: ProgressCallback
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

  /** Streams one tensor of `file` into `writer` as `to`. */
  async copy(file: SafetensorsFile, info: TensorInfo, to: DType, writer: SafetensorsWriter, progress: Counter, signal?: AbortSignal): Promise<void> {
    const from = info.dtype
    const start = file.header.dataStart + info.dataOffsets[0]
    const elements = info.shape.reduce((a, b) => a * b, 1)
    const buffer = this.#core.memory.buffer
    // Elements per chunk: as many as the slot holds, a multiple of 8 so F4 and F6 chunks are whole bytes.
    const perChunk = Math.floor((SLOT_BYTES * 8) / Math.max(DTYPE_INFO[from].bits, DTYPE_INFO[to].bits) / 8) * 8
    // Over HTTP, the tensor's chunks are fetched ahead in parallel (src/downloads.ts).
    const input = sequentialReader(file.source, start, info.byteLength, signal)
    try {
      for (let first = 0; first < elements; first += perChunk) {
        const count = Math.min(perChunk, elements - first)
        const inBytes = byteLengthOf(from, count)
        const outBytes = byteLengthOf(to, count)
        const dst = this.#core.heapBase + this.#slot * SLOT_BYTES
        // The kernels' in-place layout: a wider output has the input at its end, a narrower one at its start.
        const src = dst + Math.max(0, outBytes - inBytes)
        await input.read(new Uint8Array(buffer, src, inBytes))
        // The kernels read little-endian data, and the output file is little-endian.
        if (file.byteOrder === 'big') swapElementsInCore(this.#core, src, inBytes, from)
        convertInto(this.#core, src, dst, count, from, to)
        await this.#writing
        this.#writing = writer.write(info.name, new Uint8Array(buffer, dst, outBytes))
        this.#slot ^= 1
        progress.add(inBytes)
      }
    } finally {
      input.close()
    }
  }

  /** Waits for the last write; a failed write rejects here if no later step has seen it. */
  async drain(): Promise<void> {
    const writing = this.#writing
    this.#writing = Promise.resolve()
    await writing
  }
}

class Counter {
  loaded = 0
  constructor(
    readonly total: number,
    readonly onProgress?: ProgressCallback,
  ) {}

  add(bytes: number): void {
    this.loaded += bytes
    this.onProgress?.({ loaded: this.loaded, total: this.total })
  }
}

interface Planned {
  file: string
  tensors: Array<{ source: SafetensorsFile; info: TensorInfo; to: DType }>
  metadata: Record<string, string> | null
}

/** Writes each planned shard into the set, tensor by tensor through one pipeline; returns the bytes of tensor data written. */
async function writeShards(folder: string, set: FileSet, shards: Planned[], total: number, options: ConvertFileOptions): Promise<number> {
  const pipeline = new ChunkPipeline()
  const progress = new Counter(total, options.onProgress)
  let written = 0
  for (const shard of shards) {
    const declarations = shard.tensors.map(({ info, to }) => ({ name: info.name, dtype: to, shape: info.shape }))
    const writer = SafetensorsWriter.create(await set.sink(join(folder, shard.file)), declarations, { metadata: shard.metadata })
    try {
      for (const { source, info, to } of shard.tensors) await pipeline.copy(source, info, to, writer, progress, options.signal)
      await pipeline.drain()
      await writer.close()
    } catch (error) {
      await pipeline.drain().catch(() => {})
      await writer.abort(error)
      throw error
    }
    written += writer.layout.fileSize - writer.layout.dataStart
  }
  return written
}

function dataBytes(files: Iterable<SafetensorsFile>): number {
  let total = 0
  for (const f of files) total += f.header.fileSize - f.header.dataStart
  return total
}

/** Plans the output shards of `tensors` (in model order) under `maxShardSize`, each with the metadata of the input holding its first tensor. */
function reshard(tensors: Planned['tensors'], maxShardSize: number): Planned[] {
  const sized = (t: Planned['tensors'][number]) => tensorByteLength({ name: t.info.name, dtype: t.to, shape: t.info.shape })
  return planShards(tensors, sized, maxShardSize).map(({ file, tensors }) => ({ file, tensors, metadata: tensors[0]?.source.metadata ?? null }))
}

/**
 * Writes `output` as `input` with every floating-point tensor in `options.dtype`. With
 * `options.maxShardSize`, `output` is a folder that gets the shards and their index.
 */
export async function convertFile(input: Source, output: string, options: ConvertFileOptions = {}): Promise<void> {
  const file = await open(input, options)
  try {
    const tensors = file.header.tensors.map((info) => ({ source: file, info, to: targetOf(info, options.dtype) }))
    const total = dataBytes([file])
    if (options.maxShardSize === undefined) {
      await writeSet((set) => writeShards(dirname(output), set, [{ file: basename(output), tensors, metadata: file.metadata }], total, options))
      return
    }
    const shards = reshard(tensors, options.maxShardSize)
    await mkdir(output, { recursive: true })
    await writeSet(async (set) => finishModel(output, set, shardNames(shards), await writeShards(output, set, shards, total, options), { metadata: {} }))
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
 * total_size and weight_map describe the new shards; its other metadata is kept. All files appear at
 * once, when every one is complete.
 */
export async function convertModel(index: string | URL, folder: string, options: ConvertFileOptions = {}): Promise<void> {
  const model = await openModel(index, options)
  try {
    const inputs = [...model.shards]
    const listed = model.names().map((name) => {
      const source = model.shards.get(model.shardOf(name))!
      const info = source.info(name)
      return { source, info, to: targetOf(info, options.dtype) }
    })
    const shards: Planned[] =
      options.maxShardSize === undefined
        ? inputs.map(([file, source]) => ({ file, tensors: listed.filter((t) => t.source === source), metadata: source.metadata }))
        : reshard(listed, options.maxShardSize)
    const { total_size: _, ...metadata } = model.metadata ?? {}
    await mkdir(folder, { recursive: true })
    await writeSet(async (set) => {
      const totalSize = await writeShards(folder, set, shards, dataBytes(model.shards.values()), options)
      // The same layout keeps the index's name too, and always has one.
      const indexName = options.maxShardSize !== undefined ? undefined : String(index).endsWith('.json') ? basename(String(index)) : DEFAULT_INDEX
      return finishModel(folder, set, shardNames(shards), totalSize, { metadata, index: indexName })
    })
  } finally {
    await model.close()
  }
}
