// The persistent cache of byte ranges read over http(s): open(url, { cache: await createCache() }).
//
// A file's bytes are stored in blocks of BLOCK_BYTES, aligned to the file, one entry each, named by the
// URL and the version of the file (its validator and size, see versionOf). Fixed blocks rather than the
// exact ranges read: a tensor of any size is a few entries, a range always has one place to look for,
// partly cached reads need no interval bookkeeping, and the reads of neighbouring tensors (which share
// a block at their boundary) fill the cache for each other. The price is at most a block on each side
// of a read fetched beyond what it asked for, once.
//
// Revalidation: when the cache holds blocks of a URL, the first read of an open first asks the server
// for one byte (Range: bytes=0-0), which gives the file's current validator and size; blocks of any other
// version of that URL are dropped. That probe is an ordinary GET of the kind every read makes: HEAD is
// not signed into presigned URLs (S3, the Hub's CDN), and a conditional request (If-None-Match) needs a
// CORS preflight that servers set up for Range alone refuse, and its 304 carries no size. Every later
// network read carries If-Range (src/sources/http/source.ts), so a file that changes during the open is an error, never
// a mix of versions. When the cache holds nothing of the URL, the first block, read anyway, teaches the
// version.
//
// Integrity: every entry holds its key and an XXH64 (computed in the wasm core) of key and bytes, checked
// on every read; an entry that fails (flipped bytes, truncated, or missing) is dropped and its block read
// from the network again. Writes are atomic per entry (CacheStorage.write). A write that fails (a full
// quota) is a warning, once per cache, and the read goes on with the bytes from the network.

import { folderStorage } from '#platform'
import { xxh64 } from '../core/checksum.ts'
import { SafetensorsError } from '../errors.ts'
import { type CacheStorage, type StoredEntry, storageError } from '../platform/platform.ts'
import { type ParallelReads, readChunked } from '../sources/downloads.ts'
import type { HttpSource } from '../sources/http/source.ts'
import { type OnBytes, readInto } from '../sources/source.ts'
import { type RangeCache, readThrough } from './hook.ts'
import { noStorage, opfsStorage } from './storage.ts'

/** Options of {@link createCache}: `dir` or `name`, not both. */
export interface CacheOptions {
  /**
   * Node, Deno, Bun: the folder the entries live in (created if needed).
   * @defaultValue none: the OPFS folder `name`
   */
  dir?: string
  /**
   * Browsers and workers: the folder in the Origin Private File System.
   * @defaultValue 'safetensors-wasm'
   */
  name?: string
  /**
   * Least recently used entries are removed to keep the cache at most this many bytes.
   * @defaultValue Infinity (no limit)
   */
  maxBytes?: number
}

/** Bytes per entry: progress of a cached read comes in steps of this size, too. */
const BLOCK_BYTES = 1 << 20
/** Blocks fetched by one request at most: long reads stream, and each block is stored as it lands. */
const PIECE_BLOCKS = 16
/** Blocks a read starts ahead of the one it copies out: enough to keep a request in flight, little memory. */
const AHEAD_BLOCKS = 16
/** A temporary file this old is left over from a write that never finished (a crash), not one under way. */
const STALE_TEMP_MS = 60 * 60 * 1000

// Entry names: XXH64 of the URL, XXH64 of the version, block index; a temporary name adds a suffix.
const ENTRY_NAME = /^[0-9a-f]{16}-[0-9a-f]{16}-\d+$/
const TEMP_NAME = /^[0-9a-f]{16}-[0-9a-f]{16}-\d+\.[0-9a-z]+\.tmp$/
const isOurs = (name: string) => ENTRY_NAME.test(name) || TEMP_NAME.test(name)

// Entry layout: 'STC1' | key length u32 | XXH64 of everything after the 16 bytes of head | key | bytes.
const MAGIC = 0x31435453
const HEAD = 16

/**
 * A persistent cache of what http(s) reads fetch, for the `cache` option of {@link open} and
 * {@link openModel}: 1 MiB blocks keyed by URL and version (ETag, else size and Last-Modified), each checksummed
 * and checked when read; a failed write is one console.warn, and the read goes on from the network.
 * @throws {@link SafetensorsError} `Io` when the folder cannot be created or opened.
 * Where a browser or worker has no usable Origin Private File System (WebKitGTK, a private window), the cache
 * stores nothing: its first write is one console.warn, and every read comes from the network.
 * @throws TypeError for options of the wrong type, both `dir` and `name`, `dir` outside the Node entry, or no
 * `dir` in the Node entry where the runtime has no Origin Private File System; RangeError for a `maxBytes` that is
 * not a positive integer.
 */
