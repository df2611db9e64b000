// Bundles tsc's output (build/js) into dist/. Two builds differ only in how they get the wasm: the portable
// and Node entries inline it (scripts/inline-wasm.js), the workerd entry imports the .wasm files shipped
// beside it. The first keeps one file per source module, and every module but the Node entry is free of side
// effects (package.json "sideEffects"), so that a bundler drops whole modules a page does not use, with the
// wasm they carry.
import { copyFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { basename } from 'node:path'
import { inlineWasm, wasmFromBuild } from './scripts/inline-wasm.js'

const WASM = readdirSync('build').filter((file) => file.endsWith('.wasm'))

const shipWasm = {
  name: 'ship-wasm',
  resolveId(source) {
    const id = wasmFromBuild(source)
    return id && { id, external: true }
  },
  writeBundle() {
    mkdirSync('dist', { recursive: true })
    for (const file of WASM) copyFileSync(`build/${file}`, `dist/${file}`)
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

// src/api.ts imports src/wasm-code.ts first so that a consumer's bundle puts the wasm ahead of the JS; rollup
// drops an import that takes no binding from a module without side effects, so this one is kept as it is.
const wasmFirst = {
  name: 'wasm-first',
  load(id) {
    return id.endsWith('/build/js/wasm-code.js') ? { code: readFileSync(id, 'utf8'), moduleSideEffects: 'no-treeshake' } : null
  },
}

export default [
  {
    input: { index: 'build/js/index.js', node: 'build/js/node.js', cli: 'build/js/cli.js' },
    external: [/^node:/],
    plugins: [wasmFirst, inlineWasm, requireEntry, entryTypes],
    // build/header.wasm becomes dist/header.wasm.js, assembly/boundary.ts?constants dist/boundary.js, beside
    // the modules of build/js.
    output: {
      dir: 'dist',
      format: 'es',
      preserveModules: true,
      // A module keeps its place under src/ (gguf/index.js); the wasm and the constants go beside the entries.
      entryFileNames: (chunk) =>
        (chunk.facadeModuleId.split('/build/js/')[1] ?? basename(chunk.facadeModuleId)).replace(/\.wasm$/, '.wasm.js').replace(/\.ts\?constants$/, '.js'),
    },
  },
  {
    input: 'build/js/index.js',
    external: [/^node:/],
    // shipWasm first: its .wasm files take the imports that inlineWasm would inline.
    plugins: [shipWasm, inlineWasm],
    output: { file: 'dist/workerd.js', format: 'es', paths: (id) => (id.endsWith('.wasm') ? `./${basename(id)}` : id) },
  },
]
