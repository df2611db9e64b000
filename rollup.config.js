// Bundles tsc's output (build/js) into dist/. Two builds differ only in how they get the wasm: the portable
// and Node entries inline it (scripts/inline-wasm.js), the workerd entry imports the .wasm files shipped
// beside it. The first keeps one file per source module, and every module but the Node entry is free of side
// effects (package.json "sideEffects"), so that a bundler drops whole modules a page does not use, with the
// wasm they carry.
import { copyFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { basename, resolve } from 'node:path'
import { inlineWasm, wasmFromBuild } from './scripts/inline-wasm.js'

const WASM = readdirSync('build').filter((file) => file.endsWith('.wasm'))

// The workerd build's .wasm files, shipped in dist/ beside the chunk that imports them (the shared chunk).
// Imported for their bindings only: no entry imports one for its side effects.
const shipWasm = {
  name: 'ship-wasm',
  resolveId(source) {
    const id = wasmFromBuild(source)
    return id && { id, external: true, moduleSideEffects: false }
  },
  writeBundle() {
    mkdirSync('dist', { recursive: true })
    for (const file of WASM) copyFileSync(`build/${file}`, `dist/${file}`)
  },
}

// require('safetensors-wasm') and require('safetensors-wasm/gguf') from CommonJS: Node >= 20.19 loads ES modules
// synchronously (require(esm)), so a CommonJS file that requires the ES entry gives CJS callers the very same
// module instance (no second copy of the library, SafetensorsError stays one class). Its types re-export the
// entry's, so TypeScript's node16 resolution from CJS sees a CommonJS module rather than an ES one it could
// only import().
const requireEntry = {
  name: 'require-entry',
  generateBundle() {
    for (const entry of ['node', 'gguf-node']) {
      this.emitFile({ type: 'asset', fileName: `${entry}.cjs`, source: `module.exports = require('./${entry}.js')\n` })
      this.emitFile({ type: 'asset', fileName: `types/${entry}.d.cts`, source: `export * from './${entry}.js'\n` })
    }
  },
}

// Each entry's types beside it (tsc writes them to dist/types), so plain JS that imports dist/x.js by
// path (the inspector page, the benchmarks) is type-checked against them too.
const entryTypes = {
  name: 'entry-types',
  generateBundle(_options, bundle) {
    for (const chunk of Object.values(bundle)) {
      if (chunk.type === 'chunk' && chunk.isEntry && chunk.name !== 'cli' && !chunk.name.startsWith('platform/')) {
        this.emitFile({ type: 'asset', fileName: `${chunk.name}.d.ts`, source: `export * from './types/${chunk.name}.js'\n` })
      }
    }
  },
}

// #platform and #workers stay as they are in the modules of dist/, for Node or a consumer's bundler to resolve by the package's
// conditions (package.json "imports"); it has no side effects, so no entry imports it for them.
const platformImport = {
  name: 'platform-import',
  resolveId: (source) => (source === '#platform' || source === '#workers' ? { id: source, external: true, moduleSideEffects: false } : null),
}

// #platform and #workers under the workerd condition (package.json "imports"), resolved here: the workerd bundles are whole.
const workerdPlatform = {
  name: 'workerd-platform',
  resolveId: (source) =>
    source === '#platform' ? resolve('build/js/platform/portable.js') : source === '#workers' ? resolve('build/js/platform/web-workers.js') : null,
}

// src/api.ts imports src/core/wasm-code.ts first so that a consumer's bundle puts the wasm ahead of the JS; rollup
// drops an import that takes no binding from a module without side effects, so this one is kept as it is.
const wasmFirst = {
  name: 'wasm-first',
  load(id) {
    return id.endsWith('/build/js/core/wasm-code.js') ? { code: readFileSync(id, 'utf8'), moduleSideEffects: 'no-treeshake' } : null
  },
}

export default [
  {
    input: {
      index: 'build/js/index.js',
      node: 'build/js/node.js',
      gguf: 'build/js/gguf.js',
      'gguf-node': 'build/js/gguf-node.js',
      cli: 'build/js/cli.js',
      // The targets of #platform, which the package's conditions choose (package.json "imports").
      'platform/node': 'build/js/platform/node.js',
      'platform/portable': 'build/js/platform/portable.js',
      // The targets of #workers, which only the conversion pool imports.
      'platform/node-workers': 'build/js/platform/node-workers.js',
      'platform/web-workers': 'build/js/platform/web-workers.js',
    },
    external: [/^node:/],
    plugins: [wasmFirst, inlineWasm, requireEntry, entryTypes, platformImport],
    // build/header.wasm becomes dist/header.wasm.js, assembly/boundary/header.ts?constants dist/boundary/header.js,
    // beside the modules of build/js.
    output: {
      dir: 'dist',
      format: 'es',
      preserveModules: true,
      // A module keeps its place under src/ (gguf/index.js); the wasm and the constants go beside the entries.
      entryFileNames: (chunk) =>
        (chunk.facadeModuleId.split('/build/js/')[1] ?? chunk.facadeModuleId.split('/assembly/')[1] ?? basename(chunk.facadeModuleId))
          .replace(/\.wasm$/, '.wasm.js')
          .replace(/\.ts\?constants$/, '.js'),
    },
  },
  {
    // The two entries of workerd share their code in one chunk, so that a Worker importing both has one
    // copy of the library (and of SafetensorsError). The GGUF entry is a folder deeper than the main one,
    // as its name is ('safetensors-wasm/gguf'), so that a Worker's modules named after the package
    // resolve the chunk's and the wasm files' relative paths to the same modules from either entry.
    input: { workerd: 'build/js/index.js', 'gguf/workerd': 'build/js/gguf.js' },
    external: [/^node:/],
    // shipWasm first: its .wasm files take the imports that inlineWasm would inline. #platform is workerd's,
    // bundled in.
    plugins: [shipWasm, inlineWasm, workerdPlatform],
    output: {
      dir: 'dist',
      format: 'es',
      entryFileNames: '[name].js',
      // One chunk of what the entries share, and one per module loaded on demand (only a dynamic import() takes it);
      // the quantization code, loaded on demand as a whole, is one chunk with its own imports.
      chunkFileNames: 'workerd-[name].js',
      manualChunks: (id, { getModuleInfo }) => {
        const { isEntry, importers, dynamicImporters } = getModuleInfo(id)
        if (id.includes('/build/js/quant/')) return 'quant'
        return isEntry || (importers.length === 0 && dynamicImporters.length > 0) ? undefined : 'shared'
      },
      paths: (id) => (id.endsWith('.wasm') ? `./${basename(id)}` : id),
    },
  },
]
