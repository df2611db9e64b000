// src/gguf/format.ts: the GGUF v3 header the converter writes, held byte for byte to the tests' own GGUF writer
// (test/gguf-bytes.ts, written from ggml's docs/gguf.md and gguf-py's GGUFWriter) for random metadata of every
// type the converter writes and random tensors of each of its types; the sizes from ggml's block sizes (ggml.c's
// type_traits: F32 4 bytes, F16 and BF16 2, Q8_0 34 bytes per 32 values, Q4_K 144 per 256, ...) and the 32-byte
// alignment of the format's default.
import { describe, expect, test } from 'vitest'
import { ALIGNMENT, encodeHeader, type KeyValue, type TensorEntry } from '../../src/gguf/format.ts'
import { ggufBytes, type Value } from '../gguf-bytes.ts'
import { prng } from '../random.ts'

/** Values and bytes of a block of each type the converter writes, from ggml.c's type_traits. */
const BYTES_PER_BLOCK = {
  F32: [1, 4],
  F16: [1, 2],
  BF16: [1, 2],
  Q4_0: [32, 18],
  Q4_1: [32, 20],
  Q5_0: [32, 22],
  Q5_1: [32, 24],
  Q8_0: [32, 34],
  Q2_K: [256, 84],
  Q3_K: [256, 110],
  Q4_K: [256, 144],
  Q5_K: [256, 176],
  Q6_K: [256, 210],
  TQ1_0: [256, 54],
  TQ2_0: [256, 66],
  IQ4_NL: [32, 18],
  IQ4_XS: [256, 136],
  MXFP4: [32, 17],
} as const satisfies Partial<Record<TensorEntry['type'], readonly [values: number, bytes: number]>>
const TYPES = Object.keys(BYTES_PER_BLOCK) as Array<keyof typeof BYTES_PER_BLOCK>
const KEY_CHARS = ['a', 'z', '.', '_', '0', 'é', '中', '😀']
const f32 = (x: number) => Math.fround(x)

function randomText(next: () => number, length = 1 + Math.floor(next() * 12)): string {
  return Array.from({ length }, () => KEY_CHARS[Math.floor(next() * KEY_CHARS.length)]).join('')
}

/** A metadata entry of a random type, as encodeHeader takes it and as the tests' writer writes it. */
function randomEntry(next: () => number, i: number): { mine: KeyValue; reference: [string, Value] } {
  const key = `k${i}.${randomText(next)}`
  const int = () => Math.floor(next() * 2 ** 31) * (next() < 0.5 ? -1 : 1)
  const count = Math.floor(next() * 5)
  switch (Math.floor(next() * 8)) {
    case 0: {
      const v = Math.floor(next() * 2 ** 32)
      return { mine: [key, 'u32', v], reference: [key, { type: 'UINT32', value: v }] }
    }
    case 1: {
      const v = int()
      return { mine: [key, 'i32', v], reference: [key, { type: 'INT32', value: v }] }
    }
    case 2: {
      const v = f32((next() - 0.5) * 1e6)
      return { mine: [key, 'f32', v], reference: [key, { type: 'FLOAT32', value: v }] }
    }
    case 3: {
      const v = next() < 0.5
      return { mine: [key, 'bool', v], reference: [key, { type: 'BOOL', value: v }] }
    }
    case 4: {
      const v = randomText(next, Math.floor(next() * 20))
      return { mine: [key, 'string', v], reference: [key, { type: 'STRING', value: v }] }
    }
    case 5: {
      const v = Array.from({ length: count }, () => randomText(next))
      return { mine: [key, 'string[]', v], reference: [key, { type: 'ARRAY', of: 'STRING', values: v }] }
    }
    case 6: {
      const v = Int32Array.from({ length: count }, int)
      return { mine: [key, 'i32[]', v], reference: [key, { type: 'ARRAY', of: 'INT32', values: [...v] }] }
    }
    default: {
      const v = Float32Array.from({ length: count }, () => (next() - 0.5) * 100)
      return { mine: [key, 'f32[]', v], reference: [key, { type: 'ARRAY', of: 'FLOAT32', values: [...v] }] }
    }
  }
}

