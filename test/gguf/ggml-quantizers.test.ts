// The quantization kernels (assembly/ggml-quant.ts through src/gguf/ggml-quantizers.ts) against ggml's own C code:
// ggml_quantize_chunk of node-llama-cpp's libggml-base.so with no importance matrix (test/ggml.ts), block for
// block on rows of every kind that steers its searches (normal weights, outliers, all-zero rows, subnormals,
// constant rows, mixed signs, ties, huge values) and every row length class. Q8_0 also against gguf-py's bytes
// (test/fixtures/gguf/q8_0, made by scripts/make-q8-vectors.py) and q8_0-reference.ts, which the GGUF tests use.
import { readFileSync } from 'node:fs'
import { beforeAll, describe, expect, test } from 'vitest'
import { reserveMemory } from '../../src/core/wasm.ts'
import { ggmlQuantizers, type QuantizedType } from '../../src/gguf/ggml-quantizers.ts'
import { GGML_TYPES } from '../../src/gguf/ggml-types.ts'
import { GGML_RUNTIME } from '../../src/gguf/kernels.ts'
import { SafetensorsError } from '../../src/node.ts'
import { Staging } from '../../src/pool/staging.ts'
import { type Ggml, ggmlUnsupported, loadGgml } from '../ggml.ts'
import { referenceQ8_0 } from '../q8_0-reference.ts'
import { prng } from '../random.ts'

const { types: QUANTIZED_TYPES, ggmlQuantModule, quantize, quantizedByteLength, quantizeInWasm, quantizeOnPool } = ggmlQuantizers(GGML_RUNTIME)
const QUICK = process.env.TEST_QUICK === '1'
const unsupported = ggmlUnsupported()
if (unsupported) console.log(`ggml-quantize: ${unsupported}; the kernels are checked against gguf-py's Q8_0 and the API only`)

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ')

/** Compares block by block and names the first block that differs, with its values. */
function expectSameBlocks(type: QuantizedType, actual: Uint8Array, expected: Uint8Array, values: Float32Array, what: string): void {
  const { block, bytes } = GGML_TYPES[type]
  expect(actual.length, `${what}: byte length`).toBe(expected.length)
  for (let b = 0; b < expected.length / bytes; b++) {
    const got = actual.subarray(b * bytes, (b + 1) * bytes)
    const want = expected.subarray(b * bytes, (b + 1) * bytes)
    if (got.some((byte, i) => byte !== want[i])) {
      expect.fail(
        `${type}, ${what}, block ${b} of values [${values.subarray(b * block, (b + 1) * block).join(', ')}]:\n  got      ${hex(got)}\n  expected ${hex(want)}`,
      )
    }
  }
}

/**
 * The kernel's blocks of `values` (rows of `perRow`), quantized in place at `offset` bytes past the shared
 * instance's heap base, and the error it reported: the blocks are written whatever the scales (ggml's bytes).
 */
function kernelBlocks(type: QuantizedType, values: Float32Array, perRow: number, offset = 0): { blocks: Uint8Array; error?: unknown } {
  const core = ggmlQuantModule.shared()
  const at = core.heapBase + offset
  reserveMemory(core, at + values.byteLength)
  new Uint8Array(core.memory.buffer, at, values.byteLength).set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength))
  const rows = values.length / perRow
  let error: unknown
  try {
    quantizeInWasm(core, type, at, at, rows, perRow, { name: 'values', first: 0 })
  } catch (e) {
    error = e
  }
  return { blocks: new Uint8Array(core.memory.buffer, at, quantizedByteLength(type, rows, perRow)).slice(), error }
}

const F32 = new Float32Array(1)
const F32_BITS = new Uint32Array(F32.buffer)
const fromBits = (bits: number) => {
  F32_BITS[0] = bits
  return F32[0]
}

/** Rows of values of one kind: `value(random, row, column)` for each, the PRNG seeded by the kind's index. */
interface Kind {
  name: string
  value(next: () => number, row: number, column: number): number
  /** Values so large that some block scales overflow F16: the kernel writes ggml's bytes and reports it. */
  large?: boolean
}

const gaussian = (next: () => number) => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next())

// BF16's and F16's precision: values converted from them hit ties (x * id exactly k + 0.5) often.
const MANTISSA_MASKS = [0xffffffff, 0xffff0000, 0xffffe000]

