// A RangeSource over HTTP(S): each read is one Range request. The first read also learns the file size
// (from Content-Range) and the ETag; a later response with another ETag means the file changed between
// requests, which is an error rather than a silent mix of two files. A server that ignores Range and
// answers 200 is read as a stream, keeping only the bytes asked for and cancelling the rest.
import { SafetensorsError } from './errors.ts'
import type { RangeSource } from './source.ts'

export interface HttpOptions {
  /** A fetch implementation (default: globalThis.fetch). */
  fetch?: typeof fetch
  /** Extra request headers, e.g. { Authorization: 'Bearer …' }. */
  headers?: HeadersInit
  /** Aborts every request made through this source. */
  signal?: AbortSignal
}

function io(url: string, message: string, cause?: unknown): SafetensorsError {
  if (isAbort(cause)) return new SafetensorsError('Aborted', `${url}: aborted`, { cause })
  return new SafetensorsError('Io', `${url}: ${message}`, cause === undefined ? undefined : { cause })
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError')
}

// Parses "bytes START-END/TOTAL" (TOTAL may be a star), or the star form "bytes */TOTAL" of a 416.
function parseContentRange(value: string | null): { start: number; end: number; total: number | undefined } | undefined {
  const match = /^bytes\s+(?:(\d+)-(\d+)|\*)\/(\d+|\*)$/i.exec(value?.trim() ?? '')
  if (!match) return undefined
  const total = match[3] === '*' ? undefined : Number(match[3])
  return { start: match[1] === undefined ? -1 : Number(match[1]), end: match[2] === undefined ? -1 : Number(match[2]), total }
}

/**
 * Reads a response body into `target`, after skipping `skip` bytes. Rejects when the body is shorter;
 * stops reading (and cancels) once `target` is full, so a 200 response never costs more than it must.
 */
async function readBody(url: string, response: Response, skip: number, target: Uint8Array, exact: boolean): Promise<void> {
  if (!response.body) throw io(url, 'the response has no body')
  const reader = response.body.getReader()
  let filled = 0
  try {
    while (filled < target.length) {
      const { done, value } = await reader.read()
      if (done) throw io(url, `the response ended after ${filled} of ${target.length} bytes`)
      let chunk = value
      if (skip > 0) {
        const dropped = Math.min(skip, chunk.length)
        skip -= dropped
        chunk = chunk.subarray(dropped)
      }
      if (exact && filled + chunk.length > target.length) throw io(url, `the server sent more than the ${target.length} bytes asked for`)
      const take = Math.min(chunk.length, target.length - filled)
      target.set(chunk.subarray(0, take), filled)
      filled += take
    }
    if (exact) {
      const { done, value } = await reader.read()
      if (!done && value.length > 0) throw io(url, `the server sent more than the ${target.length} bytes asked for`)
    }
  } catch (error) {
    throw error instanceof SafetensorsError ? error : io(url, `reading the response failed: ${(error as Error).message}`, error)
  } finally {
    reader.cancel().catch(() => {})
  }
}

