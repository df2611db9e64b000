// The .wasm imports of src/ (src/wasm-modules.d.ts) as modules whose default export is the wasm's bytes in
// hex: the portable and Node builds (rollup.config.js) and vitest, which runs src/ as it is, inline them.
// Hex rather than base64: gzip packs a module's hex to about its own gzipped size, base64 to 1.4 times it.
import { readFileSync } from 'node:fs'
import { basename, resolve } from 'node:path'

/** Resolves `../build/x.wasm` (tsc keeps the source's specifier, one level off from build/js) to build/x.wasm. */
export function wasmFromBuild(source) {
  return source.endsWith('.wasm') ? resolve('build', basename(source)) : null
}

export const inlineWasm = {
  name: 'inline-wasm',
  // Vite: before its own .wasm handling.
  enforce: 'pre',
  resolveId: wasmFromBuild,
  load(id) {
    return id.endsWith('.wasm') ? `export default ${JSON.stringify(readFileSync(id).toString('hex'))}\n` : null
  },
}
