// Quantized checkpoints (src/quant/): every layout's fixture read as its logical tensors, each compared bit for bit
// with the golden values its reference implementation computed (test/fixtures/quantized, golden.safetensors in the
// reference's own dtype), whole, by slices and as streams; and every inconsistent variant of mutations.json a
// coded error naming the module.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { type DType, openModel, SafetensorsError } from '../../src/node.ts'
import { referenceConvert } from '../float-reference.ts'
import { FOLDERS, MUTATIONS, methodOf, mutatedCopy, QUANTIZED, quantizedNames, referenceOf, storedOf } from '../quant-fixtures.ts'
import { errorOf, expectSameBytes, headerOf, tensorBytes } from '../read-helpers.ts'

/** Each fixture's golden tensors: dtype, shape and bytes, read from golden.safetensors by hand. */
function goldenOf(folder: string): Map<string, { dtype: string; shape: number[]; bytes: Uint8Array }> {
  const file = new Uint8Array(readFileSync(join(QUANTIZED, folder, 'golden.safetensors')))
  const { tensors } = headerOf(file)
  return new Map(Object.entries(tensors).map(([name, t]) => [name, { dtype: t.dtype, shape: t.shape, bytes: tensorBytes(file, name) }]))
}

const ELEMENT_BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 }

/** Rows [first, end) of a row-major tensor's bytes. */
function rowsOf(bytes: Uint8Array, shape: number[], [first, end]: [number, number]): Uint8Array {
  const rowBytes = bytes.length / shape[0]
  return bytes.subarray(first * rowBytes, end * rowBytes)
}

/** The block [r0, r1) x [c0, c1) of the last two dimensions of a 2-D tensor's bytes. */
function blockOf(bytes: Uint8Array, [, cols]: number[], dtype: string, [r0, r1]: [number, number], [c0, c1]: [number, number]): Uint8Array {
  const size = ELEMENT_BYTES[dtype]
  const out = new Uint8Array((r1 - r0) * (c1 - c0) * size)
  for (let r = r0; r < r1; r++) out.set(bytes.subarray((r * cols + c0) * size, (r * cols + c1) * size), (r - r0) * (c1 - c0) * size)
  return out
}