export function httpSource(url: string | URL, options: HttpOptions = {}): RangeSource {
  const href = String(url)
  const fetchImpl = options.fetch ?? globalThis.fetch
  let size: number | undefined
  let etag: string | null | undefined

  async function request(offset: number, length: number, signal?: AbortSignal): Promise<Response> {
    const headers = new Headers(options.headers)
    headers.set('Range', `bytes=${offset}-${offset + length - 1}`)
    const signals = [options.signal, signal].filter((s): s is AbortSignal => s !== undefined)
    let response: Response
    try {
      response = await fetchImpl(href, { headers, signal: signals.length > 1 ? AbortSignal.any(signals) : signals[0] })
    } catch (error) {
      throw io(href, `request failed: ${(error as Error).message}`, error)
    }
    // Byte offsets mean nothing in a compressed body, and its Content-Length is not the file's size.
    const encoding = response.headers.get('Content-Encoding')
    if (encoding && encoding.toLowerCase() !== 'identity' && response.ok) {
      response.body?.cancel().catch(() => {})
      throw io(href, `the server compressed the response (Content-Encoding: ${encoding}); byte ranges need it uncompressed`)
    }
    const tag = response.headers.get('ETag')
    if (etag === undefined) etag = tag
    else if (tag !== etag) {
      response.body?.cancel().catch(() => {})
      throw io(href, `the file changed between requests (ETag ${etag} became ${tag})`)
    }
    return response
  }

  async function readInto(offset: number, target: Uint8Array, signal?: AbortSignal): Promise<void> {
    if (target.length === 0) return
    if (size !== undefined && offset + target.length > size) throw io(href, `read of ${target.length} bytes at offset ${offset} is past the end (${size} bytes)`)
    const response = await request(offset, target.length, signal)
    if (response.status === 206) {
      const range = parseContentRange(response.headers.get('Content-Range'))
      if (!range || range.start !== offset || range.end !== offset + target.length - 1 || range.total === undefined || (size !== undefined && range.total !== size)) {
        response.body?.cancel().catch(() => {})
        throw io(href, `asked for bytes ${offset}-${offset + target.length - 1}, got Content-Range ${JSON.stringify(response.headers.get('Content-Range'))}`)
      }
      size = range.total
      return readBody(href, response, 0, target, true)
    }
    if (response.status === 200) {
      const total = Number(response.headers.get('Content-Length') ?? NaN)
      if (size !== undefined && Number.isFinite(total) && total !== size) throw io(href, `the file is now ${total} bytes, it was ${size}`)
      return readBody(href, response, offset, target, false)
    }
    response.body?.cancel().catch(() => {})
    throw io(href, `HTTP ${response.status} ${response.statusText} for bytes ${offset}-${offset + target.length - 1}`)
  }

  return {
    get size() {
      return size
    },
    readInto,
    async read(offset, length, signal) {
      if (size !== undefined) {
        const bytes = new Uint8Array(length)
        await readInto(offset, bytes, signal)
        return bytes
      }
      return firstRead(offset, length, signal)
    },
  }

  // Before the size is known, the request may run past the end of a small file: read what comes.
  async function firstRead(offset: number, length: number, signal?: AbortSignal): Promise<Uint8Array> {
    const response = await request(offset, length, signal)
    let available: number
    let skip = 0
    if (response.status === 206) {
      const range = parseContentRange(response.headers.get('Content-Range'))
      if (!range || range.start !== offset || range.total === undefined || range.end < range.start || range.end > offset + length - 1) {
        response.body?.cancel().catch(() => {})
        throw io(href, `asked for bytes ${offset}-${offset + length - 1}, got Content-Range ${JSON.stringify(response.headers.get('Content-Range'))}`)
      }
      size = range.total
      available = range.end - range.start + 1
      if (available < length && range.end !== size - 1) throw io(href, `the server sent bytes ${range.start}-${range.end} of ${size}, fewer than asked`)
    } else if (response.status === 200) {
      const total = response.headers.get('Content-Length')
      if (total === null) throw io(href, 'the server ignores Range requests and sends no Content-Length, so the file size is unknown')
      size = Number(total)
      available = Math.max(0, Math.min(length, size - offset))
      skip = offset
    } else if (response.status === 416) {
      const range = parseContentRange(response.headers.get('Content-Range'))
      response.body?.cancel().catch(() => {})
      if (range?.total !== 0) throw io(href, `HTTP 416 for bytes ${offset}-${offset + length - 1}`)
      size = 0
      return new Uint8Array(0)
    } else {
      response.body?.cancel().catch(() => {})
      throw io(href, `HTTP ${response.status} ${response.statusText}`)
    }
    const bytes = new Uint8Array(available)
    await readBody(href, response, skip, bytes, response.status === 206)
    return bytes
  }
}
