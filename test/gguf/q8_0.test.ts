// The Q8_0 kernel against gguf-py's bytes (test/fixtures/gguf/q8_0, made by scripts/make-q8-vectors.py) and
// against the second implementation in q8_0-reference.ts.
import { readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import { reserveMemory } from '../../src/core/wasm.ts'
import { q8Module, quantizeQ8_0 } from '../../src/gguf/q8_0.ts'
import { SafetensorsError } from '../../src/node.ts'
import { referenceQ8_0 } from '../q8_0-reference.ts'
import { mulberry32 } from '../random.ts'

const FIXTURES = new URL('../fixtures/gguf/q8_0/', import.meta.url)
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

/** Runs the kernel on `values` copied to `offset` bytes past the heap base of the module's shared instance, in place. */
function quantizeInWasm(values: Float32Array, offset: number): { result: number; memory: Uint8Array } {
  const core = q8Module.shared()
  const at = core.heapBase + offset
  reserveMemory(core, at + values.byteLength)
  const memory = new Uint8Array(core.memory.buffer, at, values.byteLength)
  memory.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength))
  return { result: core.exports.quantizeQ8_0(at, at, values.length / 32), memory }
}

describe('the kernel', () => {
  test('byte-identical to gguf-py on the golden vectors', () => {
    expectSameBlocks(quantizeQ8_0(GOLDEN_VALUES), GOLDEN_Q8_0, GOLDEN_VALUES, goldenCase)
  })

  test('byte-identical to the reference on 65,536 random blocks', () => {
    const values = randomBlocks(65536, 22)
    expectSameBlocks(quantizeQ8_0(values), referenceQ8_0(values), values, (b) => `random block ${b}`)
  })

  test('in place in wasm memory, at an odd address', () => {
    const values = randomBlocks(64, 5)
    const { result, memory } = quantizeInWasm(values, 3)
    expect(result).toBe(-1)
    expectSameBlocks(memory.slice(0, 64 * 34), referenceQ8_0(values), values, (b) => `block ${b}`)
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
    const { result, memory } = quantizeInWasm(values, 0)
    expect(result).toBe(3 * 32 + 5)
    expect(hex(memory.subarray(0, 3 * 34))).toBe(hex(referenceQ8_0(values.subarray(0, 3 * 32))))
    expect(hex(memory.subarray(3 * 128))).toBe(hex(new Uint8Array(values.buffer, 3 * 128)))
  })

  test("the error names the caller's tensor and counts from its first value", () => {
    const values = randomBlocks(2048, 11)
    values[40_000] = Number.NEGATIVE_INFINITY
    expect(() => quantizeQ8_0(values, undefined, { name: 'model.layers.0.mlp.up_proj.weight', first: 64 })).toThrow(
      'cannot quantize model.layers.0.mlp.up_proj.weight to Q8_0: element 40064 is -Infinity, which Q8_0 cannot hold',
    )
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
})
