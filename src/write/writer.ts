// Writing SafeTensors files: serialize() for tensors in memory, SafetensorsWriter for files larger than
// memory (declare every tensor first, then stream each one's bytes). Writing to disk is src/node/atomic-files.ts.
// Everything is validated before the first byte is written.
import { hostByteOrder } from '../core/byte-order.ts'
import { bytesOf, swapElements } from '../core/convert.ts'
import type { DType, TypedArray } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import type { Metadata } from '../format/header.ts'
import { type Layout, type LayoutEntry, planLayout, type TensorDeclaration } from '../format/layout.ts'

/** A tensor to write: what {@link serialize}, writeFile and saveModel take for each name. */
export interface TensorInput {
  /** The dtype of its elements. */
  readonly dtype: DType
  /** Its dimensions; `[]` for a scalar. */
  readonly shape: readonly number[]
  /** The natural TypedArray of the dtype, or its raw little-endian bytes as a Uint8Array. */
  readonly data: TypedArray | Uint8Array
}

/** Tensors by name: an object, a Map, or an iterable of named tensors (e.g. what SafetensorsFile.tensors() yields). */
export type TensorCollection =
  | Record<string, TensorInput>
  | ReadonlyMap<string, TensorInput>
  | Iterable<
      TensorInput & {
        /** The tensor's name in the file. */
        readonly name: string
      }
    >

/** Options of {@link serialize} and the Node entry's writers (writeFile, saveModel). */
export interface WriteOptions {
  /**
   * String metadata stored under __metadata__.
   * @defaultValue none: no __metadata__
   */
  metadata?: Metadata | null
}

/** Options of {@link SafetensorsWriter.create}: those of {@link serialize}, and `keepOrder`. */
export interface WriterOptions extends WriteOptions {
  /**
   * SafetensorsWriter: lay the tensors out in the order declared, not sorted by dtype and name as the
   * reference writer does. A file converted as it streams by (convertStream) keeps its input's order,
   * since its tensors arrive in that order.
   * @defaultValue false
   */
  keepOrder?: boolean
}