function randomTensor(next: () => number, i: number): TensorEntry {
  const type = TYPES[Math.floor(next() * TYPES.length)]
  const rank = 1 + Math.floor(next() * 3)
  // A row is whole blocks: ggml's first dim is a row's length.
  const dims = Array.from({ length: rank }, (_, d) => (d === 0 ? BYTES_PER_BLOCK[type][0] * (1 + Math.floor(next() * 9)) : 1 + Math.floor(next() * 7)))
  return { name: `blk.${i}.${randomText(next)}.weight`, dims, type }
}

const byteSize = ({ dims, type }: TensorEntry) => {
  const [values, bytes] = BYTES_PER_BLOCK[type as keyof typeof BYTES_PER_BLOCK]
  return (dims.reduce((a, b) => a * b, 1) / values) * bytes
}

describe('encodeHeader against the tests` GGUF writer', () => {
  test.each([1, 2, 3, 4, 5, 6])('seed %i: 30 keys, 25 tensors: the same head, the sizes of ggml`s blocks, the file size', (seed) => {
    const next = prng(seed)
    const entries = Array.from({ length: 30 }, (_, i) => randomEntry(next, i))
    const tensors = Array.from({ length: 25 }, (_, i) => randomTensor(next, i))
    const { head, sizes, fileSize } = encodeHeader(
      entries.map((e) => e.mine),
      tensors,
    )
    const reference = ggufBytes({
      metadata: entries.map((e) => e.reference),
      tensors: tensors.map((t) => ({ name: t.name, ne: [...t.dims], type: t.type, data: new Uint8Array(byteSize(t)) })),
    })
    expect(head.length % ALIGNMENT).toBe(0)
    expect(Buffer.compare(head, reference.subarray(0, head.length))).toBe(0)
    expect(sizes).toEqual(tensors.map(byteSize))
    // The reference ends with the last tensor's bytes; the file pads it to the alignment too.
    expect(fileSize).toBe(Math.ceil(reference.length / ALIGNMENT) * ALIGNMENT)
  })

  test('a vocabulary of 50,000 tokens, 300,000 i32 and 1,000,000 f32 values, 100,000 CJK characters: the same head, grown within each array', () => {
    const next = prng(7)
    const tokens = Array.from({ length: 50_000 }, () => randomText(next))
    const types = Int32Array.from({ length: 300_000 }, (_, i) => (i % 6) + 1)
    const scores = Float32Array.from({ length: 1_000_000 }, () => (next() - 0.5) * 1e4)
    const template = '中'.repeat(100_000)
    const { head } = encodeHeader(
      [
        ['tokenizer.ggml.tokens', 'string[]', tokens],
        ['tokenizer.ggml.token_type', 'i32[]', types],
        ['tokenizer.ggml.scores', 'f32[]', scores],
        ['tokenizer.chat_template', 'string', template],
      ],
      [],
    )
    const reference = ggufBytes({
      metadata: [
        ['tokenizer.ggml.tokens', { type: 'ARRAY', of: 'STRING', values: tokens }],
        ['tokenizer.ggml.token_type', { type: 'ARRAY', of: 'INT32', values: [...types] }],
        ['tokenizer.ggml.scores', { type: 'ARRAY', of: 'FLOAT32', values: [...scores] }],
        ['tokenizer.chat_template', { type: 'STRING', value: template }],
      ],
      tensors: [],
    })
    expect(head.length).toBeGreaterThan(6 * 2 ** 20)
    expect(Buffer.compare(head.subarray(0, reference.length), reference)).toBe(0)
  })

  test('no keys, no tensors: magic, version 3, two zero counts, padded to 32 bytes', () => {
    const { head, sizes, fileSize } = encodeHeader([], [])
    expect([...head]).toEqual([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, ...new Array(16).fill(0), ...new Array(8).fill(0)])
    expect([sizes, fileSize]).toEqual([[], 32])
  })
})
