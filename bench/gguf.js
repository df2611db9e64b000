// Q8_0 quantization speed: quantizeQ8_0 (src/gguf/q8_0.ts, bundled here with esbuild, as it is not a package
// export) and the raw kernel in wasm memory, against the fastest plain JavaScript a user would write.
// Run after `npm run build`: `node bench/gguf.js [values]`, or import { run }.
import { readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { f32BitsToF16, kernelInstance } from './convert.js'
import { compare } from './util.js'

/** quantizeQ8_0 from the sources, with build/'s wasm inlined as scripts/inline-wasm.js does it. */
async function loadQuantizer() {
  const { build } = await import('esbuild')
  const root = new URL('..', import.meta.url).pathname
  const wasm = {
    name: 'wasm',
    setup(plugin) {
      plugin.onResolve({ filter: /\.wasm$/ }, (args) => ({ path: `${root}build/${args.path.split('/').pop()}` }))
      plugin.onLoad({ filter: /\.wasm$/ }, (args) => ({ contents: `export default ${JSON.stringify(readFileSync(args.path).toString('hex'))}`, loader: 'js' }))
    },
  }
  const { outputFiles } = await build({
    stdin: { contents: "export { quantizeQ8_0 } from './src/gguf/q8_0.ts'", resolveDir: root, loader: 'ts' },
    bundle: true,
    format: 'esm',
    write: false,
    plugins: [wasm],
  })
  return (await import(`data:text/javascript,${encodeURIComponent(outputFiles[0].text)}`)).quantizeQ8_0
}

/** Runs every measurement on `count` values (a multiple of 32); prints the table and returns the rows. */
export async function run({ count = 16 << 20, log = console.log } = {}) {
  const quantizeQ8_0 = await loadQuantizer()
  const blocks = count / 32
  // Weights of a typical spread: normal-ish, about 0.02.
  const values = Float32Array.from({ length: count }, () => (Math.random() + Math.random() + Math.random() - 1.5) * 0.04)
  const out = new Uint8Array(blocks * 34)
  const outInt8 = new Int8Array(out.buffer)
  const scale = new Float32Array(1)
  const scaleBits = new Uint32Array(scale.buffer)

  // The plain JS loop, inline in the closure that owns its arrays (see bench/convert.js why): the F32 steps
  // with Math.fround, round half away from zero (exact in doubles for |v| <= 128), the scale's F16 by bits.
  const jsLoop = (o, o8) => {
    for (let b = 0; b < blocks; b++) {
      const base = b * 32
      const at = b * 34
      let amax = 0
      for (let j = 0; j < 32; j++) {
        const a = Math.abs(values[base + j])
        if (a > amax) amax = a
      }
      const d = Math.fround(amax / 127)
      const id = d === 0 ? 0 : Math.fround(1 / d)
      scale[0] = d
      const h = f32BitsToF16(scaleBits[0])
      o[at] = h & 0xff
      o[at + 1] = h >> 8
      for (let j = 0; j < 32; j++) {
        const v = Math.fround(values[base + j] * id)
        o8[at + 2 + j] = v < 0 ? -Math.floor(0.5 - v) : Math.floor(v + 0.5)
      }
    }
  }
  jsLoop(out, outInt8)
  const same = quantizeQ8_0(values).every((byte, i) => byte === out[i])

  const copy = new Float32Array(count)
  const { exports: kernelExports, memory, src, dst } = kernelInstance(count * 4, blocks * 34, 'q8_0')
  const exports = /** @type {import('../src/gguf/q8_0.ts').Q8_0Exports} */ (/** @type {unknown} */ (kernelExports))
  new Float32Array(memory.buffer, src, count).set(values)
  const times = compare({
    jsNew: () => {
      const o = new Uint8Array(blocks * 34)
      jsLoop(o, new Int8Array(o.buffer))
    },
    jsInto: () => jsLoop(out, outInt8),
    apiNew: () => quantizeQ8_0(values),
    apiInto: () => quantizeQ8_0(values, out),
    kernel: () => exports.quantizeQ8_0(src, dst, blocks),
    memcpy: () => copy.set(values),
  })
  const gbPerSecond = (ms) => (count * 4) / ms / 1e6
  const rows = [
    ['JS loop, new array', times.jsNew, ''],
    ['quantizeQ8_0, new array', times.apiNew, times.jsNew / times.apiNew],
    ['JS loop, into out', times.jsInto, ''],
    ['quantizeQ8_0, into out', times.apiInto, times.jsInto / times.apiInto],
    ['kernel F32 in wasm memory', times.kernel, times.jsInto / times.kernel],
    ['memcpy (set) of the input', times.memcpy, ''],
  ]
  log(`gguf bench: Q8_0 of ${count} F32 values, medians of 15 interleaved runs (Node ${process.version}); JS loop agrees: ${same}`)
  log('| case | ms | input GB/s | vs JS loop |')
  log('|---|---:|---:|---:|')
  for (const [name, ms, ratio] of rows) log(`| ${name} | ${ms.toFixed(2)} | ${gbPerSecond(ms).toFixed(2)} | ${ratio === '' ? '' : `${ratio.toFixed(2)}x`} |`)
  return rows
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run({ count: process.argv[2] ? Number(process.argv[2]) : undefined })
}
