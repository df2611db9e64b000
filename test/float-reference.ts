// A scalar reference for the conversion kernels, written from the format definitions (docs/conversion.md, "Number formats")
// and nothing else: codes are decoded by formula (sign, exponent, mantissa, bias, Math.pow) to their exact
// value as a JS number, and rounded to F16/BF16 once with plain arithmetic on that value. Slow and obvious on purpose; it shares
// no code with src/ or assembly/.

import { FORMAT_DTYPES } from './dtype-table.ts'

/** A sign/exponent/mantissa format. */
interface FloatFormat {
  readonly expBits: number
  readonly mantBits: number
  readonly bias: number
  readonly signed: boolean
  /** How the all-ones exponent and other special codes are read. */
  readonly specials: 'ieee' | 'fn' | 'fnuz' | 'none' | 'e8m0'
}

export const FORMATS = {
  BF16: { expBits: 8, mantBits: 7, bias: 127, signed: true, specials: 'ieee' },
  F16: { expBits: 5, mantBits: 10, bias: 15, signed: true, specials: 'ieee' },
  F8_E4M3: { expBits: 4, mantBits: 3, bias: 7, signed: true, specials: 'fn' },
  F8_E5M2: { expBits: 5, mantBits: 2, bias: 15, signed: true, specials: 'ieee' },
  F8_E4M3FNUZ: { expBits: 4, mantBits: 3, bias: 8, signed: true, specials: 'fnuz' },
  F8_E5M2FNUZ: { expBits: 5, mantBits: 2, bias: 16, signed: true, specials: 'fnuz' },
  F8_E8M0: { expBits: 8, mantBits: 0, bias: 127, signed: false, specials: 'e8m0' },
  F4: { expBits: 2, mantBits: 1, bias: 1, signed: true, specials: 'none' },
  F6_E2M3: { expBits: 2, mantBits: 3, bias: 1, signed: true, specials: 'none' },
  F6_E3M2: { expBits: 3, mantBits: 2, bias: 3, signed: true, specials: 'none' },
} as const satisfies Record<string, FloatFormat>

export type FloatName = keyof typeof FORMATS

const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

export function f32Bits(value: number): number {
  f32[0] = value
  return u32[0]
}

export function f32FromBits(bits: number): number {
  u32[0] = bits
  return f32[0]
}

const QUIET_NAN = 0x7fc00000

/** The value of a code, or NaN. */
export function decodeValue(format: FloatFormat, code: number): number {
  const width = format.expBits + format.mantBits
  const negative = format.signed && ((code >> width) & 1) === 1
  const exponent = (code >> format.mantBits) & ((1 << format.expBits) - 1)
  const mantissa = code & ((1 << format.mantBits) - 1)
  const allOnes = (1 << format.expBits) - 1
  let value: number
  if (format.specials === 'e8m0') {
    if (code === 0xff) return NaN
    value = 2 ** (code - 127)
  } else if (format.specials === 'fnuz' && code === 1 << width) {
    return NaN // the code of negative zero is the only NaN
  } else if (format.specials === 'ieee' && exponent === allOnes) {
    value = mantissa === 0 ? Infinity : NaN
  } else if (format.specials === 'fn' && exponent === allOnes && mantissa === (1 << format.mantBits) - 1) {
    return NaN
  } else if (exponent === 0) {
    value = mantissa * 2 ** (1 - format.bias - format.mantBits)
  } else {
    value = (1 + mantissa / 2 ** format.mantBits) * 2 ** (exponent - format.bias)
  }
  return negative ? -value : value
}

/**
 * The F32 bits the kernels must produce for a code. NaN rules (docs/conversion.md, "Number formats"): BF16 and F16 NaNs
 * keep sign and payload, moved to the top of the F32 mantissa; every other NaN becomes the quiet NaN
 * 0x7FC00000 with the code's sign bit.
 */
export function decodeToF32Bits(name: FloatName, code: number): number {
  const format: FloatFormat = FORMATS[name]
  const value = decodeValue(format, code)
  if (!Number.isNaN(value)) {
    if (Math.fround(value) !== value) throw new Error(`${name} code ${code} is not exact in F32`)
    return f32Bits(value)
  }
  const width = format.expBits + format.mantBits
  const sign = format.signed && ((code >> width) & 1) === 1 ? 0x80000000 : 0
  if (name === 'BF16' || name === 'F16') {
    const payload = code & ((1 << format.mantBits) - 1)
    return (sign | 0x7f800000 | (payload << (23 - format.mantBits))) >>> 0
  }
  return (sign | QUIET_NAN) >>> 0
}

