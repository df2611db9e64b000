// Dequantization speed (docs/quantized.md), on a 16M-element weight of each layout, as F32, against a memcpy of the
// F32 output (TypedArray.prototype.set) in the same run: the kernels (src/quant/kernels.ts on a job of the layout's
// shape: its codes and scales copied into wasm memory, each rectangle dequantized there and left there), and
// `getTensor` into `out` from a model in memory (all of it: the parts read from their Blob, the scales decoded, the
// kernels, the copy out), as F32 and in the reference's dtype; for three layouts, the plain JavaScript loop a user
// would write (the reference's formula, rounded as it rounds). Medians of interleaved rounds.
// Run after `npm run build`: `node bench/quant.js`, or import { run }.
import { pathToFileURL } from 'node:url'
import { convert, openModel, serialize } from '../dist/index.js'
import { table } from './util.js'

const ROWS = 4096
const COLS = 4096
const N = ROWS * COLS

/** A seeded xorshift stream of 32-bit words. */
function words(count, seed) {
  const out = new Uint32Array(count)
  let x = seed
  for (let i = 0; i < count; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x >>> 0
  }
  return out
}

const bytes = (count, seed) => new Uint8Array(words(Math.ceil(count / 4), seed).buffer, 0, count)
/** `count` scales as `dtype` bits (BF16, F16) or F32 values, between 0.001 and 0.002: weights' magnitudes. */
function scales(count, dtype, seed) {
  const values = Float32Array.from(words(count, seed), (w) => 0.001 + w / 2 ** 32 / 1000)
  return dtype === 'F32' ? values : convert(values, 'F32', dtype)
}

/**
 * F8_E4M3 codes of weights: normal ones, either sign, but the two NaNs (the scale of a block puts its largest
 * magnitude at 448, so that its smallest are far above E4M3's subnormals).
 */
const e4m3 = (count, seed) => bytes(count, seed).map((c) => ((c & 0x78) === 0 ? c | 0x08 : (c & 0x7f) === 0x7f ? c ^ 1 : c))

