// A RangeSource over HTTP(S): each read is one Range request, retried with resume when the network
// fails it; a read longer than a chunk is several, in parallel (src/sources/downloads.ts), each chunk resumed on
// its own. The first response gives the file size (Content-Range) and its validator (ETag, else
// Last-Modified); every later response must carry the same validator, and later requests send it as
// If-Range, so bytes of two versions of a file are never put together. A server that ignores Range
// and answers 200 is read as a stream, keeping only the bytes asked for and cancelling the rest.
//
// The parts: responses.ts (what the server said so far, and the checks of each response against it; a
// single-range body), attempts.ts (one attempt of a request and its retries), multipart.ts (a
// multipart/byteranges body), and httpSource() here putting them together.

import { ConnectionPool, connectionsOption, DOWNLOAD, type ParallelReads, readChunked } from '../downloads.ts'
import { PARALLEL_READS, runPool } from '../pool.ts'
import { retrySettings } from '../retry.ts'
import { abortedError, type OnBytes, type RangeSource } from '../source.ts'
import { type Attempt, io, type RetryPlan, TransientError, withRetries } from './attempts.ts'
import { discard, FileState, parseContentRange, readBody } from './responses.ts'
import type { WholeFile } from './whole-file.ts'

/** Options of reads over http(s), in {@link open}, {@link openModel} and {@link httpSource}. */
export interface HttpOptions {
  /**
   * A fetch implementation.
   * @defaultValue globalThis.fetch
   */
  fetch?: typeof fetch
  /**
   * Extra request headers, e.g. { Authorization: 'Bearer …' }.
   * @defaultValue none
   */
  headers?: ConstructorParameters<typeof Headers>[0]
  /**
   * Attempts after the first, per read (per chunk of a large read), for transient failures: a dropped
   * connection, a body cut short, a stall (see idleTimeout), HTTP 408, 429, 500, 502, 503, 504. Each
   * resumes at the first byte not yet received. Default 4.
   * @defaultValue 4
   */
  retries?: number
  /**
   * Milliseconds with no byte (waiting for headers or body) before an attempt counts as stalled. Default 30000; Infinity: never.
   * @defaultValue 30000
   */
  idleTimeout?: number
  /**
   * http(s): what one more request costs, in bytes of transfer (RangeSource.requestCost): a slice's runs
   * closer than this are fetched in one request, gap included. Default 512 KiB, about a 10-20 ms round
   * trip at 25-50 MB/s; 0 fetches exactly the bytes a slice covers.
   * @defaultValue 524288 (512 KiB)
   */
  requestCost?: number
  /**
   * http(s): most requests in flight at once for one large read of this file (a tensor, a stream, a
   * conversion), fetched in chunks of 8 MiB; as many as make it faster are used. Default 8 in Node, Deno
   * and Bun, 6 in workerd, 4 in browsers (which share one HTTP/2 connection per origin); 1: one request
   * at a time, a large read in one request.
   * @defaultValue 8 in Node, Deno and Bun; 6 in workerd; 4 in browsers
   */
  connections?: number
}

export const HTTP_REQUEST_COST = 512 << 10

/** Longest Range header sent: servers refuse longer header lines (nginx's limit is 8 KiB), so a request carries a few hundred ranges at most. */
const MAX_RANGE_HEADER = 4000

/** One read in progress: what arrived so far survives a failed attempt, so the next one asks only for the rest. */
interface Transfer {
  offset: number
  /** Bytes asked for; the first read of a file may get fewer, at its end. */
  length: number
  /** Allocated once the size is known (for the first read: when its response arrives). */
  target?: Uint8Array
  filled: number
  /**
   * Told each part's length as it lands in `target` (progress, conversion as bytes arrive): in order, or,
   * for a read in parallel chunks, in any order with `done`, the bytes complete at the front of `target`.
   */
  onBytes?: OnBytes
}

/** What a server says identifies one version of a file; learnt from the first response. */
export interface HttpVersion {
  etag: string | null
  lastModified: string | null
}

export type HttpSource = RangeSource & {
  readonly url: string
  /** The validators of the first response (the persistent cache keys on them); undefined before it. */
  readonly version: HttpVersion | undefined
  /** How large reads go parallel; undefined while they cannot (connections: 1, size unknown, Range ignored). */
  readonly parallel: ParallelReads | undefined
}

/** Consecutive transfers in at least PARALLEL_READS groups, each one request whose Range header stays under MAX_RANGE_HEADER. */
function batchesOf(transfers: Transfer[]): Transfer[][] {
  const per = Math.ceil(transfers.length / PARALLEL_READS)
  const batches: Transfer[][] = []
  let length = Infinity
  for (const t of transfers) {
    const range = `${t.offset}-${t.offset + t.length - 1},`.length
    if (batches[batches.length - 1]?.length === per || length + range > MAX_RANGE_HEADER) {
      batches.push([])
      length = 'Range: bytes='.length
    }
    batches[batches.length - 1].push(t)
    length += range
  }
  return batches
}