/** floor(log2(a)) for a finite a > 0, exactly. */
function floorLog2(a: number): number {
  let e = Math.floor(Math.log2(a))
  if (2 ** e > a) e--
  if (2 ** (e + 1) <= a) e++
  return e
}

/** x rounded to an integer, ties to even; x is exact (no rounding happened before). */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x)
  const rest = x - floor
  if (rest > 0.5 || (rest === 0.5 && floor % 2 === 1)) return floor + 1
  return floor
}

/** The sign and the mantissa field of a NaN, as narrowing keeps them (docs/conversion.md, "Number formats"). */
export interface NaNBits {
  readonly sign: number
  readonly payload: number
  readonly payloadBits: number
}

/**
 * The bits of a NaN in BF16 or F16: the sign and the top payload bits kept, the quiet bit set, so that
 * a payload that would truncate to zero still gives a NaN.
 */
export function encodeNaN(name: 'BF16' | 'F16', nan: NaNBits): number {
  const { expBits, mantBits } = FORMATS[name]
  const top = Math.floor(nan.payload * 2 ** (mantBits - nan.payloadBits))
  return nan.sign * 2 ** (expBits + mantBits) + (((1 << expBits) - 1) << mantBits) + ((top | (1 << (mantBits - 1))) & ((1 << mantBits) - 1))
}

/**
 * The bits of a number (any double, not NaN) in an IEEE-style format (BF16, F16): one rounding to
 * nearest even, overflow to infinity, subnormals by the fixed quantum of the smallest exponent. Every
 * step is exact in float64: scaling by powers of two and taking the integer part.
 */
export function encodeValue(name: 'BF16' | 'F16', value: number): number {
  const { expBits, mantBits, bias } = FORMATS[name]
  const signBit = (value < 0 || Object.is(value, -0) ? 1 : 0) << (expBits + mantBits)
  const infinity = signBit | (((1 << expBits) - 1) << mantBits)
  const a = Math.abs(value)
  if (a === Infinity) return infinity
  const minExponent = 1 - bias
  const maxExponent = (1 << expBits) - 2 - bias
  let exponent = a === 0 ? minExponent : Math.max(minExponent, floorLog2(a))
  let steps = roundHalfEven(a / 2 ** (exponent - mantBits))
  if (steps === 2 ** (mantBits + 1)) {
    exponent++
    steps /= 2
  }
  if (exponent > maxExponent) return infinity
  if (steps < 2 ** mantBits) return signBit | steps // subnormal (or zero)
  return signBit | ((exponent + bias) << mantBits) | (steps - 2 ** mantBits)
}

/** The BF16 or F16 bits of F32 bits. */
export function encodeF32Bits(name: 'BF16' | 'F16', bits: number): number {
  const value = f32FromBits(bits)
  if (!Number.isNaN(value)) return encodeValue(name, value)
  return encodeNaN(name, { sign: bits >>> 31, payload: bits & 0x7fffff, payloadBits: 23 })
}

/** A bigint rounded to the nearest F32, ties to even, exactly (Number(bigint) would round first). */
export function bigintToF32(v: bigint): number {
  const negative = v < 0n
  const a = negative ? -v : v
  const length = a.toString(2).length
  let result: number
  if (length <= 24) {
    result = Number(a)
  } else {
    const shift = BigInt(length - 24)
    let kept = a >> shift
    const rest = a - (kept << shift)
    const half = 1n << (shift - 1n)
    if (rest > half || (rest === half && (kept & 1n) === 1n)) kept++
    result = Number(kept) * 2 ** (length - 24)
  }
  return negative ? -result : result
}

/** The element `index` of packed F4 bytes: element 0 in the low nibble. */
export function f4Code(bytes: Uint8Array, index: number): number {
  const byte = bytes[index >> 1]
  return index % 2 === 0 ? byte & 0x0f : byte >> 4
}

/** The element `index` of packed F6 bytes: element i in bits 6i..6i+5 of each little-endian 24-bit group. */
export function f6Code(bytes: Uint8Array, index: number): number {
  const group = Math.floor(index / 4) * 3
  const bits = bytes[group] + bytes[group + 1] * 256 + bytes[group + 2] * 65536
  return Math.floor(bits / 2 ** (6 * (index % 4))) % 64
}

/** Bits per element of each source the reference knows: every dtype but F32 itself and C64. */
export const SOURCE_BITS: Record<string, number> = Object.fromEntries(FORMAT_DTYPES.filter(([d]) => d !== 'F32' && d !== 'C64'))

