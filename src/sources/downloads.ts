// Large reads over several connections at once (one concern: the chunk scheduler, shared by plain and
// cached HTTP reads, streams and conversions). A read longer than a chunk is cut at multiples of the
// chunk size; each chunk is fetched on its own (and resumed on its own by whoever fetches it), straight
// into its place in the target. How many chunks are in flight adapts per file: it starts at 2 (the
// second request hides the round trip between chunks), and one more connection is added while the total
// throughput grows by at least 5% (as @huggingface/hub's downloader does), up to `connections`; a
// connection that brings less is dropped again. CDNs cap each connection, so each one adds its cap; a
// server that caps all connections together stays at 2, no slower than one.
import { integerOption } from './retry.ts'
import { abortedError, onAbort, type RangeSource, readInto } from './source.ts'

/**
 * chunkBytes: 8 MiB, a third of a second at a CDN's 25 MB/s per connection, so the last chunks of a read
 * (when fewer than all connections have work) cost little, and a request's round trip (tens of ms, hidden
 * anyway by the requests beside it) is a few percent of a chunk even at 1 Gb/s. windowMs: how long the
 * throughput is measured before a connection is added or dropped, short so that 2 to 8 takes about a
 * second (measured against limit_rate 25m: 250 ms windows made a 256 MiB read 3.5x one fetch, 150 ms ones
 * 4.2x); warmUpMs: the start of each window not counted (a connection just added has not had its first
 * byte yet). Mutable only so that tests can make
 * chunks small and windows short.
 */
export const DOWNLOAD = { chunkBytes: 8 << 20, windowMs: 150, warmUpMs: 50 }

/** A connection is kept when it raises the total throughput by at least this factor. */
const GAIN = 1.05
/** Chunks a sequential read keeps fetched beyond those in flight, for the consumer to take while the others come. */
const READY_CHUNKS = 2
/** Windows to wait at a level after a connection was dropped before one is tried again (a busy moment may have misled the trial). */
const HOLD_WINDOWS = 4

/** Requests in flight per file by default: 6 in workerd, 4 in browsers (one HTTP/2 connection per origin, shared), else 8. */
function defaultConnections(): number {
  const scope = globalThis as { navigator?: { userAgent?: string }; process?: { versions?: { node?: string } }; Deno?: unknown; Bun?: unknown }
  if (scope.navigator?.userAgent === 'Cloudflare-Workers') return 6
  if (scope.process?.versions?.node !== undefined || scope.Deno !== undefined || scope.Bun !== undefined) return 8
  return 4
}

/** The `connections` option, checked. */
export function connectionsOption(options: { connections?: unknown }): number {
  const { connections = defaultConnections() } = options
  return integerOption('connections', connections, 1)
}

/**
 * The request slots of one file, `level` of them open at a time, and the throughput measurement that
 * moves `level` between 2 and `limit`. Tasks wait their turn in order, so chunks start front to back.
 */
export class ConnectionPool {
  readonly #limit: number
  #level: number
  #active = 0
  readonly #waiting: Array<() => void> = []
  /** The throughput at one connection fewer, while a new one is on trial; undefined when none is. */
  #baseline: number | undefined
  /** Windows left before the next trial, after a connection was dropped. */
  #hold = 0
  #windowStart = 0
  #windowBytes = 0
  /** false while fewer requests than `level` were in flight: that window says nothing about `level`. */
  #windowFull = false

  constructor(limit: number) {
    this.#limit = limit
    this.#level = Math.min(2, limit)
  }

  /** Requests allowed in flight now. */
  get level(): number {
    return this.#level
  }

  /** A new read: the level it finds is kept, and tried one higher again. */
  begin(): void {
    this.#hold = 0
    this.#baseline = undefined
    this.#restartWindow()
  }

  /** Runs `task` once a slot is free; rejects with Aborted, without running it, if `signal` aborts first. */
  async run<T>(task: () => Promise<T>, signal: AbortSignal): Promise<T> {
    await this.#slot(signal)
    try {
      return await task()
    } finally {
      this.#active--
      this.#startWaiting()
      // A chunk that ends with another waiting hands its slot straight on: the window goes on.
      if (this.#active < this.#level) this.#windowFull = false
    }
  }

  /** Bytes that arrived through one of the slots. */
  arrived(bytes: number): void {
    if (!this.#windowFull) return this.#restartWindow()
    const elapsed = performance.now() - this.#windowStart
    if (elapsed < 0) return
    this.#windowBytes += bytes
    if (elapsed >= DOWNLOAD.windowMs) this.#judge(this.#windowBytes / elapsed)
  }

  /** After a window at `level`: keep the connection on trial if it paid, and try one more; else drop it and wait. */
  #judge(rate: number): void {
    if (this.#hold > 0) {
      this.#hold--
      this.#baseline = undefined
    } else if (this.#baseline === undefined || rate >= this.#baseline * GAIN) {
      this.#baseline = rate
      if (this.#level < this.#limit) this.#setLevel(this.#level + 1)
    } else {
      this.#baseline = undefined
      this.#hold = HOLD_WINDOWS
      this.#setLevel(this.#level - 1)
    }
    this.#restartWindow()
  }

  #setLevel(level: number): void {
    this.#level = level
    this.#startWaiting()
  }

  #restartWindow(): void {
    this.#windowStart = performance.now() + DOWNLOAD.warmUpMs
    this.#windowBytes = 0
    this.#windowFull = this.#active >= this.#level
  }

