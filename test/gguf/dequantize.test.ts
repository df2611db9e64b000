// ggml's tensor types read as floats (src/gguf/dequantize.ts, assembly/ggml.ts) against ggml itself: every type's F32
// bit for bit as libggml-base's dequantize_row_<type> gives it (test/ggml.ts) on random blocks, on blocks whose
// scales are subnormal, zero, negative, infinite and NaN, and on what ggml_quantize_chunk makes of random rows; F16
// and BF16 as that F32 rounded once by the independent encoder of test/float-reference.ts. The plain types ggml has no
// dequantizer for against the F32 nearest their value. Big-endian blocks against the little-endian ones swapped by
// this file's own reading of ggml-common.h's block layouts.
import { beforeAll, describe, expect, test } from 'vitest'
import * as contract from '../../assembly/boundary/ggml.ts?constants'
import { SafetensorsError } from '../../src/errors.ts'
import { dequantizeGgml, GgmlDequantizer } from '../../src/gguf/dequantize.ts'
import { GGML_TYPES, type GgmlType, ggmlByteLength } from '../../src/gguf/ggml-types.ts'
import { bigintToF32 } from '../float-reference.ts'
import { type Ggml, ggmlUnsupported, loadGgml } from '../ggml.ts'
import { firstF32Difference, firstRoundingDifference } from '../ggml-compare.ts'
import { mulberry32, prng } from '../random.ts'

const unsupported = ggmlUnsupported()
if (unsupported) console.log(`ggml-dequantize: ${unsupported}; the values of the block types are not judged`)

type Target = 'F32' | 'F16' | 'BF16'
const PLAIN = ['F32', 'F16', 'BF16', 'F64', 'I8', 'I16', 'I32', 'I64'] as const
type Plain = (typeof PLAIN)[number]

/** Where a block's scales are, and how each is stored: F16 unless said; IQ1_M's F16 is the top nibbles of four u16. */
type Scale = { at: number; kind: 'F16' | 'F32' | 'E8M0' | 'UE4M3' | 'IQ1_M' }

/**
 * This file's reading of ggml-common.h: each block type's scales (and mins), and the multi-byte fields a big-endian
 * block holds in the other order ([offset, bytes, how many in a row]); none where that order is not defined.
 */
const BLOCKS: Record<Exclude<GgmlType, Plain | 'Q8_1'>, { scales: Scale[]; swapped?: [number, number, number][] }> = {
  Q4_0: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 1]] },
  Q4_1: {
    scales: [
      { at: 0, kind: 'F16' },
      { at: 2, kind: 'F16' },
    ],
    swapped: [[0, 2, 2]],
  },
  Q5_0: { scales: [{ at: 0, kind: 'F16' }] },
  Q5_1: {
    scales: [
      { at: 0, kind: 'F16' },
      { at: 2, kind: 'F16' },
    ],
  },
  Q8_0: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 1]] },
  Q2_K: {
    scales: [
      { at: 80, kind: 'F16' },
      { at: 82, kind: 'F16' },
    ],
    swapped: [[80, 2, 2]],
  },
  Q3_K: { scales: [{ at: 108, kind: 'F16' }] },
  Q4_K: {
    scales: [
      { at: 0, kind: 'F16' },
      { at: 2, kind: 'F16' },
    ],
    swapped: [[0, 2, 2]],
  },
  Q5_K: {
    scales: [
      { at: 0, kind: 'F16' },
      { at: 2, kind: 'F16' },
    ],
    swapped: [[0, 2, 2]],
  },
  Q6_K: { scales: [{ at: 208, kind: 'F16' }], swapped: [[208, 2, 1]] },
  Q8_K: {
    scales: [{ at: 0, kind: 'F32' }],
    swapped: [
      [0, 4, 1],
      [260, 2, 16],
    ],
  },
  IQ2_XXS: { scales: [{ at: 0, kind: 'F16' }] },
  IQ2_XS: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 33]] },
  IQ3_XXS: { scales: [{ at: 0, kind: 'F16' }] },
  IQ1_S: {
    scales: [{ at: 0, kind: 'F16' }],
    swapped: [
      [0, 2, 1],
      [34, 2, 8],
    ],
  },
  IQ4_NL: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 1]] },
  IQ3_S: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 1]] },
  IQ2_S: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 1]] },
  IQ4_XS: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 2]] },
  IQ1_M: { scales: [{ at: 48, kind: 'IQ1_M' }] },
  TQ1_0: { scales: [{ at: 52, kind: 'F16' }], swapped: [[52, 2, 1]] },
  TQ2_0: { scales: [{ at: 64, kind: 'F16' }], swapped: [[64, 2, 1]] },
  MXFP4: { scales: [{ at: 0, kind: 'E8M0' }], swapped: [] },
  NVFP4: { scales: [0, 1, 2, 3].map((at) => ({ at, kind: 'UE4M3' as const })), swapped: [] },
  Q1_0: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 1]] },
  Q2_0: { scales: [{ at: 0, kind: 'F16' }], swapped: [[0, 2, 1]] },
}
type Block = keyof typeof BLOCKS
const BLOCK_TYPES = Object.keys(BLOCKS) as Block[]

