// The one HTTP server of the tests, on 127.0.0.1 (node:http, port 0): the reading tests, the CLI tests,
// the inspector page in Chromium and the workerd worker all use it. It logs every request with its
// headers, status and the body bytes it wrote, so a test can count requests and bytes on the server's
// side of the wire; and it can break a response the ways real networks and servers do (Fault). It knows
// nothing about the library.
import { closeSync, openSync, readSync, statSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gzipSync } from 'node:zlib'

export interface Logged {
  /** Number of the request on its server, from 0 (clear() starts again). */
  n: number
  method: string
  path: string
  range: string | undefined
  headers: IncomingHttpHeaders
  status: number
  /** Body bytes handed to the socket so far. */
  bytesSent: number
}

export type Handler = (req: IncomingMessage, res: ServerResponse, log: Logged) => void | Promise<void>

export interface TestServer {
  /** http://127.0.0.1:PORT (no trailing slash). */
  origin: string
  /** origin + '/', for appending file names. */
  url: string
  log: Logged[]
  bytesSent(): number
  /** The Range header of each GET ('' when there was none). */
  ranges(): string[]
  /** Resolves once every response so far is over (finished, or its connection closed), so the log is final. */
  settled(): Promise<void>
  /** Responses begun and not yet over (finished, or their connection closed). */
  open(): Promise<number>
  clear(): void
  close(): Promise<void>
}

/**
 * Starts `handler` on a free port. With `cors`, any origin may read the responses: a Range request and
 * the Content-Range a reader needs are not CORS-safelisted, hence the preflight answer and the exposed
 * headers (a page on another origin, such as the inspector's, needs them).
 */
