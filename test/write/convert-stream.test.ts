// convertStream(): a file converted as it flows, against an independent conversion (test/float-reference.ts)
// and the reference writer's order; errors and cancels passed between the two streams.
import { describe, expect, test } from 'vitest'
import { convertStream, open, SafetensorsError } from '../../src/node.ts'
import { referenceConvert } from '../float-reference.ts'
import { collect, headerOf, streamsFile } from '../read-helpers.ts'
import { referenceOrder } from '../writer-reference.ts'

const file = streamsFile()

describe('convertStream', () => {
  /** Checks `out` is `file` with its floats as `dtype`, tensor by tensor, in `order`. */
  function expectConverted(out: Uint8Array, dtype: 'F16' | 'F32', order: string[]) {
    const input = headerOf(file)
    const output = headerOf(out)
    expect(Object.keys(output.tensors)).toEqual(order)
    let offset = 0
    for (const name of order) {
      const from = input.tensors[name]
      const to = output.tensors[name]
      const isFloat = from.dtype !== 'I64'
      expect(to.dtype).toBe(isFloat ? dtype : from.dtype)
      expect(to.shape).toEqual(from.shape)
      const raw = file.subarray(input.dataStart + from.data_offsets[0], input.dataStart + from.data_offsets[1])
      const expected = isFloat && from.dtype !== dtype ? referenceConvert(from.dtype, dtype, raw) : raw
      expect(to.data_offsets).toEqual([offset, offset + expected.length])
      offset += expected.length
      expect(Buffer.compare(out.subarray(output.dataStart + to.data_offsets[0], output.dataStart + to.data_offsets[1]), expected), name).toBe(0)
    }
    expect(out.length).toBe(output.dataStart + offset)
  }

  test('a stream (a Response body): checked as it flows by, its tensors in its own order', async () => {
    const { bytes } = await collect(convertStream(new Response(file).body!, { dtype: 'F16' }))
    expectConverted(bytes, 'F16', Object.keys(headerOf(file).tensors))
  })

  test('an open file: laid out as the reference writer lays it out', async () => {
    const { bytes } = await collect(convertStream(await open(file), { dtype: 'F32' }))
    const input = headerOf(file)
    const order = referenceOrder(Object.entries(input.tensors).map(([name, t]) => ({ name, dtype: t.dtype === 'I64' ? 'I64' : 'F32' }))).map((t) => t.name)
    expectConverted(bytes, 'F32', order)
  })

  test('a bad input errors the output stream with its code', async () => {
    await expect(collect(convertStream(new Blob([file.subarray(0, file.length - 1)]).stream(), { dtype: 'F16' }))).rejects.toMatchObject({
      code: 'MetadataIncompleteBuffer',
    })
    await expect(collect(convertStream(new Blob([file, new Uint8Array(3)]).stream(), { dtype: 'F16' }))).rejects.toMatchObject({
      code: 'MetadataIncompleteBuffer',
    })
    const bad = file.slice()
    bad[9] = 0xff
    const error = await collect(convertStream(new Blob([bad]).stream())).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SafetensorsError)
    expect(() => convertStream(new Blob([file]).stream(), { dtype: 'F8_E4M3' as never })).toThrow(TypeError)
  })

  test('cancelling the output cancels the input', async () => {
    let cancelled = false
    let sent = 0
    const input = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(file.slice(sent, sent + 4096))
        sent += 4096
      },
      cancel: () => void (cancelled = true),
    })
    const reader = convertStream(input, { dtype: 'F32' }).getReader()
    await reader.read()
    await reader.cancel()
    await expect.poll(() => cancelled).toBe(true)
    expect(sent).toBeLessThan(file.length)
  })

  test('cancelling the output cancels a stalled input at once (a proxy whose client left)', async () => {
    let cancelled: unknown
    // The header and a few bytes of the first tensor, then nothing: an upstream that stalls.
    const sent = file.slice(0, headerOf(file).dataStart + 8)
    const input = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(sent), cancel: (reason) => void (cancelled = reason) })
    const reader = convertStream(input, { dtype: 'F32' }).getReader()
    await reader.read()
    const pending = reader.read()
    await new Promise((resolve) => setTimeout(resolve, 20))
    await reader.cancel('client left')
    expect(cancelled).toBe('client left')
    expect((await pending).done).toBe(true)
  })
})
