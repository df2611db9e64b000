// The conversion kernels and convert()/byteSwap(), against the independent reference in
// float-reference.ts, for both wasm builds.
import { describe, expect, test } from 'vitest'
import { byteLengthOf, convertInto, DEDICATED_MIN_BYTES, instantiate, kernelModule } from '../../src/core/convert.ts'
import { reserveMemory } from '../../src/core/wasm.ts'
import { byteSwap, convert, DTYPE_INFO, type DType, SafetensorsError, type TypedArray } from '../../src/node.ts'
import {
  bigintToF32,
  decodeToF32Bits,
  decodeValue,
  encodeF32Bits,
  encodeValue,
  FLOAT_SOURCES,
  type FloatName,
  FORMATS,
  f32Bits,
  f32FromBits,
  referenceConvert,
  SOURCE_BITS,
} from '../float-reference.ts'
import { mulberry32 } from '../random.ts'

function randomBytes(length: number, seed: number): Uint8Array {
  const next = mulberry32(seed)
  const out = new Uint8Array(length)
  for (let i = 0; i < length; i += 4) {
    const word = next()
    for (let j = 0; j < 4 && i + j < length; j++) out[i + j] = word >>> (8 * j)
  }
  return out
}

function bytesOf(array: TypedArray): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength)
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes)
    .reverse()
    .map((b) => b.toString(16).padStart(2, '0'))
    .join('')
}

/** Compares element by element and names the first element that differs, in hex. */
function expectSameBits(actual: Uint8Array, expected: Uint8Array, width: number, label: string): void {
  expect(actual.length, `${label}: byte length`).toBe(expected.length)
  for (let i = 0; i < actual.length; i++) {
    if (actual[i] !== expected[i]) {
      const e = Math.floor(i / width)
      const at = (b: Uint8Array) => hex(b.subarray(e * width, (e + 1) * width))
      expect.fail(`${label}: element ${e} is 0x${at(actual)}, expected 0x${at(expected)}`)
    }
  }
}

const TO_F32_SOURCES = Object.keys(SOURCE_BITS) as DType[]
const NARROW_TARGETS = ['F16', 'BF16'] as const
/** Every float source to F16 and BF16 but the identities. */
const TO_16_PAIRS = (FLOAT_SOURCES as DType[]).flatMap((from) => NARROW_TARGETS.filter((to) => to !== from).map((to): [DType, DType] => [from, to]))
const PAIRS: Array<[DType, DType]> = [...TO_F32_SOURCES.map((from): [DType, DType] => [from, 'F32']), ...TO_16_PAIRS]
const FLOAT_NAMES = Object.keys(FORMATS) as FloatName[]

function bitsOf(dtype: DType): number {
  return DTYPE_INFO[dtype].bits
}

/** The smallest element count > 0 that fills whole bytes (2 for F4, 4 for F6, else 1). */
function elementStep(dtype: DType): number {
  const bits = bitsOf(dtype)
  return bits === 4 ? 2 : bits === 6 ? 4 : 1
}

/** Converts through the public API and checks against the reference. */
function checkConvert(from: DType, to: DType, input: Uint8Array, label: string): void {
  const result = convert(input, from, to)
  expect(result).toBeInstanceOf(DTYPE_INFO[to].array)
  expectSameBits(bytesOf(result), referenceConvert(from, to, input.slice()), bitsOf(to) / 8, label)
}

/** Every code 0..2^bits-1 of a 16- or 8-bit format, as little-endian bytes. */
function everyCode(bits: 8 | 16): Uint8Array {
  const codes = bits === 8 ? new Uint8Array(256) : new Uint16Array(65536)
  codes.forEach((_, i) => (codes[i] = i))
  return bytesOf(codes)
}

/** Packs 6-bit codes, four per little-endian 24-bit group. */
function packF6(codes: number[]): Uint8Array {
  const out = new Uint8Array((codes.length / 4) * 3)
  for (let g = 0; g < codes.length / 4; g++) {
    const group = codes[4 * g] | (codes[4 * g + 1] << 6) | (codes[4 * g + 2] << 12) | (codes[4 * g + 3] << 18)
    out[3 * g] = group & 0xff
    out[3 * g + 1] = (group >> 8) & 0xff
    out[3 * g + 2] = group >> 16
  }
  return out
}

