// The dequantization kernels (src/quant/kernels.ts, assembly/quant.ts) on what the fixtures hold little or none of:
// every bit width's unpack (3, 5, 6 and 7 bits straddling words, strided words, AWQ's and bitsandbytes' orders,
// codes down the columns of words), the reference roundings at their edges (F16 subnormals, overflow to infinity,
// NaN), every F8_E4M3 code (runs with a zero, subnormal or NaN code, and scales out of the exponent-shift range,
// take the element-at-a-time path), groups that are not runs of 16 and a g_idx, and the 16-result tables of large
// groups and of symmetric tables in groups of 16. The expected values come from the formulas written out here,
// with the independent F16/BF16 encoder of test/float-reference.ts.
import { describe, expect, test } from 'vitest'
import type { ConvertTarget } from '../../src/core/convert.ts'
import { dtypeIndex } from '../../src/core/dtypes.ts'
import { reserveMemory, WasmModule } from '../../src/core/wasm.ts'
import { type CodeFormat, type Job, Kernels, type Params } from '../../src/quant/kernels.ts'
import { decodeToF32Bits, encodeF32Bits, f32Bits, f32FromBits } from '../float-reference.ts'
import { prng } from '../random.ts'

const kernels = new Kernels({ WasmModule, reserveMemory, dtypeIndex })

/** Runs one rectangle of `rows` x `cols` (parameters addressed as `params` says) and returns its F32 bits. */
function run(codes: Uint8Array, format: CodeFormat, params: Params, rows: number, cols: number, colOffset = 0, to: ConvertTarget = 'F32'): Uint32Array {
  const job: Job = {
    codes,
    format,
    params,
    rects: [{ codeOffset: 0, rows, cols, colOffset, paramRowOf: Int32Array.from({ length: rows }, (_, r) => r), first: 0 }],
  }
  let out = new Uint32Array(0)
  kernels.run(job, to, (output) => {
    // 16-bit results as the F32 bits of the same values.
    const copy = output.slice().buffer
    out = to === 'F32' ? new Uint32Array(copy) : Uint32Array.from(new Uint16Array(copy), (h) => decodeToF32Bits(to, h))
  })
  return out
}

/** F32 bits rounded to `ref` (and back to F32 bits): what the references do after each operation. */
function rounded(ref: ConvertTarget, bits: number): number {
  if (ref === 'F32') return bits >>> 0
  const narrow = encodeF32Bits(ref, bits)
  return decodeToF32Bits(ref, narrow)
}

const value = (x: number) => f32Bits(Math.fround(x))

/** F32 bits, every NaN as one 'NaN' (wasm leaves a NaN's sign and payload to the machine). */
const anyNaN = (bits: number) => (Number.isNaN(f32FromBits(bits)) ? 'NaN' : bits)

/** `count` codes of `bits` bits packed LSB-first into 32-bit words (a dense bitstream), as bytes. */
function pack(codes: number[], bits: number): Uint8Array {
  const words = new Uint32Array(Math.ceil((codes.length * bits) / 32) + 1)
  codes.forEach((code, i) => {
    for (let b = 0; b < bits; b++) {
      const at = i * bits + b
      if ((code >> b) & 1) words[at >>> 5] |= 1 << (at & 31)
    }
  })
  return new Uint8Array(words.buffer)
}

