// Writing SafeTensors files: serialize() for tensors in memory, SafetensorsWriter for files larger than
// memory (declare every tensor first, then stream each one's bytes), saveModel() for sharded models.
// Everything is validated before the first byte is written.
import { hostByteOrder } from './byte-order.ts'
import { bytesOf, swapElements } from './convert.ts'
import type { DType, TypedArray } from './dtypes.ts'
import { SafetensorsError } from './errors.ts'
import { compareCodePoints, planLayout, tensorByteLength, type Layout, type LayoutEntry, type TensorDeclaration } from './layout.ts'
import { DEFAULT_INDEX } from './model.ts'

export interface TensorInput {
  readonly dtype: DType
  readonly shape: readonly number[]
  /** The natural TypedArray of the dtype, or its raw little-endian bytes as a Uint8Array. */
  readonly data: TypedArray | Uint8Array
}

/** Tensors by name: an object, a Map, or an iterable of named tensors (e.g. what SafetensorsFile.tensors() yields). */
export type TensorCollection = Record<string, TensorInput> | ReadonlyMap<string, TensorInput> | Iterable<TensorInput & { readonly name: string }>

export interface WriteOptions {
  /** String metadata stored under __metadata__. */
  metadata?: Record<string, string> | null
}

function named(tensors: TensorCollection): Array<TensorInput & { name: string }> {
  if (tensors instanceof Map) return [...tensors].map(([name, t]) => ({ ...t, name }))
  if (Symbol.iterator in tensors) return [...(tensors as Iterable<TensorInput & { name: string }>)]
  return Object.entries(tensors as Record<string, TensorInput>).map(([name, t]) => ({ ...t, name }))
}

/**
 * The little-endian bytes of one chunk of tensor data: raw bytes as they are, a natural TypedArray
 * viewed as bytes (swapped into a copy on a big-endian host).
 */
function littleEndianBytes(name: string, dtype: DType, data: TypedArray | Uint8Array): Uint8Array {
  let bytes: Uint8Array
  try {
    bytes = bytesOf(data, dtype)
  } catch (cause) {
    throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(name)}: ${(cause as Error).message}`, { cause })
  }
  if (hostByteOrder() === 'little' || data instanceof Uint8Array) return bytes
  const copy = bytes.slice()
  swapElements(copy, dtype)
  return copy
}

interface Prepared {
  readonly layout: Layout
  /** Each entry's little-endian bytes, in layout order. */
  readonly chunks: Uint8Array[]
}

/** Validates the tensors, their data and the metadata, and lays them out: nothing is written before this passes. */
function prepare(list: Array<TensorInput & { name: string }>, metadata: WriteOptions['metadata']): Prepared {
  const layout = planLayout(list, metadata)
  const byName = new Map(list.map((t) => [t.name, t]))
  const chunks = layout.entries.map((e) => {
    const bytes = littleEndianBytes(e.name, e.dtype, byName.get(e.name)!.data)
    checkLength(e, bytes.length)
    return bytes
  })
  return { layout, chunks }
}

/** The whole file in memory, laid out exactly as the reference writer lays it out. */
export function serialize(tensors: TensorCollection, options: WriteOptions = {}): Uint8Array {
  const { layout, chunks } = prepare(named(tensors), options.metadata)
  const file = new Uint8Array(layout.fileSize)
  file.set(layout.head)
  layout.entries.forEach((e, i) => file.set(chunks[i], layout.dataStart + e.dataOffsets[0]))
  return file
}

function checkLength(e: LayoutEntry, length: number): void {
  const expected = e.dataOffsets[1] - e.dataOffsets[0]
  if (length !== expected) {
    throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(e.name)}: ${e.dtype} shape [${e.shape.join(', ')}] takes ${expected} bytes, the data has ${length}`)
  }
}

/** Where a writer's bytes go. A seekable sink takes tensors in any order; a stream, in file order only. */
export interface WriterSink {
  readonly seekable: boolean
  write(bytes: Uint8Array, position: number): Promise<void>
  /** Makes the file visible at its final place (e.g. renames a temporary file). */
  commit(): Promise<void>
  /** Drops everything written; the target stays as it was. */
  abort(reason: unknown): Promise<void>
}

/** A file on disk, written beside the target under a temporary name and renamed into place at the end. */
export async function fileSink(path: string): Promise<WriterSink> {
  const fs = await import('node:fs/promises')
  const temporary = `${path}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`
  const handle = await fs.open(temporary, 'wx').catch((cause) => {
    throw new SafetensorsError('Io', `cannot create ${temporary}: ${(cause as Error).message}`, { cause })
  })
  let closed = false
  const close = async () => {
    if (!closed) {
      closed = true
      await handle.close()
    }
  }
  return {
    seekable: true,
    async write(bytes, position) {
      for (let done = 0; done < bytes.length; ) {
        const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position + done)
        done += bytesWritten
      }
    },
    async commit() {
      await handle.sync()
      await close()
      await fs.rename(temporary, path)
    },
    async abort() {
      await close().catch(() => {})
      await fs.rm(temporary, { force: true })
    },
  }
}

