// A RangeSource over HTTP(S): each read is one Range request, retried with resume when the network
// fails it; a read longer than a chunk is several, in parallel (src/downloads.ts), each chunk resumed on
// its own. The first response gives the file size (Content-Range) and its validator (ETag, else
// Last-Modified); every later response must carry the same validator, and later requests send it as
// If-Range, so bytes of two versions of a file are never put together. A server that ignores Range
// and answers 200 is read as a stream, keeping only the bytes asked for and cancelling the rest.
//
// The parts: FileState (what the server said so far, and the checks of each response against it),
// attempt()/withRetries() (one attempt of a request and its retries), readBody() and readParts() (a
// single-range body and a multipart/byteranges one), and httpSource() putting them together.
import { ConnectionPool, connectionsOption, DOWNLOAD, type ParallelReads, readChunked } from './downloads.ts'
import { SafetensorsError } from './errors.ts'
import { PARALLEL_READS, runPool } from './pool.ts'
import { parseRetryAfter, retryDelay, retrySettings, sleep, watchdog } from './retry.ts'
import { type OnBytes, onAbort, type RangeSource } from './source.ts'

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
  headers?: HeadersInit
  /** Aborts every request made through this source, and any wait between retries. */
  signal?: AbortSignal
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

/** Bytes before a multipart delimiter, or of a part's headers, past which the answer counts as malformed. */
const MAX_PART_HEADERS = 8192

const CRLF2 = new Uint8Array([13, 10, 13, 10])
const latin1 = (bytes: Uint8Array) => String.fromCharCode(...bytes)

/** Statuses that say "not now" rather than "never": a later attempt may well succeed. */
const TRANSIENT_STATUS = new Set([408, 429, 500, 502, 503, 504])

function io(url: string, message: string): SafetensorsError {
  return new SafetensorsError('Io', `${url}: ${message}`)
}

/** A failure another attempt may not meet. The retry loop catches it; if it ever escapes, it is still an Io error. */
class TransientError extends SafetensorsError {
  constructor(
    url: string,
    message: string,
    readonly retryAfter?: number,
    cause?: unknown,
  ) {
    super('Io', `${url}: ${message}`, cause === undefined ? undefined : { cause })
  }
}

interface ContentRange {
  start: number
  end: number
  total: number | undefined
}

// Parses "bytes START-END/TOTAL" (TOTAL may be a star), or the star form "bytes */TOTAL" of a 416.
function parseContentRange(value: string | null): ContentRange | undefined {
  const match = /^bytes\s+(?:(\d+)-(\d+)|\*)\/(\d+|\*)$/i.exec(value?.trim() ?? '')
  if (!match) return undefined
  const total = match[3] === '*' ? undefined : Number(match[3])
  return { start: match[1] === undefined ? -1 : Number(match[1]), end: match[2] === undefined ? -1 : Number(match[2]), total }
}

/**
 * How many of the `want` bytes asked for at `from` a single-range answer brings, judged by its Content-Range;
 * undefined when it cannot be used. It must start at `from` and be of a file of `size` bytes (when known). It
 * may end before the asked end only at the end of the file, on a first read (`size` unknown). It may run
 * past the asked end: Vite's dev server answers `bytes=0-0` with the whole file (it takes the end as
 * `parseInt(end) || size - 1`); the bytes asked for are kept and the rest of the body cancelled.
 */
function rangeAnswered(range: ContentRange | undefined, from: number, want: number, size: number | undefined): number | undefined {
  if (range?.total === undefined || range.start !== from || range.end < from || range.end >= range.total) return undefined
  if (size !== undefined && range.total !== size) return undefined
  if (range.end >= from + want - 1) return want
  return size === undefined && range.end === range.total - 1 ? range.end - from + 1 : undefined
}

function discard(response: Response): void {
  response.body?.cancel().catch(() => {})
}

function parseBoundary(contentType: string | null): string | undefined {
  const match = /^\s*multipart\/byteranges\s*;(?:.*;)?\s*boundary=(?:"([^"]+)"|([^\s;]+))/i.exec(contentType ?? '')
  return match ? (match[1] ?? match[2]) : undefined
}

/** What one attempt's requests use: its signal, a promise that rejects when the attempt ends, the watchdog's touch. */
interface Attempt {
  signal: AbortSignal
  gone: Promise<never>
  touch(): void
}

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

/** Where a response's wanted bytes begin in its body, how many come, and whether the body must end right after them. */
interface Accepted {
  skip: number
  available: number
  exact: boolean
}

/**
 * What the server said so far about the file (its size, its version, whether it honours Range and
 * multi-range requests), and the checks every response must pass against it.
 */
class FileState {
  size: number | undefined
  /** undefined until the first response; null when the server sends none. */
  etag: string | null | undefined
  lastModified: string | null = null
  ranged = false
  /** Whether the server answers a request for several ranges with their parts: unknown until one is sent. */
  multiRange: boolean | undefined