/** Each layout: its config.json's quantization, its stored parts, and the logical tensor read. */
const LAYOUTS = [
  {
    name: 'MLX 4-bit, group 64, BF16',
    config: { quantization: { bits: 4, group_size: 64 } },
    tensor: 'w.weight',
    job: ({ parts }) => ({
      codes: parts['w.weight'].data,
      format: { rowBytes: COLS / 2, wordStride: 1, bits: 4, order: 'lsb-first' },
      params: {
        scales: f32(parts['w.scales']),
        biases: f32(parts['w.biases']),
        rowStride: COLS / 64,
        groupSize: 64,
        groupStride: 1,
        value: 'affine',
        ref: 'BF16',
      },
      rects: rowRects(COLS / 2),
    }),
    parts: {
      'w.weight': { dtype: 'U32', shape: [ROWS, COLS / 8], data: bytes(N / 2, 1) },
      'w.scales': { dtype: 'BF16', shape: [ROWS, COLS / 64], data: scales(N / 64, 'BF16', 2) },
      'w.biases': { dtype: 'BF16', shape: [ROWS, COLS / 64], data: scales(N / 64, 'BF16', 3) },
    },
  },
  {
    name: 'GPTQ 4-bit, group 128, F16 (v2)',
    config: { quantization_config: { quant_method: 'gptq', bits: 4, group_size: 128, checkpoint_format: 'gptq_v2' } },
    tensor: 'w.weight',
    job: ({ parts }) => ({
      codes: parts['w.qweight'].data,
      format: { rowBytes: 4, wordStride: ROWS, bits: 4, order: 'lsb-first' },
      params: {
        scales: f32(parts['w.scales']),
        zeros: new Float32Array(N / 128).fill(8),
        rowStride: 1,
        groupSize: 128,
        groupStride: ROWS,
        value: 'affine',
        ref: 'F16',
      },
      rects: rowRects(4),
    }),
    parts: {
      'w.qweight': { dtype: 'I32', shape: [COLS / 8, ROWS], data: bytes(N / 2, 4) },
      'w.qzeros': { dtype: 'I32', shape: [COLS / 128, ROWS / 8], data: bytes((N / 128 / 8) * 4, 5) },
      'w.scales': { dtype: 'F16', shape: [COLS / 128, ROWS], data: scales(N / 128, 'F16', 6) },
    },
  },
  {
    name: 'AWQ 4-bit, group 128, F16',
    config: { quantization_config: { quant_method: 'awq', bits: 4, group_size: 128, version: 'gemm', zero_point: true } },
    tensor: 'w.weight',
    job: ({ parts }) => ({
      codes: parts['w.qweight'].data,
      format: { rowBytes: ROWS / 2, wordStride: 1, bits: 4, order: 'awq', columns: true },
      params: {
        scales: f32(parts['w.scales']),
        zeros: new Float32Array(N / 128).fill(8),
        rowStride: 1,
        groupSize: 128,
        groupStride: ROWS,
        value: 'affine',
        ref: 'F16',
      },
      rects: Array.from({ length: ROWS / 64 }, (_, i) => ({
        codeOffset: i * 32,
        rows: 64,
        cols: COLS,
        colOffset: 0,
        paramRowOf: Int32Array.from({ length: 64 }, (_, r) => i * 64 + r),
        first: i * 64 * COLS,
      })),
    }),
    parts: {
      'w.qweight': { dtype: 'I32', shape: [COLS, ROWS / 8], data: bytes(N / 2, 7) },
      'w.qzeros': { dtype: 'I32', shape: [COLS / 128, ROWS / 8], data: bytes((N / 128 / 8) * 4, 8) },
      'w.scales': { dtype: 'F16', shape: [COLS / 128, ROWS], data: scales(N / 128, 'F16', 9) },
    },
  },
  {
    name: 'bitsandbytes NF4, block 64, BF16',
    config: { quantization_config: { quant_method: 'bitsandbytes', load_in_4bit: true } },
    tensor: 'w.weight',
    job: ({ parts }) => ({
      codes: parts['w.weight'].data,
      format: { rowBytes: 0, wordStride: 1, bits: 4, order: 'high-nibble-first' },
      params: { scales: parts['w.weight.absmax'].data, rowStride: 0, groupSize: 64, groupStride: 1, value: 'table', table: NF4, ref: 'BF16' },
      rects: Array.from({ length: N / (1 << 18) }, (_, i) => ({
        codeOffset: i << 17,
        rows: 1,
        cols: 1 << 18,
        colOffset: i << 18,
        paramRowOf: new Int32Array(1),
        first: i << 18,
      })),
    }),
    parts: {
      'w.weight': { dtype: 'U8', shape: [N / 2, 1], data: bytes(N / 2, 10) },
      'w.weight.absmax': { dtype: 'F32', shape: [N / 64], data: scales(N / 64, 'F32', 11) },
      'w.weight.quant_state.bitsandbytes__nf4': {
        dtype: 'U8',
        shape: null,
        data: new TextEncoder().encode(JSON.stringify({ quant_type: 'nf4', blocksize: 64, dtype: 'bfloat16', shape: [ROWS, COLS] })),
      },
    },
  },
  {
    name: 'bitsandbytes int8',
    config: { quantization_config: { quant_method: 'bitsandbytes', load_in_8bit: true } },
    tensor: 'w.weight',
    job: ({ parts }) => ({
      codes: parts['w.weight'].data,
      format: { rowBytes: COLS, wordStride: 1, bits: 8, order: 'lsb-first', signed: true },
      params: {
        scales: parts['w.SCB'].data,
        zeros: new Float32Array(ROWS).fill(128),
        rowStride: 1,
        groupSize: 2 ** 30,
        groupStride: 1,
        value: 'affine',
        postMultiplier: Math.fround(1 / 127),
        ref: 'F32',
      },
      rects: rowRects(COLS),
    }),
    parts: {
      'w.weight': { dtype: 'I8', shape: [ROWS, COLS], data: bytes(N, 12) },
      'w.SCB': { dtype: 'F32', shape: [ROWS], data: scales(ROWS, 'F32', 13).map((s) => s * 1000) },
    },
  },
  {
    name: 'FP8 E4M3, blocks 128 x 128, BF16',
    config: { dtype: 'bfloat16', quantization_config: { quant_method: 'fp8', weight_block_size: [128, 128] } },
    tensor: 'w.weight',
    job: ({ parts }) => ({
      codes: parts['w.weight'].data,
      format: { rowBytes: COLS, wordStride: 1, bits: 8, order: 'lsb-first' },
      params: { scales: parts['w.weight_scale_inv'].data, rowStride: COLS / 128, groupSize: 128, groupStride: 1, value: 'F8_E4M3', ref: 'BF16' },
      rects: rowRects(COLS, (row) => row >> 7),
    }),
    parts: {
      'w.weight': { dtype: 'F8_E4M3', shape: [ROWS, COLS], data: e4m3(N, 14) },
      'w.weight_scale_inv': { dtype: 'F32', shape: [ROWS / 128, COLS / 128], data: scales(N / 128 / 128, 'F32', 15) },
    },
  },
  {
    name: 'MXFP4 (gpt-oss experts), BF16',
    config: { dtype: 'bfloat16', quantization_config: { quant_method: 'mxfp4' } },
    tensor: 'e',
    job: ({ parts }) => ({
      codes: parts.e_blocks.data,
      format: { rowBytes: 512, wordStride: 1, bits: 4, order: 'lsb-first', columns: true },
      params: {
        // Transposed by the layout ([experts, groups, rows]); the bytes' order does not change the timing.
        scales: Float32Array.from(parts.e_scales.data, (byte) => 2 ** (byte - 128)),
        rowStride: 1024,
        groupSize: 1,
        groupStride: 1,
        value: 'table',
        table: E2M1.map((v) => v * 2),
        ref: 'F32', // as the layout passes it: its products are exact in BF16
      },
      rects: Array.from({ length: 64 }, (_, i) => ({
        codeOffset: (i >> 2) * (1 << 19) + (i & 3) * 128,
        rows: 256,
        cols: 1024,
        colOffset: 0,
        paramRowOf: Int32Array.from({ length: 256 }, (_, r) => (i >> 2) * 32 + (((i & 3) * 256 + r) >> 5)),
        first: i << 18,
      })),
    }),
    parts: {
      e_blocks: { dtype: 'U8', shape: [16, 1024, 32, 16], data: bytes(N / 2, 16) },
      e_scales: { dtype: 'U8', shape: [16, 1024, 32], data: bytes(N / 32, 17).map((b) => 118 + (b & 7)) },
    },
  },
  {
    name: 'NVFP4 (ModelOpt), BF16',
    config: { dtype: 'bfloat16', quantization_config: { quant_method: 'modelopt', quant_algo: 'NVFP4' } },
    tensor: 'w.weight',
    job: ({ parts }) => ({
      codes: parts['w.weight'].data,
      format: { rowBytes: COLS / 2, wordStride: 1, bits: 4, order: 'lsb-first' },
      params: {
        scales: convert(parts['w.weight_scale'].data, 'F8_E4M3', 'F32'),
        rowStride: COLS / 16,
        groupSize: 16,
        groupStride: 1,
        value: 'table',
        table: E2M1,
        ref: 'BF16',
      },
      rects: rowRects(COLS / 2),
    }),
    parts: {
      'w.weight': { dtype: 'U8', shape: [ROWS, COLS / 2], data: bytes(N / 2, 18) },
      'w.weight_scale': { dtype: 'F8_E4M3', shape: [ROWS, COLS / 16], data: e4m3(N / 16, 19).map((c) => c & 0x7f) },
      'w.weight_scale_2': { dtype: 'F32', shape: [], data: new Float32Array([0.0001]) },
    },
  },
]

