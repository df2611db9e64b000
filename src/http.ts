// A RangeSource over HTTP(S): each read is one Range request, retried with resume when the network
// fails it. The first response gives the file size (Content-Range) and its validator (ETag, else
// Last-Modified); every later response must carry the same validator, and later requests send it as
// If-Range, so bytes of two versions of a file are never put together. A server that ignores Range
// and answers 200 is read as a stream, keeping only the bytes asked for and cancelling the rest.
import { SafetensorsError } from './errors.ts'
import { parseRetryAfter, retryDelay, retrySettings, sleep, watchdog } from './retry.ts'
import type { RangeSource } from './source.ts'

export interface HttpOptions {
  /** A fetch implementation (default: globalThis.fetch). */
  fetch?: typeof fetch
  /** Extra request headers, e.g. { Authorization: 'Bearer …' }. */
  headers?: HeadersInit
  /** Aborts every request made through this source, and any wait between retries. */
  signal?: AbortSignal
  /**
   * Attempts after the first, per read, for transient failures: a dropped connection, a body cut short,
   * a stall (see idleTimeout), HTTP 408, 429, 500, 502, 503, 504. Each resumes at the first byte not yet
   * received. Default 4.
   */
  retries?: number
  /** Milliseconds with no byte (waiting for headers or body) before an attempt counts as stalled. Default 30000; Infinity: never. */
  idleTimeout?: number
}

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

// Parses "bytes START-END/TOTAL" (TOTAL may be a star), or the star form "bytes */TOTAL" of a 416.
function parseContentRange(value: string | null): { start: number; end: number; total: number | undefined } | undefined {
  const match = /^bytes\s+(?:(\d+)-(\d+)|\*)\/(\d+|\*)$/i.exec(value?.trim() ?? '')
  if (!match) return undefined
  const total = match[3] === '*' ? undefined : Number(match[3])
  return { start: match[1] === undefined ? -1 : Number(match[1]), end: match[2] === undefined ? -1 : Number(match[2]), total }
}

function discard(response: Response): void {
  response.body?.cancel().catch(() => {})
}

/** One read in progress: what arrived so far survives a failed attempt, so the next one asks only for the rest. */
interface Transfer {
  offset: number
  /** Bytes asked for; the first read of a file may get fewer, at its end. */
  length: number
  /** Allocated once the size is known (for the first read: when its response arrives). */
  target?: Uint8Array
  filled: number
  /** Told each part's length as it lands in `target`, in order (progress, conversion as bytes arrive). */
  onBytes?: (bytes: number) => void
}

