// The imports of src/ that the builds make (src/core/wasm-modules.d.ts), for rollup.config.js and for vitest,
// which runs src/ as it is: a .wasm file as a module whose default export is its bytes in hex (hex rather
// than base64: gzip packs a module's hex to about its own gzipped size, base64 to 1.4 times it), and
// assembly/boundary.ts?constants as a module that exports that file's constants by name, one binding each,
// so that a bundler puts their numbers where they are used (no object of names in a page).
import { readFileSync } from 'node:fs'
import { basename, resolve } from 'node:path'

const BOUNDARY = resolve('assembly/boundary.ts')
const CONSTANT = /^export const (\w+): \w+ = (0x[0-9a-f]+|\d+);/gim

/** Resolves `../build/x.wasm` (tsc keeps the source's specifier, one level off from build/js) to build/x.wasm. */
export function wasmFromBuild(source) {
  return source.endsWith('.wasm') ? resolve('build', basename(source)) : null
}

export const inlineWasm = {
  name: 'inline-wasm',
  // Vite: before its own .wasm handling.
  enforce: 'pre',
  resolveId(source) {
    return source.endsWith('boundary.ts?constants') ? `${BOUNDARY}?constants` : wasmFromBuild(source)
  },
  load(id) {
    if (id === `${BOUNDARY}?constants`) {
      return [...readFileSync(BOUNDARY, 'utf8').matchAll(CONSTANT)].map(([, name, value]) => `export const ${name} = ${Number(value)}\n`).join('')
    }
    return id.endsWith('.wasm') ? `export default ${JSON.stringify(readFileSync(id).toString('hex'))}\n` : null
  },
}
