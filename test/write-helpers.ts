// What the writer's tests share (test/write/writer.test.ts, test/node/atomic-files.test.ts,
// test/node/save-model-files.test.ts): inputs made from the reference's tensors, byte and error checks, scratch
// folders. Expected values still come from test/writer-reference.ts, never from here.
import { rmSync } from 'node:fs'
import { afterAll, expect } from 'vitest'
import { type DType, SafetensorsError, type TensorInput } from '../src/node.ts'
import { firstDifference, type RefTensor, tempDir } from './writer-reference.ts'

/** A fresh folder per call, all removed after the calling file's tests: call once, at the top of a test file. */
export function scratchFolders(): () => string {
  const temps: string[] = []
  afterAll(() => {
    for (const dir of temps) rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    const dir = tempDir()
    temps.push(dir)
    return dir
  }
}

type Natural = Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array | Float64Array | BigInt64Array | BigUint64Array
type NaturalCtor = { new (buffer: ArrayBuffer, byteOffset: number, length: number): Natural; BYTES_PER_ELEMENT: number }
/** The natural array of each dtype, written from the public contract (DESIGN.md), not from src/. */
export const NATURAL: Record<string, NaturalCtor> = {
  BOOL: Uint8Array,
  F4: Uint8Array,
  F6_E2M3: Uint8Array,
  F6_E3M2: Uint8Array,
  U8: Uint8Array,
  I8: Int8Array,
  F8_E5M2: Uint8Array,
  F8_E4M3: Uint8Array,
  F8_E8M0: Uint8Array,
  F8_E4M3FNUZ: Uint8Array,
  F8_E5M2FNUZ: Uint8Array,
  I16: Int16Array,
  U16: Uint16Array,
  F16: Uint16Array,
  BF16: Uint16Array,
  I32: Int32Array,
  U32: Uint32Array,
  F32: Float32Array,
  C64: Float32Array,
  F64: Float64Array,
  I64: BigInt64Array,
  U64: BigUint64Array,
}

/** `bytes` as the dtype's natural array, placed at a non-zero byteOffset of a larger buffer. */
export function asNatural(dtype: string, bytes: Uint8Array): Natural {
  const Ctor = NATURAL[dtype]
  const unit = Ctor.BYTES_PER_ELEMENT
  const buffer = new ArrayBuffer(bytes.length + 3 * unit)
  new Uint8Array(buffer, 2 * unit, bytes.length).set(bytes)
  return new Ctor(buffer, 2 * unit, bytes.length / unit)
}

export function bytesOfView(v: ArrayBufferView): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
}

/** Raw bytes -> the input form serialize() takes: raw bytes, or the natural array when `natural`. */
export function toInput(t: RefTensor, natural: boolean): TensorInput & { name: string } {
  return { name: t.name, dtype: t.dtype as DType, shape: t.shape, data: natural ? asNatural(t.dtype, t.bytes) : t.bytes }
}

export function expectBytes(actual: Uint8Array, expected: Uint8Array): void {
  const at = firstDifference(actual, expected)
  if (at !== -1) {
    const show = (b: Uint8Array) => new TextDecoder().decode(b.subarray(Math.max(0, at - 60), at + 60))
    expect.fail(
      `bytes differ at ${at} (lengths ${actual.length} vs ${expected.length}):\n  actual:   ${JSON.stringify(show(actual))}\n  expected: ${JSON.stringify(show(expected))}`,
    )
  }
}

export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  return undefined
}

export function expectCode(error: unknown, codes: string | string[]): void {
  expect(error, 'expected a SafetensorsError').toBeInstanceOf(SafetensorsError)
  const wanted = Array.isArray(codes) ? codes : [codes]
  expect(wanted, `code ${(error as SafetensorsError).code}: ${(error as Error).message}`).toContain((error as SafetensorsError).code)
}

export const declare = (tensors: readonly RefTensor[]) => tensors.map((t) => ({ name: t.name, dtype: t.dtype as DType, shape: t.shape }))

export const f32 = (n: number) => new Float32Array(n)