const NF4 = Float32Array.from([
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
])
const E2M1 = convert(new Uint8Array([0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe]), 'F4', 'F32')

/** A part's values as F32. */
const f32 = ({ dtype, data }) => convert(data, dtype, 'F32')

/** The kernel's rectangles over ROWS rows of COLS columns, 64 rows each, as the layouts make them. */
function rowRects(rowBytes, paramRowOf = (row) => row) {
  return Array.from({ length: ROWS / 64 }, (_, i) => ({
    codeOffset: i * 64 * rowBytes,
    rows: 64,
    cols: COLS,
    colOffset: 0,
    paramRowOf: Int32Array.from({ length: 64 }, (_, r) => paramRowOf(i * 64 + r)),
    first: i * 64 * COLS,
  }))
}

/** The model of a layout, as the files a page would pick: model.safetensors and config.json. */
function modelFiles({ config, parts }) {
  const tensors = Object.fromEntries(
    Object.entries(parts).map(([name, { dtype, shape, data }]) => [
      name,
      { dtype, shape: shape ?? [data.byteLength], data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) },
    ]),
  )
  const bytes = /** @type {Uint8Array<ArrayBuffer>} */ (serialize(tensors))
  return [new File([bytes], 'model.safetensors'), new File([JSON.stringify(config)], 'config.json')]
}

// ---- The plain JavaScript a user writes: the reference's formula, element by element ----

const bf16Round = (bits) => ((bits + 0x7fff + ((bits >>> 16) & 1)) & 0xffff0000) >>> 0

/** MLX: bf16(bf16(q * s) + b), as F32. */
function mlxLoop({ parts }, out) {
  const codes = new Uint32Array(parts['w.weight'].data.buffer)
  const s = convert(parts['w.scales'].data, 'BF16', 'F32')
  const b = convert(parts['w.biases'].data, 'BF16', 'F32')
  const f = new Float32Array(1)
  const u = new Uint32Array(f.buffer)
  const outBits = new Uint32Array(out.buffer)
  for (let i = 0; i < N; i++) {
    const g = i >>> 6
    f[0] = ((codes[i >>> 3] >>> ((i & 7) << 2)) & 15) * s[g]
    u[0] = bf16Round(u[0])
    f[0] += b[g]
    outBits[i] = bf16Round(u[0])
  }
}

