// What one HTTP file's responses must agree on: FileState holds what the server said so far (the file's
// size and version, whether it honours Range) and checks every response against it; readBody reads a
// single-range body into its target.
import type { SafetensorsError } from '../../errors.ts'
import { parseRetryAfter } from '../retry.ts'
import type { OnBytes } from '../source.ts'
import { type Attempt, io, TransientError } from './attempts.ts'

/** One read in progress: what arrived so far survives a failed attempt, so the next one asks only for the rest. */
export interface Transfer {
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

/** Statuses that say "not now" rather than "never": a later attempt may well succeed. */
const TRANSIENT_STATUS = new Set([408, 429, 500, 502, 503, 504])

interface ContentRange {
  start: number
  end: number
  total: number | undefined
}

// Parses "bytes START-END/TOTAL" (TOTAL may be a star), or the star form "bytes */TOTAL" of a 416.
export function parseContentRange(value: string | null): ContentRange | undefined {
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

export function discard(response: Response): void {
  response.body?.cancel().catch(() => {})
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
export class FileState {
  size: number | undefined
  /** undefined until the first response; null when the server sends none. */
  etag: string | null | undefined
  lastModified: string | null = null
  ranged = false
  /** Whether the server has answered a Range request with the whole file (a 200): it ignores Range. */
  ignoresRange = false
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
      if (TRANSIENT_STATUS.has(status)) throw new TransientError(this.href, message, parseRetryAfter(response.headers.get('Retry-After')), { status })
      throw io(this.href, this.size === undefined ? message : `${message} of a ${this.size}-byte file`, status)
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
    this.ignoresRange = true
    return { skip: from, available: Math.max(0, Math.min(want, this.size - from)), exact: false }
  }
}

/**
 * Reads a response body into `target`, after skipping `skip` bytes, reporting each chunk as it lands.
 * A body that ends early is transient (the rest can be asked for); more bytes than the Content-Range
 * said is not. Stops reading (and cancels) once `target` is full, so a 200 costs no more than it must.
 */
export async function readBody(
  href: string,
  response: Response,
  skip: number,
  target: Uint8Array,
  exact: boolean,
  until: Attempt['until'],
  landed: (n: number) => void,
): Promise<void> {
  if (!response.body) throw io(href, 'the response has no body')
  const reader = response.body.getReader()
  const more = `the server sent more than the ${target.length} bytes asked for`
  let filled = 0
  try {
    while (filled < target.length) {
      const { done, value } = await until(reader.read())
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
      const { done, value } = await until(reader.read())
      if (!done && value.length > 0) throw io(href, more)
    }
  } finally {
    reader.cancel().catch(() => {})
  }
}
