// src/format/layout.ts: the writer's plan of a file, held to the reference writer written again in
// test/writer-reference.ts (Rust safetensors and serde_json's layout, from the format's description): the same
// first bytes, order and offsets for random tensors with awkward names, the code point order of names, each
// tensor's byte length and the errors a reader would raise, before anything is written.
import { describe, expect, test } from 'vitest'
import type { DType } from '../../src/core/dtypes.ts'
import { compareCodePoints, planLayout, type TensorDeclaration, tensorByteLength } from '../../src/format/layout.ts'
import { FORMAT_DTYPES } from '../dtype-table.ts'
import { prng } from '../random.ts'
import { errorOf } from '../read-helpers.ts'
import { byteSize, compareUtf8, firstDifference, referenceFile, referenceHeaderText, referenceOrder } from '../writer-reference.ts'

// Names from an alphabet where UTF-16 order and UTF-8 (code point) order differ: astral characters (surrogate
// pairs) sort below U+E000..U+FFFF in UTF-16 but above them in UTF-8; and what JSON must escape.
const ALPHABET = ['a', 'b', 'Z', '.', '_', '0', 'é', '中', '\uE000', '\uFFFD', '\uFFFF', '😀', '𝔸', '"', '\\', '\n', '\u0001', '/', '\u007f']

function randomName(next: () => number): string {
  let name = ''
  const length = 1 + Math.floor(next() * 6)
  for (let i = 0; i < length; i++) name += ALPHABET[Math.floor(next() * ALPHABET.length)]
  return name
}

/** `count` tensors of random dtypes, shapes (zeros and scalars among them) and distinct names. */
function randomTensors(seed: number, count: number): TensorDeclaration[] {
  const next = prng(seed)
  const names = new Set<string>()
  while (names.size < count) names.add(randomName(next))
  return [...names].map((name) => {
    const [dtype, bits] = FORMAT_DTYPES[Math.floor(next() * FORMAT_DTYPES.length)]
    const rank = Math.floor(next() * 4)
    const shape = Array.from({ length: rank }, () => Math.floor(next() * 5))
    // Packed sub-byte floats need whole bytes: an even count for F4, a multiple of 4 for F6.
    if (bits < 8) shape.push(bits === 4 ? 2 : 4)
    return { name, dtype: dtype as DType, shape }
  })
}

const fill = (t: TensorDeclaration) => ({ ...t, shape: [...t.shape], bytes: new Uint8Array(byteSize(t.dtype, t.shape)) })

describe('planLayout against the reference writer', () => {
  test.each([1, 2, 3, 4, 5, 6, 7, 8])('seed %i: 40 random tensors, one metadata key: the same head, order, offsets and size', (seed) => {
    const tensors = randomTensors(seed, 40)
    const metadata = { [randomName(prng(seed + 100))]: randomName(prng(seed + 200)) }
    const layout = planLayout(tensors, metadata)
    const reference = referenceFile(tensors.map(fill), Object.entries(metadata))
    expect(layout.fileSize).toBe(reference.length)
    expect(firstDifference(layout.head, reference.subarray(0, layout.dataStart))).toBe(-1)
    expect(layout.entries.map((e) => e.name)).toEqual(referenceOrder(tensors).map((t) => t.name))
    let offset = 0
    for (const entry of layout.entries) {
      expect(entry.dataOffsets).toEqual([offset, offset + byteSize(entry.dtype, entry.shape)])
      offset = entry.dataOffsets[1]
    }
  })

  test('the head: the length prefix, then the JSON padded with spaces to a multiple of 8', async () => {
    const tensors = randomTensors(11, 7)
    const { head, dataStart } = planLayout(tensors, null)
    const text = referenceHeaderText(tensors.map(fill))
    const n = Number(new DataView(head.buffer).getBigUint64(0, true))
    expect(n % 8).toBe(0)
    expect(dataStart).toBe(8 + n)
    const json = new TextEncoder().encode(text)
    expect(n).toBe(Math.ceil(json.length / 8) * 8)
    expect(firstDifference(head.subarray(8, 8 + json.length), json)).toBe(-1)
    expect(head.subarray(8 + json.length).every((byte) => byte === 0x20)).toBe(true)
  })

  test('every tensor starts aligned to its element size, the data section being 8-aligned', async () => {
    const layout = planLayout(randomTensors(12, 60))
    expect(layout.dataStart % 8).toBe(0)
    for (const { dtype, dataOffsets } of layout.entries) {
      const bytes = Math.max(1, FORMAT_DTYPES.find(([d]) => d === dtype)![1] / 8)
      expect(dataOffsets[0] % bytes, dtype).toBe(0)
    }
  })

  test('keepOrder: the order given, packed the same way', async () => {
    const tensors = randomTensors(13, 20)
    const layout = planLayout(tensors, undefined, true)
    expect(layout.entries.map((e) => e.name)).toEqual(tensors.map((t) => t.name))
    expect(layout.fileSize).toBe(layout.dataStart + tensors.reduce((sum, t) => sum + byteSize(t.dtype, t.shape), 0))
  })

  test('no tensors, no metadata: the header {} padded to 8', async () => {
    const layout = planLayout([])
    expect([...layout.head]).toEqual([8, 0, 0, 0, 0, 0, 0, 0, ...new TextEncoder().encode('{}      ')])
    expect(layout.fileSize).toBe(16)
  })
})

