// Debian's nginx as the production server of the reading tests: started here on a free loopback port,
// with a config, a document root, logs and a pid file in a temporary folder (no daemon, nothing outside
// that folder), and stopped by the test. Its access log gives each request's Range, status and body
// bytes, which makes it look like a TestServer to the tests. nginx writes a request's line when it is
// done with the request, which can be just after the client has the response: tests await settled()
// (nginx's status page showing no response in progress) before they read the log.
import { type ChildProcess, spawn } from 'node:child_process'
import { accessSync, chmodSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { type AddressInfo, createConnection, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import type { Logged, TestServer } from './http-server.ts'

/** The nginx binary on PATH, or undefined. */
export function findNginx(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const path = join(dir, 'nginx')
    try {
      accessSync(path, constants.X_OK)
      return path
    } catch {
      // not in this folder
    }
  }
  return undefined
}

export interface Nginx {
  origin: string
  /**
   * A TestServer view of the URLs under `prefix`: '/ranged' (Range honoured; under /ranged/auth/ only with
   * "Authorization: Bearer s3cret"), '/norange' (max_ranges 0: Range ignored, 200 with the whole file) or
   * '/capped' (Range honoured, each response at most 25 MB/s: limit_rate, as CDNs cap each connection).
   */
  server(prefix: '/ranged' | '/norange' | '/capped'): TestServer
  close(): Promise<void>
}

function config(dir: string, root: string, port: number): string {
  return `
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 64; }
http {
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  log_format tests escape=json '{"method":"$request_method","path":"$uri","range":"$http_range","status":$status,'
    '"bytes":$body_bytes_sent,"authorization":"$http_authorization","x-test":"$http_x_test","if-range":"$http_if_range"}';
  access_log ${dir}/access.log tests;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${port};
    location /ranged/auth/ {
      alias ${root}/;
      if ($http_authorization != "Bearer s3cret") { return 401; }
    }
    location /ranged/ { alias ${root}/; }
    location /norange/ { alias ${root}/; max_ranges 0; }
    location /capped/ { alias ${root}/; limit_rate 25m; }
    location = /status { stub_status; access_log off; }
  }
}
`
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo
      probe.close(() => resolve(port))
    })
  })
}

/** Resolves once something accepts connections on `port`; rejects when `child` exits first. */
function listening(port: number, child: ChildProcess, errorLog: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const exited = () => reject(new Error(`nginx exited: ${readFileSync(errorLog, 'utf8').trim()}`))
    child.once('exit', exited)
    const tryConnect = () => {
      const socket = createConnection({ port, host: '127.0.0.1' }, () => {
        socket.destroy()
        child.off('exit', exited)
        resolve()
      })
      socket.once('error', () => setTimeout(tryConnect, 20))
    }
    tryConnect()
  })
}

/** Serves the folder `root` (its files as they are at each request). */
export async function startNginx(binary: string, root: string): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'safetensors-nginx-'))
  // Run as root, nginx's workers run as nobody, who must be able to read the root.
  for (const d of [dir, root]) chmodSync(d, 0o755)
  const errorLog = join(dir, 'error.log')
  const port = await freePort()
  writeFileSync(join(dir, 'nginx.conf'), config(dir, root, port))
  const child = spawn(binary, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', errorLog], { stdio: 'ignore' })
  try {
    await listening(port, child, errorLog)
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
  const origin = `http://127.0.0.1:${port}`
  const accessLog = join(dir, 'access.log')
  const entries = (): Logged[] =>
    readFileSync(accessLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line, n) => {
        const e = JSON.parse(line)
        const headers = Object.fromEntries(['authorization', 'x-test', 'if-range'].filter((h) => e[h] !== '').map((h) => [h, e[h]]))
        return { n, method: e.method, path: e.path, range: e.range || undefined, headers, status: e.status, bytesSent: e.bytes }
      })
  // "Writing: 1" is the status request itself: no other response is in progress.
  const open = async () => Number(/Writing: (\d+) /.exec(await (await fetch(`${origin}/status`)).text())![1]) - 1
  const settled = async () => {
    while ((await open()) > 0) await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return {
    origin,
    server(prefix) {
      let skip = 0
      const log = () =>
        entries()
          .filter((e) => e.path.startsWith(`${prefix}/`))
          .slice(skip)
      return {
        origin: origin + prefix,
        url: `${origin}${prefix}/`,
        get log() {
          return log()
        },
        bytesSent: () => log().reduce((s, e) => s + e.bytesSent, 0),
        ranges: () =>
          log()
            .filter((e) => e.method === 'GET')
            .map((e) => e.range ?? ''),
        settled,
        open,
        clear: () => void (skip += log().length),
        close: async () => {},
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => {
          rmSync(dir, { recursive: true, force: true })
          resolve()
        })
        child.kill('SIGTERM')
      }),
  }
}

/** A server a test runs against, by name: it starts it, and gives it with how to stop it. */
export type ServerCase = [name: string, start: () => Promise<{ server: TestServer; close(): Promise<void> }>]

/**
 * The servers a test runs against: the tests' own (`own`, named `name`), and Debian's nginx serving `root` under
 * `prefix` where nginx is installed (CI installs it; a line says where it is not).
 */
export function serverCases(name: string, own: () => Promise<TestServer>, root: string, prefix: '/ranged' | '/norange'): ServerCase[] {
  const cases: ServerCase[] = [
    [
      name,
      async () => {
        const server = await own()
        return { server, close: () => server.close() }
      },
    ],
  ]
  const binary = findNginx()
  if (!binary) console.log(`nginx not found: skipping the runs against nginx (CI installs it)`)
  else
    cases.push([
      `nginx (${binary})`,
      async () => {
        const nginx = await startNginx(binary, root)
        return { server: nginx.server(prefix), close: () => nginx.close() }
      },
    ])
  return cases
}