export function httpSource(url: string | URL, options: HttpOptions = {}): RangeSource & { readonly url: string } {
  const href = String(url)
  const fetchImpl = options.fetch ?? globalThis.fetch
  const { retries, idleTimeout } = retrySettings(options)
  let size: number | undefined
  // Learnt from the first response: this version of the file, and whether the server honours Range.
  let etag: string | null | undefined
  let lastModified: string | null = null
  let ranged = false
  // From a page, a cross-origin If-Range needs a CORS preflight that allows it, which servers set up for
  // Range alone refuse. There the validator check on each response is the guard on its own.
  const page = (globalThis as { location?: { origin: string } }).location
  const conditional = page === undefined || new URL(href).origin === page.origin

  async function transfer(t: Transfer, signal: AbortSignal | undefined): Promise<Uint8Array> {
    const signals = [options.signal, signal].filter((s): s is AbortSignal => s !== undefined)
    for (let attempt = 0; ; attempt++) {
      try {
        await attemptTransfer(t, signals)
        return t.target!
      } catch (error) {
        if (!(error instanceof TransientError)) throw error
        if (attempt >= retries)
          throw new SafetensorsError('Io', attempt > 0 ? `${error.message} (after ${attempt} retries)` : error.message, { cause: error.cause })
        await sleep(retryDelay(attempt, error.retryAfter), signals)
      }
    }
  }

  async function attemptTransfer(t: Transfer, signals: AbortSignal[]): Promise<void> {
    const stopIfAborted = () => {
      const by = signals.find((s) => s.aborted)
      if (by) throw new SafetensorsError('Aborted', `${href}: aborted`, { cause: by.reason })
    }
    stopIfAborted()
    // One controller per attempt, ended by the caller's signals or by the watchdog (listeners rather than
    // AbortSignal.any, which older browsers lack and which keeps a link from a long-lived signal).
    const attempt = new AbortController()
    const end = () => attempt.abort()
    for (const s of signals) s.addEventListener('abort', end)
    let stalled = false
    const dog = watchdog(idleTimeout, () => {
      stalled = true
      end()
    })
    const { signal } = attempt
    // Raced against every wait, so that a fetch or a body that ignores its signal still stops.
    const gone = new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))
    gone.catch(() => {})
    try {
      const from = t.offset + t.filled
      const want = (t.target?.length ?? t.length) - t.filled
      const headers = new Headers(options.headers)
      headers.set('Range', `bytes=${from}-${from + want - 1}`)
      // If-Range takes a strong validator only (RFC 9110 13.1.5); a weak ETag is still compared below.
      const ifRange = ranged && conditional ? (etag && !etag.startsWith('W/') ? etag : lastModified) : null
      if (ifRange) headers.set('If-Range', ifRange)
      const response = await Promise.race([fetchImpl(href, { headers, signal }), gone])
      dog.touch()
      const { skip, available } = accept(response, from, want, ifRange)
      if (t.target === undefined) t.target = new Uint8Array(available)
      else if (available !== want) throw io(href, `read of ${want} bytes at offset ${from} is past the end (${size} bytes)`)
      if (available === 0) return discard(response)
      await readBody(response, skip, t.target.subarray(t.filled), response.status === 206, gone, (n) => {
        t.filled += n
        dog.touch()
        t.onBytes?.(n)
      })
    } catch (error) {
      stopIfAborted()
      if (stalled) throw new TransientError(href, `no byte arrived for ${idleTimeout} ms`)
      if (error instanceof SafetensorsError) throw error
      // fetch() rejects, or a body stream errors, only when the connection failed.
      throw new TransientError(href, `the connection failed: ${(error as Error).message}`, undefined, error)
    } finally {
      dog.stop()
      for (const s of signals) s.removeEventListener('abort', end)
    }
  }

  /**
   * Checks a response before any of its body is used, in this order: the status (a 503 is a 503, whatever
   * else the response says), the encoding, the validator, then the range. Says where in the body the
   * bytes at `from` begin and how many of the `want` asked for will come.
   */
  function accept(response: Response, from: number, want: number, ifRange: string | null): { skip: number; available: number } {
    const { status } = response
    const asked = `bytes ${from}-${from + want - 1}`
    if (status !== 200 && status !== 206) {
      discard(response)
      if (status === 416 && size === undefined && parseContentRange(response.headers.get('Content-Range'))?.total === 0) {
        size = 0
        return { skip: 0, available: 0 }
      }
      const message = `HTTP ${status}${response.statusText ? ` ${response.statusText}` : ''} for ${asked}`
      if (TRANSIENT_STATUS.has(status)) throw new TransientError(href, message, parseRetryAfter(response.headers.get('Retry-After')))
      throw io(href, size === undefined ? message : `${message} of a ${size}-byte file`)
    }
    const fail = (message: string) => {
      discard(response)
      return io(href, message)
    }
    // Byte offsets mean nothing in a compressed body, and its Content-Length is not the file's size.
    const encoding = response.headers.get('Content-Encoding')
    if (encoding && encoding.toLowerCase() !== 'identity')
      throw fail(`the server compressed the response (Content-Encoding: ${encoding}); byte ranges need it uncompressed`)
    const tag = response.headers.get('ETag')
    const modified = response.headers.get('Last-Modified')
    if (etag === undefined) {
      etag = tag
      lastModified = modified
    } else if (tag !== etag) {
      throw fail(`the file changed between requests (ETag ${etag} became ${tag}); HTTP ${status} for ${asked}`)
    } else if (etag === null && modified !== lastModified) {
      throw fail(`the file changed between requests (Last-Modified ${lastModified} became ${modified}); HTTP ${status} for ${asked}`)
    }
    if (status === 200) {
      // The validator matched, so a 200 here is not a new version the server admits to.
      if (ranged) {
        throw fail(
          ifRange
            ? `HTTP 200 (the whole file) for ${asked} with If-Range ${ifRange}: the server says the file changed, or it stopped honouring Range`
            : `HTTP 200 (the whole file) for ${asked}: the server stopped honouring Range`,
        )
      }
      const length = response.headers.get('Content-Length')
      if (size === undefined) {
        if (length === null) throw fail('the server ignores Range requests and sends no Content-Length, so the file size is unknown')
        size = Number(length)
      } else if (length !== null && Number(length) !== size) {
        throw fail(`the file is now ${length} bytes, it was ${size}`)
      }
      return { skip: from, available: Math.max(0, Math.min(want, size - from)) }
    }
    const range = parseContentRange(response.headers.get('Content-Range'))
    const got = `got Content-Range ${JSON.stringify(response.headers.get('Content-Range'))}`
    if (range?.total !== undefined && size !== undefined && range.total !== size) throw fail(`the file is now ${range.total} bytes, it was ${size} (${got})`)
    // The first read may run past the end of a small file: the range may end early, at the file's end.
    const fits =
      range?.total !== undefined &&
      range.start === from &&
      (range.end === from + want - 1 || (size === undefined && range.end >= from && range.end === range.total - 1 && range.end < from + want))
    if (!fits) throw fail(`asked for ${asked}, ${got}`)
    size = range.total
    ranged = true
    return { skip: 0, available: range.end - range.start + 1 }
  }

  /**
   * Reads a response body into `target`, after skipping `skip` bytes, reporting each chunk as it lands.
   * A body that ends early is transient (the rest can be asked for); more bytes than the Content-Range
   * said is not. Stops reading (and cancels) once `target` is full, so a 200 costs no more than it must.
   */
  async function readBody(
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

  const checkInFile = (offset: number, length: number) => {
    if (size !== undefined && offset + length > size) throw io(href, `read of ${length} bytes at offset ${offset} is past the end (${size} bytes)`)
  }

  return {
    url: href,
    get size() {
      return size
    },
    async readInto(offset, target, signal, onBytes) {
      if (target.length === 0) return
      checkInFile(offset, target.length)
      await transfer({ offset, length: target.length, target, filled: 0, onBytes }, signal)
    },
    // Before the size is known, the request may run past the end of a small file: it gives what there is.
    read(offset, length, signal, onBytes) {
      checkInFile(offset, length)
      return transfer({ offset, length, target: size === undefined ? undefined : new Uint8Array(length), filled: 0, onBytes }, signal)
    },
  }
}