/** A WritableStream (browser file system access, a network upload, …): bytes must come in file order. */
export function streamSink(stream: WritableStream<Uint8Array>): WriterSink {
  const writer = stream.getWriter()
  let position = 0
  return {
    seekable: false,
    async write(bytes, at) {
      if (at !== position) throw new Error(`stream sinks take bytes in order: expected position ${position}, got ${at}`)
      await writer.write(bytes.slice())
      position += bytes.length
    },
    async commit() {
      await writer.close()
    },
    async abort(reason) {
      await writer.abort(reason).catch(() => {})
    },
  }
}

/**
 * Writes a file whose tensors are declared up front, then streamed in chunks: with a seekable sink in
 * any order, with a stream sink in file order (see `entries`). close() checks every tensor is complete.
 */
export class SafetensorsWriter {
  readonly layout: Layout
  readonly #sink: WriterSink
  readonly #entries: Map<string, LayoutEntry>
  readonly #written = new Map<string, number>()
  #next = 0 // stream sinks: index in layout.entries of the tensor being written
  #failed: unknown = undefined
  #started: Promise<void>

  private constructor(sink: WriterSink, layout: Layout) {
    this.#sink = sink
    this.layout = layout
    this.#entries = new Map(layout.entries.map((e) => [e.name, e]))
    this.#started = sink.write(layout.head, 0)
    // A failure here surfaces from the next write() or close(); until then it is not unhandled.
    this.#started.catch(() => {})
  }

  /** Validates the declarations and writes the header. */
  static create(sink: WriterSink, tensors: readonly TensorDeclaration[], options: WriteOptions = {}): SafetensorsWriter {
    return new SafetensorsWriter(sink, planLayout(tensors, options.metadata))
  }

  /** The order in which a stream sink needs the tensors. */
  get entries(): readonly LayoutEntry[] {
    return this.layout.entries
  }

  /** Appends a chunk to tensor `name`: raw little-endian bytes or the dtype's natural TypedArray. */
  async write(name: string, chunk: TypedArray | Uint8Array): Promise<void> {
    if (this.#failed !== undefined) throw new SafetensorsError('Io', 'the writer has failed and was aborted', { cause: this.#failed })
    const entry = this.#entries.get(name)
    if (!entry) throw new SafetensorsError('TensorNotFound', `tensor ${JSON.stringify(name)} was not declared`)
    const bytes = littleEndianBytes(name, entry.dtype, chunk)
    const done = this.#written.get(name) ?? 0
    const size = entry.dataOffsets[1] - entry.dataOffsets[0]
    if (done + bytes.length > size) {
      throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(name)}: ${done + bytes.length} bytes written, but ${entry.dtype} [${entry.shape.join(', ')}] takes ${size}`)
    }
    if (!this.#sink.seekable) {
      while (this.#next < this.layout.entries.length && this.#isComplete(this.layout.entries[this.#next])) this.#next++
      const expected = this.layout.entries[this.#next]
      if (expected !== entry) {
        throw new SafetensorsError('Io', `this sink takes tensors in file order: expected ${JSON.stringify(expected?.name)}, got ${JSON.stringify(name)}`)
      }
    }
    this.#written.set(name, done + bytes.length)
    await this.#run(async () => {
      await this.#started
      await this.#sink.write(bytes, this.layout.dataStart + entry.dataOffsets[0] + done)
    })
  }

  /** Checks that every tensor got all its bytes, then commits the file. */
  async close(): Promise<void> {
    const missing = this.layout.entries.find((e) => !this.#isComplete(e))
    if (missing) {
      const error = new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(missing.name)} got ${this.#written.get(missing.name) ?? 0} of its ${missing.dataOffsets[1] - missing.dataOffsets[0]} bytes`)
      await this.abort(error)
      throw error
    }
    await this.#run(async () => {
      await this.#started
      await this.#sink.commit()
    })
  }

  /** Abandons the file: nothing appears at the target. */
  async abort(reason: unknown = new Error('aborted')): Promise<void> {
    if (this.#failed !== undefined) return
    this.#failed = reason
    await this.#started.catch(() => {})
    await this.#sink.abort(reason)
  }

  #isComplete(e: LayoutEntry): boolean {
    return (this.#written.get(e.name) ?? 0) === e.dataOffsets[1] - e.dataOffsets[0]
  }

  async #run(step: () => Promise<void>): Promise<void> {
    try {
      await step()
    } catch (cause) {
      await this.abort(cause)
      throw cause instanceof SafetensorsError ? cause : new SafetensorsError('Io', `writing failed: ${(cause as Error).message}`, { cause })
    }
  }
}

