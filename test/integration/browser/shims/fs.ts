/// <reference types="vite/client" />
// node:fs for the tests that run in Chromium: read-only access to the files under test/fixtures, which
// Vite's dev server serves as they are. Synchronous XHR keeps readFileSync synchronous, as the tests expect
// (deprecated on the main thread, but Chromium still allows it and the tests run in their own iframe).
// Anything else a test might want from node:fs is absent on purpose: such a test does not belong in the
// browser run, and a missing export makes it fail to load instead of passing vacuously.

// Vite lists the fixture files at transform time; the functions (lazy imports) are never called.
const FILES = new Set(Object.keys(import.meta.glob('/test/fixtures/**/*')))

function normalize(path: string): string {
  return path.replace(/\/+$/, '')
}

/** Not in node:fs: whether `path` is a directory holding fixture files (used by the node:url shim). */
export function isFixtureDirectory(path: string): boolean {
  const dir = `${normalize(path)}/`
  for (const f of FILES) if (f.startsWith(dir)) return true
  return false
}

export function existsSync(path: string): boolean {
  return FILES.has(normalize(path)) || isFixtureDirectory(path)
}

interface Dirent {
  name: string
  isDirectory(): boolean
  isFile(): boolean
}

export function readdirSync(path: string, options?: { withFileTypes?: boolean }): string[] | Dirent[] {
  const dir = `${normalize(path)}/`
  const entries = new Map<string, boolean>() // name -> is a directory
  for (const f of FILES) {
    if (!f.startsWith(dir)) continue
    const rest = f.slice(dir.length)
    const slash = rest.indexOf('/')
    entries.set(slash < 0 ? rest : rest.slice(0, slash), slash >= 0)
  }
  if (entries.size === 0) throw new Error(`ENOENT: no fixture directory ${path} (browser shim of node:fs)`)
  const names = [...entries.keys()].sort()
  if (!options?.withFileTypes) return names
  return names.map((name) => ({ name, isDirectory: () => entries.get(name)!, isFile: () => !entries.get(name) }))
}

export function readFileSync(path: string, encoding?: string | { encoding?: string }): Uint8Array | string {
  if (!FILES.has(path)) throw new Error(`ENOENT: ${path} is not a fixture file (browser shim of node:fs)`)
  const request = new XMLHttpRequest()
  request.open('GET', path, false)
  // A synchronous request cannot ask for an ArrayBuffer; this charset keeps every byte as one char code.
  request.overrideMimeType('text/plain; charset=x-user-defined')
  request.send()
  if (request.status !== 200) throw new Error(`cannot read ${path}: HTTP ${request.status}`)
  const text: string = request.responseText
  const bytes = new Uint8Array(text.length)
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i) & 0xff
  const enc = typeof encoding === 'string' ? encoding : encoding?.encoding
  if (enc === undefined) return bytes
  if (enc !== 'utf8' && enc !== 'utf-8') throw new Error(`encoding ${enc} is not supported by the browser shim of node:fs`)
  return new TextDecoder().decode(bytes)
}