export function named(tensors: TensorCollection): Array<TensorInput & { name: string }> {
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

export interface Prepared {
  readonly layout: Layout
  /** Each entry's little-endian bytes, in layout order. */
  readonly chunks: Uint8Array[]
}

/** Validates the tensors, their data and the metadata, and lays them out: nothing is written before this passes. */
export function prepare(list: Array<TensorInput & { name: string }>, options: WriteOptions, what: string): Prepared {
  if ((options as WriterOptions).keepOrder !== undefined)
    throw new TypeError(`${what}: keepOrder is an option of SafetensorsWriter.create only; ${what} lays tensors out as the reference writer does`)
  const layout = planLayout(list, options.metadata)
  const byName = new Map(list.map((t) => [t.name, t]))
  const chunks = layout.entries.map((e) => {
    const bytes = littleEndianBytes(e.name, e.dtype, byName.get(e.name)!.data)
    checkLength(e, bytes.length)
    return bytes
  })
  return { layout, chunks }
}

/**
 * The whole file in memory, laid out exactly as the reference writer lays it out.
 * @throws {@link SafetensorsError} the codes of {@link planLayout}: `InvalidHeaderDeserialization`,
 * `ValidationOverflow`, `MisalignedSlice`, `HeaderTooLarge`; and `TensorInvalidInfo` when a tensor's data is
 * not the size its dtype and shape take.
 * @throws TypeError for `keepOrder`, an option of {@link SafetensorsWriter.create} only.
 */
export function serialize(tensors: TensorCollection, options: WriteOptions = {}): Uint8Array {
  const { layout, chunks } = prepare(named(tensors), options, 'serialize')
  const file = new Uint8Array(layout.fileSize)
  file.set(layout.head)
  layout.entries.forEach((e, i) => file.set(chunks[i], layout.dataStart + e.dataOffsets[0]))
  return file
}

function checkLength(e: LayoutEntry, length: number): void {
  const expected = e.dataOffsets[1] - e.dataOffsets[0]
  if (length !== expected) {
    throw new SafetensorsError(
      'TensorInvalidInfo',
      `tensor ${JSON.stringify(e.name)}: ${e.dtype} shape [${e.shape.join(', ')}] takes ${expected} bytes, the data has ${length}`,
    )
  }
}

/** Where a writer's bytes go. A seekable sink takes tensors in any order; a stream, in file order only. */
export interface WriterSink {
  /** Whether `write` takes any position (a file), or only the next one (a stream). */
  readonly seekable: boolean
  /** Writes `bytes` at byte `position` of the file. */
  write(bytes: Uint8Array, position: number): Promise<void>
  /** Makes the file visible at its final place (e.g. renames a temporary file). */
  commit(): Promise<void>
  /** Drops everything written; the target stays as it was. */
  abort(reason: unknown): Promise<void>
}

/**
 * A WritableStream (browser file system access, a network upload, …): bytes must come in file order.
 * @throws {@link SafetensorsError} from its writes: `Io` for bytes out of order.
 */
export function streamSink(stream: WritableStream<Uint8Array>): WriterSink {
  const writer = stream.getWriter()
  let position = 0
  return {
    seekable: false,
    async write(bytes, at) {
      if (at !== position) throw new SafetensorsError('Io', `stream sinks take bytes in order: expected position ${position}, got ${at}`)
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
  /** Where each tensor goes in the file, and its header bytes. */
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

  /**
   * Validates the declarations and writes the header.
   * @throws {@link SafetensorsError} the codes of {@link planLayout}.
   */
  static create(sink: WriterSink, tensors: readonly TensorDeclaration[], options: WriterOptions = {}): SafetensorsWriter {
    return new SafetensorsWriter(sink, planLayout(tensors, options.metadata, options.keepOrder))
  }

  /** The order in which a stream sink needs the tensors. */
  get entries(): readonly LayoutEntry[] {
    return this.layout.entries
  }

  /**
   * Appends a chunk to tensor `name`: raw little-endian bytes or the dtype's natural TypedArray.
   * @throws {@link SafetensorsError} `TensorNotFound` (not declared); `TensorInvalidInfo` (more bytes than the
   * tensor takes, or a chunk that is not whole elements); `Io` (a failed write, a stream sink given tensors out
   * of file order, a writer that already failed).
   */
  async write(name: string, chunk: TypedArray | Uint8Array): Promise<void> {
    if (this.#failed !== undefined) throw new SafetensorsError('Io', 'the writer has failed and was aborted', { cause: this.#failed })
    const entry = this.#entries.get(name)
    if (!entry) throw new SafetensorsError('TensorNotFound', `tensor ${JSON.stringify(name)} was not declared`)
    const bytes = littleEndianBytes(name, entry.dtype, chunk)
    const done = this.#written.get(name) ?? 0
    const size = entry.dataOffsets[1] - entry.dataOffsets[0]
    if (done + bytes.length > size) {
      throw new SafetensorsError(
        'TensorInvalidInfo',
        `tensor ${JSON.stringify(name)}: ${done + bytes.length} bytes written, but ${entry.dtype} [${entry.shape.join(', ')}] takes ${size}`,
      )
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

  /**
   * Checks that every tensor got all its bytes, then commits the file.
   * @throws {@link SafetensorsError} `TensorInvalidInfo` for a tensor not complete (the file is then
   * abandoned); `Io` for a failed write or commit.
   */
  async close(): Promise<void> {
    const missing = this.layout.entries.find((e) => !this.#isComplete(e))
    if (missing) {
      const error = new SafetensorsError(
        'TensorInvalidInfo',
        `tensor ${JSON.stringify(missing.name)} got ${this.#written.get(missing.name) ?? 0} of its ${missing.dataOffsets[1] - missing.dataOffsets[0]} bytes`,
      )
      await this.abort(error)
      throw error
    }
    await this.#run(async () => {
      await this.#started
      await this.#sink.commit()
    })
  }

  /** Abandons the file: nothing appears at the target. */
  async abort(reason: unknown = new SafetensorsError('Aborted', 'the writer was aborted')): Promise<void> {
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