  #slot(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(abortedError(signal))
    if (this.#active < this.#level && this.#waiting.length === 0) return Promise.resolve(this.#take())
    return new Promise((resolve, reject) => {
      const start = () => {
        release()
        this.#take()
        resolve()
      }
      const release = onAbort(signal, () => {
        this.#waiting.splice(this.#waiting.indexOf(start), 1)
        reject(abortedError(signal))
      })
      this.#waiting.push(start)
    })
  }

  #take(): void {
    this.#active++
    if (this.#active >= this.#level && !this.#windowFull) this.#restartWindow()
  }

  #startWaiting(): void {
    while (this.#active < this.#level && this.#waiting.length > 0) this.#waiting.shift()!()
  }
}

/** What a source that reads large ranges in parallel offers: its file's slots, and where it cuts chunks. */
export interface ParallelReads {
  pool: ConnectionPool
  chunkBytes: number
}

/** Fills `target` (bytes `offset` on) through `fetch`, as RangeSource.readInto does; `onBytes` as in readInto. */
type ChunkFetch = (offset: number, target: Uint8Array, signal: AbortSignal, onBytes: (bytes: number) => void) => Promise<void>

/** [start, end) pieces of [offset, offset + length), cut at the multiples of `chunkBytes` (so that chunks line up with cache blocks). */
function chunksOf(offset: number, length: number, chunkBytes: number): Array<[number, number]> {
  const chunks: Array<[number, number]> = []
  for (let at = offset; at < offset + length; ) {
    const end = Math.min(offset + length, (Math.floor(at / chunkBytes) + 1) * chunkBytes)
    chunks.push([at, end])
    at = end
  }
  return chunks
}

/**
 * One AbortController per chunk (a signal per chunk keeps each signal's listeners few, whatever the
 * number of chunks), all aborted by `signal` or by abortAll(); `release` drops the listener on `signal`.
 */
function chunkControllers(count: number, signal: AbortSignal | undefined): { controllers: AbortController[]; abortAll(): void; release(): void } {
  const controllers = Array.from({ length: count }, () => new AbortController())
  const abortAll = () => {
    for (const c of controllers) c.abort(signal?.reason)
  }
  if (signal?.aborted) abortAll()
  return { controllers, abortAll, release: onAbort(signal, abortAll) }
}

/**
 * Fills `target` with the bytes from `offset` on, a chunk per slot of `parallel.pool`, each landing in
 * its place. `onBytes(bytes, done)` is told each part as it lands, in any order, with `done` the bytes at
 * the front of `target` complete by then. The first failure aborts the other chunks; once every one has
 * settled (no request is left open), it is thrown.
 */
export async function readChunked(
  parallel: ParallelReads,
  offset: number,
  target: Uint8Array,
  signal: AbortSignal | undefined,
  onBytes: ((bytes: number, done: number) => void) | undefined,
  fetch: ChunkFetch,
): Promise<void> {
  const { pool, chunkBytes } = parallel
  const chunks = chunksOf(offset, target.length, chunkBytes)
  const filled = chunks.map(() => 0)
  let front = 0
  let done = 0
  const landed = (i: number, bytes: number) => {
    filled[i] += bytes
    pool.arrived(bytes)
    while (front < chunks.length && filled[front] === chunks[front][1] - chunks[front][0]) done += filled[front++]
    onBytes?.(bytes, front < chunks.length ? done + filled[front] : done)
  }
  const { controllers, abortAll, release } = chunkControllers(chunks.length, signal)
  let failure: { error: unknown } | undefined
  pool.begin()
  try {
    await Promise.all(
      chunks.map(([start, end], i) => {
        const { signal } = controllers[i]
        return pool
          .run(() => fetch(start, target.subarray(start - offset, end - offset), signal, (bytes) => landed(i, bytes)), signal)
          .catch((error: unknown) => {
            failure ??= { error }
            abortAll()
          })
      }),
    )
  } finally {
    release()
  }
  if (failure) throw failure.error
}