/** The F32 bits of element `index` of `bytes` (little-endian) in `dtype`. */
function elementToF32Bits(dtype: string, bytes: Uint8Array, view: DataView, index: number): number {
  switch (dtype) {
    case 'F4':
      return decodeToF32Bits('F4', f4Code(bytes, index))
    case 'F6_E2M3':
    case 'F6_E3M2':
      return decodeToF32Bits(dtype, f6Code(bytes, index))
    case 'BF16':
    case 'F16':
      return decodeToF32Bits(dtype, view.getUint16(index * 2, true))
    case 'BOOL':
      return f32Bits(bytes[index] !== 0 ? 1 : 0)
    case 'U8':
      return f32Bits(bytes[index])
    case 'I8':
      return f32Bits(view.getInt8(index))
    case 'U16':
      return f32Bits(view.getUint16(index * 2, true))
    case 'I16':
      return f32Bits(view.getInt16(index * 2, true))
    // Number() of a 32-bit integer is exact, so Math.fround rounds once, to nearest even.
    case 'U32':
      return f32Bits(Math.fround(view.getUint32(index * 4, true)))
    case 'I32':
      return f32Bits(Math.fround(view.getInt32(index * 4, true)))
    case 'U64':
      return f32Bits(bigintToF32(view.getBigUint64(index * 8, true)))
    case 'I64':
      return f32Bits(bigintToF32(view.getBigInt64(index * 8, true)))
    case 'F64': {
      const value = view.getFloat64(index * 8, true)
      if (Number.isNaN(value)) return ((view.getUint32(index * 8 + 4, true) & 0x80000000) | QUIET_NAN) >>> 0
      return f32Bits(Math.fround(value))
    }
    default:
      return decodeToF32Bits(dtype as FloatName, bytes[index])
  }
}

/** Sources whose NaNs keep their payload when narrowed; the others' NaNs become the quiet NaN with their sign. */
const PAYLOAD_SOURCES = new Set(['BF16', 'F16', 'F32', 'F64'])

/** The value of element `index` of a float dtype, and what a NaN keeps. */
function elementValue(dtype: string, bytes: Uint8Array, view: DataView, index: number): { value: number; nan: NaNBits } {
  if (dtype === 'F64') {
    const high = view.getUint32(index * 8 + 4, true)
    const payload = (high & 0xfffff) * 2 ** 32 + view.getUint32(index * 8, true)
    return { value: view.getFloat64(index * 8, true), nan: { sign: high >>> 31, payload, payloadBits: 52 } }
  }
  if (dtype === 'F32') {
    const bits = view.getUint32(index * 4, true)
    return { value: f32FromBits(bits), nan: { sign: bits >>> 31, payload: bits & 0x7fffff, payloadBits: 23 } }
  }
  const name = dtype as FloatName
  const code =
    name === 'F4'
      ? f4Code(bytes, index)
      : name === 'F6_E2M3' || name === 'F6_E3M2'
        ? f6Code(bytes, index)
        : name === 'BF16' || name === 'F16'
          ? view.getUint16(index * 2, true)
          : bytes[index]
  const format: FloatFormat = FORMATS[name]
  const width = format.expBits + format.mantBits
  const sign = format.signed ? (code >> width) & 1 : 0
  const payload = PAYLOAD_SOURCES.has(name) ? code & ((1 << format.mantBits) - 1) : 0
  return { value: decodeValue(format, code), nan: { sign, payload, payloadBits: Math.max(1, format.mantBits) } }
}

/** The float dtypes the reference converts to F16 and BF16. */
export const FLOAT_SOURCES = [...Object.keys(FORMATS), 'F32', 'F64']

/**
 * The expected output bytes of converting `bytes` from `from` to `to`: any source to F32, any float to
 * F16 or BF16 (each element's exact value rounded once).
 */
export function referenceConvert(from: string, to: string, bytes: Uint8Array): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const count = (bytes.length * 8) / (from === 'F32' ? 32 : SOURCE_BITS[from])
  if (to === 'F16' || to === 'BF16') {
    if (!FLOAT_SOURCES.includes(from)) throw new Error(`no reference for ${from} -> ${to}`)
    const out = new DataView(new ArrayBuffer(count * 2))
    for (let i = 0; i < count; i++) {
      const { value, nan } = elementValue(from, bytes, view, i)
      out.setUint16(i * 2, Number.isNaN(value) ? encodeNaN(to, nan) : encodeValue(to, value), true)
    }
    return new Uint8Array(out.buffer)
  }
  if (to !== 'F32') throw new Error(`no reference for ${from} -> ${to}`)
  const out = new DataView(new ArrayBuffer(count * 4))
  for (let i = 0; i < count; i++) out.setUint32(i * 4, elementToF32Bits(from, bytes, view, i), true)
  return new Uint8Array(out.buffer)
}
