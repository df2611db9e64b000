// Conversion speed: the public API (dist/) and the raw kernels in wasm memory, against memcpy
// (TypedArray.prototype.set of the output size) and the fastest plain JavaScript a user would write.
// Run after `npm run build`: `node bench/convert.js [elements]`, or import { run }.
import { readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { convert, DTYPE_INFO, DTYPES } from '../dist/node.js'

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

// ---- Tables a JS user builds once (their construction is not timed) ----

/** F16 bits -> F32 value, by the format's definition. */
function f16Value(h) {
  const exponent = (h >> 10) & 0x1f
  const mantissa = h & 0x3ff
  const magnitude = exponent === 0 ? mantissa * 2 ** -24 : exponent === 31 ? (mantissa ? NaN : Infinity) : (1 + mantissa / 1024) * 2 ** (exponent - 15)
  return h & 0x8000 ? -magnitude : magnitude
}

/** The 64K-entry F16 -> F32 bits table. */
function f16Table() {
  return new Uint32Array(Float32Array.from({ length: 65536 }, (_, h) => f16Value(h)).buffer)
}

/** F32 bits -> F16 bits, rounding to nearest even: the bit manipulation a JS user writes. */
export function f32BitsToF16(x) {
  const sign = (x >>> 16) & 0x8000
  const m = x & 0x7fffffff
  if (m > 0x7f800000) return sign | 0x7e00 | ((m >>> 13) & 0x3ff)
  if (m >= 0x477ff000) return sign | 0x7c00
  if (m >= 0x38800000) return sign | ((m - 0x38000000 + 0xfff + ((m >>> 13) & 1)) >>> 13)
  // Subnormal F16: the value in units of 2^-24 (exact in a double), rounded to nearest even.
  const v = new Float32Array(new Uint32Array([m]).buffer)[0] * 2 ** 24
  const r = Math.round(v)
  return sign | (r - v === 0.5 && r % 2 === 1 ? r - 1 : r)
}

/** The 64K-entry BF16 -> F16 bits table. */
function bf16ToF16Table() {
  return Uint16Array.from({ length: 65536 }, (_, h) => f32BitsToF16(h << 16))
}

/** The 256-entry F8_E4M3 -> F16 bits table: every F8_E4M3 value is exact in F16. */
function f8E4m3ToF16Table() {
  return Uint16Array.from({ length: 256 }, (_, c) => {
    const exponent = (c >> 3) & 15
    const mantissa = c & 7
    if ((c & 0x7f) === 0x7f) return ((c & 0x80) << 8) | 0x7e00
    const magnitude = exponent === 0 ? mantissa * 2 ** -9 : (1 + mantissa / 8) * 2 ** (exponent - 7)
    return f32BitsToF16(new Uint32Array(new Float32Array([c & 0x80 ? -magnitude : magnitude]).buffer)[0])
  })
}

// ---- The kernels on data already in wasm memory ----

/** An instance of build/convert.wasm (the kernels) with its own memory holding an input and an output region. */
export function kernelInstance(inBytes, outBytes) {
  const module = new WebAssembly.Module(readFileSync(new URL('../build/convert.wasm', import.meta.url)))
  const memory = new WebAssembly.Memory({ initial: 2 + Math.ceil((inBytes + outBytes + 32) / 65536) })
  /** The core's exports, as src/core/convert.ts types them. @type {import('../src/core/convert.ts').KernelExports} */
  const exports = /** @type {any} */ (new WebAssembly.Instance(module, { env: { memory } }).exports)
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
  const f8 = new Uint8Array(f16.buffer, 0, n)
  const f32 = Float32Array.from({ length: n }, () => Math.random() * 2 - 1)
  const f32Bits = new Uint32Array(f32.buffer)
  const f64 = Float64Array.from(f32, (x) => x * (1 + 2 ** -30))
  const out32 = new Float32Array(n)
  const out32Bits = new Uint32Array(out32.buffer)
  const out16 = new Uint16Array(n)
  const scratch32 = new Float32Array(n)
  const scratch32Bits = new Uint32Array(scratch32.buffer)
  const f16ToF32 = f16Table()
  const bf16ToF16 = bf16ToF16Table()
  const f8ToF16 = f8E4m3ToF16Table()

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

  // Through the public API, against the fastest plain JS: the loop written inline in the closure that
  // owns its arrays. Measured here: the same BF16 -> F32 loop in a helper function that takes the arrays
  // as arguments runs 2-3x slower (47 ms against 16 ms), and a baseline that slow flatters the ratios.
  // Both with a fresh result (what a function returning an array does) and with a preallocated one (`out`).
  // Every F16/BF16 target is a table lookup or the usual bit manipulation (F64 demoted natively first).
  const cases = [
    {
      name: 'BF16 -> F32',
      out: out32,
      memcpy: memcpy32,
      target: 1.5,
      jsFresh: () => {
        const o = new Uint32Array(n)
        for (let i = 0; i < n; i++) o[i] = bf16[i] << 16
      },
      jsInto: () => {
        for (let i = 0; i < n; i++) out32Bits[i] = bf16[i] << 16
      },
      api: (out) => convert(bf16, 'BF16', 'F32', out),
    },
    {
      name: 'F16 -> F32',
      out: out32,
      memcpy: memcpy32,
      target: 2,
      jsFresh: () => {
        const o = new Uint32Array(n)
        for (let i = 0; i < n; i++) o[i] = f16ToF32[f16[i]]
      },
      jsInto: () => {
        for (let i = 0; i < n; i++) out32Bits[i] = f16ToF32[f16[i]]
      },
      api: (out) => convert(f16, 'F16', 'F32', out),
    },
    {
      name: 'F32 -> BF16',
      out: out16,
      memcpy: memcpy16,
      target: 1.5,
      jsFresh: () => {
        const o = new Uint16Array(n)
        for (let i = 0; i < n; i++) {
          const x = f32Bits[i]
          o[i] = (x & 0x7fffffff) > 0x7f800000 ? (x >>> 16) | 0x40 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16
        }
      },
      jsInto: () => {
        for (let i = 0; i < n; i++) {
          const x = f32Bits[i]
          out16[i] = (x & 0x7fffffff) > 0x7f800000 ? (x >>> 16) | 0x40 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16
        }
      },
      api: (out) => convert(f32, 'F32', 'BF16', out),
    },
    {
      name: 'BF16 -> F16',
      out: out16,
      memcpy: memcpy16,
      jsFresh: () => {
        const o = new Uint16Array(n)
        for (let i = 0; i < n; i++) o[i] = bf16ToF16[bf16[i]]
      },
      jsInto: () => {
        for (let i = 0; i < n; i++) out16[i] = bf16ToF16[bf16[i]]
      },
      api: (out) => convert(bf16, 'BF16', 'F16', out),
    },
    {
      name: 'F8_E4M3 -> F16',
      out: out16,
      memcpy: memcpy16,
      jsFresh: () => {
        const o = new Uint16Array(n)
        for (let i = 0; i < n; i++) o[i] = f8ToF16[f8[i]]
      },
      jsInto: () => {
        for (let i = 0; i < n; i++) out16[i] = f8ToF16[f8[i]]
      },
      api: (out) => convert(f8, 'F8_E4M3', 'F16', out),
    },
    {
      // The JS route rounds twice (F64 -> F32 -> F16); it is here for its speed only.
      name: 'F64 -> F16',
      out: out16,
      memcpy: memcpy16,
      jsFresh: () => {
        const o = new Uint16Array(n)
        scratch32.set(f64)
        for (let i = 0; i < n; i++) {
          const x = scratch32Bits[i],
            sign = (x >>> 16) & 0x8000,
            m = x & 0x7fffffff
          o[i] = m >= 0x38800000 && m < 0x477ff000 ? sign | ((m - 0x38000000 + 0xfff + ((m >>> 13) & 1)) >>> 13) : f32BitsToF16(x)
        }
      },
      jsInto: () => {
        scratch32.set(f64)
        for (let i = 0; i < n; i++) {
          const x = scratch32Bits[i],
            sign = (x >>> 16) & 0x8000,
            m = x & 0x7fffffff
          out16[i] = m >= 0x38800000 && m < 0x477ff000 ? sign | ((m - 0x38000000 + 0xfff + ((m >>> 13) & 1)) >>> 13) : f32BitsToF16(x)
        }
      },
      api: (out) => convert(f64, 'F64', 'F16', out),
    },
  ]
  const verdicts = []
  for (const c of cases) {
    const jsFresh = time(c.jsFresh)
    const jsInto = time(c.jsInto)
    const apiFresh = time(() => c.api())
    const apiInto = time(() => c.api(c.out))
    const outBytes = c.out.byteLength
    row(`JS loop ${c.name}, new array`, jsFresh, outBytes, c.memcpy)
    row(`convert ${c.name}, new array`, apiFresh, outBytes, c.memcpy, jsFresh)
    row(`JS loop ${c.name}, into out`, jsInto, outBytes, c.memcpy)
    row(`convert ${c.name}, into out`, apiInto, outBytes, c.memcpy, jsInto)
    const target = c.target === undefined ? '' : `; target ${c.target}x`
    verdicts.push(`${c.name}: convert is ${(jsFresh / apiFresh).toFixed(2)}x the JS loop (new array), ${(jsInto / apiInto).toFixed(2)}x (into out)${target}`)
  }

  // The raw kernels, input and output already in wasm memory (disjoint), against memcpy of the output size.
  const kernels = [
    { from: 'BF16', to: 'F32', input: bf16 },
    { from: 'F16', to: 'F32', input: f16 },
    { from: 'F8_E4M3', to: 'F32', input: f8 },
    { from: 'F32', to: 'BF16', input: f32 },
    { from: 'F32', to: 'F16', input: f32 },
    { from: 'BF16', to: 'F16', input: bf16 },
    { from: 'F16', to: 'BF16', input: f16 },
    { from: 'F8_E4M3', to: 'F16', input: f8 },
    { from: 'F64', to: 'F16', input: f64 },
    { from: 'F64', to: 'BF16', input: f64 },
  ]
  for (const k of kernels) {
    const inBytes = (n * DTYPE_INFO[k.from].bits) / 8
    const outBytes = (n * DTYPE_INFO[k.to].bits) / 8
    const { exports, memory, src, dst } = kernelInstance(inBytes, outBytes)
    new Uint8Array(memory.buffer).set(new Uint8Array(k.input.buffer, k.input.byteOffset, inBytes), src)
    const ms = time(() => exports.convertKernel(DTYPES.indexOf(/** @type {any} */ (k.from)), DTYPES.indexOf(/** @type {any} */ (k.to)), src, dst, n))
    const memcpyMs = outBytes === 4 * n ? memcpy32 : memcpy16
    // A narrowing kernel reads more than it writes: memcpy of its input size is the like-for-like bound.
    const inputMemcpy = inBytes === 4 * n && outBytes < inBytes ? `, ${(memcpy32 / ms).toFixed(2)}x memcpy of its input size` : ''
    const name = `${k.from} -> ${k.to}`
    row(`kernel ${name} in wasm memory`, ms, outBytes, memcpyMs)
    if (['BF16 -> F32', 'F16 -> F32', 'F32 -> BF16', 'BF16 -> F16'].includes(name)) {
      verdicts.push(`kernel ${name}: ${(memcpyMs / ms).toFixed(2)}x memcpy of its output size${inputMemcpy}; target 0.7x`)
    }
  }
  {
    const { exports, memory, src } = kernelInstance(4 * n, 0)
    new Uint8Array(memory.buffer).set(new Uint8Array(f32.buffer), src)
    row(
      'kernel byteSwap32 in wasm memory',
      time(() => exports.byteSwap32(src, n)),
      4 * n,
      memcpy32,
    )
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
