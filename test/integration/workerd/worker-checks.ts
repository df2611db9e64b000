// What the Workers of test/integration/workerd (over HTTP) and test/integration/r2 (over an R2 binding) are checked against, the
// same for both: the uploads the gateway must refuse, and the converting proxy's output checked tensor by
// tensor against the input's bytes converted by the reference (test/float-reference.ts).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import { FLOAT_SOURCES, referenceConvert } from '../../float-reference.ts'
import { FIXTURES_REAL } from '../../helpers.ts'
import { headerOf } from '../../read-helpers.ts'

export const FIXTURE = 'fluxml__safetensors.jl__model.safetensors'
export const INVALID = 'syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors'
export const fixture = (): Uint8Array<ArrayBuffer> => new Uint8Array(readFileSync(join(FIXTURES_REAL, FIXTURE)))
/** Large enough that much of it reaches storage before the end shows it is short. */
const LARGE = 'catundchat__stable-diffusion-v1.5-lora__pytorch_lora_weights.safetensors'

/** Uploads a gateway must answer 422 with the code, by the format's rules: [name, bytes, code]. */
export function badUploads(): Array<[string, Uint8Array<ArrayBuffer>, string]> {
  const bytes = fixture()
  const n = Number(Buffer.from(bytes).readBigUInt64LE(0))
  const shifted = bytes.slice()
  // The first data_offsets begin becomes 1: InvalidOffset.
  const text = Buffer.from(shifted.subarray(8, 8 + n))
    .toString('latin1')
    .replace(/"data_offsets":\[0,/, '"data_offsets":[1,')
  shifted.set(Buffer.from(text, 'latin1'), 8)
  const large = new Uint8Array(readFileSync(join(FIXTURES_REAL, LARGE)))
  return [
    ['cut-short', bytes.subarray(0, bytes.length - 1), 'MetadataIncompleteBuffer'],
    ['cut-to-two-thirds', bytes.subarray(0, Math.floor((bytes.length * 2) / 3)), 'MetadataIncompleteBuffer'],
    ['large-cut-short', large.subarray(0, large.length - 100), 'MetadataIncompleteBuffer'],
    ['trailing', new Uint8Array(Buffer.concat([bytes, Buffer.alloc(1)])), 'MetadataIncompleteBuffer'],
    ['bad-offset', shifted, 'InvalidOffset'],
    ['abuse', new Uint8Array(readFileSync(join(FIXTURES_REAL, 'invalid', INVALID))), 'InvalidHeaderLength'],
  ]
}

/** `out` is `input` with every float tensor as F16, byte-exact, in the input's data order, packed. */
export function expectConvertedToF16(input: Uint8Array, out: Uint8Array): void {
  const before = headerOf(input)
  const after = headerOf(out)
  // The tensors keep the upstream's data order, packed, each converted.
  const order = Object.entries(before.tensors)
    .sort(([, a], [, b]) => a.data_offsets[0] - b.data_offsets[0])
    .map(([name]) => name)
  expect(Object.keys(after.tensors)).toEqual(order)
  let offset = 0
  for (const name of order) {
    const from = before.tensors[name]
    const raw = input.subarray(before.dataStart + from.data_offsets[0], before.dataStart + from.data_offsets[1])
    const isFloat = FLOAT_SOURCES.includes(from.dtype)
    const expected = isFloat && from.dtype !== 'F16' ? referenceConvert(from.dtype, 'F16', raw) : raw
    expect(after.tensors[name]).toEqual({ dtype: isFloat ? 'F16' : from.dtype, shape: from.shape, data_offsets: [offset, offset + expected.length] })
    expect(Buffer.compare(out.subarray(after.dataStart + offset, after.dataStart + offset + expected.length), expected), name).toBe(0)
    offset += expected.length
  }
  expect(out.length).toBe(after.dataStart + offset)
}