// Scales at the edges: zeros of both signs, subnormals, the largest finite, infinities, quiet and signalling NaNs, ones.
const SPECIAL_SCALES: Record<Scale['kind'], number[]> = {
  F16: [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0200, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x3c00, 0xbc00],
  IQ1_M: [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x3c00, 0xbc00],
  F32: [0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0x3f800000, 0xbf800000],
  // E8M0 0 and 1 are the subnormals 2^-128 and 2^-127 once halved; 255, ggml's 2^127.
  E8M0: [0, 1, 2, 126, 127, 128, 253, 254, 255],
  // 0 and 0x7f are zero; 1-7 subnormal; bit 7 ignored.
  UE4M3: [0x00, 0x01, 0x07, 0x08, 0x38, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff],
}

function setScale(block: Uint8Array, { at, kind }: Scale, value: number): void {
  const view = new DataView(block.buffer, block.byteOffset, block.byteLength)
  if (kind === 'F16') view.setUint16(at, value, true)
  else if (kind === 'F32') view.setUint32(at, value, true)
  else if (kind === 'IQ1_M')
    for (let k = 0; k < 4; k++) view.setUint16(at + 2 * k, (view.getUint16(at + 2 * k, true) & 0x0fff) | (((value >> (4 * k)) & 15) << 12), true)
  else block[at] = value
}

const randomBytes = (length: number, seed: number) => {
  const next = mulberry32(seed)
  return Uint8Array.from({ length }, () => next() & 0xff)
}

/**
 * `blocks` random blocks of `type`; every other block's scales set to the special values, in turns. 2048 blocks of
 * random grid indices reach every entry of the IQ types' grids: IQ1_S and IQ1_M's 2048 entries, the most, are each
 * picked 32 times a block, so an entry missed has a chance below e^-32 in 2048 blocks.
 */
function randomBlocks(type: Block, blocks: number, seed: number): Uint8Array {
  const { bytes } = GGML_TYPES[type]
  const data = randomBytes(blocks * bytes, seed)
  const { scales } = BLOCKS[type]
  for (let b = 0; b < blocks; b += 2) {
    const block = data.subarray(b * bytes, (b + 1) * bytes)
    scales.forEach((scale, k) => {
      const specials = SPECIAL_SCALES[scale.kind]
      setScale(block, scale, specials[(b / 2 + 5 * k) % specials.length])
    })
  }
  return data
}

/** ggml_quantize_chunk of random rows (a random scale per row, so every magnitude), with an importance matrix of ones where ggml needs one. */
function quantizedRows(ggml: Ggml, type: Block, seed: number): { blocks: Uint8Array; count: number } {
  const rows = 8
  const perRow = 1024
  const random = prng(seed)
  const values = new Float32Array(rows * perRow)
  for (let r = 0; r < rows; r++) {
    const magnitude = 10 ** (random() * 12 - 8)
    for (let i = 0; i < perRow; i++) values[r * perRow + i] = (random() + random() + random() - 1.5) * magnitude
  }
  const imatrix = ggml.requiresImatrix(type) ? new Float32Array(perRow).fill(1) : undefined
  return { blocks: ggml.quantize(type, values, rows, perRow, imatrix), count: rows * perRow }
}

describe('the contract (assembly/boundary/ggml.ts)', () => {
  const declared = Object.entries(contract).filter(([name]) => name.startsWith('TYPE_'))

  test('the module reads every type it declares and no other, and big-endian the ones whose layout is defined', () => {
    const read = (order: 'little' | 'big') =>
      (Object.keys(GGML_TYPES) as GgmlType[]).filter((type) => {
        try {
          dequantizeGgml(type, new Uint8Array(0), 0, 'F32', { byteOrder: order })
          return true
        } catch (error) {
          if (!(error instanceof SafetensorsError) || error.code !== 'UnsupportedQuantization') throw error
          return false
        }
      })
    expect(read('little')).toEqual(declared.map(([name]) => name.slice('TYPE_'.length)))
    const refused = ['Q8_1', ...BLOCK_TYPES.filter((type) => !BLOCKS[type].swapped)]
    expect(refused.sort()).toEqual(['IQ1_M', 'IQ2_XXS', 'IQ3_XXS', 'Q3_K', 'Q5_0', 'Q5_1', 'Q8_1'])
    expect(read('big')).toEqual(Object.keys(GGML_TYPES).filter((type) => !refused.includes(type)))
  })
})

