// What differs between the runtimes this package runs in, as one interface: each runtime's side
// (src/platform/node.ts, src/platform/portable.ts) exports it, and the package's conditions pick one for the
// subpath import `#platform` (package.json "imports"), which the modules that need it import. So a page's
// bundle never sees a Node built-in, and nothing depends on which entry was imported first.
import { SafetensorsError } from '../errors.ts'
import type { RangeSource } from '../sources/source.ts'

/** Files on a local disk (Node, Deno, Bun). */
export interface LocalFiles {
  /** A RangeSource over the file at `path`. */
  open(path: string): Promise<RangeSource>
  /** The path of a `file:` URL. */
  pathOf(url: URL): string
  /**
   * The file a model is read from (`name`: its file name): `path` itself, or when it is a folder the
   * first of `names` there (undefined when it holds none); and where its shards are.
   */
  locateModel(path: string, names: readonly string[]): Promise<{ file: string; name: string; shard(name: string): string } | undefined>
}

/** A file of a persistent cache's folder. */
export interface StoredEntry {
  name: string
  /** Bytes. */
  size: number
  /** Last written, in ms since the epoch: the order of least recent use when a cache is created. */
  modified: number
}

/** Where a persistent cache (src/cache/cache.ts) keeps its entries: a flat folder of named files. */
export interface CacheStorage {
  /** The entry's bytes, or undefined when there is no such entry. */
  read(name: string): Promise<Uint8Array | undefined>
  /**
   * Stores the entry whole or not at all: the bytes go to a temporary name (tempName) that is then
   * renamed, so a reader never sees part of a write under the entry's own name. Rejects on failure
   * (a full disk or quota among others), leaving no temporary file behind where it can.
   */
  write(name: string, bytes: Uint8Array): Promise<void>
  /** Removes the entry; nothing happens when there is none. */
  delete(name: string): Promise<void>
  /** Every file in the folder, temporary ones included. */
  list(): Promise<StoredEntry[]>
}

/** A started worker of the conversion pool (src/pool/pool.ts). */
export interface PoolWorker {
  post(message: unknown, transfer?: ArrayBuffer[]): void
  /** Whether the worker has work: only then may it keep a Node process alive. */
  hold(busy: boolean): void
  terminate(): void
}

/**
 * Threads the runtime can start for the conversion pool: what the subpath import `#workers` gives as `workers`
 * (src/platform/node-workers.ts, src/platform/web-workers.ts), undefined where there are none. Apart from
 * `#platform`, because only the pool, which loads on demand, imports it: a module the first load shares with
 * the pool would carry it into every bundle.
 */
export interface Workers {
  /** The cores the pool may use (os.availableParallelism(), navigator.hardwareConcurrency). */
  cores(): number
  /** Whether results can be SharedArrayBuffers that workers write (Node; a cross-origin isolated page). */
  sharedMemory(): boolean
  /**
   * Starts a worker running `body` (a function's source text) as `(body)(listen, post, fs)`: `listen` takes
   * the handler of the messages it is sent, `post` answers, `fs` is node:fs where there are local files.
   * `onError` is told when the worker fails to start (a Content-Security-Policy that forbids it) or dies.
   */
  start(body: string, onMessage: (message: unknown) => void, onError: (error: unknown) => void): PoolWorker
}

/** What `#platform` gives: each member undefined where the runtime lacks it. */
export interface Platform {
  /** Local files: paths and `file:` URLs in open() and openModel(). */
  localFiles: LocalFiles | undefined
  /** A cache's storage in a folder on disk (createCache({ dir })). */
  folderStorage: ((dir: string) => Promise<CacheStorage>) | undefined
}

/** The temporary name a write of `name` goes to before its rename: unique, so two writers never share one. */
export function tempName(name: string): string {
  return `${name}.${Math.random().toString(36).slice(2, 10)}.tmp`
}

export function storageError(cause: unknown, folder?: string): SafetensorsError {
  return new SafetensorsError('Io', `cannot use the cache folder${folder ? ` ${folder}` : ''}: ${(cause as Error).message}`, { cause, path: folder })
}

/** The runtime's local files, or the TypeError that says which runtimes have them. */
export function requireLocalFiles(localFiles: LocalFiles | undefined, what: string): LocalFiles {
  if (localFiles) return localFiles
  throw new TypeError(`${what}: local files can only be read under Node, Deno or Bun; here pass a URL, Blob, bytes or a RangeSource`)
}
