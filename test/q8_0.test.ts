// The Q8_0 kernel against gguf-py's bytes (test/fixtures/gguf/q8_0, made by scripts/make-q8-vectors.py) and
// against the second implementation in q8_0-reference.ts, in both wasm builds.
import { readFileSync } from 'node:fs'
import { beforeAll, describe, expect, test } from 'vitest'
import { quantizeQ8_0, quantizeQ8_0Into } from '../src/gguf/q8_0.ts'
import { SafetensorsError } from '../src/node.ts'
import { reserveMemory, selectBackend, sharedCore } from '../src/wasm.ts'
import { decodeToF32Bits, f32FromBits } from './float-reference.ts'
import { referenceQ8_0 } from './q8_0-reference.ts'
import { mulberry32 } from './random.ts'

const FIXTURES = new URL('./fixtures/gguf/q8_0/', import.meta.url)
const read = (name: string) => new Uint8Array(readFileSync(new URL(name, FIXTURES)))
const GOLDEN_VALUES = new Float32Array(read('values.f32').buffer)
const GOLDEN_Q8_0 = read('q8_0.bin')
const CASES: Array<[string, number]> = JSON.parse(readFileSync(new URL('cases.json', FIXTURES), 'utf8'))

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ')

/** Compares block by block and names the first block that differs, with its case and its values. */
function expectSameBlocks(actual: Uint8Array, expected: Uint8Array, values: Float32Array, caseOf: (block: number) => string): void {
  expect(actual.length, 'byte length').toBe(expected.length)
  for (let b = 0; b < expected.length / 34; b++) {
    const got = actual.subarray(b * 34, b * 34 + 34)
    const want = expected.subarray(b * 34, b * 34 + 34)
    if (got.some((byte, i) => byte !== want[i])) {
      expect.fail(`block ${b} (${caseOf(b)}) of values [${values.subarray(b * 32, b * 32 + 32).join(', ')}]:\n  got      ${hex(got)}\n  expected ${hex(want)}`)
    }
  }
}

function goldenCase(block: number): string {
  let first = 0
  for (const [name, count] of CASES) {
    if (block < first + count) return `"${name}", its block ${block - first}`
    first += count
  }
  return 'no case'
}

/** BF16's and F16's precision: values converted from them hit ties (x * id exactly k + 0.5) often. */
const MANTISSA_MASKS = [0xffffffff, 0xffff0000, 0xffffe000]

/**
 * Random finite F32 values, steered to what matters: per block one exponent with a spread (values of one
 * size, as in weights, down to subnormals) or any exponent, the precision of F32, BF16 or F16, now and then zeros.
 */
function randomBlocks(blocks: number, seed: number): Float32Array {
  const next = mulberry32(seed)
  const values = new Float32Array(blocks * 32)
  const bits = new Uint32Array(values.buffer)
  for (let b = 0; b < blocks; b++) {
    const exponent = next() % 254
    const spread = next() % 4
    const mask = MANTISSA_MASKS[next() % 3]
    for (let j = b * 32; j < b * 32 + 32; j++) {
      const e = spread === 0 ? 1 + (next() % 253) : Math.max(0, exponent - (next() % (spread * 8)))
      bits[j] = ((next() & 0x80000000) | (e << 23) | (next() & 0x7fffff & mask)) >>> 0
      if (next() % 64 === 0) bits[j] = next() & 0x80000000
    }
  }
  return values
}

test('the reference gives gguf-py bytes on every golden block', () => {
  expect(CASES.reduce((n, [, count]) => n + count, 0)).toBe(GOLDEN_VALUES.length / 32)
  expectSameBlocks(referenceQ8_0(GOLDEN_VALUES), GOLDEN_Q8_0, GOLDEN_VALUES, goldenCase)
})