describe.each(FOLDERS)('%s', (folder) => {
  const reference = referenceOf(folder)
  const golden = goldenOf(folder)
  const quantized = quantizedNames(folder)

  test('lists the logical tensors, with their dtype and shape; quantization names the method', async () => {
    const model = await openModel(join(QUANTIZED, folder))
    try {
      expect(model.quantization?.method).toBe(methodOf(folder))
      expect(new Set(model.names())).toEqual(new Set(golden.keys()))
      for (const name of quantized) {
        const info = model.info(name)
        expect({ dtype: info.dtype, shape: info.shape }, name).toEqual({ dtype: reference.golden_dtype, shape: reference.tensors[name].shape })
        expect(new Set(info.quantized?.parts ?? []), name).toEqual(new Set(reference.tensors[name].stored))
      }
    } finally {
      await model.close()
    }
  })

  test('every tensor is its golden value, bit for bit; F32 and BF16 are those values converted once', async () => {
    const model = await openModel(join(QUANTIZED, folder))
    try {
      for (const [name, expected] of golden) {
        const tensor = await model.getTensor(name, { dtype: expected.dtype as DType })
        expect(tensor.shape, name).toEqual(expected.shape)
        expectSameBytes(tensor.data, expected.bytes, name)
      }
      for (const name of quantized) {
        const expected = golden.get(name)!
        for (const to of ['F32', 'BF16', 'F16'] as const) {
          const tensor = await model.getTensor(name, { dtype: to })
          expect(tensor.dtype).toBe(to)
          expectSameBytes(tensor.data, to === expected.dtype ? expected.bytes : referenceConvert(expected.dtype, to, expected.bytes), `${name} as ${to}`)
        }
      }
    } finally {
      await model.close()
    }
  })

  test('row slices, blocks and indices of a logical tensor are those of its golden value', async () => {
    const model = await openModel(join(QUANTIZED, folder))
    try {
      for (const name of quantized) {
        const { dtype, shape, bytes } = golden.get(name)!
        const rows = shape[0]
        const first = Math.floor(rows / 3)
        const end = Math.min(rows, first + Math.max(1, Math.floor(rows / 8)))
        expectSameBytes((await model.getSlice(name, [[first, end]])).data, rowsOf(bytes, shape, [first, end]), `${name} rows`)
        const index = await model.getSlice(name, [rows - 1])
        expect(index.shape).toEqual(shape.slice(1))
        expectSameBytes(index.data, rowsOf(bytes, shape, [rows - 1, rows]), `${name} last row`)
        if (shape.length === 2) {
          const cols = shape[1]
          const block = await model.getSlice(name, [
            [first, end],
            [1, cols - 3],
          ])
          expect(block.shape).toEqual([end - first, cols - 4])
          expectSameBytes(block.data, blockOf(bytes, shape, dtype, [first, end], [1, cols - 3]), `${name} block`)
        } else {
          const [, inner, cols] = shape
          const slice = await model.getSlice(name, [1, [2, 5], null])
          expect(slice.shape).toEqual([3, cols])
          expectSameBytes(slice.data, bytes.subarray((inner + 2) * cols * 2, (inner + 5) * cols * 2), `${name} expert slice`)
        }
      }
    } finally {
      await model.close()
    }
  })

  test('a logical tensor streams as its golden bytes; its parts stay readable by their own names', async () => {
    const model = await openModel(join(QUANTIZED, folder))
    try {
      const name = quantized[0]
      expectSameBytes(new Uint8Array(await new Response(model.stream(name)).arrayBuffer()), golden.get(name)!.bytes, name)
      const stored = storedOf(folder)
      for (const part of reference.tensors[name].stored!) {
        const { dtype, shape } = stored.get(part)!
        const tensor = await model.getTensor(part, { stored: true })
        expect({ dtype: tensor.dtype, shape: tensor.shape }, part).toEqual({ dtype, shape })
        expect(model.info(part, { stored: true }).dtype).toBe(dtype)
      }
      const seen: string[] = []
      for await (const tensor of model.tensors()) seen.push(tensor.name)
      expect(seen).toEqual(model.names())
    } finally {
      await model.close()
    }
  })
})

describe('inconsistent and unsupported quantized models (mutations.json)', () => {
  test.each(MUTATIONS.map((m) => [m.name, m] as const))('%s', async (_, mutation) => {
    const folder = mutatedCopy(mutation)
    const error = await errorOf(async () => {
      const model = await openModel(folder)
      try {
        await model.getTensor(mutation.read)
      } finally {
        await model.close()
      }
    })
    expect(error).toBeInstanceOf(SafetensorsError)
    expect(error.code, error.message).toBe(mutation.expect.code)
    for (const mention of mutation.expect.mentions) expect(error.message).toContain(mention)
  })
})

describe('openModel(x, { quantization: false }): the stored tensors, as they are', () => {
  test.each(FOLDERS)('%s', async (folder) => {
    const stored = storedOf(folder)
    const model = await openModel(join(QUANTIZED, folder), { quantization: false })
    try {
      expect(model.quantization).toBeNull()
      expect(new Set(model.names())).toEqual(new Set(stored.keys()))
      const [name, { dtype, shape }] = [...stored][0]
      const tensor = await model.getTensor(name)
      expect({ dtype: tensor.dtype, shape: tensor.shape }).toEqual({ dtype, shape })
    } finally {
      await model.close()
    }
  })

  test('a method this library does not read opens as well', async () => {
    const mutation = MUTATIONS.find((m) => m.expect.code === 'UnsupportedQuantization')!
    const model = await openModel(mutatedCopy(mutation), { quantization: false })
    expect(model.names().length).toBe(storedOf(mutation.folder).size)
    await model.close()
  })

  test('a quantization option that is not a boolean is a TypeError', async () => {
    await expect(openModel(join(QUANTIZED, FOLDERS[0]), { quantization: 'no' as unknown as boolean })).rejects.toThrow(TypeError)
  })
})
