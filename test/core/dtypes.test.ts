// src/core/dtypes.ts, the library's one dtype table, held to the tests' own: the format's list and bits
// (test/dtype-table.ts, from the format's definition), the natural arrays (test/read-helpers.ts, from the public
// contract), the float layouts (test/float-reference.ts, from the number formats' definitions) and the
// conversions the guides promise (docs/reading.md: floats to F32, F16 and BF16; integers and BOOL to F32).
import { describe, expect, test } from 'vitest'
import { canConvert, DTYPE_INFO, DTYPES, type DType, dtypeIndex, isDType } from '../../src/core/dtypes.ts'
import { FORMAT_DTYPES } from '../dtype-table.ts'
import { FORMATS } from '../float-reference.ts'
import { NATURAL } from '../read-helpers.ts'

const FORMAT_NAMES = FORMAT_DTYPES.map(([dtype]) => dtype)

describe('the table', () => {
  test('DTYPES is the format list, in its order; dtypeIndex is the position in it', () => {
    expect([...DTYPES]).toEqual(FORMAT_NAMES)
    expect(DTYPES.map(dtypeIndex)).toEqual(FORMAT_NAMES.map((_, i) => i))
  })

  test.each(FORMAT_DTYPES)('%s: %i bits, its natural array', (dtype, bits) => {
    const info = DTYPE_INFO[dtype as DType]
    expect(info.bits).toBe(bits)
    expect(info.array.name).toBe(NATURAL[dtype].name)
    expect(info.array.BYTES_PER_ELEMENT).toBe(NATURAL[dtype].bytes)
  })

  test('the float layouts are those of the number formats; F32 and F64 are IEEE binary32 and binary64', () => {
    const floats = Object.fromEntries(Object.entries(DTYPE_INFO).flatMap(([dtype, info]) => (info.float ? [[dtype, info.float]] : [])))
    const expected = {
      ...Object.fromEntries(Object.entries(FORMATS).map(([dtype, f]) => [dtype, { exponentBits: f.expBits, mantissaBits: f.mantBits, bias: f.bias }])),
      F32: { exponentBits: 8, mantissaBits: 23, bias: 127 },
      F64: { exponentBits: 11, mantissaBits: 52, bias: 1023 },
    }
    expect(floats).toEqual(expected)
    // Sign, exponent and mantissa fill the element, but for E8M0, which has no sign.
    for (const [dtype, f] of Object.entries(floats))
      expect(f.exponentBits + f.mantissaBits + (dtype === 'F8_E8M0' ? 0 : 1)).toBe(DTYPE_INFO[dtype as DType].bits)
  })
})

describe('canConvert', () => {
  const FLOATS = new Set([...Object.keys(FORMATS), 'F32', 'F64'])
  /** The guides' rule, written again: a float to F32, F16 or BF16; an integer or BOOL to F32; C64 nowhere; never to itself. */
  const promised = (from: string, to: string) => from !== to && (FLOATS.has(from) ? ['F32', 'F16', 'BF16'].includes(to) : from !== 'C64' && to === 'F32')

  test.each(FORMAT_NAMES)('from %s: to exactly the targets the guides promise', (from) => {
    const targets = FORMAT_NAMES.filter((to) => canConvert(from as DType, to as DType))
    expect(targets).toEqual(FORMAT_NAMES.filter((to) => promised(from, to)))
  })
})

describe('isDType', () => {
  test('the 22 names exactly as a header spells them', () => {
    for (const name of FORMAT_NAMES) expect(isDType(name)).toBe(true)
  })

  test('nothing else: other cases, other spellings, names of the object prototype, other types', () => {
    for (const value of [
      'f32',
      'Bf16',
      'F8_E4M3FN',
      'FP8',
      'float32',
      '',
      ' F32',
      'F32 ',
      'toString',
      '__proto__',
      'constructor',
      'hasOwnProperty',
      32,
      null,
      undefined,
      ['F32'],
      { F32: 1 },
    ])
      expect(isDType(value), String(value)).toBe(false)
  })
})