/** bitsandbytes NF4: bf16(f32(table[q] * absmax)), the first code of a byte in its high nibble. */
function nf4Loop({ parts }, out, table) {
  const packed = parts['w.weight'].data
  const absmax = parts['w.weight.absmax'].data
  const f = new Float32Array(1)
  const u = new Uint32Array(f.buffer)
  const outBits = new Uint32Array(out.buffer)
  for (let i = 0; i < N; i++) {
    f[0] = table[(packed[i >>> 1] >>> ((~i & 1) << 2)) & 15] * absmax[i >>> 6]
    outBits[i] = bf16Round(u[0])
  }
}

/** FP8 blocks: bf16(f32(f8 * scale)), the codes through a 256-entry table. */
function fp8Loop({ parts }, out, table) {
  const codes = parts['w.weight'].data
  const grid = parts['w.weight_scale_inv'].data
  const f = new Float32Array(1)
  const u = new Uint32Array(f.buffer)
  const outBits = new Uint32Array(out.buffer)
  for (let r = 0; r < ROWS; r++) {
    for (let c = 0; c < COLS; c++) {
      const i = r * COLS + c
      f[0] = table[codes[i]] * grid[(r >>> 7) * (COLS >>> 7) + (c >>> 7)]
      outBits[i] = bf16Round(u[0])
    }
  }
}

/** Runs every measurement; prints the table and returns its rows. */
export async function run({ log = console.log } = {}) {
  const out = new Float32Array(N)
  const source = new Float32Array(N).fill(0.5)
  const kernels = await internalKernels()
  const nf4 = NF4
  const e4m3Table = convert(
    Uint8Array.from({ length: 256 }, (_, c) => c),
    'F8_E4M3',
    'F32',
  )
  const loops = { 'MLX 4-bit, group 64, BF16': mlxLoop, 'bitsandbytes NF4, block 64, BF16': (l, o) => nf4Loop(l, o, nf4) }
  loops['FP8 E4M3, blocks 128 x 128, BF16'] = (l, o) => fp8Loop(l, o, e4m3Table)
  const rows = []
  for (const layout of LAYOUTS) {
    const model = await openModel(modelFiles(layout))
    // The parts in memory, read once: the timed reads are the dequantization and the copies around it.
    await model.getTensor(layout.tensor, { dtype: 'F32', out })
    const loop = loops[layout.name]
    const job = layout.job(layout)
    const variants = {
      memcpy: () => out.set(source),
      kernels: () => kernels.run(job, 'F32', () => {}),
      getTensor: () => model.getTensor(layout.tensor, { dtype: 'F32', out }),
      // In the dtype a read gives by default, the reference's (16-bit for all but bitsandbytes int8), into `out`.
      native: () => model.getTensor(layout.tensor, { out }),
      ...(loop && { js: () => loop(layout, out) }),
    }
    const ms = await compareAsync(variants)
    await model.close()
    rows.push({
      layout: layout.name,
      'memcpy ms': ms.memcpy.toFixed(1),
      'kernels ms': ms.kernels.toFixed(1),
      'kernels vs memcpy': `${(ms.memcpy / ms.kernels).toFixed(2)}x`,
      'getTensor ms': ms.getTensor.toFixed(1),
      'getTensor vs memcpy': `${(ms.memcpy / ms.getTensor).toFixed(2)}x`,
      'reference dtype ms': ms.native.toFixed(1),
      'JS loop ms': loop ? ms.js.toFixed(1) : '',
      'getTensor vs JS loop': loop ? `${(ms.js / ms.getTensor).toFixed(1)}x faster` : '',
    })
  }
  log('\nDequantization of 16M elements to F32 (median of interleaved rounds; memcpy of the 64 MB output in the same run)')
  table(rows)
  return rows
}

/** The kernels' wrapper (src/quant/kernels.ts) from dist/, with what the library lends it: internal modules. */
async function internalKernels() {
  const load = (path) => import(new URL(`../dist/${path}`, import.meta.url).href)
  const [{ Kernels }, { dtypeIndex }, { reserveMemory, WasmModule }] = await Promise.all([
    load('quant/kernels.js'),
    load('core/dtypes.js'),
    load('core/wasm.js'),
  ])
  return new Kernels({ WasmModule, reserveMemory, dtypeIndex })
}

/** compare() for variants that may be async: each round awaits each variant in turn. */
async function compareAsync(variants, rounds = 9) {
  /** @type {Record<string, number[]>} */
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
  for (const fn of Object.values(variants)) await fn()
  for (let r = 0; r < rounds; r++) {
    for (const [name, fn] of Object.entries(variants)) {
      const start = performance.now()
      await fn()
      times[name].push(performance.now() - start)
    }
  }
  return Object.fromEntries(Object.entries(times).map(([k, v]) => [k, v.sort((a, b) => a - b)[v.length >> 1]]))
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await run()