describe.skipIf(unsupported)('block types against ggml', () => {
  let ggml: Ggml
  beforeAll(() => {
    ggml = loadGgml()
  }, 300_000)

  /**
   * Each case's blocks: random ones with special scales, and ggml's own quantization of random rows, but for Q8_K,
   * which ggml_quantize_chunk does not make (ggml quantizes only activations to it), and in the quick loop for the
   * IQ1 and IQ2 types, whose quantizer first spends seconds to half a minute a type on its lattice searches.
   */
  const quickSkips = ['IQ1_S', 'IQ1_M', 'IQ2_XXS', 'IQ2_XS', 'IQ2_S']
  const cases = (type: Block, seed: number) => {
    const blocks = type.startsWith('IQ') ? 2048 : 512
    const random = { name: 'random blocks', blocks: randomBlocks(type, blocks, seed), count: blocks * GGML_TYPES[type].block }
    if (type === 'Q8_K' || (process.env.TEST_QUICK === '1' && quickSkips.includes(type))) return [random]
    return [random, { name: 'ggml_quantize_chunk', ...quantizedRows(ggml, type, seed) }]
  }

  test.each(BLOCK_TYPES.map((type, i) => [type, i] as const))('%s: F32 as dequantize_row, F16 and BF16 that rounded once', (type, seed) => {
    for (const { name, blocks, count } of cases(type, seed + 1)) {
      const expected = ggml.dequantize(type, blocks, count)
      expect(firstF32Difference(dequantizeGgml(type, blocks, count, 'F32'), expected), `${type}, ${name}, F32`).toBeUndefined()
      for (const to of ['F16', 'BF16'] as const) {
        expect(firstRoundingDifference(dequantizeGgml(type, blocks, count, to), expected, to), `${type}, ${name}, ${to}`).toBeUndefined()
      }
    }
  })

  test.each(BLOCK_TYPES.filter((type) => BLOCKS[type].swapped))('%s big-endian: its fields swapped read as the little-endian blocks', (type) => {
    const { bytes, block } = GGML_TYPES[type]
    const little = randomBlocks(type, 256, 77)
    const big = little.slice()
    const view = new DataView(big.buffer)
    for (let at = 0; at < big.length; at += bytes) {
      for (const [offset, width, fields] of BLOCKS[type].swapped!) {
        for (let f = 0; f < fields; f++) {
          const field = at + offset + f * width
          if (width === 2) view.setUint16(field, view.getUint16(field, true), false)
          else view.setUint32(field, view.getUint32(field, true), false)
        }
      }
    }
    const copy = big.slice()
    const count = 256 * block
    const expected = ggml.dequantize(type, little, count)
    expect(firstF32Difference(dequantizeGgml(type, big, count, 'F32', { byteOrder: 'big' }), expected)).toBeUndefined()
    expect(firstRoundingDifference(dequantizeGgml(type, big, count, 'BF16', { byteOrder: 'big' }), expected, 'BF16')).toBeUndefined()
    expect(big).toEqual(copy)
  })
})

describe.skipIf(unsupported)('F16 and BF16 against ggml_fp16_to_fp32_row and ggml_bf16_to_fp32_row', () => {
  let ggml: Ggml
  beforeAll(() => {
    ggml = loadGgml()
  }, 300_000)

  test.each(['F16', 'BF16'] as const)('every %s code, to each target', (type) => {
    const codes = new Uint8Array(Uint16Array.from({ length: 65536 }, (_, i) => i).buffer)
    const expected = ggml.dequantize(type, codes, 65536)
    expect(firstF32Difference(dequantizeGgml(type, codes, 65536, 'F32'), expected)).toBeUndefined()
    for (const to of ['F16', 'BF16'] as const) expect(firstRoundingDifference(dequantizeGgml(type, codes, 65536, to), expected, to)).toBeUndefined()
  })
})

