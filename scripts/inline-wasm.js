// The imports of src/ that the builds make (src/core/wasm-modules.d.ts), for rollup.config.js and for vitest,
// which runs src/ as it is: a .wasm file as a module whose default export is its bytes in hex (hex rather
// than base64: gzip packs a module's hex to about its own gzipped size, base64 to 1.4 times it), and
// assembly/boundary/<module>.ts?constants (a wasm module's contract: its codes, modes and descriptor layouts) as a
// module that exports that file's constants by name, one binding each, so that a bundler puts their numbers where
// they are used (no object of names in a page).
import { readFileSync } from 'node:fs'
import { basename, resolve } from 'node:path'

const BOUNDARY = /[/\\]assembly[/\\]boundary[/\\]([\w-]+)\.ts\?constants$/
const CONSTANT = /^export const (\w+): \w+ = (0x[0-9a-f]+|\d+);/gim

/** The constants of an assembly/boundary/ file, as a module's source: `export const NAME = number` each. */
function constantsModule(path) {
  return [...readFileSync(path, 'utf8').matchAll(CONSTANT)].map(([, name, value]) => `export const ${name} = ${Number(value)}\n`).join('')
}

/** Resolves `../build/x.wasm` (tsc keeps the source's specifier, one level off from build/js) to build/x.wasm. */
export function wasmFromBuild(source) {
  return source.endsWith('.wasm') ? resolve('build', basename(source)) : null
}

export const inlineWasm = {
  name: 'inline-wasm',
  // Vite: before its own .wasm handling.
  enforce: 'pre',
  resolveId(source) {
    const boundary = BOUNDARY.exec(source)
    if (boundary) return `${resolve('assembly/boundary', boundary[1])}.ts?constants`
    return wasmFromBuild(source)
  },
  load(id) {
    if (BOUNDARY.test(id)) return constantsModule(id.slice(0, -'?constants'.length))
    return id.endsWith('.wasm') ? `export default ${JSON.stringify(readFileSync(id).toString('hex'))}\n` : null
  },
}