/** Each of the 64 codes in each of the 4 positions of a group, the other positions filled with varied codes. */
function everyF6CodeInEveryPosition(): number[] {
  const codes: number[] = []
  for (let code = 0; code < 64; code++) {
    for (let position = 0; position < 4; position++) {
      for (let k = 0; k < 4; k++) codes.push(k === position ? code : (code * 5 + k * 17 + 1) & 63)
    }
  }
  return codes
}

/**
 * Doubles that probe every rounding decision of F16 or BF16: in every binade from below the smallest
 * subnormal to the overflow, grid points, ties between them, and ties moved by 2^-30 ulp (too little for
 * F32 to hold, so a conversion through F32 rounds them as ties), and the same around the subnormal steps.
 */
function f64Cases(to: 'F16' | 'BF16'): number[] {
  const { expBits, mantBits, bias } = FORMATS[to]
  const smallest = 2 ** (1 - bias - mantBits)
  const values: number[] = [0, Infinity, Number.MAX_VALUE, 5e-324, 1e-300, 1e300, 3.4028234663852886e38, (2 - 2 ** -24) * 2 ** 127]
  const nudges = [0, 2 ** -30, -(2 ** -30)]
  for (let e = 1 - bias - mantBits - 2; e <= (1 << expBits) - 1 - bias; e++) {
    const ulp = 2 ** (e - mantBits)
    for (const j of [0, 1, 2, 3, 2 ** mantBits - 1]) {
      for (const half of [0, 0.5, -0.5]) for (const nudge of nudges) values.push(2 ** e + ulp * (j + half + nudge))
    }
  }
  for (let k = 0; k <= 9; k++) for (const nudge of nudges) values.push(smallest * (k / 2 + nudge))
  return values.flatMap((v) => [v, -v])
}

/** Doubles with random 52-bit mantissas and exponents across the target's range and a little beyond. */
function randomDoubles(to: 'F16' | 'BF16', count: number): number[] {
  const { expBits, mantBits, bias } = FORMATS[to]
  const next = mulberry32(count + expBits)
  const low = 1 - bias - mantBits - 3
  const span = (1 << expBits) + mantBits + 4
  return Array.from({ length: count }, () => {
    const mantissa = 1 + (next() * 2 ** 20 + (next() >>> 12)) * 2 ** -52
    const sign = next() & 1 ? -1 : 1
    return sign * mantissa * 2 ** (low + (next() % span))
  })
}

