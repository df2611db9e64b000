/** The SafeTensors element types. The order is the format's: the writer lays tensors out in reverse. */
export const DTYPES = [
  'BOOL',
  'F4',
  'F6_E2M3',
  'F6_E3M2',
  'U8',
  'I8',
  'F8_E5M2',
  'F8_E4M3',
  'F8_E8M0',
  'F8_E4M3FNUZ',
  'F8_E5M2FNUZ',
  'I16',
  'U16',
  'F16',
  'BF16',
  'I32',
  'U32',
  'F32',
  'C64',
  'F64',
  'I64',
  'U64',
] as const

/** A SafeTensors dtype name, exactly as a header spells it (case-sensitive). */
export type DType = (typeof DTYPES)[number]

/** The arrays a tensor's `data` can be: the natural array of each dtype (see {@link DTYPE_INFO}). */
export type TypedArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array

/**
 * The native half-precision array (ES2025): the lib's own type where the compiler's `lib` has it
 * (`esnext.float16`, ES2025), else the part of it a read hands out, so the type does not depend on a lib
 * that TypeScript 5.9's defaults lack.
 */
export type Float16Array = typeof globalThis extends {
  /** The runtime's own constructor, where the lib declares one. */
  Float16Array: {
    /** What its instances are. */
    prototype: infer A
  }
}
  ? A
  : Float16ArrayBase

/** What every Float16Array has: numbers over 2-byte elements of a buffer. */
export interface Float16ArrayBase extends ArrayBufferView, ArrayLike<number>, Iterable<number> {
  /** Bytes per element: 2. */
  readonly BYTES_PER_ELEMENT: 2
  [index: number]: number
}

type ArrayConstructor = {
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TypedArray
  new (length: number): TypedArray
  readonly BYTES_PER_ELEMENT: number
}

/** A sign-exponent-mantissa format (F8_E8M0: no sign, no mantissa); docs/conversion.md, "Number formats". */
interface FloatFormat {
  readonly exponentBits: number
  readonly mantissaBits: number
  readonly bias: number
}

/** What {@link DTYPE_INFO} says of each dtype. */
export interface DTypeInfo {
  /** Bits per element: 4 and 6 for the packed sub-byte floats. */
  readonly bits: number
  /** The natural array a tensor of this dtype is returned in (raw bits for F16/BF16, raw bytes for F8/F6/F4). */
  readonly array: ArrayConstructor
  /** Floats only: their layout. Floats convert to F32, F16 and BF16; integers and BOOL to F32; C64 to nothing. */
  readonly float?: FloatFormat
}

const float = (exponentBits: number, mantissaBits: number, bias: number): FloatFormat => ({ exponentBits, mantissaBits, bias })

/** Each dtype's bits per element, natural array and (for floats) bit layout. */
export const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = {
  BOOL: { bits: 8, array: Uint8Array },
  F4: { bits: 4, array: Uint8Array, float: float(2, 1, 1) },
  F6_E2M3: { bits: 6, array: Uint8Array, float: float(2, 3, 1) },
  F6_E3M2: { bits: 6, array: Uint8Array, float: float(3, 2, 3) },
  U8: { bits: 8, array: Uint8Array },
  I8: { bits: 8, array: Int8Array },
  F8_E5M2: { bits: 8, array: Uint8Array, float: float(5, 2, 15) },
  F8_E4M3: { bits: 8, array: Uint8Array, float: float(4, 3, 7) },
  F8_E8M0: { bits: 8, array: Uint8Array, float: float(8, 0, 127) },
  F8_E4M3FNUZ: { bits: 8, array: Uint8Array, float: float(4, 3, 8) },
  F8_E5M2FNUZ: { bits: 8, array: Uint8Array, float: float(5, 2, 16) },
  I16: { bits: 16, array: Int16Array },
  U16: { bits: 16, array: Uint16Array },
  F16: { bits: 16, array: Uint16Array, float: float(5, 10, 15) },
  BF16: { bits: 16, array: Uint16Array, float: float(8, 7, 127) },
  I32: { bits: 32, array: Int32Array },
  U32: { bits: 32, array: Uint32Array },
  F32: { bits: 32, array: Float32Array, float: float(8, 23, 127) },
  C64: { bits: 64, array: Float32Array },
  F64: { bits: 64, array: Float64Array, float: float(11, 52, 1023) },
  I64: { bits: 64, array: BigInt64Array },
  U64: { bits: 64, array: BigUint64Array },
}

/** The dtypes conversions produce. */
const CONVERSION_TARGETS = ['F32', 'F16', 'BF16'] as const satisfies readonly DType[]

/** Whether the kernels convert `from` to `to` (a different dtype): floats to every target, integers and BOOL to F32. */
export function canConvert(from: DType, to: DType): boolean {
  if (from === to || !(CONVERSION_TARGETS as readonly DType[]).includes(to)) return false
  return DTYPE_INFO[from].float !== undefined || (to === 'F32' && from !== 'C64')
}

/** The index of a dtype in DTYPES: how the wasm core names it. */
export function dtypeIndex(dtype: DType): number {
  return DTYPES.indexOf(dtype)
}

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.hasOwn(DTYPE_INFO, value)
}
