// src/sources/source.ts: the RangeSource of bytes in memory and of a Blob, held to the bytes they were made
// from, and the helpers every source shares: readInto over a plain read(), range checks, aborts, and the one
// way listeners are added to a caller's signal.
import { randomFillSync } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { SafetensorsError } from '../../src/errors.ts'
import { blobSource, isMissingFile, linkedAbort, memorySource, onAbort, type RangeSource, readInto } from '../../src/sources/source.ts'

const BYTES = randomFillSync(new Uint8Array(300_000))
const RANGES = [
  [0, 0],
  [0, 8],
  [12_345, 1],
  [65_530, 20],
  [1, BYTES.length - 1],
  [BYTES.length, 0],
]

describe('memorySource', () => {
  test('reads are views of the bytes, never copies', async () => {
    const source = memorySource(BYTES)
    expect(source.size).toBe(BYTES.length)
    for (const [offset, length] of RANGES) {
      const view = await source.read(offset, length)
      expect([view.buffer, view.byteOffset, view.length]).toEqual([BYTES.buffer, offset, length])
    }
  })

  test('a range past the end, or negative: Io naming it', async () => {
    const source = memorySource(BYTES.subarray(0, 100))
    await expect(source.read(96, 8)).rejects.toMatchObject({ code: 'Io', message: 'read of 8 bytes at offset 96 is past the end of the 100-byte source' })
    await expect(source.read(-1, 2)).rejects.toMatchObject({ code: 'Io' })
  })
})

describe('blobSource', () => {
  // Parts of several sizes, so that a slice's stream comes in several chunks.
  const blob = new Blob([BYTES.subarray(0, 7), BYTES.subarray(7, 70_000), BYTES.subarray(70_000)])

  test('reads are the Blob`s bytes; onBytes is told each part, adding up to the read', async () => {
    const source = blobSource(blob)
    expect(source.size).toBe(BYTES.length)
    for (const [offset, length] of RANGES) {
      const parts: number[] = []
      const target = new Uint8Array(length)
      await readInto(source, offset, target, undefined, (n) => parts.push(n))
      expect(Buffer.compare(target, BYTES.subarray(offset, offset + length)), `${offset}+${length}`).toBe(0)
      expect(parts.reduce((a, b) => a + b, 0)).toBe(length)
      expect(Buffer.compare(await source.read(offset, length), BYTES.subarray(offset, offset + length))).toBe(0)
    }
  })

  test('past the end: Io; an aborted signal: Aborted with its reason', async () => {
    const source = blobSource(blob)
    await expect(source.read(BYTES.length - 1, 2)).rejects.toMatchObject({ code: 'Io' })
    const controller = new AbortController()
    const reason = new Error('left the page')
    controller.abort(reason)
    await expect(source.read(0, 10, controller.signal)).rejects.toMatchObject({ code: 'Aborted', cause: reason })
  })

  test('a Blob whose stream fails: Io naming the range, with the cause', async () => {
    const failing = {
      size: 100,
      slice: () => ({ stream: () => new ReadableStream({ pull: (c) => c.error(new Error('NotReadableError')) }) }),
    } as unknown as Blob
    const error = await blobSource(failing)
      .read(10, 20)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SafetensorsError)
    expect((error as SafetensorsError).message).toBe('cannot read 20 bytes at offset 10 of the Blob: NotReadableError')
  })
})

describe('readInto', () => {
  test('over a source with read() only: the bytes copied into the target; a source that returns too few: Io', async () => {
    const plain: RangeSource = { read: async (offset, length) => BYTES.slice(offset, offset + length) }
    const target = new Uint8Array(50)
    await readInto(plain, 1000, target)
    expect(Buffer.compare(target, BYTES.subarray(1000, 1050))).toBe(0)
    const short: RangeSource = { read: async (offset, length) => BYTES.slice(offset, offset + length - 1) }
    await expect(readInto(short, 0, new Uint8Array(10))).rejects.toMatchObject({ code: 'Io', message: 'asked for 10 bytes at offset 0, the source returned 9' })
  })
})

describe('signals', () => {
  test('onAbort: the listener once, at the abort; removed, never', () => {
    const controller = new AbortController()
    const calls: string[] = []
    onAbort(controller.signal, () => calls.push('kept'))
    const remove = onAbort(controller.signal, () => calls.push('removed'))
    remove()
    controller.abort()
    controller.signal.dispatchEvent(new Event('abort'))
    expect(calls).toEqual(['kept'])
    expect(() => onAbort(undefined, () => {})()).not.toThrow()
  })

  test("linkedAbort: the caller's abort reaches the call's signal and is told as Aborted; the call's own abort leaves the caller's signal alone", () => {
    const caller = new AbortController()
    const told: SafetensorsError[] = []
    const linked = linkedAbort(caller.signal, (error) => told.push(error))
    linked.abort(new Error('cancelled'))
    expect([linked.signal.aborted, caller.signal.aborted, told.length]).toEqual([true, false, 0])
    linked.release()
    const second = linkedAbort(caller.signal, (error) => told.push(error))
    caller.abort(new Error('stop'))
    expect(second.signal.aborted).toBe(true)
    expect(told.map((e) => [e.code, (e.cause as Error).message])).toEqual([['Aborted', 'stop']])
    // Aborted already: at once.
    const late = linkedAbort(caller.signal, (error) => told.push(error))
    expect([late.signal.aborted, told.length]).toEqual([true, 2])
  })

  test('released: a later abort of the caller reaches nothing', () => {
    const caller = new AbortController()
    const told: unknown[] = []
    const linked = linkedAbort(caller.signal, (error) => told.push(error))
    linked.release()
    caller.abort()
    expect([linked.signal.aborted, told.length]).toEqual([false, 0])
  })
})

describe('isMissingFile', () => {
  test('Io with HTTP 404 or 410, or a path whose cause is ENOENT; nothing else', () => {
    const io = (facts: ConstructorParameters<typeof SafetensorsError>[2]) => new SafetensorsError('Io', 'x', facts)
    expect(isMissingFile(io({ status: 404 }))).toBe(true)
    expect(isMissingFile(io({ status: 410 }))).toBe(true)
    expect(isMissingFile(io({ path: '/m', cause: Object.assign(new Error('x'), { code: 'ENOENT' }) }))).toBe(true)
    expect(isMissingFile(io({ status: 403 }))).toBe(false)
    expect(isMissingFile(io({ path: '/m', cause: Object.assign(new Error('x'), { code: 'EACCES' }) }))).toBe(false)
    expect(isMissingFile(io({ cause: Object.assign(new Error('x'), { code: 'ENOENT' }) }))).toBe(false)
    expect(isMissingFile(new SafetensorsError('TensorNotFound', 'x', { status: 404 }))).toBe(false)
    expect(isMissingFile(Object.assign(new Error('x'), { code: 'Io', status: 404 }))).toBe(false)
  })
})
