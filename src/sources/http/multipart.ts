// Multi-range reads: the rest of several ranges of a file in one request per batch of a few hundred, and the
// answer's parts (a multipart/byteranges body) landed where they belong, or a single range from a server that
// joined them. Only a read of many ranges (a slice of many runs) makes such requests, so this module is loaded
// on demand; it imports nothing at run time (what it needs of its source comes in a MultiRangeSource), so that a
// bundle puts it in a chunk of its own.
import type { runPool } from '../pool.ts'
import type { Attempt, RetryPlan, TransientError, withRetries } from './attempts.ts'
import type { discard, FileState, parseContentRange, Transfer } from './responses.ts'

/** What readMultiRange takes of its source (src/sources/http/source.ts): its state, its requests, and the functions it would import. */
interface MultiRangeSource {
  state: FileState
  plan: RetryPlan
  request(range: string, attempt: Attempt): { response: Promise<Response> }
  withRetries: typeof withRetries
  runPool: typeof runPool
  discard: typeof discard
  parseContentRange: typeof parseContentRange
  TransientError: typeof TransientError
  /** Requests at once (the source's PARALLEL_READS). */
  parallel: number
}

/** Longest Range header sent: servers refuse longer header lines (nginx's limit is 8 KiB), so a request carries a few hundred ranges at most. */
const MAX_RANGE_HEADER = 4000

/** Consecutive transfers in at least `parallel` groups, each one request whose Range header stays under MAX_RANGE_HEADER. */
function batchesOf(transfers: Transfer[], parallel: number): Transfer[][] {
  const per = Math.ceil(transfers.length / parallel)
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
 * Fills what multi-range answers bring of `transfers` (ascending, disjoint, sizes known): in requests of a few
 * hundred ranges each, `source.parallel` at once, while the server answers them. Whether it does is learnt from
 * a first request sent alone, so a server that refuses costs one request, once. What is left incomplete is for
 * single requests to finish.
 */
export async function readMultiRange(source: MultiRangeSource, transfers: Transfer[], signal: AbortSignal | undefined): Promise<void> {
  const { state, plan, withRetries } = source
  let batches = batchesOf(transfers, source.parallel)
  if (state.multiRange === undefined) {
    await withRetries(plan, signal, (attempt) => attemptMultiRange(source, batches[0], attempt))
    batches = batches.slice(1)
  }
  await source.runPool(batches, source.parallel, async (batch) => {
    if (batch.length > 1 && state.multiRange !== false) await withRetries(plan, signal, (attempt) => attemptMultiRange(source, batch, attempt))
  })
}

/**
 * One request for the rest of several transfers. A multipart/byteranges answer fills each transfer from the
 * parts that start where it stands; a single range (the server refuses several, or joined them into one)
 * fills what it covers; a 200 (its validator matched, so the file is the same) says the server refuses
 * multi-range, and fills nothing. The server's way is remembered.
 */
async function attemptMultiRange(source: MultiRangeSource, batch: Transfer[], attempt: Attempt): Promise<void> {
  const { state, discard, TransientError } = source
  const pending = batch.filter((t) => t.filled < t.length)
  if (pending.length === 0) return
  const ranges = pending.map((t) => `${t.offset + t.filled}-${t.offset + t.length - 1}`).join(',')
  const response = await source.request(ranges, attempt).response
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
  const context: PartsContext = {
    size: state.size!,
    fail: (message) => state.failed(response, `${message}, in answer to a request for ${asked}`),
    endedEarly: () => new TransientError(state.href, 'the response ended before its last part did'),
    parseContentRange: source.parseContentRange,
  }
  state.multiRange = await readParts(context, response, pending.length, [low, high], attempt.until, land)
}

/** What readParts needs of the request it reads the answer of. */
interface PartsContext {
  /** The file's size. */
  size: number
  /** The error of an answer that cannot be used. */
  fail(message: string): Error
  /** The error of an answer that ended early: another request can ask for the rest. */
  endedEarly(): Error
  parseContentRange: typeof parseContentRange
}

/** Bytes before a multipart delimiter, or of a part's headers, past which the answer counts as malformed. */
const MAX_PART_HEADERS = 8192

const CRLF2 = new Uint8Array([13, 10, 13, 10])
const latin1 = (bytes: Uint8Array) => String.fromCharCode(...bytes)

function parseBoundary(contentType: string | null): string | undefined {
  const match = /^\s*multipart\/byteranges\s*;(?:.*;)?\s*boundary=(?:"([^"]+)"|([^\s;]+))/i.exec(contentType ?? '')
  return match ? (match[1] ?? match[2]) : undefined
}

/**
 * The parts of a 206 to a request for several ranges, each handed to `land` with its file position as it
 * arrives: a multipart/byteranges body, or a single range (a server that joined them, or sent the
 * first). Every part's Content-Range must lie within [low, high) of a `size`-byte file. Returns whether
 * the answer was multipart.
 */
async function readParts(
  context: PartsContext,
  response: Response,
  ranges: number,
  [low, high]: [number, number],
  until: Attempt['until'],
  land: (position: number, chunk: Uint8Array) => void,
): Promise<boolean> {
  const { size, fail } = context
  const partRange = (value: string | null) => {
    const range = context.parseContentRange(value)
    if (range === undefined || range.total !== size || range.start < low || range.end >= high || range.end < range.start)
      throw fail(`a part with Content-Range ${JSON.stringify(value)} (the file has ${size} bytes)`)
    return range
  }
  if (!response.body) throw fail('no body')
  const body = new BodyReader(context, response.body.getReader(), until)
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

/** A response body as a byte stream: a given number of bytes, or the bytes up to a delimiter. */
class BodyReader {
  #buffer: Uint8Array = new Uint8Array(0)

  constructor(
    readonly context: PartsContext,
    readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    readonly orEnd: Attempt['until'],
  ) {}

  async #more(): Promise<void> {
    const { done, value } = await this.orEnd(this.reader.read())
    // The rest can be asked for again: an early end is transient.
    if (done) throw this.context.endedEarly()
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
        throw this.context.fail('a malformed multipart/byteranges answer (no delimiter where one belongs)')
      from = Math.max(0, this.#buffer.length - pattern.length + 1)
      await this.#more()
    }
  }

  /** Whether the body has nothing after what was taken. */
  async ended(): Promise<boolean> {
    while (this.#buffer.length === 0) {
      const { done, value } = await this.orEnd(this.reader.read())
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
