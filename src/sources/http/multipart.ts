// The body of a 206 to a request for several ranges: a multipart/byteranges body whose parts land where
// they belong, or a single range from a server that joined them. Only a slice of many runs over HTTP makes
// such a request, so this module is loaded on demand; it imports nothing (its errors and the Content-Range
// parser come from the source that asks), so that it loads alone, as a chunk of its own in a bundle.
import type { ContentRange } from './responses.ts'

/** What readParts needs of the source that asked for the ranges. */
export interface PartsContext {
  /** The file's size. */
  size: number
  /** The error of an answer that cannot be used. */
  fail(message: string): Error
  /** The error of an answer that ended early: another request can ask for the rest. */
  endedEarly(): Error
  parseContentRange(value: string | null): ContentRange | undefined
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
export async function readParts(
  context: PartsContext,
  response: Response,
  ranges: number,
  [low, high]: [number, number],
  gone: Promise<never>,
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
  const body = new BodyReader(context, response.body.getReader(), gone)
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
    readonly gone: Promise<never>,
  ) {}

  async #more(): Promise<void> {
    const { done, value } = await Promise.race([this.reader.read(), this.gone])
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