describe('the plain types: the F32 nearest each value', () => {
  const count = 4096
  /** Random bytes (every float class among them), and the values at the edges of each integer type. */
  const data = (type: Plain) => {
    const bytes = randomBytes(count * GGML_TYPES[type].bytes, 7)
    const view = new DataView(bytes.buffer)
    const edges: Record<string, (bigint | number)[]> = {
      I8: [-128, 127, 0, -1],
      I16: [-32768, 32767, 0, -1],
      I32: [-(2 ** 31), 2 ** 31 - 1, 2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24 + 1), 0, -1],
      I64: [-(2n ** 63n), 2n ** 63n - 1n, 2n ** 24n + 1n, 2n ** 53n + 1n, (1n << 40n) + (1n << 16n), (1n << 40n) + (3n << 15n), -1n, 0n],
      F64: [0, -0, 5e-324, -5e-324, 1e-46, 1.401298464324817e-45, 3.4028235677973366e38, 3.4028235677973362e38, 1e300, -1e300, Infinity, -Infinity, NaN],
    }
    const edge = edges[type] ?? []
    edge.forEach((value, i) => {
      if (type === 'I8') view.setInt8(i, Number(value))
      if (type === 'I16') view.setInt16(2 * i, Number(value), true)
      if (type === 'I32') view.setInt32(4 * i, Number(value), true)
      if (type === 'I64') view.setBigInt64(8 * i, BigInt(value), true)
      if (type === 'F64') view.setFloat64(8 * i, Number(value), true)
    })
    return bytes
  }
  /** The judge: each value as F32, rounded to nearest even (Math.fround rounds a double so; a 64-bit integer exactly). */
  const nearest = (type: Exclude<Plain, 'F16' | 'BF16'>, bytes: Uint8Array) => {
    const view = new DataView(bytes.buffer, bytes.byteOffset)
    const read = {
      F32: (i: number) => view.getFloat32(4 * i, true),
      F64: (i: number) => Math.fround(view.getFloat64(8 * i, true)),
      I8: (i: number) => view.getInt8(i),
      I16: (i: number) => view.getInt16(2 * i, true),
      I32: (i: number) => Math.fround(view.getInt32(4 * i, true)),
      I64: (i: number) => bigintToF32(view.getBigInt64(8 * i, true)),
    }[type]
    const out = new Float32Array(count)
    for (let i = 0; i < count; i++) out[i] = read(i)
    // F32 keeps its NaNs' bits as they are.
    if (type === 'F32') return new Float32Array(bytes.slice().buffer)
    return out
  }

  test.each(['F32', 'F64', 'I8', 'I16', 'I32', 'I64'] as const)('%s, to F32, F16 and BF16, both byte orders', (type) => {
    const bytes = data(type)
    const expected = nearest(type, bytes)
    const width = GGML_TYPES[type].bytes
    const big = bytes.slice()
    for (let at = 0; at < big.length; at += width) big.subarray(at, at + width).reverse()
    for (const [order, input] of [
      ['little', bytes],
      ['big', big],
    ] as const) {
      expect(firstF32Difference(dequantizeGgml(type, input, count, 'F32', { byteOrder: order }), expected), `${type} ${order}`).toBeUndefined()
      for (const to of ['F16', 'BF16'] as const) {
        expect(firstRoundingDifference(dequantizeGgml(type, input, count, to, { byteOrder: order }), expected, to), `${type} ${order} ${to}`).toBeUndefined()
      }
    }
  })

  test('F16 and BF16 big-endian, and to themselves as they are', () => {
    for (const type of ['F16', 'BF16'] as const) {
      const bytes = randomBytes(2 * count, 9)
      const big = bytes.slice()
      for (let at = 0; at < big.length; at += 2) big.subarray(at, at + 2).reverse()
      expect(new Uint8Array(dequantizeGgml(type, big, count, type, { byteOrder: 'big' }).buffer)).toEqual(bytes)
      expect(dequantizeGgml(type, big, count, 'F32', { byteOrder: 'big' })).toEqual(dequantizeGgml(type, bytes, count, 'F32'))
    }
  })
})