describe.each(['simd', 'scalar'] as const)('%s build', (backend) => {
  beforeAll(() => {
    selectBackend(backend)
    return () => void selectBackend('simd')
  })

  test('runs in the build asked for', () => {
    expect(sharedCore().exports.simdBuild()).toBe(backend === 'simd' ? 1 : 0)
  })

  test('byte-identical to gguf-py on the golden vectors', () => {
    expectSameBlocks(quantizeQ8_0(GOLDEN_VALUES), GOLDEN_Q8_0, GOLDEN_VALUES, goldenCase)
  })

  test('byte-identical to the reference on 65,536 random blocks', () => {
    const values = randomBlocks(65536, 22)
    expectSameBlocks(quantizeQ8_0(values), referenceQ8_0(values), values, (b) => `random block ${b}`)
  })

  test.each(['F16', 'BF16'] as const)('from %s in wasm memory, in place: its F32 values quantized', (from) => {
    const next = mulberry32(from === 'F16' ? 16 : 17)
    const finite = (code: number) => (from === 'F16' ? (code & 0x7c00) !== 0x7c00 : (code & 0x7f80) !== 0x7f80)
    // 4,001 blocks: whole groups of blocks and a partial one.
    const codes = new Uint16Array(4001 * 32)
    for (let i = 0; i < codes.length; i++) {
      do codes[i] = next() & 0xffff
      while (!finite(codes[i]))
    }
    const values = Float32Array.from(codes, (code) => f32FromBits(decodeToF32Bits(from, code)))
    const core = sharedCore()
    reserveMemory(core, core.heapBase + codes.byteLength)
    new Uint16Array(core.memory.buffer, core.heapBase, codes.length).set(codes)
    quantizeQ8_0Into(core, core.heapBase, core.heapBase, codes.length, from)
    const result = new Uint8Array(core.memory.buffer, core.heapBase, (codes.length / 32) * 34)
    expectSameBlocks(result, referenceQ8_0(values), values, (b) => `${from} block ${b}`)
  })

  test.each([
    ['F16', 0x7c00, 'Infinity'],
    ['BF16', 0xffc1, 'NaN'],
  ] as const)('refuses a non-finite %s value past the first groups, naming it', (from, code, text) => {
    const codes = new Uint16Array(200 * 32).fill(0x3c00)
    codes[150 * 32 + 7] = code
    const core = sharedCore()
    reserveMemory(core, core.heapBase + codes.byteLength)
    new Uint16Array(core.memory.buffer, core.heapBase, codes.length).set(codes)
    expect(() => quantizeQ8_0Into(core, core.heapBase, core.heapBase, codes.length, from, 'lm_head.weight')).toThrow(
      `cannot quantize lm_head.weight to Q8_0: element ${150 * 32 + 7} is ${text}, which Q8_0 cannot hold`,
    )
  })

  test('F32 in place in wasm memory, at an odd address', () => {
    const values = randomBlocks(64, 5)
    const core = sharedCore()
    const at = core.heapBase + 3
    reserveMemory(core, at + values.byteLength)
    new Uint8Array(core.memory.buffer, at, values.byteLength).set(new Uint8Array(values.buffer))
    quantizeQ8_0Into(core, at, at, values.length, 'F32')
    expectSameBlocks(new Uint8Array(core.memory.buffer, at, 64 * 34).slice(), referenceQ8_0(values), values, (b) => `block ${b}`)
  })

  test.each([
    [37, Number.NaN, 'NaN'],
    [100_000, Number.POSITIVE_INFINITY, 'Infinity'],
    [31, Number.NEGATIVE_INFINITY, '-Infinity'],
  ])('refuses a non-finite value: element %i, %s', (index, value, text) => {
    const values = randomBlocks(4096, 3)
    values[index] = value
    const error = (() => {
      try {
        quantizeQ8_0(values)
      } catch (e) {
        return e
      }
    })()
    expect(error).toBeInstanceOf(SafetensorsError)
    expect(error).toMatchObject({
      code: 'UnsupportedConversion',
      message: `cannot quantize values to Q8_0: element ${index} is ${text}, which Q8_0 cannot hold`,
    })
  })

  test('a refused block and those after it are left as they were, those before written', () => {
    const values = randomBlocks(8, 9)
    values[3 * 32 + 5] = Number.NaN
    const core = sharedCore()
    reserveMemory(core, core.heapBase + values.byteLength)
    const memory = new Uint8Array(core.memory.buffer, core.heapBase, values.byteLength)
    memory.set(new Uint8Array(values.buffer))
    const before = memory.slice()
    expect(() => quantizeQ8_0Into(core, core.heapBase, core.heapBase, values.length, 'F32', 'model.layers.0.mlp.up_proj.weight', 64)).toThrow(
      'cannot quantize model.layers.0.mlp.up_proj.weight to Q8_0: element 165 is NaN, which Q8_0 cannot hold',
    )
    const expected = referenceQ8_0(values.subarray(0, 3 * 32))
    expect(hex(memory.subarray(0, 3 * 34))).toBe(hex(expected))
    expect(hex(memory.subarray(3 * 128))).toBe(hex(before.subarray(3 * 128)))
  })
})

describe('the API', () => {
  test('an empty input gives an empty output', () => {
    expect(quantizeQ8_0(new Float32Array(0))).toEqual(new Uint8Array(0))
  })

  test('out: the result is written there, as a view of its first bytes', () => {
    const values = GOLDEN_VALUES.subarray(0, 64)
    const out = new Uint8Array(100).fill(0xee)
    const result = quantizeQ8_0(values, out)
    expect(result.buffer).toBe(out.buffer)
    expect(result.byteOffset).toBe(0)
    expect(hex(result)).toBe(hex(GOLDEN_Q8_0.subarray(0, 68)))
    expect(out.subarray(68)).toEqual(new Uint8Array(32).fill(0xee))
  })

  test('a length that is not whole blocks is a RangeError', () => {
    expect(() => quantizeQ8_0(new Float32Array(33))).toThrow(new RangeError('Q8_0 quantizes whole blocks of 32 values, got 33 values'))
  })

  test('an out too short is a RangeError', () => {
    expect(() => quantizeQ8_0(new Float32Array(64), new Uint8Array(67))).toThrow(new RangeError('out must hold 68 bytes for 64 values, got 67'))
  })

  test('values that are not a Float32Array, or an out that is not a Uint8Array, are a TypeError', () => {
    expect(() => quantizeQ8_0(new Float64Array(32) as unknown as Float32Array)).toThrow(TypeError)
    expect(() => quantizeQ8_0([1, 2] as unknown as Float32Array)).toThrow(TypeError)
    expect(() => quantizeQ8_0(new Float32Array(32), new Uint16Array(17) as unknown as Uint8Array)).toThrow(TypeError)
  })

  test('a source dtype the kernel does not read is a TypeError', () => {
    expect(() => quantizeQ8_0Into(sharedCore(), 0, 0, 32, 'F64' as 'F32')).toThrow(new TypeError('Q8_0 quantizes F32, F16 or BF16, got F64'))
  })
})
