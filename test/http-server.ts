// Real HTTP servers on 127.0.0.1 (node:http, port 0) for the reading tests. Every request is logged with
// its Range header, request headers, status and the body bytes the server wrote, so tests can count
// requests and bytes. Handlers are plain functions; the server knows nothing about the library.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Logged {
  method: string;
  path: string;
  range: string | undefined;
  headers: IncomingHttpHeaders;
  status: number;
  /** Body bytes handed to the socket so far. */
  bytesSent: number;
  /** True once the server saw the connection close before it finished the body. */
  cutShort: boolean;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, log: Logged) => void | Promise<void>;

export interface TestServer {
  /** http://127.0.0.1:PORT (no trailing slash). */
  origin: string;
  log: Logged[];
  bytesSent(): number;
  clear(): void;
  close(): Promise<void>;
}

export async function startServer(handler: Handler): Promise<TestServer> {
  const log: Logged[] = [];
  const server: Server = createServer((req, res) => {
    const entry: Logged = {
      method: req.method ?? '',
      path: decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname),
      range: req.headers.range,
      headers: req.headers,
      status: 0,
      bytesSent: 0,
      cutShort: false,
    };
    log.push(entry);
    res.on('close', () => {
      entry.status = res.statusCode;
      if (!res.writableFinished) entry.cutShort = true;
    });
    Promise.resolve(handler(req, res, entry)).catch((error) => {
      if (!res.headersSent) res.writeHead(599);
      res.destroy(error);
    });
  });
  // A client that drops a connection mid-body must not crash the server.
  server.on('clientError', (_e, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    log,
    bytesSent: () => log.reduce((s, e) => s + e.bytesSent, 0),
    clear: () => void (log.length = 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Writes `chunk` and counts it. */
export function send(res: ServerResponse, log: Logged, chunk: Uint8Array): boolean {
  log.bytesSent += chunk.length;
  return res.write(chunk);
}

/** Parses a single "bytes=A-B", "bytes=A-" or "bytes=-N" range against `size`. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'none' | 'unsatisfiable' {
  if (header === undefined) return 'none';
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'none';
  let start: number;
  let end: number;
  if (m[1] === '') {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || end < start) return 'unsatisfiable';
  return { start, end };
}

/** Serves `lookup(path)` with correct Range support (206 + Content-Range + ETag), 200 without Range. */
export function rangeHandler(lookup: (path: string) => Uint8Array | undefined, etag = '"v1"'): Handler {
  return (req, res, log) => {
    const body = lookup(log.path);
    if (!body) {
      res.writeHead(404, { 'Content-Length': 0 });
      res.end();
      return;
    }
    const range = parseRange(req.headers.range, body.length);
    const common = { ETag: etag, 'Accept-Ranges': 'bytes', 'Content-Type': 'application/octet-stream' };
    if (range === 'unsatisfiable') {
      res.writeHead(416, { ...common, 'Content-Range': `bytes */${body.length}`, 'Content-Length': 0 });
      res.end();
      return;
    }
    if (range === 'none') {
      res.writeHead(200, { ...common, 'Content-Length': body.length });
      send(res, log, body);
      res.end();
      return;
    }
    const part = body.subarray(range.start, range.end + 1);
    res.writeHead(206, { ...common, 'Content-Range': `bytes ${range.start}-${range.end}/${body.length}`, 'Content-Length': part.length });
    send(res, log, part);
    res.end();
  };
}

/**
 * Ignores Range: always 200 with the whole body, streamed in 64 KiB chunks that wait for the socket to
 * drain, stopping as soon as the client goes away (so bytesSent shows how much the client let through).
 */
export function ignoreRangeHandler(lookup: (path: string) => Uint8Array | undefined): Handler {
  return async (_req, res, log) => {
    const body = lookup(log.path);
    if (!body) {
      res.writeHead(404, { 'Content-Length': 0 });
      res.end();
      return;
    }
    res.writeHead(200, { ETag: '"v1"', 'Content-Length': body.length, 'Content-Type': 'application/octet-stream' });
    let closed = false;
    res.on('close', () => (closed = true));
    for (let at = 0; at < body.length && !closed; at += 65536) {
      if (!send(res, log, body.subarray(at, Math.min(body.length, at + 65536)))) {
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        });
      }
      // Let the client run between chunks, as a real network would.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (!closed) res.end();
  };
}
