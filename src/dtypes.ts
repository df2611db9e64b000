/** The SafeTensors element types. The order is the format's: the writer lays tensors out in reverse. */
export const DTYPES = [
  'BOOL', 'F4', 'F6_E2M3', 'F6_E3M2', 'U8', 'I8', 'F8_E5M2', 'F8_E4M3', 'F8_E8M0', 'F8_E4M3FNUZ',
  'F8_E5M2FNUZ', 'I16', 'U16', 'F16', 'BF16', 'I32', 'U32', 'F32', 'C64', 'F64', 'I64', 'U64',
] as const

export type DType = (typeof DTYPES)[number]

export type TypedArray =
  | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array
  | Float32Array | Float64Array | BigInt64Array | BigUint64Array

type ArrayConstructor = {
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TypedArray
  new (length: number): TypedArray
  readonly BYTES_PER_ELEMENT: number
}

export interface DTypeInfo {
  /** Bits per element: 4 and 6 for the packed sub-byte floats. */
  readonly bits: number
  /** The natural array a tensor of this dtype is returned in (raw bits for F16/BF16, raw bytes for F8/F6/F4). */
  readonly array: ArrayConstructor
}

export const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = {
  BOOL: { bits: 8, array: Uint8Array },
  F4: { bits: 4, array: Uint8Array },
  F6_E2M3: { bits: 6, array: Uint8Array },
  F6_E3M2: { bits: 6, array: Uint8Array },
  U8: { bits: 8, array: Uint8Array },
  I8: { bits: 8, array: Int8Array },
  F8_E5M2: { bits: 8, array: Uint8Array },
  F8_E4M3: { bits: 8, array: Uint8Array },
  F8_E8M0: { bits: 8, array: Uint8Array },
  F8_E4M3FNUZ: { bits: 8, array: Uint8Array },
  F8_E5M2FNUZ: { bits: 8, array: Uint8Array },
  I16: { bits: 16, array: Int16Array },
  U16: { bits: 16, array: Uint16Array },
  F16: { bits: 16, array: Uint16Array },
  BF16: { bits: 16, array: Uint16Array },
  I32: { bits: 32, array: Int32Array },
  U32: { bits: 32, array: Uint32Array },
  F32: { bits: 32, array: Float32Array },
  C64: { bits: 64, array: Float32Array },
  F64: { bits: 64, array: Float64Array },
  I64: { bits: 64, array: BigInt64Array },
  U64: { bits: 64, array: BigUint64Array },
}

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.hasOwn(DTYPE_INFO, value)
}
