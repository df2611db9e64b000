// A static file server on 127.0.0.1 with HTTP Range support, for the tests that fetch over loopback (the
// inspector page in Chromium, the workerd worker). It counts what it sends, so a test can check that a
// reader fetched only what it needed, on the server's side of the wire.
import { createReadStream, statSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface RangeServer {
  /** http://127.0.0.1:PORT/ (ends with a slash; file names are appended). */
  readonly url: string
  /** Body bytes sent so far, all requests together. */
  readonly bytesSent: number
  /** The Range header of each GET ('' when there was none). */
  readonly ranges: string[]
  reset(): void
  close(): Promise<void>
}

/**
 * Serves `files` (URL name -> path on disk). With `cors`, any origin may read them: the inspector page
 * and this server are different origins, and a Range request plus the Content-Range a reader needs are
 * not CORS-safelisted, hence the preflight answer and the exposed headers.
 */
export async function serveFiles(files: Record<string, string>, options: { cors?: boolean } = {}): Promise<RangeServer> {
  let bytesSent = 0
  let ranges: string[] = []
  const server = createServer((request, response) => {
    if (options.cors) {
      response.setHeader('Access-Control-Allow-Origin', '*')
      response.setHeader('Access-Control-Expose-Headers', 'Content-Range, Content-Length, ETag, Accept-Ranges')
    }
    if (request.method === 'OPTIONS' && options.cors) {
      response.writeHead(204, { 'Access-Control-Allow-Headers': 'Range', 'Access-Control-Allow-Methods': 'GET, HEAD' })
      return response.end()
    }
    const name = decodeURIComponent(new URL(request.url ?? '/', 'http://x').pathname.slice(1))
    const path = Object.hasOwn(files, name) ? files[name] : undefined
    if (!path || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(path ? 405 : 404)
      return response.end()
    }
    if (request.method === 'GET') ranges.push(request.headers.range ?? '')
    send(request, response, path, (n) => (bytesSent += n))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/`,
    get bytesSent() {
      return bytesSent
    },
    get ranges() {
      return ranges
    },
    reset() {
      bytesSent = 0
      ranges = []
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

function send(request: IncomingMessage, response: ServerResponse, path: string, count: (n: number) => void): void {
  const { size, mtimeMs } = statSync(path)
  const headers: Record<string, string | number> = {
    'Accept-Ranges': 'bytes',
    'Content-Type': 'application/octet-stream',
    ETag: `"${size.toString(16)}-${Math.floor(mtimeMs).toString(16)}"`,
    'Cache-Control': 'no-store',
  }
  let start = 0
  let end = size - 1
  let status = 200
  const range = request.headers.range
  if (range) {
    // One range, "bytes=A-B" or "bytes=A-", is all a reader here asks for; anything else is not served.
    const match = /^bytes=(\d+)-(\d*)$/.exec(range)
    if (!match || Number(match[1]) >= size) {
      response.writeHead(416, { ...headers, 'Content-Range': `bytes */${size}` })
      return void response.end()
    }
    start = Number(match[1])
    end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1)
    status = 206
    headers['Content-Range'] = `bytes ${start}-${end}/${size}`
  }
  headers['Content-Length'] = end - start + 1
  response.writeHead(status, headers)
  if (request.method === 'HEAD' || end < start) return void response.end()
  const stream = createReadStream(path, { start, end })
  stream.on('data', (chunk) => count(chunk.length))
  stream.pipe(response)
  // A reader that has what it wants may cancel the body: stop reading the file then.
  response.on('close', () => stream.destroy())
}