describe('unpack', () => {
  test.each([1, 2, 3, 4, 5, 6, 7, 8])('%i-bit codes, LSB-first, straddling words: every one', (bits) => {
    const random = prng(bits)
    const codes = Array.from({ length: 1000 }, () => Math.floor(random() * 2 ** bits))
    expect([...kernels.unpack(pack(codes, bits), { bits, order: 'lsb-first', wordStride: 1 }, codes.length)]).toEqual(codes)
  })

  test('words far apart (GPTQ: a column down qweight), several streams (compressed-tensors: zero points per group)', () => {
    const random = prng(9)
    for (const bits of [2, 3, 4, 8]) {
      const streams = 3
      const codes = Array.from({ length: streams }, () => Array.from({ length: 64 }, () => Math.floor(random() * 2 ** bits)))
      // Stream s's word w at word w * streams + s.
      const packed = codes.map((c) => new Uint32Array(pack(c, bits).buffer))
      const words = new Uint32Array(packed[0].length * streams)
      for (let w = 0; w < packed[0].length; w++) for (let s = 0; s < streams; s++) words[w * streams + s] = packed[s][w]
      const out = kernels.unpack(new Uint8Array(words.buffer), { bits, order: 'lsb-first', wordStride: streams }, 64, streams, 1)
      expect([...out], `${bits} bits`).toEqual(codes.flat())
    }
  })

  test("AWQ's order (column 8c + j in nibble [0, 4, 1, 5, 2, 6, 3, 7][j]) and bitsandbytes' (the first in the high nibble)", () => {
    const random = prng(10)
    const codes = Array.from({ length: 64 }, () => Math.floor(random() * 16))
    const awq = new Uint32Array(8)
    const nibble = [0, 4, 1, 5, 2, 6, 3, 7]
    codes.forEach((code, i) => {
      awq[i >> 3] |= code << (4 * nibble[i & 7])
    })
    expect([...kernels.unpack(new Uint8Array(awq.buffer), { bits: 4, order: 'awq', wordStride: 1 }, 64)]).toEqual(codes)
    const bnb = Uint8Array.from({ length: 32 }, (_, i) => (codes[2 * i] << 4) | codes[2 * i + 1])
    expect([...kernels.unpack(bnb, { bits: 4, order: 'high-nibble-first', wordStride: 1 }, 64)]).toEqual(codes)
  })

  test.each([4, 8])('%i-bit rows whose words interleave (GPTQ: qweight read by columns), 16 rows at a time and the rest', (bits) => {
    const random = prng(bits + 100)
    const [rows, cols] = [37, 300]
    const codes = Array.from({ length: rows }, () => Array.from({ length: cols }, () => Math.floor(random() * 2 ** bits)))
    // Word w of row j at word w * rows + j.
    const packed = codes.map((row) => new Uint32Array(pack(row, bits).buffer))
    const words = new Uint32Array(packed[0].length * rows)
    packed.forEach((row, j) => row.forEach((word, w) => (words[w * rows + j] = word)))
    const out = run(
      new Uint8Array(words.buffer),
      { rowBytes: 4, wordStride: rows, bits, order: 'lsb-first' },
      { scales: Float32Array.of(1), rowStride: 0, groupStride: 1, groupSize: 2 ** 30, value: 'affine', ref: 'F32' },
      rows,
      cols,
    )
    expect([...out].map(f32FromBits)).toEqual(codes.flat())
  })

  test.each([
    ['awq', 45, 1100],
    ['lsb-first', 8, 37],
  ] as const)('codes down the columns of words (AWQ qweight read as rows), %s order: %i rows of %i', (order, rows, cols) => {
    const random = prng(rows)
    const wordsPerRow = Math.ceil(rows / 8)
    // The stored matrix is cols x (8 * wordsPerRow) codes; row r of the result is its column r.
    const stored = Array.from({ length: cols }, () => Array.from({ length: 8 * wordsPerRow }, () => Math.floor(random() * 16)))
    const words = new Uint32Array(cols * wordsPerRow)
    const nibble = order === 'awq' ? [0, 4, 1, 5, 2, 6, 3, 7] : [0, 1, 2, 3, 4, 5, 6, 7]
    stored.forEach((row, k) => {
      row.forEach((code, c) => {
        words[k * wordsPerRow + (c >> 3)] |= code << (4 * nibble[c & 7])
      })
    })
    const out = run(
      new Uint8Array(words.buffer),
      { rowBytes: wordsPerRow * 4, wordStride: 1, bits: 4, order, columns: true },
      { scales: Float32Array.of(1), rowStride: 0, groupStride: 1, groupSize: 2 ** 30, value: 'affine', ref: 'F32' },
      rows,
      cols,
    )
    expect([...out].map(f32FromBits)).toEqual(Array.from({ length: rows * cols }, (_, i) => stored[i % cols][Math.floor(i / cols)]))
  })
})

