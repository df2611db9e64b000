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

export default [
  {
    input: { index: 'build/js/index.js', node: 'build/js/node.js', cli: 'build/js/cli.js' },
    external: [/^node:/],
    plugins: [wasmFromBuild, wasm({ sync: WASM, targetEnv: 'auto-inline' })],
    output: { dir: 'dist', format: 'es', chunkFileNames: 'shared.js' },
  },
  {
    input: 'build/js/workerd.js',
    external: [/^node:/, /\.wasm\?module$/],
    plugins: [shipWasm],
    output: {
      file: 'dist/workerd.js',
      format: 'es',
      paths: (id) => (id.endsWith('.wasm?module') ? `./${basename(id, '.wasm?module')}.wasm` : id),
    },
  },
]