const KINDS: Kind[] = [
  { name: 'normal weights', value: (next) => gaussian(next) * 0.02 },
  { name: 'outliers', value: (next) => gaussian(next) * (next() < 0.01 ? 8 : 0.02) },
  { name: 'all-zero rows, some -0', value: (next) => (next() < 0.1 ? -0 : 0) },
  { name: 'tiny values (subnormal)', value: (next) => fromBits((next() < 0.5 ? 0x80000000 : 0) | Math.floor(next() * 0x7fffff)) },
  { name: 'tiny values (below GROUP_MAX_EPS)', value: (next) => gaussian(next) * 1e-17 },
  { name: 'constant rows', value: (_, row) => (row % 3 === 0 ? 0.25 : row % 3 === 1 ? -3.75 : (row - 50) * 1e-3) },
  { name: 'mixed signs', value: (next, _, column) => (column % 2 ? 1 : -1) * next() * 0.1 },
  { name: 'one sign a row', value: (next, row) => (row % 2 ? 1 : -1) * next() },
  { name: 'small integers and halves (ties)', value: (next) => Math.round(gaussian(next) * 8) / 2 },
  { name: 'sparse', value: (next) => (next() < 0.8 ? 0 : gaussian(next)) },
  {
    name: 'any exponent, BF16 and F16 precision',
    large: true,
    value: (next) => {
      const mask = MANTISSA_MASKS[Math.floor(next() * 3)]
      return fromBits(((next() < 0.5 ? 0x80000000 : 0) | (Math.floor(next() * 254) << 23) | (Math.floor(next() * 0x800000) & mask)) >>> 0)
    },
  },
  { name: 'huge values (scales beyond F16)', large: true, value: (next) => gaussian(next) * (next() < 0.5 ? 1e5 : 3e37) },
  {
    // Blocks of values of one size (as weights are) at any scale, subnormal to near F32's largest: each scale's
    // F16 (or its underflow to zero) and the rounding at it.
    name: 'one exponent a 256 values, spread under it, any exponent, BF16 and F16 precision, some zeros',
    large: true,
    value: oneExponentPerGroup(),
  },
]

/** Kind.value drawing, at the start of each 256 values of a row, an exponent, a spread below it and a precision. */
function oneExponentPerGroup(): Kind['value'] {
  let exponent = 0
  let spread = 0
  let mask = 0
  return (next, _, column) => {
    if (column % 256 === 0) {
      exponent = Math.floor(next() * 254)
      spread = Math.floor(next() * 4)
      mask = MANTISSA_MASKS[Math.floor(next() * 3)]
    }
    const sign = next() < 0.5 ? 0x80000000 : 0
    if (next() < 1 / 64) return fromBits(sign)
    // Spread 0: any exponent for each value.
    const e = spread === 0 ? 1 + Math.floor(next() * 253) : Math.max(0, exponent - Math.floor(next() * spread * 8))
    return fromBits((sign | (e << 23) | (Math.floor(next() * 0x800000) & mask)) >>> 0)
  }
}

/** Rows of `kind`, `rows` of `perRow`, from a seed of their own. */
function rowsOf(kind: Kind, rows: number, perRow: number, seed: number): Float32Array {
  const next = prng(seed)
  const values = new Float32Array(rows * perRow)
  for (let row = 0; row < rows; row++) for (let column = 0; column < perRow; column++) values[row * perRow + column] = kind.value(next, row, column)
  return values
}

const K_LENGTHS = [256, 512, 4096, 11008]
// The 32-value types also take rows that are not whole blocks of 256.
const SHORT_LENGTHS = [32, 96, 1056, 2880]
/** Values per kind and row length: thousands of rows a type in the full run. */
const VALUES_PER_CASE = QUICK ? 1 << 13 : 1 << 17

describe.skipIf(unsupported)('byte-identical to ggml_quantize_chunk with no importance matrix', () => {
  let ggml: Ggml
  beforeAll(() => {
    ggml = loadGgml()
  }, 300_000)

  describe.each(QUANTIZED_TYPES)('%s', (type) => {
    const lengths = GGML_TYPES[type].block === 32 ? [...K_LENGTHS, ...SHORT_LENGTHS] : K_LENGTHS
    test.each(KINDS.map((kind, k) => ({ kind, k })))('$kind.name', ({ kind, k }) => {
      for (const [l, perRow] of lengths.entries()) {
        const rows = Math.max(2, Math.floor(VALUES_PER_CASE / perRow))
        const values = rowsOf(kind, rows, perRow, 1000 * k + l)
        const { blocks, error } = kernelBlocks(type, values, perRow)
        expectSameBlocks(type, blocks, ggml.quantize(type, values, rows, perRow), values, `${rows} rows of ${perRow}`)
        if (!kind.large) expect(error).toBeUndefined()
      }
    })
  })
})

