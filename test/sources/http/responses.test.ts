// src/sources/http/responses.ts: what each HTTP response of one file must agree on, without a server: Responses
// built by hand, judged by HTTP's rules (RFC 9110: Content-Range's forms in 14.4, If-Range's strong validators
// in 13.1.5) and by what the guides promise (a changed file is an error, never bytes of two versions; a
// compressed body is refused; a transient status is retried).
import { describe, expect, test } from 'vitest'
import { TransientError } from '../../../src/sources/http/attempts.ts'
import { FileState, parseContentRange } from '../../../src/sources/http/responses.ts'
import { errorOf } from '../../read-helpers.ts'

const URL_ = 'https://example.com/m.safetensors'
const response = (status: number, headers: Record<string, string> = {}) => new Response(status === 416 ? null : 'x', { status, headers })

describe('parseContentRange', () => {
  test("RFC 9110's forms: a range of a known length, of an unknown length, and the unsatisfied-range form of a 416", async () => {
    expect(parseContentRange('bytes 42-1233/1234')).toEqual({ start: 42, end: 1233, total: 1234 })
    expect(parseContentRange('bytes 42-1233/*')).toEqual({ start: 42, end: 1233, total: undefined })
    expect(parseContentRange('bytes */1234')).toEqual({ start: -1, end: -1, total: 1234 })
    expect(parseContentRange('  BYTES 0-0/1  ')).toEqual({ start: 0, end: 0, total: 1 })
  })

  test('anything else is not a Content-Range', async () => {
    for (const value of [null, '', 'bytes 1-2', 'items 0-1/2', 'bytes -1-2/3', 'bytes 1-2/3,4-5/6', 'bytes 0x1-2/3'])
      expect(parseContentRange(value), String(value)).toBeUndefined()
  })
})

describe('FileState.accept', () => {
  test('a 206 of the range asked: its bytes, its total the size from now on', async () => {
    const state = new FileState(URL_)
    expect(state.accept(response(206, { 'Content-Range': 'bytes 100-199/1000', ETag: '"v1"' }), 100, 100, null)).toEqual({
      skip: 0,
      available: 100,
      exact: true,
    })
    expect([state.size, state.etag, state.ranged]).toEqual([1000, '"v1"', true])
  })

  test('a first read past the end of a file of unknown size: what there is; a 206 that runs past the asked end (Vite): the bytes asked for', async () => {
    expect(new FileState(URL_).accept(response(206, { 'Content-Range': 'bytes 0-499/500' }), 0, 65_536, null)).toEqual({ skip: 0, available: 500, exact: true })
    expect(new FileState(URL_).accept(response(206, { 'Content-Range': 'bytes 0-999/1000' }), 0, 1, null)).toEqual({ skip: 0, available: 1, exact: false })
  })

  test('an empty file: the 416 of its first read says 0 bytes', async () => {
    const state = new FileState(URL_)
    expect(state.accept(response(416, { 'Content-Range': 'bytes */0' }), 0, 65_536, null)).toEqual({ skip: 0, available: 0, exact: true })
    expect(state.size).toBe(0)
  })

  test('a 200 to the first Range request: the whole body, the bytes at `from` skipped to; known to ignore Range', async () => {
    const state = new FileState(URL_)
    expect(state.accept(response(200, { 'Content-Length': '1000' }), 300, 100, null)).toEqual({ skip: 300, available: 100, exact: false })
    expect([state.size, state.ignoresRange]).toEqual([1000, true])
    expect((await errorOf(() => new FileState(URL_).accept(response(200), 0, 8, null))).message).toContain('sends no Content-Length')
  })

  test('another range than asked, another total, a 200 after 206s: Io naming what came', async () => {
    const state = new FileState(URL_)
    state.accept(response(206, { 'Content-Range': 'bytes 0-9/1000' }), 0, 10, null)
    expect((await errorOf(() => state.accept(response(206, { 'Content-Range': 'bytes 10-19/1000' }), 20, 10, null))).message).toBe(
      `${URL_}: asked for bytes 20-29, got Content-Range "bytes 10-19/1000"`,
    )
    expect((await errorOf(() => state.accept(response(206, { 'Content-Range': 'bytes 20-29/2000' }), 20, 10, null))).message).toContain(
      'the file is now 2000 bytes, it was 1000',
    )
    expect((await errorOf(() => state.accept(response(200, { 'Content-Length': '1000' }), 20, 10, null))).message).toContain(
      'the server stopped honouring Range',
    )
  })
})

describe('FileState.checkResponse', () => {
  test('a transient status is a TransientError with its Retry-After; a permanent one is Io with the status', async () => {
    const state = new FileState(URL_)
    const busy = await errorOf(() => state.checkResponse(response(503, { 'Retry-After': '7' }), 'bytes 0-9'))
    expect(busy).toBeInstanceOf(TransientError)
    expect([(busy as TransientError).retryAfter, busy.status]).toEqual([7000, 503])
    const gone = await errorOf(() => state.checkResponse(response(404), 'bytes 0-9'))
    expect(gone).not.toBeInstanceOf(TransientError)
    expect([gone.code, gone.status, gone.url, gone.message]).toEqual(['Io', 404, URL_, `${URL_}: HTTP 404 for bytes 0-9`])
  })

  test('a compressed body is refused', async () => {
    expect((await errorOf(() => new FileState(URL_).checkResponse(response(206, { 'Content-Encoding': 'gzip' }), 'bytes 0-9'))).message).toContain(
      'Content-Encoding: gzip',
    )
    expect(() => new FileState(URL_).checkResponse(response(206, { 'Content-Encoding': 'identity' }), 'bytes 0-9')).not.toThrow()
  })

  test('the file changed: another ETag, or, without one, another Last-Modified', async () => {
    const tagged = new FileState(URL_)
    tagged.checkResponse(response(206, { ETag: '"a"' }), 'first')
    expect((await errorOf(() => tagged.checkResponse(response(206, { ETag: '"b"' }), 'second'))).message).toContain('ETag "a" became "b"')
    const dated = new FileState(URL_)
    dated.checkResponse(response(206, { 'Last-Modified': 'Mon, 07 Dec 2026 01:00:00 GMT' }), 'first')
    expect((await errorOf(() => dated.checkResponse(response(206, { 'Last-Modified': 'Mon, 07 Dec 2026 02:00:00 GMT' }), 'second'))).message).toContain(
      'Last-Modified',
    )
  })
})

describe('FileState.ifRange', () => {
  test('only once Range is honoured, and only a strong validator: a weak ETag gives Last-Modified instead', async () => {
    const strong = new FileState(URL_)
    expect(strong.ifRange(true)).toBeNull()
    strong.accept(response(206, { 'Content-Range': 'bytes 0-9/100', ETag: '"v1"', 'Last-Modified': 'Mon, 07 Dec 2026 01:00:00 GMT' }), 0, 10, null)
    expect([strong.ifRange(true), strong.ifRange(false)]).toEqual(['"v1"', null])
    const weak = new FileState(URL_)
    weak.accept(response(206, { 'Content-Range': 'bytes 0-9/100', ETag: 'W/"v1"', 'Last-Modified': 'Mon, 07 Dec 2026 01:00:00 GMT' }), 0, 10, null)
    expect(weak.ifRange(true)).toBe('Mon, 07 Dec 2026 01:00:00 GMT')
  })
})