/**
 * The {@link RangeSource} that {@link open} uses for an http(s) URL: Range requests, retried with resume,
 * every response checked against the first one's validator (docs/reading.md, "When the network fails").
 * @throws {@link SafetensorsError} from its reads: `Io` (an HTTP error status, the file changed, a malformed
 * or compressed response, retries exhausted), `Aborted`.
 * @throws TypeError or RangeError for `retries`, `idleTimeout`, `requestCost` or `connections` of the wrong type or out of range.
 */
export function httpSource(url: string | URL, options: HttpOptions = {}): HttpSource {
  const href = String(url)
  const fetchImpl = options.fetch ?? globalThis.fetch
  const plan: RetryPlan = { href, ...retrySettings(options) }
  const requestCost = options.requestCost ?? HTTP_REQUEST_COST
  if (typeof requestCost !== 'number' || !(requestCost >= 0) || !Number.isFinite(requestCost))
    throw new RangeError(`requestCost must be a non-negative number of bytes, got ${String(requestCost)}`)
  const connections = connectionsOption(options)
  const pool: ConnectionPool | undefined = connections > 1 ? new ConnectionPool(connections) : undefined
  const state = new FileState(href)
  // From a page, a cross-origin If-Range needs a CORS preflight that allows it, which servers set up for
  // Range alone refuse. There the validator check on each response is the guard on its own.
  const page = (globalThis as { location?: { origin: string } }).location
  const conditional = page === undefined || new URL(href).origin === page.origin
  const parallel = (): ParallelReads | undefined => (pool && state.ranged ? { pool, chunkBytes: DOWNLOAD.chunkBytes } : undefined)

  /** The request, with the caller's headers, the Range, and If-Range once the server has shown it honours Range. */
  function request(range: string, { signal, gone }: Attempt): { response: Promise<Response>; ifRange: string | null } {
    const headers = new Headers(options.headers)
    headers.set('Range', `bytes=${range}`)
    const ifRange = state.ifRange(conditional)
    if (ifRange) headers.set('If-Range', ifRange)
    return { response: Promise.race([fetchImpl(href, { headers, signal }), gone]), ifRange }
  }

  async function attemptTransfer(t: Transfer, attempt: Attempt): Promise<void> {
    const from = t.offset + t.filled
    const want = (t.target?.length ?? t.length) - t.filled
    const sent = request(`${from}-${from + want - 1}`, attempt)
    const response = await sent.response
    attempt.touch()
    const { skip, available, exact } = state.accept(response, from, want, sent.ifRange)
    if (t.target === undefined) t.target = new Uint8Array(available)
    else if (available !== want) throw io(href, `read of ${want} bytes at offset ${from} is past the end (${state.size} bytes)`)
    if (available === 0) return discard(response)
    await readBody(href, response, skip, t.target.subarray(t.filled), exact, attempt.gone, (n) => {
      t.filled += n
      attempt.touch()
      t.onBytes?.(n)
    })
  }

  /**
   * One request for the rest of several transfers (ascending, disjoint, sizes known). A multipart/byteranges
   * answer fills each transfer from the parts that start where it stands; a single range (the server
   * refuses several, or joined them into one) fills what it covers; a 200 (its validator matched, so the
   * file is the same) says the server refuses multi-range, and fills nothing. The server's way is
   * remembered; what is left incomplete is for single requests to finish.
   */
  async function attemptMultiRange(batch: Transfer[], attempt: Attempt): Promise<void> {
    const pending = batch.filter((t) => t.filled < t.length)
    if (pending.length === 0) return
    const ranges = pending.map((t) => `${t.offset + t.filled}-${t.offset + t.length - 1}`).join(',')
    const response = await request(ranges, attempt).response
    attempt.touch()
    const asked = pending.length > 4 ? `${pending.length} ranges from byte ${pending[0].offset + pending[0].filled}` : `bytes ${ranges}`
    state.checkResponse(response, asked)
    if (response.status === 200) {
      state.multiRange = false
      return discard(response)
    }
    const low = pending[0].offset + pending[0].filled
    const high = pending[pending.length - 1].offset + pending[pending.length - 1].length
    // A part's bytes land in each transfer that stands at their position; a part that starts inside a
    // transfer's rest fills none of it (that rest is asked for again), so a byte lands only where it belongs.
    const land = (position: number, chunk: Uint8Array) => {
      for (const t of pending) {
        const at = t.offset + t.filled
        if (at < position || at >= position + chunk.length || t.filled === t.length) continue
        const n = Math.min(t.offset + t.length, position + chunk.length) - at
        t.target!.set(chunk.subarray(at - position, at - position + n), t.filled)
        t.filled += n
        t.onBytes?.(n)
      }
      attempt.touch()
    }
    const context = {
      size: state.size!,
      fail: (message: string) => state.failed(response, `${message}, in answer to a request for ${asked}`),
      endedEarly: () => new TransientError(href, 'the response ended before its last part did'),
      parseContentRange,
    }
    // Loaded when first needed: only a slice of many runs makes multi-range requests.
    const { readParts } = await import('./multipart.ts')
    state.multiRange = await readParts(context, response, pending.length, [low, high], attempt.gone, land)
  }

  /** Every read after the one that found the server ignores Range: from one download of the file (whole-file.ts). */
  let whole: Promise<WholeFile> | undefined

  /** The rest of one transfer: in parallel chunks when it is longer than one, else one request with its retries. */
  async function readTransfer(t: Transfer, signal: AbortSignal | undefined): Promise<void> {
    if (state.ignoresRange && t.target) {
      // Loaded when first needed: only a server that ignores Range needs it.
      whole ??= import('./whole-file.ts').then(({ WholeFile }) => new WholeFile({ state, plan, request, withRetries, io, TransientError, abortedError }))
      return (await whole).read(t.offset + t.filled, t.target.subarray(t.filled), signal, t.onBytes)
    }
    const fast = t.target && parallel()
    if (!fast || t.target!.length - t.filled <= fast.chunkBytes) return withRetries(plan, signal, (attempt) => attemptTransfer(t, attempt))
    await readChunked(fast, t.offset + t.filled, t.target!.subarray(t.filled), signal, t.onBytes, (offset, target, chunkSignal, onBytes) => {
      const chunk: Transfer = { offset, length: target.length, target, filled: 0, onBytes }
      return withRetries(plan, chunkSignal, (attempt) => attemptTransfer(chunk, attempt))
    })
    t.filled = t.target!.length
  }

  /**
   * Reads several ranges: in multi-range requests of a few hundred ranges each (at least PARALLEL_READS
   * of them, run concurrently) while the server answers them, else one request per range. Whether it
   * does is learnt from a first request sent alone, so a server that refuses costs one request, once.
   */
  async function readRanges(transfers: Transfer[], signal: AbortSignal | undefined): Promise<void> {
    const incomplete = () => transfers.filter((t) => t.filled < t.length)
    const several = (batch: Transfer[]) => batch.length > 1 && state.multiRange !== false
    let batches = state.ranged && state.multiRange !== false && transfers.length > PARALLEL_READS ? batchesOf(transfers) : []
    if (state.multiRange === undefined && batches.length > 0) {
      await withRetries(plan, signal, (attempt) => attemptMultiRange(batches[0], attempt))
      batches = batches.slice(1)
    }
    await runPool(batches, PARALLEL_READS, async (batch) => {
      if (several(batch)) await withRetries(plan, signal, (attempt) => attemptMultiRange(batch, attempt))
    })
    // Whatever no multi-range answer brought: a refusal, parts left out, a part that started mid-range.
    await runPool(incomplete(), PARALLEL_READS, (t) => readTransfer(t, signal))
  }

  const checkInFile = (offset: number, length: number) => {
    if (state.size !== undefined && offset + length > state.size)
      throw io(href, `read of ${length} bytes at offset ${offset} is past the end (${state.size} bytes)`)
  }

  return {
    url: href,
    get size() {
      return state.size
    },
    get version() {
      return state.etag === undefined ? undefined : { etag: state.etag, lastModified: state.lastModified }
    },
    get parallel() {
      return parallel()
    },
    async readInto(offset, target, signal, onBytes) {
      if (target.length === 0) return
      checkInFile(offset, target.length)
      await readTransfer({ offset, length: target.length, target, filled: 0, onBytes }, signal)
    },
    // Before the size is known, the request may run past the end of a small file: it gives what there is.
    async read(offset, length, signal, onBytes) {
      checkInFile(offset, length)
      const t: Transfer = { offset, length, target: state.size === undefined ? undefined : new Uint8Array(length), filled: 0, onBytes }
      await readTransfer(t, signal)
      return t.target!
    },
    readRanges(ranges, signal, onBytes) {
      for (const { offset, target } of ranges) checkInFile(offset, target.length)
      const transfers = ranges.flatMap(({ offset, target }, i): Transfer[] =>
        target.length === 0 ? [] : [{ offset, length: target.length, target, filled: 0, onBytes: onBytes && ((n) => onBytes(n, i)) }],
      )
      return readRanges(
        transfers.sort((a, b) => a.offset - b.offset),
        signal,
      )
    },
    async close() {
      ;(await whole)?.close()
    },
    requestCost,
  }
}