describe('refusals', () => {
  test.each(QUANTIZED_TYPES)('%s: NaN and infinities, naming the element; blocks before written, the rest untouched', (type) => {
    const { block, bytes } = GGML_TYPES[type]
    const values = rowsOf(KINDS[0], 8, block, 7)
    // In place, at an address that is not a multiple of 4.
    const offset = 2
    for (const [index, value] of [
      [3 * block + 5, Number.NaN],
      [block - 1, Number.POSITIVE_INFINITY],
      [7 * block, Number.NEGATIVE_INFINITY],
    ] as const) {
      const bad = values.slice()
      bad[index] = value
      const { blocks, error } = kernelBlocks(type, bad, block, offset)
      expect(error).toBeInstanceOf(SafetensorsError)
      expect(error).toMatchObject({
        code: 'UnsupportedConversion',
        message: `cannot quantize values to ${type}: element ${index} is ${value}, which ${type} cannot hold`,
      })
      const first = Math.floor(index / block)
      expect(hex(blocks.subarray(0, first * bytes))).toBe(hex(quantize(type, values.subarray(0, first * block), block)))
      // The untouched input starts at its block's F32 bytes.
      const untouched = new Uint8Array(bad.buffer, first * block * 4)
      const core = ggmlQuantModule.shared()
      expect(hex(new Uint8Array(core.memory.buffer, core.heapBase + offset + first * block * 4, untouched.length))).toBe(hex(untouched))
    }
  })

  test("the error names the caller's tensor and counts from its first value", () => {
    const values = rowsOf(KINDS[0], 64, 256, 11)
    values[9000] = Number.NEGATIVE_INFINITY
    expect(() => quantize('Q4_K', values, 256, undefined, { name: 'model.layers.0.mlp.up_proj.weight', first: 512 })).toThrow(
      'cannot quantize model.layers.0.mlp.up_proj.weight to Q4_K: element 9512 is -Infinity, which Q4_K cannot hold',
    )
  })

  test.each(QUANTIZED_TYPES)('%s: values whose block scale overflows F16, as llama.cpp refuses them', (type) => {
    const { block } = GGML_TYPES[type]
    const values = rowsOf(KINDS[0], 4, block, 5)
    values[2 * block + 1] = 1e10
    expect(() => quantize(type, values, block, undefined, { name: 'w', first: 0 })).toThrow(
      new SafetensorsError(
        'UnsupportedConversion',
        `cannot quantize w to ${type}: elements ${2 * block} to ${3 * block - 1} are too large for ${type}'s F16 scales (llama.cpp's quantizer refuses them too)`,
      ),
    )
  })
})

describe('Q8_0 against gguf-py', () => {
  const FIXTURES = new URL('../fixtures/gguf/q8_0/', import.meta.url)
  const read = (name: string) => new Uint8Array(readFileSync(new URL(name, FIXTURES)))
  const GOLDEN_VALUES = new Float32Array(read('values.f32').buffer)
  const GOLDEN_Q8_0 = read('q8_0.bin')
  const CASES: Array<[string, number]> = JSON.parse(readFileSync(new URL('cases.json', FIXTURES), 'utf8'))

  test('the reference and the kernel give gguf-py bytes on every golden block (in place, at an odd address)', () => {
    expect(CASES.reduce((n, [, count]) => n + count, 0)).toBe(GOLDEN_VALUES.length / 32)
    expectSameBlocks('Q8_0', referenceQ8_0(GOLDEN_VALUES), GOLDEN_Q8_0, GOLDEN_VALUES, 'the reference, golden vectors')
    expectSameBlocks('Q8_0', kernelBlocks('Q8_0', GOLDEN_VALUES, 32, 3).blocks, GOLDEN_Q8_0, GOLDEN_VALUES, 'golden vectors')
  })

  test('the kernel gives the reference bytes on 65,536 blocks of any exponent', () => {
    const values = rowsOf(KINDS[10], 2048, 1024, 22)
    expectSameBlocks('Q8_0', kernelBlocks('Q8_0', values, 1024).blocks, referenceQ8_0(values), values, 'random blocks')
  })
})