export async function startServer(handler: Handler, options: { cors?: boolean } = {}): Promise<TestServer> {
  const log: Logged[] = []
  const closed: Array<Promise<void>> = []
  let count = 0
  let open = 0
  const server = createServer((req, res) => {
    if (options.cors) {
      res.setHeader('Access-Control-Allow-Origin', '*')
      res.setHeader('Access-Control-Expose-Headers', 'Content-Range, Content-Length, ETag, Last-Modified, Accept-Ranges')
      if (req.method === 'OPTIONS') {
        res.writeHead(204, { 'Access-Control-Allow-Headers': 'Range', 'Access-Control-Allow-Methods': 'GET, HEAD' })
        return res.end()
      }
    }
    const entry: Logged = {
      n: count++,
      method: req.method ?? '',
      path: new URL(req.url ?? '/', 'http://x').pathname,
      range: req.headers.range,
      headers: req.headers,
      status: 0,
      bytesSent: 0,
    }
    try {
      entry.path = decodeURIComponent(entry.path)
    } catch {
      // kept as sent: a handler answers 404 to a path it does not know
    }
    log.push(entry)
    open++
    closed.push(waitForClose(res).then(() => void open--))
    res.on('close', () => void (entry.status = res.statusCode))
    Promise.resolve(handler(req, res, entry)).catch((error) => {
      if (!res.headersSent) res.writeHead(599)
      res.destroy(error)
    })
  })
  // A client that drops a connection mid-body must not crash the server.
  server.on('clientError', (_e, socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const origin = `http://127.0.0.1:${port}`
  return {
    origin,
    url: `${origin}/`,
    log,
    bytesSent: () => log.reduce((s, e) => s + e.bytesSent, 0),
    ranges: () => log.filter((e) => e.method === 'GET').map((e) => e.range ?? ''),
    settled: async () => void (await Promise.all(closed)),
    open: async () => open,
    clear: () => {
      log.length = 0
      closed.length = 0
      count = 0
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** Runs `read` while counting the responses open at `server` every few ms; the most seen at once. */
export async function mostOpen<T>(server: TestServer, read: () => Promise<T>): Promise<{ result: T; most: number }> {
  let most = 0
  let reading = true
  const sampling = (async () => {
    while (reading) {
      most = Math.max(most, await server.open())
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
  })()
  try {
    return { result: await read(), most }
  } finally {
    reading = false
    await sampling
  }
}

/** What a URL serves: its bytes (read a chunk at a time, so a 5 GiB sparse file costs nothing) and validators. */
export interface Resource {
  size: number
  etag?: string
  lastModified?: string
  /** Bytes [start, end). */
  read(start: number, end: number): Uint8Array
}

export function bytesResource(bytes: Uint8Array, validators: { etag?: string; lastModified?: string } = { etag: '"v1"' }): Resource {
  return { size: bytes.length, ...validators, read: (start, end) => bytes.subarray(start, end) }
}

/** A file on disk, with an ETag made of its size and modification time (as nginx makes it). */
export function fileResource(path: string): Resource {
  const { size, mtimeMs } = statSync(path)
  return {
    size,
    etag: `"${size.toString(16)}-${Math.floor(mtimeMs).toString(16)}"`,
    read(start, end) {
      const fd = openSync(path, 'r')
      try {
        const out = new Uint8Array(end - start)
        readSync(fd, out, 0, out.length, start)
        return out
      } finally {
        closeSync(fd)
      }
    },
  }
}

/**
 * What can go wrong with one response. `at` is a fraction of the body: the fault strikes after that
 * much of it was sent.
 */
export type Fault =
  /** The connection is destroyed (a reset, a dropped network). */
  | { kind: 'drop'; at: number }
  /** The connection is closed cleanly before the body is complete (a proxy that gives up). */
  | { kind: 'close'; at: number }
  /** Nothing more is sent until the client goes away: before the headers, or part-way through the body. */
  | { kind: 'stall'; at: number | 'headers' }
  /** The body stops part-way until `until` resolves, then goes on: a slow network that the test controls. */
  | { kind: 'pause'; at: number; until: Promise<void> }
  | { kind: 'status'; status: number; retryAfter?: string }
  /** Content-Range and the bytes sent start `by` bytes from where they were asked for. */
  | { kind: 'shift'; by: number }
  /** Content-Range and the bytes sent run to the file's end, whatever end was asked for: Vite's dev server does so for `bytes=0-0` (it takes the end as `parseInt(end) || size - 1`). */
  | { kind: 'toFileEnd' }
  /** Content-Range's total is `by` bytes off the real size; the bytes are right. */
  | { kind: 'total'; by: number }
  /** A complete response whose Content-Length (and body) is half its Content-Range. */
  | { kind: 'short' }
  /** 16 bytes more than Content-Range says. */
  | { kind: 'extra' }
  /** A 206 without Content-Range. */
  | { kind: 'noContentRange' }
  /** Range is ignored: 200 with the whole body; gzip: compressed; chunked: no Content-Length. */
  | { kind: 'ignoreRange'; encoding?: 'gzip' | 'chunked' }

/** Faults by request number: `fault` for requests `from` .. `from + times - 1`. */
export function faultAt(fault: Fault, from: number, times = 1): (n: number) => Fault | undefined {
  return (n) => (n >= from && n < from + times ? fault : undefined)
}

export interface RangeOptions {
  /** true: Range is ignored on every request (200 with the whole file, as Python's http.server answers); faults still apply to that body. */
  ignoreRange?: boolean
  /** The fault, if any, for a request (n as in Logged). */
  fault?: (n: number, log: Logged) => Fault | undefined
  /** false: a server that ignores If-Range (sends the range even when the validator does not match). */
  ifRange?: boolean
  /**
   * The answer to a Range of several ranges: 'whole' (the default: 200 with the whole file, as servers
   * that refuse them do), 'first' (206 with the first range alone), 'multipart' (206
   * multipart/byteranges, laid out as nginx does).
   */
  multiRange?: 'whole' | 'first' | 'multipart'
  /** Milliseconds each response waits before its headers: a simulated round trip. */
  delay?: number
  /**
   * Bytes per second the bodies may go out at: `perConnection` caps each response on its own (as a CDN
   * caps each connection, nginx's limit_rate), `shared` all the responses of this handler together (a
   * server's or a link's whole bandwidth).
   */
  bandwidth?: { perConnection?: number; shared?: number }
}

/** Paces writes at `rate` bytes per second: each write waits for its share of time, after the writes before it. */
class Budget {
  #free = 0
  constructor(readonly rate: number) {}

  async take(bytes: number): Promise<void> {
    const now = performance.now()
    this.#free = Math.max(now, this.#free) + (bytes / this.rate) * 1000
    // Sent at the end of its slot: a write never goes out before the bytes before it have had their time.
    const wait = this.#free - now
    if (wait >= 1) await new Promise((resolve) => setTimeout(resolve, wait))
  }
}

const BOUNDARY = '00000000000000000042'

/**
 * Serves `lookup(path, n)` as a static file server does: 206 with Content-Range for a single range, 200
 * with the whole body without one (or when If-Range does not match the current validator), 416 for a
 * range past the end, HEAD, 404 for an unknown path. Faults come on top.
 */
export function rangeHandler(lookup: (path: string, n: number) => Resource | Uint8Array | undefined, options: RangeOptions = {}): Handler {
  const shared = options.bandwidth?.shared ? new Budget(options.bandwidth.shared) : undefined
  const perConnection = options.bandwidth?.perConnection
  return async (req, res, log) => {
    const budgets = [shared, perConnection ? new Budget(perConnection) : undefined].filter((b): b is Budget => b !== undefined)
    const found = lookup(log.path, log.n)
    if (!found || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(found ? 405 : 404, { 'Content-Length': 0 })
      return void res.end()
    }
    if (options.delay) await new Promise((resolve) => setTimeout(resolve, options.delay))
    const resource = found instanceof Uint8Array ? bytesResource(found) : found
    const fault = options.fault?.(log.n, log)
    const send = (resource: Resource, start: number, end: number) => sendBody(res, log, resource, start, end, fault, budgets)
    const { size } = resource
    const headers: Record<string, string | number> = { 'Accept-Ranges': 'bytes', 'Content-Type': 'application/octet-stream', 'Cache-Control': 'no-store' }
    if (resource.etag) headers.ETag = resource.etag
    if (resource.lastModified) headers['Last-Modified'] = resource.lastModified
    if (fault?.kind === 'stall' && fault.at === 'headers') return waitForClose(res)
    if (fault?.kind === 'status') {
      res.writeHead(fault.status, { 'Content-Type': 'text/plain', ...(fault.retryAfter === undefined ? {} : { 'Retry-After': fault.retryAfter }) })
      return void res.end(`error ${fault.status}`)
    }
    const ifRange = req.headers['if-range']
    const stale = options.ifRange !== false && ifRange !== undefined && ifRange !== resource.etag && ifRange !== resource.lastModified
    const several = (req.headers.range ?? '').includes(',') ? parseRanges(req.headers.range!, size) : undefined
    if (several && options.multiRange === 'multipart' && !stale) {
      // Each part as nginx sends it: CRLF, the delimiter, its headers, a blank line, the bytes; then the closing delimiter.
      const parts = several.flatMap(({ start, end }) => [
        new TextEncoder().encode(`\r\n--${BOUNDARY}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes ${start}-${end}/${size}\r\n\r\n`),
        resource.read(start, end + 1),
      ])
      parts.push(new TextEncoder().encode(`\r\n--${BOUNDARY}--\r\n`))
      const body = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0))
      let at = 0
      for (const p of parts) {
        body.set(p, at)
        at += p.length
      }
      res.writeHead(206, { ...headers, 'Content-Type': `multipart/byteranges; boundary=${BOUNDARY}`, 'Content-Length': body.length })
      return send(bytesResource(body), 0, body.length)
    }
    const first = several && options.multiRange === 'first' ? `bytes=${several[0].start}-${several[0].end}` : req.headers.range
    const range = stale || options.ignoreRange || fault?.kind === 'ignoreRange' ? 'none' : parseRange(first, size)
    if (range === 'unsatisfiable') {
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${size}`, 'Content-Length': 0 })
      return void res.end()
    }
    if (range === 'none') {
      if (fault?.kind === 'ignoreRange' && fault.encoding === 'gzip') {
        const gzipped = gzipSync(resource.read(0, size))
        res.writeHead(200, { ...headers, 'Content-Encoding': 'gzip', 'Content-Length': gzipped.length })
        return send(bytesResource(gzipped), 0, gzipped.length)
      }
      if (!(fault?.kind === 'ignoreRange' && fault.encoding === 'chunked')) headers['Content-Length'] = size
      res.writeHead(200, headers)
      return send(resource, 0, req.method === 'HEAD' ? 0 : size)
    }
    // [start, end) is what Content-Range says, [start, bodyEnd) what is sent.
    let { start, end } = range
    end += 1
    if (fault?.kind === 'toFileEnd') end = size
    if (fault?.kind === 'shift') {
      start = Math.max(0, start + fault.by)
      end = Math.min(size, end + fault.by)
    }
    const bodyEnd = fault?.kind === 'short' ? start + ((end - start) >> 1) : end
    const total = fault?.kind === 'total' ? size + fault.by : size
    if (fault?.kind !== 'noContentRange') headers['Content-Range'] = `bytes ${start}-${end - 1}/${total}`
    headers['Content-Length'] = bodyEnd - start + (fault?.kind === 'extra' ? 16 : 0)
    res.writeHead(206, headers)
    if (req.method === 'HEAD') return void res.end()
    await send(resource, start, bodyEnd)
    if (fault?.kind === 'extra' && !res.destroyed) {
      await write(res, log, new Uint8Array(16).fill(0xee))
      res.end()
    }
  }
}

/** Ignores Range: 200 with the whole body. */
export function ignoreRangeHandler(lookup: Parameters<typeof rangeHandler>[0]): Handler {
  return rangeHandler(lookup, { ignoreRange: true })
}

/** Serves `files` (URL name -> path on disk), as a static file server does; `fault` and `bandwidth` as in rangeHandler. */
export function serveFiles(
  files: Record<string, string>,
  options: { cors?: boolean; fault?: RangeOptions['fault']; bandwidth?: RangeOptions['bandwidth'] } = {},
): Promise<TestServer> {
  return startServer(
    rangeHandler((path) => (Object.hasOwn(files, path.slice(1)) ? fileResource(files[path.slice(1)]) : undefined), {
      fault: options.fault,
      bandwidth: options.bandwidth,
    }),
    options,
  )
}

/** Parses a single "bytes=A-B", "bytes=A-" or "bytes=-N" range against `size`. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'none' | 'unsatisfiable' {
  if (header === undefined) return 'none'
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (!m || (m[1] === '' && m[2] === '')) return 'none'
  let start: number
  let end: number
  if (m[1] === '') {
    start = Math.max(0, size - Number(m[2]))
    end = size - 1
  } else {
    start = Number(m[1])
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1)
  }
  if (start >= size || end < start) return 'unsatisfiable'
  return { start, end }
}

/** Parses "bytes=A-B,C-D,..." into its satisfiable ranges (each as parseRange reads it). */
function parseRanges(header: string, size: number): Array<{ start: number; end: number }> {
  return header
    .replace(/^bytes=/, '')
    .split(',')
    .map((part) => parseRange(`bytes=${part.trim()}`, size))
    .filter((r): r is { start: number; end: number } => typeof r === 'object')
}

const CHUNK = 64 * 1024

const waitForClose = (res: ServerResponse) => new Promise<void>((resolve) => (res.destroyed ? resolve() : res.on('close', () => resolve())))

/** Writes `chunk` (once each of `budgets` allows), counts it, and resolves once it is handed to the socket (or the socket is gone). */
async function write(res: ServerResponse, log: Logged, chunk: Uint8Array, budgets: Budget[] = []): Promise<void> {
  for (const budget of budgets) await budget.take(chunk.length)
  if (res.destroyed) return
  log.bytesSent += chunk.length
  return new Promise((resolve) => res.write(chunk, () => resolve()))
}

/**
 * Sends bytes [start, end) of `resource` in 64 KiB chunks, each once the last one reached the socket
 * and `budgets` allow it, so the client runs between chunks as on a real network, and the count stops
 * where the client went away. A body fault strikes at its fraction of the body; 'extra' leaves the
 * response open for more.
 */
async function sendBody(
  res: ServerResponse,
  log: Logged,
  resource: Resource,
  start: number,
  end: number,
  fault: Fault | undefined,
  budgets: Budget[],
): Promise<void> {
  const cutAt = fault && 'at' in fault && typeof fault.at === 'number' ? start + Math.floor((end - start) * fault.at) : end
  const send = async (from: number, to: number) => {
    for (let at = from; at < to && !res.destroyed; at += CHUNK) await write(res, log, resource.read(at, Math.min(to, at + CHUNK)), budgets)
  }
  await send(start, cutAt)
  if (fault?.kind === 'pause') {
    await fault.until
    await send(cutAt, end)
  }
  if (res.destroyed) return
  switch (fault?.kind) {
    case 'drop':
      return void res.socket?.destroy()
    case 'close':
      return void res.socket?.end()
    case 'stall':
      return waitForClose(res)
  }
  if (fault?.kind !== 'extra') res.end()
}