  constructor(readonly href: string) {}

  /** The If-Range to send, if any: only once the server has shown it honours Range; only a strong validator (RFC 9110 13.1.5). */
  ifRange(conditional: boolean): string | null {
    if (!this.ranged || !conditional) return null
    return this.etag && !this.etag.startsWith('W/') ? this.etag : this.lastModified
  }

  /** The Io error for a response that cannot be used, whose body is then cancelled. */
  failed(response: Response, message: string): SafetensorsError {
    discard(response)
    return io(this.href, message)
  }

  /**
   * Checks what every response must pass before any of its body is used, in this order: the status (a
   * 503 is a 503, whatever else the response says: transient ones are retried), the encoding, the
   * validator (the first response sets it). Leaves a 200 or a 206.
   */
  checkResponse(response: Response, asked: string): void {
    const { status } = response
    if (status !== 200 && status !== 206) {
      discard(response)
      const message = `HTTP ${status}${response.statusText ? ` ${response.statusText}` : ''} for ${asked}`
      if (TRANSIENT_STATUS.has(status)) throw new TransientError(this.href, message, parseRetryAfter(response.headers.get('Retry-After')))
      throw io(this.href, this.size === undefined ? message : `${message} of a ${this.size}-byte file`)
    }
    // Byte offsets mean nothing in a compressed body, and its Content-Length is not the file's size.
    const encoding = response.headers.get('Content-Encoding')
    if (encoding && encoding.toLowerCase() !== 'identity')
      throw this.failed(response, `the server compressed the response (Content-Encoding: ${encoding}); byte ranges need it uncompressed`)
    const tag = response.headers.get('ETag')
    const modified = response.headers.get('Last-Modified')
    if (this.etag === undefined) {
      this.etag = tag
      this.lastModified = modified
    } else if (tag !== this.etag) {
      throw this.failed(response, `the file changed between requests (ETag ${this.etag} became ${tag}); HTTP ${status} for ${asked}`)
    } else if (this.etag === null && modified !== this.lastModified) {
      throw this.failed(response, `the file changed between requests (Last-Modified ${this.lastModified} became ${modified}); HTTP ${status} for ${asked}`)
    }
  }

  /**
   * Checks a single-range response (checkResponse, then the range). Says where in the body the bytes at
   * `from` begin, how many of the `want` asked for will come, and whether the body must end right after them.
   */
  accept(response: Response, from: number, want: number, ifRange: string | null): Accepted {
    const { status } = response
    const asked = `bytes ${from}-${from + want - 1}`
    if (status === 416 && this.size === undefined && parseContentRange(response.headers.get('Content-Range'))?.total === 0) {
      discard(response)
      this.size = 0
      return { skip: 0, available: 0, exact: true }
    }
    this.checkResponse(response, asked)
    if (status === 200) return this.#acceptWhole(response, from, want, asked, ifRange)
    const fail = (message: string) => this.failed(response, message)
    const range = parseContentRange(response.headers.get('Content-Range'))
    const got = `got Content-Range ${JSON.stringify(response.headers.get('Content-Range'))}`
    const { size } = this
    if (range?.total !== undefined && size !== undefined && range.total !== size) throw fail(`the file is now ${range.total} bytes, it was ${size} (${got})`)
    const available = rangeAnswered(range, from, want, size)
    if (available === undefined) throw fail(`asked for ${asked}, ${got}`)
    this.size = range!.total
    this.ranged = true
    return { skip: 0, available, exact: range!.end === from + available - 1 }
  }

  /** A 200 to a Range request: the whole file, read as a stream from its start (the validator matched, so it is not a new version the server admits to). */
  #acceptWhole(response: Response, from: number, want: number, asked: string, ifRange: string | null): Accepted {
    const fail = (message: string) => this.failed(response, message)
    if (this.ranged) {
      throw fail(
        ifRange
          ? `HTTP 200 (the whole file) for ${asked} with If-Range ${ifRange}: the server says the file changed, or it stopped honouring Range`
          : `HTTP 200 (the whole file) for ${asked}: the server stopped honouring Range`,
      )
    }
    const length = response.headers.get('Content-Length')
    if (this.size === undefined) {
      if (length === null) throw fail('the server ignores Range requests and sends no Content-Length, so the file size is unknown')
      this.size = Number(length)
    } else if (length !== null && Number(length) !== this.size) {
      throw fail(`the file is now ${length} bytes, it was ${this.size}`)
    }
    return { skip: from, available: Math.max(0, Math.min(want, this.size - from)), exact: false }
  }
}

/** How a source's requests are retried: the URL they name, the retry settings, the source's own signal. */
interface RetryPlan {
  href: string
  retries: number
  idleTimeout: number
  signal: AbortSignal | undefined
}

