// file.stream(): bytes against an independent conversion (test/float-reference.ts), backpressure and cancel
// seen from the source's side, errors as stream errors with codes.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { open, openModel } from '../../src/node.ts'
import { referenceConvert } from '../float-reference.ts'
import { FIXTURES_REAL } from '../helpers.ts'
import { collect, countingSource, headerOf, streamsFile } from '../read-helpers.ts'

const file = streamsFile()

describe('file.stream', () => {
  test.each([
    ['big', 'F32'],
    ['big', 'F16'],
    ['big', 'BF16'],
    ['f8', 'F32'],
    ['f8', 'BF16'],
    ['f4', 'F16'],
    ['empty', 'F16'],
  ] as const)('%s as %s equals the reference conversion', async (name, dtype) => {
    const f = await open(file)
    const { tensors, dataStart } = headerOf(file)
    const [begin, end] = tensors[name].data_offsets
    const raw = file.subarray(dataStart + begin, dataStart + end)
    const expected = dtype === tensors[name].dtype ? raw : referenceConvert(tensors[name].dtype, dtype, raw)
    const { bytes, chunks } = await collect(f.stream(name, { dtype }))
    expect(Buffer.compare(bytes, expected)).toBe(0)
    if (name === 'big') expect(chunks).toBe(2)
  })

  test('a slice: only its rows and columns, converted', async () => {
    const f = await open(file)
    const { dataStart, tensors } = headerOf(file)
    const at = dataStart + tensors.big.data_offsets[0]
    // Rows 100..399, columns 10..19: a run of 20 bytes per row.
    const parts: Uint8Array[] = []
    for (let row = 100; row < 400; row++) parts.push(file.subarray(at + (row * 500 + 10) * 2, at + (row * 500 + 20) * 2))
    const expected = referenceConvert('BF16', 'F32', new Uint8Array(Buffer.concat(parts)))
    const { bytes } = await collect(
      f.stream('big', {
        dtype: 'F32',
        ranges: [
          [100, 400],
          [10, 20],
        ],
      }),
    )
    expect(Buffer.compare(bytes, expected)).toBe(0)
  })

  test('backpressure: a chunk is read only once the one before is taken; cancel stops', async () => {
    const counting = countingSource(file, { readInto: true })
    const f = await open(counting.source)
    counting.reset()
    const reader = f.stream('big', { dtype: 'F32' }).getReader()
    await new Promise((resolve) => setTimeout(resolve, 50))
    // One chunk kept ready (highWaterMark 1), nothing more while nobody reads.
    expect(counting.bytesRead()).toBe(1 << 19)
    await reader.read()
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(counting.bytesRead()).toBe(600_000)
    await reader.cancel()
    expect((await reader.read()).done).toBe(true)
  })

  test('cancel aborts the read in flight', async () => {
    let signal: AbortSignal | undefined
    const stalling = {
      size: file.length,
      read: async (offset: number, length: number, s?: AbortSignal) => {
        if (offset < 200) return file.slice(offset, offset + length) // the header
        signal = s
        return new Promise<Uint8Array>(() => {})
      },
    }
    const f = await open(stalling)
    const reader = f.stream('big').getReader()
    const read = reader.read()
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(signal?.aborted).toBe(false)
    await reader.cancel('enough')
    expect(signal?.aborted).toBe(true)
    expect((await read).done).toBe(true)
  })

  test('errors arrive as stream errors with codes: a failing source (Io), an abort (Aborted)', async () => {
    const failing = {
      size: file.length,
      read: async (offset: number, length: number) => {
        if (offset < 200) return file.slice(offset, offset + length)
        throw new Error('disk on fire')
      },
    }
    await expect(collect((await open(failing)).stream('big'))).rejects.toMatchObject({ code: 'Io', message: expect.stringContaining('disk on fire') })
    const controller = new AbortController()
    const stream = (await open(file)).stream('big', { dtype: 'F32', signal: controller.signal })
    const reader = stream.getReader()
    await reader.read()
    controller.abort()
    await expect(reader.read()).rejects.toMatchObject({ code: 'Aborted' })
  })

  test('known at once: an unknown tensor, a bad slice, an impossible conversion', async () => {
    const f = await open(file)
    expect(() => f.stream('nope')).toThrow(expect.objectContaining({ code: 'TensorNotFound' }))
    expect(() => f.stream('big', { ranges: [[0, 601]] })).toThrow(expect.objectContaining({ code: 'SliceOutOfRange' }))
    expect(() => f.stream('ints', { dtype: 'F16' })).toThrow(expect.objectContaining({ code: 'UnsupportedConversion' }))
  })

  test('a big-endian file gives little-endian bytes', async () => {
    const { dataStart, tensors } = headerOf(file)
    const [begin, end] = tensors.big.data_offsets
    const swapped = file.slice()
    for (let i = dataStart + begin; i < dataStart + end; i += 2) [swapped[i], swapped[i + 1]] = [file[i + 1], file[i]]
    const f = await open(swapped, { byteOrder: 'big' })
    const { bytes } = await collect(f.stream('big', { dtype: 'F32' }))
    expect(Buffer.compare(bytes, referenceConvert('BF16', 'F32', file.subarray(dataStart + begin, dataStart + end)))).toBe(0)
  })

  test('a model streams a tensor from its shard', async () => {
    const folder = join(FIXTURES_REAL, 'sharded/fluxml__safetensors.jl')
    const model = await openModel(folder)
    const name = model.names().at(-1)!
    const shard = new Uint8Array(readFileSync(join(folder, model.shardOf(name))))
    const { dataStart, tensors } = headerOf(shard)
    const [begin, end] = tensors[name].data_offsets
    const { bytes } = await collect(model.stream(name))
    expect(Buffer.compare(bytes, shard.subarray(dataStart + begin, dataStart + end))).toBe(0)
    await model.close()
  })
})