export async function createCache(options: CacheOptions = {}): Promise<RangeCache> {
  if (typeof options !== 'object' || options === null)
    throw new TypeError(`createCache(): options must be an object, not ${options === null ? 'null' : typeof options}`)
  const { dir, name = 'safetensors-wasm', maxBytes } = options
  if (dir !== undefined && typeof dir !== 'string') throw new TypeError(`createCache(): dir must be a string (a folder path), not ${typeof dir}`)
  if (typeof name !== 'string') throw new TypeError(`createCache(): name must be a string (an OPFS folder name), not ${typeof name}`)
  if (dir !== undefined && options.name !== undefined) throw new TypeError('createCache(): pass dir (a folder on disk) or name (an OPFS folder), not both')
  checkMaxBytes(maxBytes)
  const folders = folderStorage
  if (dir === undefined) {
    const opfs = await opfsStorage(name)
    if (opfs) return rangeCache(opfs, { maxBytes })
    if (folders)
      throw new TypeError('createCache(): this runtime has no Origin Private File System (navigator.storage.getDirectory); on Node, Deno or Bun pass { dir }')
    // A page cannot know whether its visitor's browser has OPFS: without one the cache is a warning, not a failure.
    return rangeCache(noStorage('this runtime has no usable Origin Private File System (navigator.storage.getDirectory)'), { maxBytes })
  }
  if (!folders)
    throw new TypeError(
      'createCache({ dir }): a folder on disk needs the Node entry of safetensors-wasm (Node, Deno, Bun); in browsers and workers pass { name }, an OPFS folder',
    )
  return rangeCache(await folders(dir), { maxBytes })
}

function checkMaxBytes(maxBytes: unknown): void {
  if (maxBytes === undefined) return
  if (typeof maxBytes !== 'number') throw new TypeError(`createCache(): maxBytes must be a number of bytes, not ${typeof maxBytes}`)
  if (!(maxBytes > 0) || !(Number.isInteger(maxBytes) || maxBytes === Infinity))
    throw new RangeError(`createCache(): maxBytes must be a positive integer (or Infinity), not ${maxBytes}`)
}

/** A cache over any storage: createCache's, or a test's. `blockBytes` is for tests that want many blocks from small files. */
export async function rangeCache(storage: CacheStorage, options: { maxBytes?: number; blockBytes?: number } = {}): Promise<BlockCache> {
  checkMaxBytes(options.maxBytes)
  const listed = await listOurs(storage)
  const now = Date.now()
  await Promise.all(listed.filter((e) => TEMP_NAME.test(e.name) && now - e.modified > STALE_TEMP_MS).map((e) => storage.delete(e.name).catch(() => {})))
  const entries = listed.filter((e) => ENTRY_NAME.test(e.name)).sort((a, b) => a.modified - b.modified)
  return new BlockCache(storage, entries, options.maxBytes ?? Infinity, options.blockBytes ?? BLOCK_BYTES)
}

async function listOurs(storage: CacheStorage): Promise<StoredEntry[]> {
  try {
    return (await storage.list()).filter((e) => isOurs(e.name))
  } catch (cause) {
    throw storageError(cause)
  }
}

const isQuotaError = (error: unknown) => {
  const { name, code } = (error ?? {}) as { name?: string; code?: string }
  return name === 'QuotaExceededError' || code === 'ENOSPC' || code === 'EDQUOT'
}

const utf8 = (text: string) => new TextEncoder().encode(text)
const hashHex = (text: string) => xxh64(utf8(text)).toString(16).padStart(16, '0')

/** An entry's stored bytes: head, key and payload (see MAGIC). */
function encodeEntry(key: string, payload: Uint8Array): Uint8Array {
  const keyBytes = utf8(key)
  const entry = new Uint8Array(HEAD + keyBytes.length + payload.length)
  entry.set(keyBytes, HEAD)
  entry.set(payload, HEAD + keyBytes.length)
  const view = new DataView(entry.buffer)
  view.setUint32(0, MAGIC, true)
  view.setUint32(4, keyBytes.length, true)
  view.setBigUint64(8, xxh64(entry.subarray(HEAD)), true)
  return entry
}