/** Runs `run` until it succeeds, again after each transient failure (each attempt resumes where the last stopped), up to `retries` times. */
async function withRetries(plan: RetryPlan, signal: AbortSignal | undefined, run: (attempt: Attempt) => Promise<void>): Promise<void> {
  const signals = [plan.signal, signal].filter((s): s is AbortSignal => s !== undefined)
  for (let n = 0; ; n++) {
    try {
      return await attempt(plan, signals, run)
    } catch (error) {
      if (!(error instanceof TransientError)) throw error
      if (n >= plan.retries) throw new SafetensorsError('Io', n > 0 ? `${error.message} (after ${n} retries)` : error.message, { cause: error.cause })
      await sleep(retryDelay(n, error.retryAfter), signals)
    }
  }
}

/** One attempt: ended by any of `signals` (Aborted) or by the watchdog (a transient stall); a failed connection is transient. */
async function attempt(plan: RetryPlan, signals: AbortSignal[], run: (attempt: Attempt) => Promise<void>): Promise<void> {
  const { href, idleTimeout } = plan
  const stopIfAborted = () => {
    const by = signals.find((s) => s.aborted)
    if (by) throw new SafetensorsError('Aborted', `${href}: aborted`, { cause: by.reason })
  }
  stopIfAborted()
  // One controller per attempt, ended by the caller's signals or by the watchdog (listeners rather than
  // AbortSignal.any, which older browsers lack and which keeps a link from a long-lived signal).
  const controller = new AbortController()
  const end = () => controller.abort()
  const listeners = signals.map((s) => onAbort(s, end))
  let stalled = false
  const dog = watchdog(idleTimeout, () => {
    stalled = true
    end()
  })
  const { signal } = controller
  // Raced against every wait, so that a fetch or a body that ignores its signal still stops.
  const gone = new Promise<never>((_, reject) => onAbort(signal, () => reject(signal.reason)))
  gone.catch(() => {})
  try {
    await run({ signal, gone, touch: () => dog.touch() })
  } catch (error) {
    stopIfAborted()
    if (stalled) throw new TransientError(href, `no byte arrived for ${idleTimeout} ms`)
    if (error instanceof SafetensorsError) throw error
    // fetch() rejects, or a body stream errors, only when the connection failed.
    throw new TransientError(href, `the connection failed: ${(error as Error).message}`, undefined, error)
  } finally {
    dog.stop()
    for (const release of listeners) release()
  }
}

/**
 * Reads a response body into `target`, after skipping `skip` bytes, reporting each chunk as it lands.
 * A body that ends early is transient (the rest can be asked for); more bytes than the Content-Range
 * said is not. Stops reading (and cancels) once `target` is full, so a 200 costs no more than it must.
 */
async function readBody(
  href: string,
  response: Response,
  skip: number,
  target: Uint8Array,
  exact: boolean,
  gone: Promise<never>,
  landed: (n: number) => void,
): Promise<void> {
  if (!response.body) throw io(href, 'the response has no body')
  const reader = response.body.getReader()
  const more = `the server sent more than the ${target.length} bytes asked for`
  let filled = 0
  try {
    while (filled < target.length) {
      const { done, value } = await Promise.race([reader.read(), gone])
      if (done) throw new TransientError(href, `the response ended after ${filled} of ${target.length} bytes`)
      const dropped = Math.min(skip, value.length)
      skip -= dropped
      const chunk = value.subarray(dropped)
      if (exact && filled + chunk.length > target.length) throw io(href, more)
      const take = Math.min(chunk.length, target.length - filled)
      target.set(chunk.subarray(0, take), filled)
      filled += take
      landed(take)
    }
    if (exact) {
      const { done, value } = await Promise.race([reader.read(), gone])
      if (!done && value.length > 0) throw io(href, more)
    }
  } finally {
    reader.cancel().catch(() => {})
  }
}

/**
 * The parts of a 206 to a request for several ranges, each handed to `land` with its file position as it
 * arrives: a multipart/byteranges body, or a single range (a server that joined them, or sent the
 * first). Every part's Content-Range must lie within [low, high) of a `size`-byte file. Returns whether
 * the answer was multipart.
 */
