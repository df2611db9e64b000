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
import { abortedError, type RangeSource } from '../source.ts'
import { type Attempt, io, type RetryPlan, TransientError, withRetries } from './attempts.ts'
import { discard, FileState, parseContentRange, readBody, type Transfer } from './responses.ts'
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

const HTTP_REQUEST_COST = 512 << 10

/** What a server says identifies one version of a file; learnt from the first response. */
interface HttpVersion {
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
  function request(range: string, { signal, until }: Attempt): { response: Promise<Response>; ifRange: string | null } {
    const headers = new Headers(options.headers)
    headers.set('Range', `bytes=${range}`)
    const ifRange = state.ifRange(conditional)
    if (ifRange) headers.set('If-Range', ifRange)
    return { response: until(fetchImpl(href, { headers, signal })), ifRange }
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
    await readBody(href, response, skip, t.target.subarray(t.filled), exact, attempt.until, (n) => {
      t.filled += n
      attempt.touch()
      t.onBytes?.(n)
    })
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
   * Reads several ranges: through multi-range requests where that can pay (many ranges, a server that may
   * answer them: multipart.ts), then one request for each range they left incomplete.
   */
  async function readRanges(transfers: Transfer[], signal: AbortSignal | undefined): Promise<void> {
    if (state.ranged && state.multiRange !== false && transfers.length > PARALLEL_READS) {
      // Loaded when first needed: only a slice of many runs makes multi-range requests.
      const { readMultiRange } = await import('./multipart.ts')
      await readMultiRange(
        { state, plan, request, withRetries, runPool, discard, parseContentRange, TransientError, parallel: PARALLEL_READS },
        transfers,
        signal,
      )
    }
    // Whatever no multi-range answer brought: a refusal, parts left out, a part that started mid-range.
    await runPool(
      transfers.filter((t) => t.filled < t.length),
      PARALLEL_READS,
      (t) => readTransfer(t, signal),
    )
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