/** A range read front to back: each read(target) fills `target` with the next bytes, telling `onBytes` of each part as it is filled. */
export interface SequentialReader {
  read(target: Uint8Array, onBytes?: (bytes: number) => void): Promise<void>
  /** Aborts what is in flight. */
  close(): void
}

/** Bytes [offset, offset + length) of `source`: one of the ranges a sequential read takes in turn. */
export interface SourceRange {
  source: RangeSource
  offset: number
  length: number
}

/** A piece of a sequential read: a range, or a chunk of one; `fetched` once it is asked for ahead of the consumer. */
interface Piece {
  source: RangeSource
  start: number
  end: number
  parallel: ParallelReads | undefined
  fetched?: Promise<Uint8Array>
}

/**
 * The bytes of `ranges`, one after the other, taken front to back by `read(target)` calls: a stream's, a
 * conversion's or a GGUF's input. Over sources with ParallelReads, chunks are fetched ahead of the
 * consumer through their file's pool, across the ends of ranges (tensors), at most `pool.level +
 * READY_CHUNKS` of them (in flight or waiting to be taken), so memory stays a few chunks whatever the
 * length. A single range of at most one chunk, or a range of any other source, is read by readInto into
 * the caller's target. `close()` aborts what is in flight.
 */
export function sequentialReader(ranges: readonly SourceRange[], signal: AbortSignal | undefined): SequentialReader {
  const pieces: Piece[] = []
  for (const { source, offset, length } of ranges) {
    const parallel = (source as { parallel?: ParallelReads }).parallel
    if (!parallel) pieces.push({ source, start: offset, end: offset + length, parallel })
    else for (const [start, end] of chunksOf(offset, length, parallel.chunkBytes)) pieces.push({ source, start, end, parallel })
  }
  // One chunk alone gains nothing from a slot, and would cost a copy.
  if (pieces.length === 1) pieces[0].parallel = undefined
  const { controllers, abortAll, release } = chunkControllers(pieces.length, signal)
  // The buffers of chunks taken, for the chunks fetched next: a read allocates as many chunks as it holds
  // at once, not its length in chunks (measured: a CLI conversion of a 256 MiB tensor from a capped URL
  // spent a median 400 ms collecting garbage with a new buffer per chunk, 310 ms with these).
  const spare: Uint8Array[] = []
  let current = 0
  /** Bytes of pieces[current] taken. */
  let taken = 0
  /** The next piece to consider fetching, and how many fetched pieces are not taken yet. */
  let next = 0
  let ahead = 0
  const fetchAhead = () => {
    for (next = Math.max(next, current); next < pieces.length; next++) {
      const piece = pieces[next]
      if (!piece.parallel) continue
      const { pool, chunkBytes } = piece.parallel
      // Every slot busy, and two chunks ready beyond them: the consumer takes a chunk while the next ones come.
      if (ahead >= pool.level + READY_CHUNKS) return
      const { signal } = controllers[next]
      const length = piece.end - piece.start
      piece.fetched = pool.run(async () => {
        // A spare from a source that cuts smaller chunks (a cache's blocks) may be too short for this one.
        const kept = spare.pop()
        const buffer = (kept && kept.length >= length ? kept : new Uint8Array(chunkBytes)).subarray(0, length)
        await readInto(piece.source, piece.start, buffer, signal, (n) => pool.arrived(n))
        return buffer
      }, signal)
      // Fetched ahead for a consumer that may stop first: its failure is nobody's to handle then.
      piece.fetched.catch(() => {})
      ahead++
    }
  }
  for (const pool of new Set(pieces.map((piece) => piece.parallel?.pool))) pool?.begin()
  return {
    async read(target, onBytes) {
      for (let into = 0; into < target.length; ) {
        const piece = pieces[current]
        if (!piece) throw new RangeError(`read of ${target.length - into} bytes past the end of the ranges`)
        const take = Math.min(target.length - into, piece.end - piece.start - taken)
        let bytes: Uint8Array | undefined
        if (piece.parallel) {
          fetchAhead()
          bytes = await piece.fetched!
          target.set(bytes.subarray(taken, taken + take), into)
          onBytes?.(take)
        } else {
          await readInto(piece.source, piece.start + taken, target.subarray(into, into + take), signal, onBytes)
        }
        into += take
        taken += take
        if (taken === piece.end - piece.start) {
          if (bytes) {
            spare.push(new Uint8Array(bytes.buffer))
            piece.fetched = undefined
            ahead--
          }
          current++
          taken = 0
        }
      }
      if (current === pieces.length) release()
    },
    close() {
      release()
      abortAll()
    },
  }
}
