// Bundles tsc's output (build/js) into dist/. Two builds differ only in how they get the wasm:
// the default entry inlines it, the workerd entry imports the .wasm files shipped beside it.
import { copyFileSync, mkdirSync } from 'node:fs'
import { basename, resolve } from 'node:path'
import wasm from '@rollup/plugin-wasm'

const WASM = ['build/core-simd.wasm', 'build/core-scalar.wasm']

// tsc keeps the source's '../build/x.wasm' specifiers, which from build/js point one level off.
const wasmFromBuild = {
  name: 'wasm-from-build',
  resolveId(source) {
    return source.endsWith('.wasm') ? resolve('build', basename(source)) : null
  },
}

const shipWasm = {
  name: 'ship-wasm',
  writeBundle() {
    mkdirSync('dist', { recursive: true })
    for (const file of WASM) copyFileSync(file, `dist/${basename(file)}`)
  },
}

// require('safetensors-wasm') from CommonJS: Node >= 20.19 loads ES modules synchronously (require(esm)), so a
// CommonJS file that requires the ES entry gives CJS callers the very same module instance (no second copy of
// the library, SafetensorsError stays one class). Its types re-export the entry's, so TypeScript's node16
// resolution from CJS sees a CommonJS module rather than an ES one it could only import().
const requireEntry = {
  name: 'require-entry',
  generateBundle() {
    this.emitFile({ type: 'asset', fileName: 'node.cjs', source: "module.exports = require('./node.js')\n" })
    this.emitFile({ type: 'asset', fileName: 'types/node.d.cts', source: "export * from './node.js'\n" })
  },
}

// Each entry's types beside it (tsc writes them to dist/types), so plain JS that imports dist/x.js by
// path (the inspector page, the benchmarks) is type-checked against them too.
const entryTypes = {
  name: 'entry-types',
  generateBundle(_options, bundle) {
    for (const chunk of Object.values(bundle)) {
      if (chunk.type === 'chunk' && chunk.isEntry && chunk.name !== 'cli') {
        this.emitFile({ type: 'asset', fileName: `${chunk.name}.d.ts`, source: `export * from './types/${chunk.name}.js'\n` })
      }
    }
  },
}

export default [
  {
    input: { index: 'build/js/index.js', node: 'build/js/node.js', cli: 'build/js/cli.js' },
    external: [/^node:/],
    plugins: [wasmFromBuild, wasm({ sync: WASM, targetEnv: 'auto-inline' }), requireEntry, entryTypes],
    output: { dir: 'dist', format: 'es', chunkFileNames: 'shared.js' },
  },
  {
    input: 'build/js/workerd.js',
    external: [/^node:/, /\.wasm\?module$/],
    plugins: [shipWasm, entryTypes],
    output: {
      file: 'dist/workerd.js',
      format: 'es',
      paths: (id) => (id.endsWith('.wasm?module') ? `./${basename(id, '.wasm?module')}.wasm` : id),
    },
  },
]
