// Where file bytes come from. Every kind of input (memory, Blob, URL, file) is read through this one
// interface, so the readers ask for exactly the byte ranges they need and nothing more.
import { SafetensorsError } from '../errors.ts'

/**
 * What a {@link RangeSource} tells of each part of a read as it lands: `bytes`, its length; `done`, from a
 * source that lands parts in any order (a read in parallel chunks), the bytes complete at the front.
 */
export type OnBytes = (bytes: number, done?: number) => void

/**
 * Any random-access source of a file's bytes: what {@link open} reads through, and what it takes to read from
 * storage of your own. Errors a source throws should be {@link SafetensorsError}s (`Io`, `Aborted`).
 */
export interface RangeSource {
  /**
   * Total size in bytes. A source that learns it from its first read (an HTTP response) may leave it
   * undefined until then; such a source may return fewer bytes than asked at the end of the file.
   */
  readonly size?: number
  /**
   * Resolves to exactly `length` bytes starting at `offset`, or rejects. A source that receives its
   * bytes in parts may call `onBytes` with each part's length as it lands (progress); the parts add up
   * to the bytes returned. Parts land front to back, unless the source passes `done`: then they land in
   * any order (a read in parallel chunks), and `done` is how many bytes at the front are complete.
   */
  read(offset: number, length: number, signal?: AbortSignal, onBytes?: OnBytes): Promise<Uint8Array>
  /** Optional: fills `target` with the bytes from `offset` on, without an intermediate copy. */
  readInto?(offset: number, target: Uint8Array, signal?: AbortSignal, onBytes?: OnBytes): Promise<void>
  /**
   * Optional: fills each range's `target` with the bytes from its `offset` on, in as few requests as the
   * source can make (HTTP: multi-range requests, where the server answers them). `onBytes` is told each
   * part's length and the index of its range, as it lands.
   */
  readRanges?(
    ranges: ReadonlyArray<{ offset: number; target: Uint8Array }>,
    signal?: AbortSignal,
    onBytes?: (bytes: number, index: number) => void,
  ): Promise<void>
  /**
   * What one more read costs beyond its bytes, in bytes (default 0): a slice's runs closer than this are
   * read as one, with the gap between them (src/sources/read-plan.ts). About a round trip's worth of transfer for
   * HTTP, a system call's for a file; 0 reads exactly the bytes a slice covers.
   */
  readonly requestCost?: number
  /** Optional: releases what the source holds (a file handle); {@link SafetensorsFile.close} calls it. */
  close?(): Promise<void>
}

/**
 * Where a worker of the conversion pool (src/pool/read.ts) reads a source's bytes itself, rather than the
 * calling thread sending them: a local file through the open file's descriptor, which threads of one
 * process share (by its path where they do not, as in Deno: checked unchanged by size and modification
 * time), or a Blob.
 */
export type WorkerReadable = { fd: number; path: string; size: number; modified: number } | { blob: Blob }

/**
 * The files of a model picked or dropped in a page (a folder's files, or several files): its file or
 * index and its shards, found by file name. Files that are neither (a README, config.json) are ignored.
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

/** requestCost of in-memory sources: a read is a promise and a copy, worth a few KiB of copying. */
const MEMORY_REQUEST_COST = 16 << 10

/** requestCost of Blobs and files: a read is a stream or a system call on another thread, worth tens of microseconds of copying. */
export const LOCAL_REQUEST_COST = 64 << 10

/** Reads bytes straight into `target` (a view of wasm memory, say), through readInto where a source has it. */
export async function readInto(source: RangeSource, offset: number, target: Uint8Array, signal?: AbortSignal, onBytes?: OnBytes): Promise<void> {
  if (target.length === 0) return
  if (source.readInto) return source.readInto(offset, target, signal, onBytes)
  const bytes = await source.read(offset, target.length, signal, onBytes)
  if (bytes.length !== target.length)
    throw new SafetensorsError('Io', `asked for ${target.length} bytes at offset ${offset}, the source returned ${bytes.length}`)
  target.set(bytes)
}

/** A source's read() over its readInto(): a new buffer of the length asked, filled. */
export function readOver(readInto: NonNullable<RangeSource['readInto']>): RangeSource['read'] {
  return async (offset, length, signal, onBytes) => {
    const bytes = new Uint8Array(length)
    await readInto(offset, bytes, signal, onBytes)
    return bytes
  }
}