async function readParts(
  state: FileState,
  response: Response,
  ranges: number,
  [low, high]: [number, number],
  gone: Promise<never>,
  fail: (message: string) => SafetensorsError,
  land: (position: number, chunk: Uint8Array) => void,
): Promise<boolean> {
  const partRange = (value: string | null) => {
    const range = parseContentRange(value)
    if (range === undefined || range.total !== state.size || range.start < low || range.end >= high || range.end < range.start)
      throw fail(`a part with Content-Range ${JSON.stringify(value)} (the file has ${state.size} bytes)`)
    return range
  }
  if (!response.body) throw fail('no body')
  const body = new BodyReader(state.href, response.body.getReader(), gone)
  try {
    const boundary = parseBoundary(response.headers.get('Content-Type'))
    if (boundary === undefined) {
      const { start, end } = partRange(response.headers.get('Content-Range'))
      await body.take(end - start + 1, (chunk, at) => land(start + at, chunk))
      if (!(await body.ended())) throw fail('more bytes than its Content-Range')
      return false
    }
    const delimiter = new TextEncoder().encode(`--${boundary}`)
    for (let parts = 0; ; parts++) {
      // Before each delimiter only the line break that ends the previous part (or a blank preamble).
      const before = await body.until(delimiter, MAX_PART_HEADERS)
      if (/[^\r\n\t ]/.test(latin1(before.subarray(0, before.length - delimiter.length)))) throw fail('a malformed multipart/byteranges body')
      if (latin1(await body.take(2)) === '--') return true
      if (parts === ranges) throw fail('more parts than ranges asked for')
      const head = latin1(await body.until(CRLF2, MAX_PART_HEADERS))
      const { start, end } = partRange(/^content-range:[ \t]*(.*?)[ \t]*\r?$/im.exec(head)?.[1] ?? null)
      await body.take(end - start + 1, (chunk, at) => land(start + at, chunk))
    }
  } finally {
    body.cancel()
  }
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
  const plan: RetryPlan = { href, ...retrySettings(options), signal: options.signal }
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
    const fail = (message: string) => state.failed(response, `${message}, in answer to a request for ${asked}`)
    state.multiRange = await readParts(state, response, pending.length, [low, high], attempt.gone, fail, land)
  }

  /** The rest of one transfer: in parallel chunks when it is longer than one, else one request with its retries. */
  async function readTransfer(t: Transfer, signal: AbortSignal | undefined): Promise<void> {
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
    requestCost,
  }
}

/** A response body as a byte stream: a given number of bytes, or the bytes up to a delimiter. */
class BodyReader {
  #buffer: Uint8Array = new Uint8Array(0)

  constructor(
    readonly href: string,
    readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    readonly gone: Promise<never>,
  ) {}

  async #more(): Promise<void> {
    const { done, value } = await Promise.race([this.reader.read(), this.gone])
    // The rest can be asked for again: an early end is transient.
    if (done) throw new TransientError(this.href, 'the response ended before its last part did')
    if (this.#buffer.length === 0) this.#buffer = value
    else {
      const joined = new Uint8Array(this.#buffer.length + value.length)
      joined.set(this.#buffer)
      joined.set(value, this.#buffer.length)
      this.#buffer = joined
    }
  }

  /** The next `n` bytes, handed to `sink` as they come, each chunk with its position among the n; or, with no sink, returned. */
  async take(n: number, sink?: (chunk: Uint8Array, at: number) => void): Promise<Uint8Array> {
    if (!sink) {
      while (this.#buffer.length < n) await this.#more()
      return this.#next(n)
    }
    for (let at = 0; at < n; ) {
      if (this.#buffer.length === 0) await this.#more()
      const chunk = this.#next(Math.min(n - at, this.#buffer.length))
      sink(chunk, at)
      at += chunk.length
    }
    return new Uint8Array(0)
  }

  /** The bytes up to and including `pattern`, which must come within `limit` bytes. */
  async until(pattern: Uint8Array, limit: number): Promise<Uint8Array> {
    for (let from = 0; ; ) {
      const at = indexOf(this.#buffer, pattern, from)
      if (at >= 0 && at <= limit) return this.#next(at + pattern.length)
      if (at > limit || this.#buffer.length > limit + pattern.length)
        throw new SafetensorsError('Io', `${this.href}: a malformed multipart/byteranges answer (no delimiter where one belongs)`)
      from = Math.max(0, this.#buffer.length - pattern.length + 1)
      await this.#more()
    }
  }

  /** Whether the body has nothing after what was taken. */
  async ended(): Promise<boolean> {
    while (this.#buffer.length === 0) {
      const { done, value } = await Promise.race([this.reader.read(), this.gone])
      if (done) return true
      this.#buffer = value
    }
    return false
  }

  cancel(): void {
    this.reader.cancel().catch(() => {})
  }

  #next(n: number): Uint8Array {
    const bytes = this.#buffer.subarray(0, n)
    this.#buffer = this.#buffer.subarray(n)
    return bytes
  }
}

function indexOf(bytes: Uint8Array, pattern: Uint8Array, from: number): number {
  for (let at = bytes.indexOf(pattern[0], from); at >= 0 && at + pattern.length <= bytes.length; at = bytes.indexOf(pattern[0], at + 1)) {
    let i = 1
    while (i < pattern.length && bytes[at + i] === pattern[i]) i++
    if (i === pattern.length) return at
  }
  return -1
}