describe('the reference agrees with values from the format specifications', () => {
  const cases: Array<[FloatName, number, number]> = [
    ['BF16', 0x3f80, 1],
    ['BF16', 0xc040, -3],
    ['BF16', 0x0001, 2 ** -133],
    ['BF16', 0x7f7f, 3.3895313892515355e38],
    ['F16', 0x3c00, 1],
    ['F16', 0x7bff, 65504],
    ['F16', 0x0001, 2 ** -24],
    ['F16', 0x0400, 2 ** -14],
    ['F16', 0xfc00, -Infinity],
    ['F16', 0x8000, -0],
    ['F8_E4M3', 0x7e, 448],
    ['F8_E4M3', 0x01, 2 ** -9],
    ['F8_E4M3', 0x38, 1],
    ['F8_E4M3', 0x7f, NaN],
    ['F8_E4M3', 0x78, 256],
    ['F8_E5M2', 0x7b, 57344],
    ['F8_E5M2', 0x7c, Infinity],
    ['F8_E5M2', 0x7d, NaN],
    ['F8_E5M2', 0x01, 2 ** -16],
    ['F8_E5M2', 0x3c, 1],
    ['F8_E4M3FNUZ', 0x7f, 240],
    ['F8_E4M3FNUZ', 0x80, NaN],
    ['F8_E4M3FNUZ', 0x40, 1],
    ['F8_E4M3FNUZ', 0x01, 2 ** -10],
    ['F8_E5M2FNUZ', 0x7f, 57344],
    ['F8_E5M2FNUZ', 0x80, NaN],
    ['F8_E5M2FNUZ', 0x40, 1],
    ['F8_E5M2FNUZ', 0x01, 2 ** -17],
    ['F8_E8M0', 0x7f, 1],
    ['F8_E8M0', 0x00, 2 ** -127],
    ['F8_E8M0', 0xfe, 2 ** 127],
    ['F8_E8M0', 0xff, NaN],
    ['F4', 0x1, 0.5],
    ['F4', 0x2, 1],
    ['F4', 0x7, 6],
    ['F4', 0xf, -6],
    ['F4', 0x8, -0],
    ['F6_E2M3', 0x1f, 7.5],
    ['F6_E2M3', 0x01, 0.125],
    ['F6_E2M3', 0x3f, -7.5],
    ['F6_E3M2', 0x1f, 28],
    ['F6_E3M2', 0x01, 0.0625],
    ['F6_E3M2', 0x0c, 1],
  ]
  test.each(cases)('%s code %i', (name, code, value) => {
    expect(Object.is(decodeValue(FORMATS[name], code), value) || (Number.isNaN(value) && Number.isNaN(decodeValue(FORMATS[name], code)))).toBe(true)
  })

  const encodings: Array<['F16' | 'BF16', number, number]> = [
    ['F16', f32Bits(1 + 2 ** -11), 0x3c00],
    ['F16', f32Bits(1 + 3 * 2 ** -11), 0x3c02],
    ['F16', f32Bits(65504), 0x7bff],
    ['F16', f32Bits(65519.99609375), 0x7bff],
    ['F16', f32Bits(65520), 0x7c00],
    ['F16', f32Bits(2 ** -24), 0x0001],
    ['F16', f32Bits(2 ** -25), 0x0000],
    ['F16', f32Bits(3 * 2 ** -25), 0x0002],
    ['F16', 0x80000000, 0x8000],
    ['F16', 0x7fc00000, 0x7e00],
    ['F16', 0xff800001, 0xfe00],
    ['F16', 0x7f800000, 0x7c00],
    ['F16', f32Bits(2 ** -14 - 2 ** -25), 0x0400],
    ['BF16', f32Bits(1 + 2 ** -8), 0x3f80],
    ['BF16', f32Bits(1 + 3 * 2 ** -8), 0x3f82],
    ['BF16', 0x7f7fffff, 0x7f80],
    ['BF16', 0x7f7f7fff, 0x7f7f],
    ['BF16', 0x7f7f8000, 0x7f80],
    ['BF16', 0x7f7e8000, 0x7f7e],
    ['BF16', 0x7f800001, 0x7fc0],
    ['BF16', 0xff800001, 0xffc0],
    ['BF16', 0x00008000, 0x0000],
    ['BF16', 0x00018000, 0x0002],
    ['BF16', 0x80000001, 0x8000],
  ]
  test.each(encodings)('F32 -> %s of bits %i', (name, bits, expected) => {
    expect(encodeF32Bits(name, bits)).toBe(expected)
  })

  // Doubles just above a tie of the target: rounding through F32 first lands on the tie, then rounds to even.
  const doubles: Array<['F16' | 'BF16', number, number]> = [
    ['F16', 1 + 2 ** -11 + 2 ** -40, 0x3c01],
    ['F16', 1 + 2 ** -11, 0x3c00],
    ['F16', 65520 - 2 ** -30, 0x7bff],
    ['F16', 65520, 0x7c00],
    ['F16', 1e300, 0x7c00],
    ['F16', -5e-324, 0x8000],
    ['F16', 2 ** -25 + 2 ** -60, 0x0001],
    ['F16', 2 ** -25, 0x0000],
    ['BF16', 1 + 2 ** -8 + 2 ** -40, 0x3f81],
    ['BF16', 2 ** -134 * (1 + 2 ** -30), 0x0001],
    ['BF16', 2 ** -134, 0x0000],
    ['BF16', 3 * 2 ** -134, 0x0002],
    ['BF16', Number.MAX_VALUE, 0x7f80],
  ]
  test.each(doubles)('F64 -> %s of %d', (name, value, expected) => {
    expect(encodeValue(name, value)).toBe(expected)
  })

  test('bigint rounding is exact where Number() would round twice', () => {
    const v = (1n << 60n) + (1n << 36n) + 1n
    expect(bigintToF32(v)).toBe(2 ** 60 + 2 ** 37)
    expect(Math.fround(Number(v))).toBe(2 ** 60) // the trap the exact reference avoids
    expect(bigintToF32((1n << 64n) - 1n)).toBe(2 ** 64)
    expect(bigintToF32((1n << 63n) + (1n << 39n))).toBe(2 ** 63)
    expect(bigintToF32((1n << 24n) + 3n)).toBe(16777220)
  })
})

// 1,000,000 random F32 bit patterns and their reference encodings, computed once.
const RANDOM_F32 = randomBytes(4_000_000, 7)
const randomExpected: Partial<Record<'F16' | 'BF16', Uint8Array>> = {}