/** The payload of a stored entry, if it is whole, uncorrupted, of `key` and `length` bytes long; else undefined. */
function decodeEntry(entry: Uint8Array, key: string, length: number): Uint8Array | undefined {
  if (entry.length < HEAD) return undefined
  const view = new DataView(entry.buffer, entry.byteOffset, HEAD)
  const keyBytes = utf8(key)
  if (view.getUint32(0, true) !== MAGIC || view.getUint32(4, true) !== keyBytes.length || entry.length !== HEAD + keyBytes.length + length) return undefined
  if (view.getBigUint64(8, true) !== xxh64(entry.subarray(HEAD))) return undefined
  // The checksum matched, so a key that differs is another entry's (a hash collision of names).
  if (!keyBytes.every((byte, i) => entry[HEAD + i] === byte)) return undefined
  return entry.subarray(HEAD + keyBytes.length)
}

class BlockCache implements RangeCache {
  readonly #storage: CacheStorage
  readonly #maxBytes: number
  readonly blockBytes: number
  /** Entries known to be stored, name -> bytes, least recently used first (a Map keeps insertion order). */
  readonly #entries = new Map<string, number>()
  #bytes = 0
  #warned = false

  constructor(storage: CacheStorage, entries: StoredEntry[], maxBytes: number, blockBytes: number) {
    this.#storage = storage
    this.#maxBytes = maxBytes
    this.blockBytes = blockBytes
    for (const { name, size } of entries) this.#add(name, size)
  }

