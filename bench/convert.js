// Conversion speed: the public API (dist/) and the raw kernels in wasm memory, against memcpy
// (TypedArray.prototype.set of the output size) and the plain JavaScript a user would write.
// Run after `npm run build`: `node bench/convert.js [elements]`, or import { run }.
import { readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { convert } from '../dist/node.js'

const RUNS = 9

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}

/** Median milliseconds of `fn` over RUNS runs, after one warm-up run. */
function time(fn) {
  fn()
  const times = []
  for (let r = 0; r < RUNS; r++) {
    const start = performance.now()
    fn()
    times.push(performance.now() - start)
  }
  return median(times)
}

// ---- Plain JavaScript baselines ----

function bf16ToF32Js(input, out32) {
  for (let i = 0; i < input.length; i++) out32[i] = input[i] << 16
}

/** The 64K-entry table a JS user builds once for F16 -> F32 (its construction is not timed). */
function f16Table() {
  const table = new Float32Array(65536)
  for (let h = 0; h < 65536; h++) {
    const exponent = (h >> 10) & 0x1f
    const mantissa = h & 0x3ff
    const magnitude = exponent === 0 ? mantissa * 2 ** -24 : exponent === 31 ? (mantissa ? NaN : Infinity) : (1 + mantissa / 1024) * 2 ** (exponent - 15)
    table[h] = h & 0x8000 ? -magnitude : magnitude
  }
  return new Uint32Array(table.buffer)
}

function f16ToF32Js(table, input, out32) {
  for (let i = 0; i < input.length; i++) out32[i] = table[input[i]]
}

function f32ToBf16Js(input32, out) {
  for (let i = 0; i < input32.length; i++) {
    const x = input32[i]
    out[i] = (x & 0x7fffffff) > 0x7f800000 ? (x >>> 16) | 0x40 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16
  }
}

// ---- The kernels on data already in wasm memory ----

/** An instance of the SIMD build with its own memory holding an input and an output region. */
function kernelInstance(inBytes, outBytes) {
  const module = new WebAssembly.Module(readFileSync(new URL('../build/core-simd.wasm', import.meta.url)))
  const memory = new WebAssembly.Memory({ initial: 2 + Math.ceil((inBytes + outBytes + 32) / 65536) })
  const exports = new WebAssembly.Instance(module, { env: { memory } }).exports
  const src = (exports.heapBase() + 15) & ~15
  const dst = (src + inBytes + 15) & ~15
  return { exports, memory, src, dst }
}

function randomUint16(n, seed) {
  const out = new Uint16Array(n)
  let x = seed
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    out[i] = x >>> 16
  }
  return out
}

const gbPerSecond = (bytes, ms) => bytes / ms / 1e6