describe('the kernels', () => {
  describe('every code to F32', () => {
    test.each(['BF16', 'F16'] as const)('all 65,536 %s patterns', (name) => {
      checkConvert(name, 'F32', everyCode(16), name)
    })

    test.each(FLOAT_NAMES.filter((n) => n.startsWith('F8_')))('all 256 %s codes', (name) => {
      checkConvert(name as DType, 'F32', everyCode(8), name)
    })

    test('all 16 F4 codes in both nibbles (every byte)', () => {
      checkConvert('F4', 'F32', everyCode(8), 'F4')
    })

    test.each(['F6_E2M3', 'F6_E3M2'] as const)('all 64 %s codes in every position of the group', (name) => {
      const codes = everyF6CodeInEveryPosition()
      const input = packF6(codes)
      checkConvert(name, 'F32', input, name)
      // The reference unpacks on its own; check it also against the codes that were packed.
      const result = new Uint32Array(convert(input, name, 'F32').buffer.slice(0))
      codes.forEach((code, i) => expect(result[i]).toBe(decodeToF32Bits(name, code)))
    })
  })

  describe('every code to F16 and BF16', () => {
    const sources16 = TO_16_PAIRS.filter(([from]) => bitsOf(from) === 16)
    test.each(sources16)('all 65,536 %s patterns to %s', (from, to) => {
      checkConvert(from, to, everyCode(16), `${from} -> ${to}`)
    })

    const sources8 = TO_16_PAIRS.filter(([from]) => from.startsWith('F8_'))
    test.each(sources8)('all 256 %s codes to %s', (from, to) => {
      checkConvert(from, to, everyCode(8), `${from} -> ${to}`)
    })

    test.each(NARROW_TARGETS)('all 16 F4 codes in both nibbles (every byte) to %s', (to) => {
      checkConvert('F4', to, everyCode(8), `F4 -> ${to}`)
    })

    const sources6 = TO_16_PAIRS.filter(([from]) => bitsOf(from) === 6)
    test.each(sources6)('all 64 %s codes in every position of the group to %s', (from, to) => {
      checkConvert(from, to, packF6(everyF6CodeInEveryPosition()), `${from} -> ${to}`)
    })

    test('NaN rules: F8 NaNs are the quiet NaN with their sign, F8_E8M0 positive, F16 <-> BF16 keep the top payload bits', () => {
      const bits = (from: DType, to: DType, codes: number[]) =>
        Array.from(convert(bitsOf(from) === 8 ? Uint8Array.from(codes) : Uint16Array.from(codes), from, to as 'F16'))
      expect(bits('F8_E4M3', 'F16', [0x7f, 0xff])).toEqual([0x7e00, 0xfe00])
      expect(bits('F8_E5M2', 'BF16', [0x7d, 0xff, 0x7c])).toEqual([0x7fc0, 0xffc0, 0x7f80])
      expect(bits('F8_E4M3FNUZ', 'F16', [0x80])).toEqual([0xfe00])
      expect(bits('F8_E8M0', 'BF16', [0xff])).toEqual([0x7fc0])
      // A signalling BF16 NaN with payload 0x01 gives F16 payload 0x08 plus the quiet bit.
      expect(bits('BF16', 'F16', [0x7f81, 0xffff])).toEqual([0x7e08, 0xfff8])
      // F16 payload 0x007 truncates to nothing in BF16: the quiet bit keeps it a NaN.
      expect(bits('F16', 'BF16', [0x7c07, 0xfdff])).toEqual([0x7fc0, 0xffff])
    })
  })

  describe('F32 to F16 and BF16', () => {
    test.each(['F16', 'BF16'] as const)('ties, subnormals, overflow, NaN and signed zeros to %s', (to) => {
      const { mantBits } = FORMATS[to]
      const values: number[] = [0, -0, Infinity, -Infinity, 1, -1, 3.4028234663852886e38, -3.4028234663852886e38]
      for (let e = -150; e <= 128; e++) {
        for (const m of [0, 0.5, 1, 1.5, 2.5, 3.5]) {
          // m/2^mantBits above a power of two: halves are exact ties, odd and even neighbours both.
          const value = 2 ** e * (1 + m * 2 ** -mantBits)
          values.push(Math.fround(value), -Math.fround(value))
        }
      }
      const bits = new Uint32Array(values.map(f32Bits))
      const specials = [0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0x7fa00000, 0x00000001, 0x807fffff, 0x00400000]
      const input = bytesOf(Uint32Array.from([...bits, ...specials]))
      checkConvert('F32', to, input, `F32 -> ${to}`)
    })

    test.each(['F16', 'BF16'] as const)('1,000,000 random bit patterns to %s', (to) => {
      randomExpected[to] ??= referenceConvert('F32', to, RANDOM_F32)
      expectSameBits(bytesOf(convert(RANDOM_F32, 'F32', to)), randomExpected[to], 2, `random F32 -> ${to}`)
    })
  })

  describe('integers and F64 at their extremes and near rounding ties', () => {
    const ties32 = [1 << 24, (1 << 24) + 1, (1 << 24) + 2, (1 << 24) + 3, (1 << 25) + 2, (1 << 25) + 6, (1 << 25) + 7, 0x7fffff80, 0x7fffffc0, 0x7fffffff]
    test('I32 and U32', () => {
      const i32 = Int32Array.from([0, 1, -1, 0x7fffffff, -0x80000000, ...ties32, ...ties32.map((v) => -v)])
      checkConvert('I32', 'F32', bytesOf(i32), 'I32')
      const u32 = Uint32Array.from([0, 1, 0xffffffff, 0xffffff7f, 0xffffff80, 0xffffff81, 0x80000000, 0x80000080, 0x80000180, ...ties32])
      checkConvert('U32', 'F32', bytesOf(u32), 'U32')
      expect(Array.from(<Float32Array | Uint16Array>convert(Int32Array.from([(1 << 24) + 1, (1 << 24) + 3]), 'I32', 'F32'))).toEqual([16777216, 16777220])
    })

    test('I8, U8, I16, U16 and BOOL, every value', () => {
      for (const dtype of ['I8', 'U8', 'BOOL'] as const) checkConvert(dtype, 'F32', everyCode(8), dtype)
      for (const dtype of ['I16', 'U16'] as const) checkConvert(dtype, 'F32', everyCode(16), dtype)
    })

    test('I64 and U64, with an exact reference for the rounding', () => {
      const near: bigint[] = []
      for (const shift of [24n, 25n, 31n, 32n, 40n, 52n, 53n, 54n, 60n, 62n, 63n]) {
        const p = 1n << shift
        for (const d of [-3n, -2n, -1n, 0n, 1n, 2n, 3n]) near.push(p + d)
        // Just above 2^shift the F32 step is 2^(shift-23): ties at odd multiples of half a step.
        if (shift > 24n) {
          const half = 1n << (shift - 24n)
          near.push(p + half, p + 3n * half, p + half + 1n, p + half - 1n, p + (half << 1n) + half)
        }
      }
      const random = Array.from(
        { length: 2000 },
        (_, i) => BigInt.asUintN(64, (BigInt(mulberry32(i)()) << 32n) | BigInt(mulberry32(i + 9999)())) >> BigInt(i % 40),
      )
      const u64 = BigUint64Array.from([
        0n,
        1n,
        (1n << 64n) - 1n,
        (1n << 64n) - (1n << 40n),
        (1n << 63n) + (1n << 39n),
        ...near.filter((v) => v >= 0n && v < 1n << 64n),
        ...random,
      ])
      checkConvert('U64', 'F32', bytesOf(u64), 'U64')
      const i64 = BigInt64Array.from([
        0n,
        -1n,
        (1n << 63n) - 1n,
        -(1n << 63n),
        -(1n << 63n) + 1n,
        ...near.filter((v) => v < 1n << 63n).flatMap((v) => [v, -v]),
        ...random.map((v) => BigInt.asIntN(64, v)),
      ])
      checkConvert('I64', 'F32', bytesOf(i64), 'I64')
      const tricky = (1n << 60n) + (1n << 36n) + 1n
      expect(convert(BigInt64Array.of(tricky), 'I64', 'F32')[0]).toBe(2 ** 60 + 2 ** 37)
    })

    test('F64: extremes, subnormals, ties, NaN with sign, random patterns', () => {
      const max = 3.4028234663852886e38
      const values = [
        0,
        -0,
        Infinity,
        -Infinity,
        NaN,
        max,
        -max,
        1e300,
        -1e300,
        5e-324,
        -5e-324,
        Number.MAX_VALUE,
        (2 - 2 ** -24) * 2 ** 127,
        (2 - 2 ** -24 - 2 ** -50) * 2 ** 127,
        2 ** -149,
        2 ** -150,
        1.5 * 2 ** -150,
        1.5 * 2 ** -149,
        2 ** -126 * (1 - 2 ** -24),
        1 + 2 ** -24,
        1 + 3 * 2 ** -24,
        1 + 2 ** -24 + 2 ** -52,
        0.1,
        1 / 3,
        16777217,
      ]
      const nans = new BigUint64Array([0x7ff8000000000000n, 0xfff8000000000000n, 0x7ff0000000000001n, 0xfff0000000000001n, 0xffffffffffffffffn])
      const random = new Float64Array(randomBytes(80_000, 3).buffer)
      const near = Array.from({ length: 10_000 }, (_, i) => f32FromBits(mulberry32(i + 1)()) * (1 + (i % 7) * 2 ** -25))
      const input = new Uint8Array([...bytesOf(Float64Array.from([...values, ...near])), ...bytesOf(nans), ...bytesOf(random)])
      checkConvert('F64', 'F32', input, 'F64')
      const result = new Uint32Array(convert(bytesOf(nans), 'F64', 'F32').buffer.slice(0))
      expect(Array.from(result)).toEqual([0x7fc00000, 0xffc00000, 0x7fc00000, 0xffc00000, 0xffc00000])
    })
  })

  describe('F64 to F16 and BF16, rounded once', () => {
    test.each(NARROW_TARGETS)('ties, near-ties, subnormals, overflow, NaN payloads and random doubles to %s', (to) => {
      const input = bytesOf(Float64Array.from([...f64Cases(to), ...randomDoubles(to, 20_000)]))
      const nans = bytesOf(
        new BigUint64Array([
          0x7ff8000000000000n,
          0xfff8000000000000n,
          0x7ff0000000000001n,
          0xfff0000000000001n,
          0xffffffffffffffffn,
          0x7ff4000000000000n,
          0x7ff0040000000000n,
          0xfff0200000000000n,
          0x7ff0000020000000n,
        ]),
      )
      const random = randomBytes(80_000, 5)
      checkConvert('F64', to, new Uint8Array([...input, ...nans, ...random]), `F64 -> ${to}`)
    })

    test('a double just above a tie rounds up, where rounding through F32 would land on the tie and round to even', () => {
      expect(Array.from(convert(Float64Array.of(1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -11), 'F64', 'F16'))).toEqual([0x3c01, 0x3c00])
      expect(Array.from(convert(Float64Array.of(1 + 2 ** -8 + 2 ** -40, -(1 + 2 ** -8)), 'F64', 'BF16'))).toEqual([0x3f81, 0xbf80])
    })
  })

  describe('in place, as the memory model lays buffers out', () => {
    test.each(PAIRS)('%s -> %s: disjoint, overlapping, and input at the end of memory', (from, to) => {
      const core = instantiate(1 << 16, false)
      const memory = new Uint8Array(core.memory.buffer)
      const step = elementStep(from)
      // 63 and 127 leave 15, 7 and 3 elements after the last full vector of 16, 8 and 4 lanes.
      for (const count of [0, step, 63, 127, 4 * 40 + 4].map((n) => Math.ceil(n / step) * step)) {
        const inBytes = byteLengthOf(from, count)
        const outBytes = byteLengthOf(to, count)
        const input = randomBytes(inBytes, count + 11)
        const expected = referenceConvert(from, to, input)
        const layouts = {
          'disjoint at odd addresses': { src: core.heapBase + 1, dst: core.heapBase + inBytes + 35 },
          overlapping: { src: core.heapBase + 64 + Math.max(0, outBytes - inBytes), dst: core.heapBase + 64 },
          // A kernel that loads past the input's end traps here.
          'input at the end of memory': { src: memory.length - inBytes, dst: core.heapBase + 64 },
        }
        for (const [name, { src, dst }] of Object.entries(layouts)) {
          memory.fill(0xa5, core.heapBase)
          memory.set(input, src)
          // Afterwards memory must hold exactly this: the output written, nothing else touched.
          const image = memory.slice()
          image.set(expected, dst)
          convertInto(core, src, dst, count, from, to)
          expectSameBits(memory.slice(dst, dst + outBytes), expected, bitsOf(to) / 8, `${name}, ${count} elements`)
          const stray = memory.findIndex((b, i) => i >= core.heapBase && b !== image[i])
          expect(stray, `${name}, ${count} elements: first byte written outside the output`).toBe(-1)
        }
      }
    })
  })

  describe('convert()', () => {
    test.each(PAIRS)('%s -> %s: every length from 0 to 70 elements, at an odd byte offset', (from, to) => {
      const step = elementStep(from)
      for (let count = 0; count <= 70; count += step) {
        const inBytes = byteLengthOf(from, count)
        const buffer = randomBytes(inBytes + 3, count)
        checkConvert(from, to, buffer.subarray(1, 1 + inBytes), `${count} elements at offset 1`)
      }
    })

    test.each(PAIRS)('%s -> %s: an input spanning several chunks of the shared core', (from, to) => {
      const count = Math.ceil(100_001 / elementStep(from)) * elementStep(from)
      checkConvert(from, to, randomBytes(byteLengthOf(from, count), 99), `${count} elements`)
    })

    test('zero-length input gives an empty natural array', () => {
      expect(convert(new Uint8Array(0), 'BF16', 'F32')).toEqual(new Float32Array(0))
      expect(convert(new Float32Array(0), 'F32', 'F16')).toEqual(new Uint16Array(0))
      expect(convert(new Uint8Array(0), 'F6_E2M3', 'F32')).toEqual(new Float32Array(0))
    })

    test.each([
      ['F16', 3],
      ['BF16', 1],
      ['I32', 6],
      ['F64', 12],
      ['U64', 9],
      ['F6_E2M3', 4],
      ['F6_E3M2', 5],
      ['I16', 7],
    ] as const)('a %s input of %i bytes is a clear TensorInvalidInfo', (dtype, length) => {
      const call = () => convert(new Uint8Array(length), dtype, 'F32')
      expect(call).toThrow(SafetensorsError)
      expect(call).toThrow(expect.objectContaining({ code: 'TensorInvalidInfo', message: expect.stringContaining(`${length} bytes`) }))
      expect(call).toThrow(new RegExp(dtype))
    })

    test('F32 -> BF16 of 6 bytes is a TensorInvalidInfo; F4 of any byte count is whole', () => {
      expect(() => convert(new Uint8Array(6), 'F32', 'BF16')).toThrow(expect.objectContaining({ code: 'TensorInvalidInfo' }))
      expect(convert(new Uint8Array(3), 'F4', 'F32')).toHaveLength(6)
      expect(convert(new Uint8Array(6), 'F6_E3M2', 'F32')).toHaveLength(8)
    })

    test.each([
      ['C64', 'F32'],
      ['F32', 'I32'],
      ['F32', 'F8_E4M3'],
      ['I32', 'F16'],
      ['U8', 'BF16'],
      ['C64', 'F16'],
      ['BF16', 'F64'],
    ] as const)('%s -> %s is UnsupportedConversion naming both', (from, to) => {
      const call = () => convert(new Uint8Array(8), from, to)
      expect(call).toThrow(expect.objectContaining({ code: 'UnsupportedConversion', message: expect.stringContaining(`${from} to ${to}`) }))
    })

    test('an unknown dtype is UnsupportedConversion', () => {
      expect(() => convert(new Uint8Array(4), 'F128' as DType, 'F32')).toThrow(
        expect.objectContaining({ code: 'UnsupportedConversion', message: expect.stringContaining('F128') }),
      )
    })

    test('identity returns a copy in the natural array', () => {
      const input = BigInt64Array.of(-5n, 1n << 62n)
      const copy = convert(input, 'I64', 'I64')
      expect(copy).toBeInstanceOf(BigInt64Array)
      expect(copy).toEqual(input)
      expect(copy.buffer).not.toBe(input.buffer)
      const bytes = randomBytes(9, 1).subarray(1)
      const f4 = convert(bytes, 'F4', 'F4')
      expect(f4).toEqual(bytes)
      bytes[0] ^= 1
      expect(f4[0]).not.toBe(bytes[0])
    })

    test('natural TypedArrays are read as their dtype; other arrays are a TypeError', () => {
      expect(Array.from(<Float32Array | Uint16Array>convert(Uint16Array.of(0x3f80, 0xc000), 'BF16', 'F32'))).toEqual([1, -2])
      expect(Array.from(<Float32Array | Uint16Array>convert(Uint16Array.of(0x3c00, 0x7c00), 'F16', 'F32'))).toEqual([1, Infinity])
      expect(Array.from(<Float32Array | Uint16Array>convert(Float64Array.of(0.5, -1e300), 'F64', 'F32'))).toEqual([0.5, -Infinity])
      expect(Array.from(<Float32Array | Uint16Array>convert(Int8Array.of(-128, 127), 'I8', 'F32'))).toEqual([-128, 127])
      expect(Array.from(<Float32Array | Uint16Array>convert(Float32Array.of(1, 65520), 'F32', 'F16'))).toEqual([0x3c00, 0x7c00])
      expect(() => convert(new Float32Array(2), 'BF16', 'F32')).toThrow(TypeError)
    })

    test('out receives the result; a wrong out is a RangeError', () => {
      const out = new Float32Array(3)
      expect(convert(Uint16Array.of(0x3f80, 0x4000, 0x4040), 'BF16', 'F32', out)).toBe(out)
      expect(Array.from(out)).toEqual([1, 2, 3])
      const bigOut = new Float32Array(DEDICATED_MIN_BYTES / 4)
      expect(convert(new Uint16Array(DEDICATED_MIN_BYTES / 4).fill(0x3f80), 'BF16', 'F32', bigOut)).toBe(bigOut)
      expect(bigOut.every((v) => v === 1)).toBe(true)
      expect(() => convert(Uint16Array.of(1, 2), 'BF16', 'F32', new Float32Array(3))).toThrow(RangeError)
      expect(() => convert(Uint16Array.of(1, 2), 'BF16', 'F32', new Uint32Array(2))).toThrow(RangeError)
    })

    test('large widening results are views of their own memory that later work never detaches', () => {
      // Every F16/BF16 pattern, repeated past the threshold: the expected output is the reference tiled.
      const repeats = Math.ceil(DEDICATED_MIN_BYTES / (65536 * 4))
      const codes = everyCode(16)
      const input = new Uint8Array(codes.length * repeats)
      for (let r = 0; r < repeats; r++) input.set(codes, r * codes.length)
      const first = convert(input, 'F16', 'F32')
      const second = convert(input, 'BF16', 'F32')
      expect(first.buffer).not.toBe(second.buffer)
      expect(first.buffer).not.toBe(kernelModule.shared().memory.buffer)
      // Grow the shared core well past its size: a view of it would be detached now.
      reserveMemory(kernelModule.shared(), kernelModule.shared().memory.buffer.byteLength + (64 << 20))
      convert(randomBytes(1 << 16, 2), 'BF16', 'F32')
      expect(first.length).toBe(65536 * repeats)
      for (const [name, result] of [
        ['F16', first],
        ['BF16', second],
      ] as const) {
        const expected = referenceConvert(name, 'F32', codes)
        const bytes = bytesOf(result)
        for (let r = 0; r < repeats; r++) expectSameBits(bytes.subarray(r * expected.length, (r + 1) * expected.length), expected, 4, `${name} copy ${r}`)
      }
    })

    test('large narrowing results are plain arrays of exactly their size', () => {
      const narrowed = convert(new Float32Array(DEDICATED_MIN_BYTES / 4).fill(1.5), 'F32', 'BF16')
      expect(narrowed).toBeInstanceOf(Uint16Array)
      expect(narrowed.buffer.byteLength).toBe(narrowed.byteLength)
      expect(narrowed.every((v) => v === 0x3fc0)).toBe(true)
    })
  })

  describe('byteSwap()', () => {
    function reversedElements(bytes: Uint8Array, width: number): Uint8Array {
      const out = new Uint8Array(bytes.length)
      for (let i = 0; i < bytes.length; i += width) out.set(bytes.slice(i, i + width).reverse(), i)
      return out
    }

    test.each([2, 4, 8] as const)('%i-byte elements: every length to 40 elements, odd offset, and across chunks', (width) => {
      const lengths = [...Array.from({ length: 41 }, (_, i) => i * width), (1 << 20) + 3 * width, (3 << 20) + 5 * width]
      for (const length of lengths) {
        const buffer = randomBytes(length + 1, length)
        const bytes = buffer.subarray(1)
        const expected = reversedElements(bytes, width)
        byteSwap(bytes, width)
        expectSameBits(bytes, expected, width, `${length} bytes`)
        expect(buffer[0]).toBe(randomBytes(length + 1, length)[0])
      }
    })

    test('bad lengths and widths', () => {
      expect(() => byteSwap(new Uint8Array(6), 4)).toThrow(expect.objectContaining({ code: 'TensorInvalidInfo', message: expect.stringContaining('6 bytes') }))
      expect(() => byteSwap(new Uint8Array(6), 3 as 2)).toThrow(RangeError)
    })
  })
})
