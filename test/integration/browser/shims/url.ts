// node:url for the browser run: a test file's import.meta.url is an http URL from Vite's server, and its
// path is what the fs.ts shim reads fixtures by.
import { isFixtureDirectory } from './fs.ts'

export function fileURLToPath(url: string | URL): string {
  const path = decodeURIComponent(new URL(String(url), location.href).pathname)
  // Vite rewrites `new URL('../../../browser/shims/fixtures/real/', import.meta.url)` into the resolved path and drops the
  // trailing slash that Node keeps for a directory URL; the helpers append file names to it.
  return !path.endsWith('/') && isFixtureDirectory(path) ? `${path}/` : path
}

export function pathToFileURL(path: string): URL {
  return new URL(path, location.origin)
}