/** Writes prepared bytes through a file sink; on any failure the target is untouched and nothing is left. */
async function writePrepared(path: string, { layout, chunks }: Prepared): Promise<void> {
  const sink = await fileSink(path)
  try {
    await sink.write(layout.head, 0)
    for (const [i, e] of layout.entries.entries()) await sink.write(chunks[i], layout.dataStart + e.dataOffsets[0])
    await sink.commit()
  } catch (cause) {
    await sink.abort(cause)
    throw cause instanceof SafetensorsError ? cause : new SafetensorsError('Io', `writing ${path} failed: ${(cause as Error).message}`, { cause })
  }
}

/** Writes `tensors` to `path` atomically (Node). */
export async function writeFile(path: string, tensors: TensorCollection, options: WriteOptions = {}): Promise<void> {
  await writePrepared(path, prepare(named(tensors), options.metadata))
}

export interface SaveModelOptions extends WriteOptions {
  /** Largest shard in bytes of tensor data (default 5 GB, as transformers). A larger tensor gets a shard alone. */
  maxShardSize?: number
}

/**
 * Saves a sharded model as transformers does: model-0000i-of-0000n.safetensors plus
 * model.safetensors.index.json ({ metadata: { total_size }, weight_map }), or a single model.safetensors
 * when everything fits one shard. Tensors go to shards in the order given.
 */
export async function saveModel(folder: string, tensors: TensorCollection, options: SaveModelOptions = {}): Promise<string[]> {
  const path = await import('node:path')
  const fs = await import('node:fs/promises')
  const maxShardSize = options.maxShardSize ?? 5_000_000_000
  const list = named(tensors)
  const shards: Array<typeof list> = []
  let size = 0
  for (const t of list) {
    const bytes = tensorByteLength(t)
    if (shards.length === 0 || (size + bytes > maxShardSize && size > 0)) {
      shards.push([])
      size = 0
    }
    shards[shards.length - 1].push(t)
    size += bytes
  }
  if (shards.length === 0) shards.push([])
  // Every shard is validated before any is written.
  const prepared = shards.map((shard) => prepare(shard, options.metadata))
  await fs.mkdir(folder, { recursive: true })
  const count = shards.length
  const names = count === 1 ? ['model.safetensors'] : shards.map((_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.safetensors`)
  for (let i = 0; i < count; i++) await writePrepared(path.join(folder, names[i]), prepared[i])
  if (count > 1) {
    const weightMap: Record<string, string> = {}
    shards.forEach((shard, i) => shard.forEach((t) => (weightMap[t.name] = names[i])))
    const totalSize = list.reduce((sum, t) => sum + tensorByteLength(t), 0)
    await writeIndex(path.join(folder, DEFAULT_INDEX), totalSize, weightMap)
    names.push(DEFAULT_INDEX)
  }
  // Files of an earlier save with another shard count would be loaded in place of these (a loader that
  // finds model.safetensors never looks for the index): remove them, as transformers does, once the new
  // ones are complete.
  const stale = (await fs.readdir(folder)).filter((f) => SAVED_MODEL_FILE.test(f) && !names.includes(f))
  await Promise.all(stale.map((f) => fs.rm(path.join(folder, f), { force: true })))
  return names
}

/** The files saveModel writes: model.safetensors, its shards and their index. */
const SAVED_MODEL_FILE = /^model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?$/

/**
 * model.safetensors.index.json as transformers writes it: Python's json.dumps(indent=2, sort_keys=True)
 * and a newline, so keys in code point order and everything past ASCII as \u escapes (ensure_ascii).
 */
export async function writeIndex(path: string, totalSize: number, weightMap: Record<string, string>, metadata: Record<string, unknown> = {}): Promise<void> {
  const fs = await import('node:fs/promises')
  const text = pythonJson({ metadata: { ...metadata, total_size: totalSize }, weight_map: weightMap }, '')
  const temporary = `${path}.tmp`
  await fs.writeFile(temporary, `${text}\n`)
  await fs.rename(temporary, path)
}

/** json.dumps(value, indent=2, sort_keys=True): built by hand, since JS objects reorder integer-like keys. */
function pythonJson(value: unknown, indent: string): string {
  const inner = `${indent}  `
  if (Array.isArray(value)) {
    return value.length === 0 ? '[]' : `[\n${value.map((v) => inner + pythonJson(v, inner)).join(',\n')}\n${indent}]`
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => compareCodePoints(a, b))
    return entries.length === 0 ? '{}' : `{\n${entries.map(([k, v]) => `${inner}${pythonJson(k, inner)}: ${pythonJson(v, inner)}`).join(',\n')}\n${indent}}`
  }
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}
