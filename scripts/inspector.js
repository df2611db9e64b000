#!/usr/bin/env node
// npm run inspector [-- --port N]: builds the package if dist/ is missing or older than its sources,
// then serves the inspector page (inspector/) and the built package (dist/) on 127.0.0.1 and prints
// the URL. Static files only: the page reads models from the user's disk or from URLs, in the browser.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import { extname, join, resolve, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
// Only these two folders are served; a path outside them is a 404.
const SERVED = ['inspector', 'dist'].map((dir) => join(ROOT, dir) + sep)
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.wasm': 'application/wasm',
  '.map': 'application/json',
}

/** Serves the page; resolves with its URL once listening. */
export async function startInspectorServer({ port = 0 } = {}) {
  const server = createServer((request, response) => {
    const { pathname } = new URL(request.url ?? '/', 'http://localhost')
    if (pathname === '/' || pathname === '/inspector') {
      response.writeHead(302, { Location: '/inspector/' })
      return response.end()
    }
    let decoded
    try {
      decoded = decodeURIComponent(pathname)
    } catch {
      // A malformed escape (%E0%A4%A) throws URIError, which would end the process: refuse the request.
      response.writeHead(400, { 'Content-Type': 'text/plain' })
      return response.end('malformed URL')
    }
    let path = resolve(ROOT, `.${decoded}`)
    if (pathname.endsWith('/')) path = join(path, 'index.html')
    const allowed = SERVED.some((dir) => path.startsWith(dir))
    if (!allowed || !existsSync(path) || !statSync(path).isFile() || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'Content-Type': 'text/plain' })
      return response.end('not found')
    }
    response.writeHead(200, {
      'Content-Type': TYPES[extname(path)] ?? 'application/octet-stream',
      // The page and the package change as you rebuild; never serve a stale copy.
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    })
    response.end(request.method === 'HEAD' ? undefined : readFileSync(path))
  })
  await new Promise((resolveListen, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', resolveListen)
  })
  return {
    url: `http://127.0.0.1:${server.address().port}/inspector/`,
    close: () =>
      new Promise((resolveClose) => {
        server.closeAllConnections()
        server.close(() => resolveClose())
      }),
  }
}

/** The newest modification time of the files under `dir`. */
function newest(dir) {
  let time = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    time = Math.max(time, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return time
}

function buildIfNeeded() {
  const bundle = join(ROOT, 'dist/index.js')
  const sources = Math.max(newest(join(ROOT, 'src')), newest(join(ROOT, 'assembly')))
  if (existsSync(bundle) && statSync(bundle).mtimeMs >= sources) return
  console.log('dist/ is missing or older than src/ and assembly/: building')
  // Under `npm run`, npm_execpath is npm's own script: run the same npm, whatever PATH says.
  const npm = process.env.npm_execpath
  const result = npm
    ? spawnSync(process.execPath, [npm, 'run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' })
    : spawnSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

async function main() {
  const at = process.argv.indexOf('--port')
  const port = at > 0 ? Number(process.argv[at + 1]) : Number(process.env.PORT ?? 0)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error('usage: npm run inspector [-- --port N]')
    process.exit(2)
  }
  buildIfNeeded()
  const { url } = await startInspectorServer({ port })
  console.log(`SafeTensors inspector: ${url}`)
  console.log('(serving inspector/ and dist/ on 127.0.0.1 only; Ctrl+C stops)')
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) main()