describe('GgmlDequantizer: one memory, filled in place', () => {
  test('runs one after another, each view the result of its run, as dequantizeGgml gives it', () => {
    const dequantizer = new GgmlDequantizer(10 * 210, 10 * 256 * 4)
    for (const [type, blocks, to] of [
      ['Q6_K', 10, 'F32'],
      ['Q8_0', 40, 'BF16'],
      ['IQ4_XS', 3, 'F16'],
      ['F32', 512, 'F32'],
    ] as const) {
      const count = blocks * GGML_TYPES[type].block
      const bytes = randomBytes(ggmlByteLength(type, count), blocks)
      dequantizer.input(bytes.length).set(bytes)
      const view = dequantizer.run(type, count, to)
      const expected = dequantizeGgml(type, bytes, count, to)
      expect(view).toEqual(new Uint8Array(expected.buffer))
    }
  })

  test('a big-endian run swaps the input to little-endian in place', () => {
    const dequantizer = new GgmlDequantizer(34 * 4, 128 * 4)
    const little = randomBytes(34 * 4, 3)
    const big = little.slice()
    for (let at = 0; at < big.length; at += 34) big.subarray(at, at + 2).reverse()
    dequantizer.input(big.length).set(big)
    const view = dequantizer.run('Q8_0', 128, 'F32', 'big')
    expect(new Uint8Array(view)).toEqual(new Uint8Array(dequantizeGgml('Q8_0', little, 128, 'F32').buffer))
    expect(dequantizer.input(big.length)).toEqual(little)
  })

  test('sizes beyond what it was made for are a RangeError', () => {
    const dequantizer = new GgmlDequantizer(144, 1024)
    expect(() => dequantizer.input(145)).toThrow(RangeError)
    expect(() => dequantizer.run('Q4_K', 512)).toThrow(/512 Q4_K values take 288 bytes and give 2048 as F32; this dequantizer holds 144 and 1024/)
    expect(() => dequantizer.run('Q8_0', 256, 'F16')).toThrow(/272 bytes and give 512 as F16; this dequantizer holds 144 and 1024/)
    expect(() => new GgmlDequantizer(-1, 0)).toThrow(RangeError)
  })
})

describe('dequantizeGgml into out', () => {
  test('the result written into out, which it returns; an out of another array or length is a RangeError', () => {
    const blocks = randomBytes(34 * 8, 5)
    const out = new Uint16Array(256)
    expect(dequantizeGgml('Q8_0', blocks, 256, 'F16', { out })).toBe(out)
    expect(out).toEqual(dequantizeGgml('Q8_0', blocks, 256, 'F16'))
    const offset = new Float32Array(new ArrayBuffer(4 * 300), 4 * 44, 256)
    expect(dequantizeGgml('Q8_0', blocks, 256, 'F32', { out: offset })).toEqual(dequantizeGgml('Q8_0', blocks, 256))
    expect(() => dequantizeGgml('Q8_0', blocks, 256, 'F32', { out: new Float32Array(255) })).toThrow(/out must be a Float32Array of 256 elements/)
    expect(() => dequantizeGgml('Q8_0', blocks, 256, 'F32', { out: new Uint16Array(256) as unknown as Float32Array })).toThrow(RangeError)
  })
})

describe('errors', () => {
  test('a type ggml does not dequantize, or a big-endian layout that is not defined, is UnsupportedQuantization naming it', () => {
    expect(() => dequantizeGgml('Q8_1', new Uint8Array(36), 32)).toThrow(
      expect.objectContaining({ code: 'UnsupportedQuantization', message: expect.stringMatching(/^ggml type Q8_1 is not read .*; read are F32, F16, Q4_0/) }),
    )
    expect(() => dequantizeGgml('Q3_K', new Uint8Array(110), 256, 'F32', { byteOrder: 'big' })).toThrow(
      expect.objectContaining({
        code: 'UnsupportedQuantization',
        message: expect.stringMatching(/^big-endian Q3_K is not read: .*; read big-endian are F32, F16, Q4_0, Q4_1, Q8_0, Q2_K, Q4_K/),
      }),
    )
  })

  test('counts that are not whole blocks, short input and arguments of the wrong kind', () => {
    expect(() => dequantizeGgml('Q4_K', new Uint8Array(144), 255)).toThrow(/whole number of Q4_K blocks \(256 values each\), got 255/)
    expect(() => dequantizeGgml('Q4_K', new Uint8Array(143), 256)).toThrow(/256 Q4_K values take 144 bytes, blocks has 143/)
    expect(() => dequantizeGgml('Q4_K', new Uint8Array(144), -256)).toThrow(RangeError)
    expect(() => dequantizeGgml('Q4_K' as GgmlType, [] as unknown as Uint8Array, 0)).toThrow(TypeError)
    expect(() => dequantizeGgml('Q9' as GgmlType, new Uint8Array(0), 0)).toThrow(TypeError)
    expect(() => dequantizeGgml('Q8_0', new Uint8Array(0), 0, 'F8' as Target)).toThrow(TypeError)
    expect(() => dequantizeGgml('Q8_0', new Uint8Array(0), 0, 'F32', { byteOrder: 'middle' as 'big' })).toThrow(TypeError)
  })
})
