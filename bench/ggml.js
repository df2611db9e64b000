// Dequantization of ggml's types (src/gguf/dequantize.ts, assembly/ggml.ts), 16M values of each, against a memcpy of
// the F32 output (TypedArray.prototype.set) in the same run: the kernels on blocks already in wasm memory (a
// GgmlDequantizer's input, as a GGUF reader fills it), each result left there, to F32 and to BF16; and
// dequantizeGgml from blocks in a JS array into `out`, the copies in and out of wasm memory with it. The blocks are random
// bytes but for their scales, set to weights' magnitudes (random F16 bits would put NaN and infinite scales in a
// block in 16, and E8M0's smallest make subnormal products, which x86 computes slowly). Medians of interleaved rounds.
// Run after `npm run build`: `node bench/ggml.js`, or import { run }.
import { pathToFileURL } from 'node:url'
import { bundledSource, compare, table } from './util.js'

const N = 16 << 20

/** ggml's types, each with its block (values, bytes) and where its F16 scales are (the tests' reading, test/gguf/dequantize.test.ts). */
/** @type {Record<string, [block: number, bytes: number, scales: number[]]>} */
const TYPES = {
  F32: [1, 4, []],
  F16: [1, 2, []],
  BF16: [1, 2, []],
  F64: [1, 8, []],
  I8: [1, 1, []],
  I16: [1, 2, []],
  I32: [1, 4, []],
  I64: [1, 8, []],
  Q4_0: [32, 18, [0]],
  Q4_1: [32, 20, [0, 2]],
  Q5_0: [32, 22, [0]],
  Q5_1: [32, 24, [0, 2]],
  Q8_0: [32, 34, [0]],
  Q2_K: [256, 84, [80, 82]],
  Q3_K: [256, 110, [108]],
  Q4_K: [256, 144, [0, 2]],
  Q5_K: [256, 176, [0, 2]],
  Q6_K: [256, 210, [208]],
  Q8_K: [256, 292, []],
  IQ2_XXS: [256, 66, [0]],
  IQ2_XS: [256, 74, [0]],
  IQ2_S: [256, 82, [0]],
  IQ3_XXS: [256, 98, [0]],
  IQ3_S: [256, 110, [0]],
  IQ1_S: [256, 50, [0]],
  IQ1_M: [256, 56, []],
  IQ4_NL: [32, 18, [0]],
  IQ4_XS: [256, 136, [0]],
  TQ1_0: [256, 54, [52]],
  TQ2_0: [256, 66, [64]],
  MXFP4: [32, 17, []],
  NVFP4: [64, 36, []],
  Q1_0: [128, 18, [0]],
  Q2_0: [64, 18, [0]],
}

/** The types' scales at a weight's magnitude, beside those the table above places: Q8_K's F32, E8M0 and UE4M3 bytes, IQ1_M's nibbles. */
function setScales(type, blocks, bytes, scales) {
  const view = new DataView(blocks.buffer)
  for (let at = 0; at < blocks.length; at += bytes) {
    for (const offset of scales) view.setUint16(at + offset, 0x1800 | (view.getUint16(at + offset, true) & 0x83ff), true)
    if (type === 'Q8_K') view.setFloat32(at, 0.001, true)
    if (type === 'MXFP4') blocks[at] = 118 + (blocks[at] & 7)
    if (type === 'NVFP4') for (let s = 0; s < 4; s++) blocks[at + s] = 0x20 | (blocks[at + s] & 0x1f)
    if (type === 'IQ1_M')
      for (let k = 0; k < 4; k++) view.setUint16(at + 48 + 2 * k, (view.getUint16(at + 48 + 2 * k, true) & 0x0fff) | (((0x1800 >> (4 * k)) & 15) << 12), true)
  }
}

/** The plain types' values at weights' magnitudes: finite floats, integers of every size. */
function setPlain(type, blocks) {
  const floats = { F32: new Float32Array(blocks.buffer), F64: new Float64Array(blocks.buffer) }[type]
  if (floats) for (let i = 0; i < floats.length; i++) floats[i] = (i % 1999) / 1e5 - 0.01
  if (type === 'F16' || type === 'BF16') {
    const bits = new Uint16Array(blocks.buffer)
    for (let i = 0; i < bits.length; i++) bits[i] = (bits[i] & 0x83ff) | (type === 'F16' ? 0x2000 : 0x3c00)
  }
}

function randomBytes(length, seed) {
  const words = new Uint32Array(Math.ceil(length / 4))
  let x = seed
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    words[i] = x >>> 0
  }
  return new Uint8Array(words.buffer, 0, length)
}

/** Runs every measurement; prints the table and returns its rows. */
export async function run({ log = console.log } = {}) {
  const { GgmlDequantizer, dequantizeGgml } = await bundledSource('ggml', "export { GgmlDequantizer, dequantizeGgml } from './src/gguf/dequantize.ts'")
  const out = new Float32Array(N)
  const source = new Float32Array(N).fill(0.5)
  const rows = []
  let seed = 1
  for (const [type, [block, bytes, scales]] of Object.entries(TYPES)) {
    const blocks = randomBytes((N / block) * bytes, seed++)
    setScales(type, blocks, bytes, scales)
    setPlain(type, blocks)
    // The blocks put in place once (a reader's file read puts them there); little-endian runs leave them as they are.
    const dequantizer = new GgmlDequantizer(blocks.length, N * 4)
    dequantizer.input(blocks.length).set(blocks)
    const ms = compare(
      {
        memcpy: () => out.set(source),
        kernelF32: () => dequantizer.run(type, N, 'F32'),
        kernelBF16: () => dequantizer.run(type, N, 'BF16'),
        array: () => dequantizeGgml(type, blocks, N, 'F32', { out }),
      },
      7,
    )
    rows.push({
      type,
      'memcpy ms': ms.memcpy.toFixed(1),
      'F32 ms': ms.kernelF32.toFixed(1),
      'F32 vs memcpy': `${(ms.memcpy / ms.kernelF32).toFixed(2)}x`,
      'BF16 ms': ms.kernelBF16.toFixed(1),
      'dequantizeGgml F32 ms': ms.array.toFixed(1),
      'dequantizeGgml vs memcpy': `${(ms.memcpy / ms.array).toFixed(2)}x`,
    })
  }
  log(`\nggml dequantization of ${N} values (median of interleaved rounds; memcpy of the ${(N * 4) / 1e6} MB F32 output in the same run)`)
  table(rows)
  return rows
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await run()