describe('values, rounded as the references round them', () => {
  const base = { rowStride: 1, groupStride: 1 } as const

  test.each(['F16', 'BF16', 'F32'] as const)('(q - zero) * scale in %s: subnormal, overflowing and NaN results, in every column of a vector run', (ref) => {
    // Scales that take the products below F16's normals, above its largest, and to NaN.
    const scales = [1e-6, 3e-8, 5000, 30000, Number.NaN, 0.001, -2e-7, 65504 / 7].map(Math.fround)
    const cols = 48
    const random = prng(11)
    const codes = Array.from({ length: scales.length * cols }, () => Math.floor(random() * 16))
    const out = run(
      Uint8Array.from(codes),
      { rowBytes: cols, wordStride: 1, bits: 8, order: 'lsb-first' },
      { ...base, scales: Float32Array.from(scales), zeros: new Float32Array(scales.length).fill(7), groupSize: 2 ** 30, value: 'affine', ref },
      scales.length,
      cols,
    )
    const expected = codes.map((q, i) => rounded(ref, value((q - 7) * scales[Math.floor(i / cols)])))
    expect([...out]).toEqual(expected)
  })

  test('ref(q * scale) + bias, rounded twice (MLX), in F16 and BF16', () => {
    for (const ref of ['F16', 'BF16'] as const) {
      const random = prng(12)
      const scales = Float32Array.from({ length: 6 }, () => Math.fround((random() - 0.5) * 0.02))
      const biases = Float32Array.from({ length: 6 }, () => Math.fround((random() - 0.5) * 0.1))
      const codes = Array.from({ length: 6 * 40 }, () => Math.floor(random() * 64))
      // Six groups of 40 in one row: groups that are not runs of 16.
      const out = run(
        Uint8Array.from(codes),
        { rowBytes: 240, wordStride: 1, bits: 8, order: 'lsb-first' },
        { ...base, scales, biases, groupSize: 40, value: 'affine', ref },
        1,
        240,
      )
      const expected = codes.map((q, i) => {
        const g = Math.floor(i / 40)
        return rounded(ref, value(f32FromBits(rounded(ref, value(q * scales[g]))) + biases[g]))
      })
      expect([...out], ref).toEqual(expected)
    }
  })

  test('a g_idx (a group per column, in any order) and the 16 results of large groups give the formula', () => {
    const random = prng(13)
    const cols = 256
    const groups = 3
    const groupOf = Int32Array.from({ length: cols }, () => Math.floor(random() * groups))
    const scales = Float32Array.from({ length: groups }, () => Math.fround(random() * 0.01))
    const zeros = Float32Array.from({ length: groups }, () => Math.floor(random() * 16))
    const codes = Array.from({ length: cols }, () => Math.floor(random() * 16))
    const packed = pack(codes, 4)
    const format: CodeFormat = { rowBytes: cols / 2, wordStride: 1, bits: 4, order: 'lsb-first' }
    const gathered = run(packed, format, { ...base, scales, zeros, groupSize: 0, groupOf, value: 'affine', ref: 'F16' }, 1, cols)
    expect([...gathered]).toEqual(codes.map((q, i) => rounded('F16', value((q - zeros[groupOf[i]]) * scales[groupOf[i]]))))
    // Groups of 128 (of 4-bit codes): each group's 16 results, looked up (converted first where `to` is 16-bit).
    for (const to of ['F32', 'F16', 'BF16'] as const) {
      const tabled = run(packed, format, { ...base, scales, zeros, groupSize: 128, value: 'affine', ref: 'F16' }, 1, cols, 0, to)
      const expected = codes.map((q, i) => rounded('F16', value((q - zeros[i >> 7]) * scales[i >> 7])))
      expect([...tabled], to).toEqual(to === 'BF16' ? expected.map((bits) => rounded('BF16', bits)) : expected)
    }
  })

  // Scales of both signs, a subnormal one, large ones and those at the edges of where a code's result is its
  // exponent's shift of another's (2^-120 up to below 2^119); the BF16 reference's results as F32, as BF16 (already
  // BF16 values: stored as they are) and as F16 (rounded once more).
  const e4m3Scales = [0.0123, -0.0123, 3e-39, 255.9, 256, 1e30, 2 ** -120, -(2 ** -120), 1.5 * 2 ** -121, 2 ** 119 * (1 - 2 ** -24), 2 ** 119, 2 ** 125]
  test.each(e4m3Scales.flatMap((scale) => [[scale, 'F32'] as const, [scale, 'BF16'] as const, [scale, 'F16'] as const]))(
    'every F8_E4M3 code times %d, as %s (runs with a zero, subnormal or NaN code take the element-at-a-time path)',
    (given, to) => {
      const codes = Uint8Array.from({ length: 512 }, (_, i) => (i < 256 ? i : (i * 37) & 0xff))
      // Normal codes of both signs, also in runs of 16 free of NaN and subnormals.
      codes.set(
        Uint8Array.from({ length: 256 }, (_, i) => (0x08 + (i % 0x70)) | (i & 0x80)),
        256,
      )
      const scale = Math.fround(given)
      const out = run(
        codes,
        { rowBytes: 512, wordStride: 1, bits: 8, order: 'lsb-first' },
        { ...base, scales: Float32Array.of(scale), groupSize: 2 ** 30, value: 'F8_E4M3', ref: 'BF16' },
        1,
        512,
        0,
        to,
      )
      const expected = [...codes].map((c) => {
        const bits = decodeToF32Bits('F8_E4M3', c)
        if (Number.isNaN(f32FromBits(bits))) return 'NaN'
        const result = rounded('BF16', value(f32FromBits(bits) * scale))
        return to === 'F16' ? rounded('F16', result) : result
      })
      expect([...out].map(anyNaN)).toEqual(expected)
    },
  )

  test.each(['F32', 'F16', 'BF16'] as const)('a symmetric table (E2M1) in groups of 16, BF16 reference (NVFP4), as %s: half the results negated', (to) => {
    const table = Float32Array.from([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6])
    const random = prng(14)
    // Scales of both signs, F16 subnormal and overflowing products, a zero, a NaN.
    const scales = Float32Array.from([0.0123, -0.0456, 1e-7, 20000, 0, Number.NaN, 3e-39, ...Array.from({ length: 9 }, () => (random() - 0.5) * 0.01)])
    const cols = 16 * scales.length
    const codes = Array.from({ length: cols }, (_, i) => (i < 16 ? i : Math.floor(random() * 16)))
    const out = run(
      pack(codes, 4),
      { rowBytes: cols / 2, wordStride: 1, bits: 4, order: 'lsb-first' },
      { ...base, scales, groupSize: 16, value: 'table', table, ref: 'BF16' },
      1,
      cols,
      0,
      to,
    )
    const expected = codes.map((q, i) => {
      const result = rounded('BF16', value(table[q] * scales[i >> 4]))
      return Number.isNaN(f32FromBits(result)) ? 'NaN' : to === 'F16' ? rounded('F16', result) : result
    })
    expect([...out].map(anyNaN)).toEqual(expected)
  })

  test('a 16-entry table (E2M1 doubled, MXFP4) times powers of two up to 2^127 and down to 2^-128: exact, infinities, no NaN', () => {
    const table = Float32Array.from([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6], (v) => v * 2)
    const exponents = [0, 1, 2, 127, 254, 255]
    const codes = Array.from({ length: exponents.length * 32 }, (_, i) => i % 16)
    const out = run(
      pack(codes, 4),
      { rowBytes: 16, wordStride: 1, bits: 4, order: 'lsb-first' },
      { ...base, scales: Float32Array.from(exponents, (e) => 2 ** (e - 128)), rowStride: 1, groupSize: 32, value: 'table', table, ref: 'BF16' },
      exponents.length,
      32,
    )
    const expected = codes.map((code, i) => {
      const exact = (table[code] / 2) * 2 ** (exponents[Math.floor(i / 32)] - 127)
      return rounded('BF16', Math.abs(exact) > 3.4e38 ? f32Bits(exact > 0 ? Infinity : -Infinity) : value(exact))
    })
    expect([...out]).toEqual(expected)
  })
})