/** Runs every measurement on `elements` elements; prints the table and returns the rows. */
export function run({ elements = 16 << 20, log = console.log } = {}) {
  const n = elements
  const bf16 = randomUint16(n, 1).map((h) => (h & 0x80ff) | 0x3c00) // finite, typical weight magnitudes
  const f16 = randomUint16(n, 2)
  const f32 = Float32Array.from({ length: n }, () => Math.random() * 2 - 1)
  const f32Bits = new Uint32Array(f32.buffer)
  const out32 = new Float32Array(n)
  const out16 = new Uint16Array(n)
  const table = f16Table()

  // Sources hold data: an array never written reads the kernel's shared zero page, at cache speed.
  const copySource32 = f32
  const copySource16 = bf16
  const memcpy32 = time(() => out32.set(copySource32))
  const memcpy16 = time(() => out16.set(copySource16))

  const rows = []
  const row = (name, ms, outBytes, memcpyMs, jsMs) =>
    rows.push({ name, ms, outBytes, vsMemcpy: memcpyMs / ms, vsJs: jsMs === undefined ? undefined : jsMs / ms })

  row('memcpy (set) 4-byte output', memcpy32, 4 * n, memcpy32)
  row('memcpy (set) 2-byte output', memcpy16, 2 * n, memcpy16)
  // What any fresh result costs before a single element is converted: first-touch page faults.
  row(
    'new Float32Array + fill (fresh-result floor)',
    time(() => new Float32Array(n).fill(1)),
    4 * n,
    memcpy32,
  )

  // Through the public API, against the JS loops: both with a fresh result (what a function returning
  // an array does) and with a preallocated one (`out`).
  const cases = [
    {
      name: 'BF16 -> F32',
      js: (out) => bf16ToF32Js(bf16, new Uint32Array(out.buffer)),
      api: (out) => convert(bf16, 'BF16', 'F32', out),
      fresh: () => new Float32Array(n),
      out: out32,
      memcpy: memcpy32,
    },
    {
      name: 'F16 -> F32',
      js: (out) => f16ToF32Js(table, f16, new Uint32Array(out.buffer)),
      api: (out) => convert(f16, 'F16', 'F32', out),
      fresh: () => new Float32Array(n),
      out: out32,
      memcpy: memcpy32,
    },
    {
      name: 'F32 -> BF16',
      js: (out) => f32ToBf16Js(f32Bits, out),
      api: (out) => convert(f32, 'F32', 'BF16', out),
      fresh: () => new Uint16Array(n),
      out: out16,
      memcpy: memcpy16,
    },
  ]
  const targets = { 'BF16 -> F32': 1.5, 'F16 -> F32': 2, 'F32 -> BF16': 1.5 }
  const verdicts = []
  for (const c of cases) {
    const jsFresh = time(() => c.js(c.fresh()))
    const jsInto = time(() => c.js(c.out))
    const apiFresh = time(() => c.api())
    const apiInto = time(() => c.api(c.out))
    const outBytes = c.out.byteLength
    row(`JS loop ${c.name}, new array`, jsFresh, outBytes, c.memcpy)
    row(`convert ${c.name}, new array`, apiFresh, outBytes, c.memcpy, jsFresh)
    row(`JS loop ${c.name}, into out`, jsInto, outBytes, c.memcpy)
    row(`convert ${c.name}, into out`, apiInto, outBytes, c.memcpy, jsInto)
    verdicts.push(
      `${c.name}: convert is ${(jsFresh / apiFresh).toFixed(2)}x the JS loop (new array), ${(jsInto / apiInto).toFixed(2)}x (into out); target ${targets[c.name]}x`,
    )
  }

  // The raw kernels, input and output already in wasm memory (disjoint), against memcpy of the output size.
  const kernels = [
    { name: 'bf16ToF32', inBytes: 2 * n, outBytes: 4 * n, input: bf16 },
    { name: 'f16ToF32', inBytes: 2 * n, outBytes: 4 * n, input: f16 },
    { name: 'f8E4m3ToF32', inBytes: n, outBytes: 4 * n, input: new Uint8Array(f16.buffer, 0, n) },
    { name: 'f32ToBf16', inBytes: 4 * n, outBytes: 2 * n, input: f32 },
    { name: 'f32ToF16', inBytes: 4 * n, outBytes: 2 * n, input: f32 },
    { name: 'byteSwap32', inBytes: 4 * n, outBytes: 4 * n, input: f32 },
  ]
  for (const k of kernels) {
    const { exports, memory, src, dst } = kernelInstance(k.inBytes, k.outBytes)
    new Uint8Array(memory.buffer).set(new Uint8Array(k.input.buffer, k.input.byteOffset, k.inBytes), src)
    const kernel = exports[k.name]
    const ms = k.name === 'byteSwap32' ? time(() => kernel(src, n)) : time(() => kernel(src, dst, n))
    const memcpyMs = k.outBytes === 4 * n ? memcpy32 : memcpy16
    row(`kernel ${k.name} in wasm memory`, ms, k.outBytes, memcpyMs)
    if (k.name === 'bf16ToF32' || k.name === 'f16ToF32' || k.name === 'f32ToBf16') {
      // A narrowing kernel reads twice what it writes: memcpy of its input size is the like-for-like bound.
      const inputMemcpy = k.inBytes > k.outBytes ? `, ${(memcpy32 / ms).toFixed(2)}x memcpy of its input size` : ''
      verdicts.push(`kernel ${k.name}: ${(memcpyMs / ms).toFixed(2)}x memcpy of its output size${inputMemcpy}; target 0.7x`)
    }
  }

  log(`convert bench: ${n} elements, median of ${RUNS} runs (Node ${process.version})`)
  log('| case | ms | output GB/s | vs memcpy | vs JS loop |')
  log('|---|---:|---:|---:|---:|')
  for (const r of rows) {
    log(
      `| ${r.name} | ${r.ms.toFixed(2)} | ${gbPerSecond(r.outBytes, r.ms).toFixed(2)} | ${r.vsMemcpy.toFixed(2)}x | ${r.vsJs === undefined ? '' : `${r.vsJs.toFixed(2)}x`} |`,
    )
  }
  for (const v of verdicts) log(v)
  return rows
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  run({ elements: process.argv[2] ? Number(process.argv[2]) : undefined })
}