describe('the API', () => {
  test('byte lengths: whole rows of whole blocks', () => {
    expect(quantizedByteLength('Q4_K', 3, 512)).toBe(3 * 2 * 144)
    expect(quantizedByteLength('Q5_0', 2, 96)).toBe(2 * 3 * 22)
    expect(() => quantizedByteLength('Q4_K', 1, 96)).toThrow(new RangeError('Q4_K quantizes rows of whole blocks of 256 values, got 1 rows of 96 values'))
    expect(() => quantizedByteLength('Q4_0', 1, 0)).toThrow(RangeError)
  })

  test('an empty input gives an empty output', () => {
    expect(quantize('Q6_K', new Float32Array(0), 256)).toEqual(new Uint8Array(0))
  })

  test('out: the result is written there, as a view of its first bytes; in place over the values too', () => {
    const values = rowsOf(KINDS[0], 40, 4096, 3)
    const expected = quantize('Q4_K', values, 4096)
    const out = new Uint8Array(expected.length + 32).fill(0xee)
    const result = quantize('Q4_K', values, 4096, out)
    expect(result.buffer).toBe(out.buffer)
    expect(hex(result)).toBe(hex(expected))
    expect(out.subarray(expected.length)).toEqual(new Uint8Array(32).fill(0xee))
    const copy = values.slice()
    const inPlace = quantize('Q4_K', copy, 4096, new Uint8Array(copy.buffer))
    expect(hex(inPlace)).toBe(hex(expected))
  })

  test('misuse: rows that are not whole blocks or whole rows, a short out, the wrong types', () => {
    expect(() => quantize('Q4_K', new Float32Array(96), 96)).toThrow(RangeError)
    expect(() => quantize('Q4_0', new Float32Array(100), 32)).toThrow(new RangeError('100 values are not whole rows of 32'))
    expect(() => quantize('Q8_0', new Float32Array(64), 32, new Uint8Array(67))).toThrow(
      new RangeError('out must hold 68 bytes for 2 rows of 32 values, got 67'),
    )
    expect(() => quantize('Q8_0', new Float64Array(32) as unknown as Float32Array, 32)).toThrow(TypeError)
    expect(() => quantize('Q8_0', new Float32Array(32), 32, new Uint16Array(17) as unknown as Uint8Array)).toThrow(TypeError)
    expect(() => quantize('Q8_1' as QuantizedType, new Float32Array(32), 32)).toThrow(TypeError)
  })
})

describe('on the pool', () => {
  // Rows of 4096 values past the pool's threshold, cut in calls of whole rows; values of every scale.
  const PER_ROW = 4096
  const random = prng(41)
  const values = Float32Array.from({ length: GGML_RUNTIME.poolMinBytes / 4 + 3 * PER_ROW }, () => (random() - 0.5) * 2 ** Math.floor(random() * 24 - 12))

  test.each(QUANTIZED_TYPES)('%s: the blocks quantize() writes on the calling thread', async (type) => {
    const staging = new Staging()
    const pooled = await quantizeOnPool(type, values, PER_ROW, { name: 'w', first: 0 }, 2, staging)
    // The workers wrote the staging buffer (shared memory); the result is a copy the caller owns.
    const area = staging.bytes(values.byteLength + pooled.length)
    expect(area.buffer).toBeInstanceOf(SharedArrayBuffer)
    expect(Buffer.compare(area.subarray(values.byteLength), pooled)).toBe(0)
    expect(pooled.buffer).toBeInstanceOf(ArrayBuffer)
    const here = quantize(type, values, PER_ROW)
    expect(pooled.length).toBe(here.length)
    expect(Buffer.compare(pooled, here)).toBe(0)
  })

  test('where the pool does not run (workerd has no workers), the calling thread quantizes, with nothing staged', async () => {
    const reads = await GGML_RUNTIME.loadPool()
    const noPool = ggmlQuantizers({ ...GGML_RUNTIME, loadPool: async () => reads && { ...reads, runsOnPool: async () => false } })
    const staging = new Staging()
    const here = await noPool.quantizeOnPool('Q8_0', values, PER_ROW, { name: 'w', first: 0 }, 2, staging)
    expect(staging.bytes(0).buffer.byteLength).toBe(0)
    expect(Buffer.compare(here, quantize('Q8_0', values, PER_ROW))).toBe(0)
  })

  test('a value no type can hold: the error quantize() gives, naming its element', async () => {
    const bad = values.slice()
    bad[3 * PER_ROW + 5] = Number.NaN
    const error = await quantizeOnPool('Q4_K', bad, PER_ROW, { name: 'w', first: 10 }, 2, new Staging()).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SafetensorsError)
    expect((error as SafetensorsError).code).toBe('UnsupportedConversion')
    expect((error as SafetensorsError).message).toContain(`element ${10 + 3 * PER_ROW + 5} is NaN`)
  })
})
