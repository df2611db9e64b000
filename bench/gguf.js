// Q8_0 quantization speed: the kernel (build/q8_0.wasm) on F32 already in wasm memory, as the GGUF converter
// runs it, against the fastest plain JavaScript a user would write.
// Run after `npm run build`: `node bench/gguf.js [values]`, or import { run }.
import { pathToFileURL } from 'node:url'
import { f32BitsToF16, kernelInstance } from './convert.js'
import { compare } from './util.js'

/** Runs every measurement on `count` values (a multiple of 32); prints the table and returns the rows. */
export async function run({ count = 16 << 20, log = console.log } = {}) {
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
  const instance = kernelInstance(count * 4, blocks * 34, 'q8_0')
  const { memory, src, dst } = instance
  const exports = /** @type {import('../src/gguf/q8_0.ts').Q8_0Exports} */ (/** @type {unknown} */ (instance.exports))
  new Float32Array(memory.buffer, src, count).set(values)
  jsLoop(out, outInt8)
  exports.quantizeQ8_0(src, dst, blocks)
  const same = new Uint8Array(memory.buffer, dst, out.length).every((byte, i) => byte === out[i])
  const times = compare({
    jsNew: () => {
      const o = new Uint8Array(blocks * 34)
      jsLoop(o, new Int8Array(o.buffer))
    },
    jsInto: () => jsLoop(out, outInt8),
    kernel: () => exports.quantizeQ8_0(src, dst, blocks),
    memcpy: () => out.set(new Uint8Array(values.buffer, 0, out.length)),
  })
  const gbPerSecond = (ms) => (count * 4) / ms / 1e6
  const rows = [
    ['JS loop, new array', times.jsNew, ''],
    ['JS loop, into out', times.jsInto, ''],
    ['kernel F32 in wasm memory', times.kernel, times.jsInto / times.kernel],
    ['memcpy (set) of the output size', times.memcpy, ''],
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