  async usage(): Promise<number> {
    return (await listOurs(this.#storage)).reduce((sum, e) => sum + e.size, 0)
  }

  async clear(): Promise<void> {
    const listed = await listOurs(this.#storage)
    try {
      await Promise.all(listed.map((e) => this.#storage.delete(e.name)))
    } catch (cause) {
      throw storageError(cause)
    }
    this.#entries.clear()
    this.#bytes = 0
  }

  has(name: string): boolean {
    return this.#entries.has(name)
  }

  /** Whether any entry's name starts with `prefix`. */
  holds(prefix: string): boolean {
    for (const name of this.#entries.keys()) if (name.startsWith(prefix)) return true
    return false
  }

  /** The entry's payload, checked; undefined (and the entry dropped) when it is missing or fails the check. */
  async load(name: string, key: string, length: number): Promise<Uint8Array | undefined> {
    // A storage that cannot read an entry has it no more than one that lost it.
    const entry = await this.#storage.read(name).catch(() => undefined)
    const payload = entry && decodeEntry(entry, key, length)
    if (!payload) {
      await this.drop(name)
      return undefined
    }
    // Used now: to the end of the eviction order.
    this.#entries.delete(name)
    this.#entries.set(name, entry.length)
    return payload
  }

  /** Stores a block; never rejects: the bytes are there for the read either way. */
  async store(name: string, key: string, payload: Uint8Array): Promise<void> {
    const entry = encodeEntry(key, payload)
    if (entry.length > this.#maxBytes) return
    try {
      await this.#storage.write(name, entry)
    } catch (error) {
      return this.#warnOnce(error)
    }
    this.#add(name, entry.length)
    for (const [old] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break
      if (old !== name) await this.drop(old)
    }
  }

  async drop(name: string): Promise<void> {
    const size = this.#entries.get(name)
    if (size !== undefined) {
      this.#entries.delete(name)
      this.#bytes -= size
    }
    await this.#storage.delete(name).catch(() => {})
  }

  /** Drops the entries whose names start with `prefix` but not with `keep`: another version of a file. */
  async dropAllBut(prefix: string, keep: string): Promise<void> {
    const stale = [...this.#entries.keys()].filter((name) => name.startsWith(prefix) && !name.startsWith(keep))
    await Promise.all(stale.map((name) => this.drop(name)))
  }

  #add(name: string, size: number): void {
    this.#bytes += size - (this.#entries.get(name) ?? 0)
    this.#entries.delete(name)
    this.#entries.set(name, size)
  }

  /** open()'s reads of `http` through this cache (src/cache/hook.ts). */
  [readThrough](http: HttpSource): HttpSource {
    return cachedHttp(http, this)
  }

  #warnOnce(error: unknown): void {
    if (this.#warned) return
    this.#warned = true
    const what = isQuotaError(error) ? 'the cache storage is full' : 'cannot write to the cache'
    console.warn(`safetensors-wasm: ${what} (${(error as Error)?.message ?? error}); ranges that cannot be stored are read from the network`)
  }
}

/** One version of one file in the cache: the start of its entry names and of its entry keys. */
interface Version {
  names: string
  keys: string
}

/** A block on its way: its bytes, and the write that stores them (done or nothing to do once settled). */
interface Block {
  bytes: Promise<Uint8Array>
  stored: Promise<void>
}

/**
 * The reads of one open of a URL through the cache: what the first read learnt (the file's version), the
 * blocks in flight, and how a range is put together from entries and network requests.
 */
class CachedFile {
  readonly #blockBytes: number
  readonly #urlNames: string
  #ready: Promise<Version | undefined> | undefined
  /** Blocks being read or written, by index: reads at once (neighbouring tensors) share them. */
  readonly #inFlight = new Map<number, Block>()

  constructor(
    readonly http: HttpSource,
    readonly cache: BlockCache,
  ) {
    this.#blockBytes = cache.blockBytes
    this.#urlNames = `${hashHex(http.url)}-`
  }

  /**
   * How large reads go parallel: in chunks of whole blocks, so that a chunk's blocks are one request of at
   * most the network's chunk (a chunk in a slot never starts a parallel read of its own, which would wait
   * for the slots it holds).
   */
  get parallel(): ParallelReads | undefined {
    const { parallel } = this.http
    return parallel && { pool: parallel.pool, chunkBytes: Math.max(1, Math.floor(parallel.chunkBytes / this.#blockBytes)) * this.#blockBytes }
  }

  /** The version of the file, learnt once for all the reads of this open; after a failure the next read tries again. */
  started(signal: AbortSignal | undefined): Promise<Version | undefined> {
    this.#ready ??= this.#start(signal).catch((error: unknown) => {
      this.#ready = undefined
      throw error
    })
    return this.#ready
  }

  async readInto(offset: number, target: Uint8Array, signal?: AbortSignal, onBytes?: OnBytes): Promise<void> {
    if (target.length === 0) return
    const { http } = this
    const version = await this.started(signal)
    if (!version) return readInto(http, offset, target, signal, onBytes)
    if (offset + target.length > http.size!)
      throw new SafetensorsError('Io', `${http.url}: read of ${target.length} bytes at offset ${offset} is past the end (${http.size} bytes)`, {
        url: http.url,
      })
    const fast = this.parallel
    if (!fast || target.length <= fast.chunkBytes) return this.#readBlocks(version, offset, target, signal, onBytes)
    await readChunked(fast, offset, target, signal, onBytes, (at, chunk, chunkSignal, chunkBytes) =>
      this.#readBlocks(version, at, chunk, chunkSignal, chunkBytes),
    )
  }

  /** The version the server has now, learnt by the first read; undefined when it names none (nothing is cached). */
  async #start(signal: AbortSignal | undefined): Promise<Version | undefined> {
    const { http, cache } = this
    const warm = cache.holds(this.#urlNames)
    const first = await http.read(0, warm ? 1 : this.#blockBytes, signal)
    const { etag, lastModified } = http.version ?? {}
    // A weak ETag names the version too, as it does for the reads of one open (src/sources/http/source.ts): the usual
    // reason for one, compression, is refused there; and the size is part of the key.
    const validator = etag ? `etag ${etag}` : lastModified ? `modified ${lastModified}` : undefined
    if (validator === undefined) return undefined
    const text = `${validator}\nsize ${http.size}`
    const version = { names: `${this.#urlNames}${hashHex(text)}-`, keys: `${http.url}\n${text}\nblock ` }
    if (warm) await cache.dropAllBut(this.#urlNames, version.names)
    else if (first.length > 0) this.#track(version, 0, Promise.resolve({ bytes: first, fresh: true }))
    return version
  }

  #lengthOf(k: number): number {
    return Math.min(this.#blockBytes, this.http.size! - k * this.#blockBytes)
  }

  /** Registers block k, to be stored once its bytes come if they are `fresh` (from the network). */
  #track(version: Version, k: number, got: Promise<{ bytes: Uint8Array; fresh: boolean }>): Block {
    const bytes = got.then((g) => g.bytes)
    const stored = got.then(
      (g) => (g.fresh ? this.cache.store(version.names + k, version.keys + k, g.bytes) : undefined),
      () => {},
    )
    // Marked handled: a block read ahead for a read that then failed has nobody waiting for it.
    bytes.catch(() => {})
    const block = { bytes, stored }
    this.#inFlight.set(k, block)
    stored.then(() => this.#inFlight.get(k) === block && this.#inFlight.delete(k))
    return block
  }

  /** Block k from its entry, or from the network when the entry fails its check. */
  #load(version: Version, k: number, signal: AbortSignal | undefined): Block {
    const length = this.#lengthOf(k)
    const got = this.cache
      .load(version.names + k, version.keys + k, length)
      .then(async (bytes) => (bytes ? { bytes, fresh: false } : { bytes: await this.http.read(k * this.#blockBytes, length, signal), fresh: true }))
    return this.#track(version, k, got)
  }

  /** Blocks from..from+count-1 in one request; each block's bytes resolve as soon as they have landed. */
  #fetchBlocks(version: Version, from: number, count: number, signal: AbortSignal | undefined): void {
    const B = this.#blockBytes
    const start = from * B
    const buffer = new Uint8Array(Math.min(this.http.size!, (from + count) * B) - start)
    const parts = Array.from({ length: count }, () => deferred<Uint8Array>())
    let landed = 0
    let done = 0
    const release = (upTo: number) => {
      for (; done < count && Math.min((done + 1) * B, buffer.length) <= upTo; done++)
        parts[done].resolve(buffer.subarray(done * B, Math.min((done + 1) * B, buffer.length)))
    }
    // A read longer than a chunk lands in parallel parts: `done` says how much of its front is complete.
    readInto(this.http, start, buffer, signal, (bytes, done) => release(done ?? (landed += bytes))).then(
      () => release(buffer.length),
      (error: unknown) => parts.forEach((p) => p.reject(error)),
    )
    parts.forEach((p, i) =>
      this.#track(
        version,
        from + i,
        p.promise.then((bytes) => ({ bytes, fresh: true })),
      ),
    )
  }

  /**
   * Starts the blocks from `planned` up to `upTo` (at most `last`) into `mine`: each in flight already, from
   * its entry, or with the missing blocks after it in one request. Returns the next block to plan.
   */
  #plan(version: Version, mine: Map<number, Block>, planned: number, upTo: number, last: number, signal: AbortSignal | undefined): number {
    const missing = (k: number) => !this.#inFlight.has(k) && !this.cache.has(version.names + k)
    while (planned <= upTo) {
      if (!missing(planned)) {
        mine.set(planned, this.#inFlight.get(planned) ?? this.#load(version, planned, signal))
        planned++
        continue
      }
      let count = 1
      while (count < PIECE_BLOCKS && planned + count <= last && missing(planned + count)) count++
      this.#fetchBlocks(version, planned, count, signal)
      for (const end = planned + count; planned < end; planned++) mine.set(planned, this.#inFlight.get(planned)!)
    }
    return planned
  }

  /** Fills `target` from the blocks of `version` it covers, AHEAD_BLOCKS started ahead of the one copied out. */
  async #readBlocks(version: Version, offset: number, target: Uint8Array, signal: AbortSignal | undefined, onBytes: OnBytes | undefined): Promise<void> {
    const B = this.#blockBytes
    const first = Math.floor(offset / B)
    const last = Math.floor((offset + target.length - 1) / B)
    const mine = new Map<number, Block>()
    let planned = first
    const stored: Array<Promise<void>> = []
    for (let k = first; k <= last; k++) {
      planned = this.#plan(version, mine, planned, Math.min(last, k + AHEAD_BLOCKS), last, signal)
      let block = mine.get(k)!
      let bytes: Uint8Array
      try {
        bytes = await block.bytes
      } catch (error) {
        // Another read started this block and was aborted: this one was not, so it reads the block itself.
        if (!(error instanceof SafetensorsError && error.code === 'Aborted') || signal?.aborted) throw error
        this.#fetchBlocks(version, k, 1, signal)
        block = this.#inFlight.get(k)!
        bytes = await block.bytes
      }
      stored.push(block.stored)
      const from = Math.max(offset, k * B)
      const to = Math.min(offset + target.length, (k + 1) * B)
      target.set(bytes.subarray(from - k * B, to - k * B), from - offset)
      onBytes?.(to - from)
    }
    // Resolved once stored: a read that is over leaves nothing behind, and the next one finds its blocks.
    await Promise.all(stored)
  }
}

/** `http` read through `cache`: the HttpSource of a CachedFile. */
function cachedHttp(http: HttpSource, cache: BlockCache): HttpSource {
  const file = new CachedFile(http, cache)
  const readInto: HttpSource['readInto'] = (offset, target, signal, onBytes) => file.readInto(offset, target, signal, onBytes)
  return {
    get url() {
      return http.url
    },
    get size() {
      return http.size
    },
    get version() {
      return http.version
    },
    close: http.close && (() => http.close!()),
    get parallel() {
      return file.parallel
    },
    readInto,
    // Before the size is known, a read may run past the end of a small file: it gives what there is.
    async read(offset, length, signal, onBytes) {
      const known = http.size !== undefined
      await file.started(signal)
      const bytes = new Uint8Array(known ? length : Math.max(0, Math.min(length, http.size! - offset)))
      await readInto(offset, bytes, signal, onBytes)
      return bytes
    },
  }
}

/** A promise and the functions that settle it (Promise.withResolvers, which Node 20 lacks). */
function deferred<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((yes, no) => {
    resolve = yes
    reject = no
  })
  return { promise, resolve, reject }
}
