// Values against ggml's: F32 as bits (any NaN matches any NaN), and F16 or BF16 as that F32 rounded once by the
// independent encoder of test/float-reference.ts. Shared by the tests of the dequantizer and of the GGUF reader.
import { encodeF32Bits, f32Bits } from './float-reference.ts'

const isNaN16 = (bits: number) => (bits & 0x7c00) === 0x7c00 && (bits & 0x3ff) !== 0
const isBf16NaN = (bits: number) => (bits & 0x7f80) === 0x7f80 && (bits & 0x7f) !== 0

/** The first place where `actual` and `expected` F32 differ as bits (any NaN matches any NaN), or undefined. */
export function firstF32Difference(actual: Float32Array, expected: Float32Array): string | undefined {
  if (actual.length !== expected.length) return `${actual.length} values, expected ${expected.length}`
  const a = new Uint32Array(actual.buffer, actual.byteOffset, actual.length)
  const e = new Uint32Array(expected.buffer, expected.byteOffset, expected.length)
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== e[i] && !(Number.isNaN(actual[i]) && Number.isNaN(expected[i]))) {
      return `value ${i}: 0x${a[i].toString(16)} (${actual[i]}), expected 0x${e[i].toString(16)} (${expected[i]})`
    }
  }
  return undefined
}

/** The first place where 16-bit `actual` differs from `expected` F32 rounded once to `to` (any NaN matches any NaN). */
export function firstRoundingDifference(actual: Uint16Array, expected: Float32Array, to: 'F16' | 'BF16'): string | undefined {
  if (actual.length !== expected.length) return `${actual.length} values, expected ${expected.length}`
  const nan = to === 'F16' ? isNaN16 : isBf16NaN
  // Quantized values repeat: each distinct one is rounded once.
  const roundings = new Map<number, number>()
  const round = (bits: number) => {
    let rounded = roundings.get(bits)
    if (rounded === undefined) roundings.set(bits, (rounded = encodeF32Bits(to, bits)))
    return rounded
  }
  for (let i = 0; i < actual.length; i++) {
    const rounded = round(f32Bits(expected[i]))
    if (actual[i] !== rounded && !(nan(actual[i]) && nan(rounded))) {
      return `value ${i}: 0x${actual[i].toString(16)}, expected 0x${rounded.toString(16)} (${expected[i]} rounded)`
    }
  }
  return undefined
}