/** Whether `error` says that a file is not there: a local file that does not exist, an HTTP 404 or 410. */
export function isMissingFile(error: unknown): boolean {
  if (!(error instanceof SafetensorsError) || error.code !== 'Io') return false
  return error.status === 404 || error.status === 410 || (error.path !== undefined && (error.cause as { code?: unknown } | undefined)?.code === 'ENOENT')
}

export function abortedError(signal: AbortSignal): SafetensorsError {
  return new SafetensorsError('Aborted', 'the operation was aborted', { cause: signal.reason })
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortedError(signal)
}

/**
 * Calls `listener` once when `signal` aborts; returns what removes it. Every listener on a signal goes
 * through here, and the call that adds one removes it when it settles: a caller's signal often lives
 * as long as the page or the server, and would otherwise collect a listener per call.
 */
export function onAbort(signal: AbortSignal | undefined, listener: () => void): () => void {
  if (!signal) return () => {}
  signal.addEventListener('abort', listener, { once: true })
  return () => signal.removeEventListener('abort', listener)
}

/**
 * An AbortController of a call's own, aborted by the caller's signal as well (at once if it has aborted
 * already), with `whenAborted` told so: the call can abort its own reads (a stream's cancel, a failed
 * write) without touching the caller's signal. `release` drops the listener on the caller's.
 */
export function linkedAbort(
  signal: AbortSignal | undefined,
  whenAborted: (error: SafetensorsError) => void,
): { signal: AbortSignal; abort(reason: unknown): void; release(): void } {
  const controller = new AbortController()
  const listener = () => {
    controller.abort(signal!.reason)
    whenAborted(abortedError(signal!))
  }
  let release = () => {}
  if (signal?.aborted) listener()
  else release = onAbort(signal, listener)
  return { signal: controller.signal, abort: (reason) => controller.abort(reason), release }
}

export function checkRange(offset: number, length: number, size: number): void {
  if (offset < 0 || length < 0 || offset + length > size) {
    throw new SafetensorsError('Io', `read of ${length} bytes at offset ${offset} is past the end of the ${size}-byte source`)
  }
}

/**
 * Bytes already in memory: reads are views, never copies.
 * @throws {@link SafetensorsError} from its reads: `Io` for a range past the end.
 */
export function memorySource(bytes: Uint8Array): RangeSource & {
  /** The length of `bytes`. */
  size: number
  /** The bytes read from. */
  bytes: Uint8Array
} {
  return {
    bytes,
    size: bytes.length,
    requestCost: MEMORY_REQUEST_COST,
    async read(offset, length) {
      checkRange(offset, length, bytes.length)
      return bytes.subarray(offset, offset + length)
    },
  }
}

/**
 * A Blob or File (browser file picker, drag and drop): each read streams only the slice it needs into its target.
 * @throws {@link SafetensorsError} from its reads: `Io` for a range past the end or a failed read; `Aborted`.
 */
export function blobSource(blob: Blob): RangeSource & {
  /** The Blob's size. */
  size: number
  /** @internal */
  forWorkers: WorkerReadable
} {
  const readInto = async (offset: number, target: Uint8Array, signal?: AbortSignal, onBytes?: (bytes: number) => void) => {
    checkRange(offset, target.length, blob.size)
    throwIfAborted(signal)
    const reader = blob
      .slice(offset, offset + target.length)
      .stream()
      .getReader()
    try {
      for (let filled = 0; filled < target.length; ) {
        throwIfAborted(signal)
        const { done, value } = await reader.read()
        if (done || filled + value.length > target.length) throw new Error(`the slice gave ${done ? filled : filled + value.length} of ${target.length} bytes`)
        target.set(value, filled)
        filled += value.length
        onBytes?.(value.length)
      }
    } catch (cause) {
      if (cause instanceof SafetensorsError) throw cause
      throw new SafetensorsError('Io', `cannot read ${target.length} bytes at offset ${offset} of the Blob: ${(cause as Error).message}`, { cause })
    } finally {
      reader.cancel().catch(() => {})
    }
  }
  return {
    size: blob.size,
    requestCost: LOCAL_REQUEST_COST,
    forWorkers: { blob },
    readInto,
    read: readOver(readInto),
  }
}