describe('compareCodePoints', () => {
  test('orders 20,000 random pairs as their UTF-8 bytes do', async () => {
    const next = prng(21)
    for (let i = 0; i < 20_000; i++) {
      const a = randomName(next)
      const b = next() < 0.2 ? a + randomName(next) : randomName(next)
      expect(Math.sign(compareCodePoints(a, b)), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).toBe(Math.sign(compareUtf8(a, b)))
    }
  })
})

describe('tensorByteLength', () => {
  test.each(FORMAT_DTYPES)('%s: the shape product times %i bits, in bytes', (dtype, bits) => {
    for (const shape of [[], [0], [8], [4, 6], [2, 0, 3], [16, 16, 4]]) {
      if ((shape.reduce((a, b) => a * b, 1) * bits) % 8 !== 0) continue
      expect(tensorByteLength({ name: 'w', dtype: dtype as DType, shape })).toBe(byteSize(dtype, shape))
    }
  })

  const codeOf = async (t: TensorDeclaration) => {
    const error = await errorOf(() => tensorByteLength(t))
    expect(error.message).toContain(JSON.stringify(t.name))
    return error.code
  }

  test('what a reader would refuse: sub-byte counts, overflow, bad shapes and dtypes, each naming the tensor', async () => {
    expect(await codeOf({ name: 'f4', dtype: 'F4', shape: [3] })).toBe('MisalignedSlice')
    expect(await codeOf({ name: 'f6', dtype: 'F6_E2M3', shape: [2, 3] })).toBe('MisalignedSlice')
    expect(await codeOf({ name: 'big', dtype: 'F64', shape: [2 ** 26, 2 ** 26] })).toBe('ValidationOverflow')
    expect(await codeOf({ name: 'neg', dtype: 'F32', shape: [-1] })).toBe('InvalidHeaderDeserialization')
    expect(await codeOf({ name: 'frac', dtype: 'F32', shape: [1.5] })).toBe('InvalidHeaderDeserialization')
    expect(await codeOf({ name: 'dtype', dtype: 'f32' as DType, shape: [1] })).toBe('InvalidHeaderDeserialization')
  })
})

describe('planLayout errors, before anything is planned', () => {
  const w = { name: 'w', dtype: 'F32' as const, shape: [2] }
  const codeOf = async (run: () => unknown) => {
    const error = await errorOf(run)
    return [error.code, error.message]
  }

  test('names: a duplicate, __metadata__, a lone surrogate', async () => {
    expect(await codeOf(() => planLayout([w, { ...w, dtype: 'U8' }]))).toEqual(['InvalidHeaderDeserialization', 'duplicate tensor name "w"'])
    expect((await codeOf(() => planLayout([{ ...w, name: '__metadata__' }])))?.[0]).toBe('InvalidHeaderDeserialization')
    expect((await codeOf(() => planLayout([{ ...w, name: 'a\uD800' }])))?.[0]).toBe('InvalidHeaderDeserialization')
  })

  test('metadata: not an object, a value that is not a string, a lone surrogate in a key', async () => {
    expect((await codeOf(() => planLayout([w], ['a'] as unknown as Record<string, string>)))?.[0]).toBe('InvalidHeaderDeserialization')
    expect(await codeOf(() => planLayout([w], { n: 1 } as unknown as Record<string, string>))).toEqual([
      'InvalidHeaderDeserialization',
      'metadata "n" must be a string, got number',
    ])
    expect((await codeOf(() => planLayout([w], { '\uDC00': 'x' })))?.[0]).toBe('InvalidHeaderDeserialization')
  })
})
