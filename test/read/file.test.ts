// src/read/file.ts read paths: conversion chunk by chunk as the bytes of a read arrive (so the transfer and
// the conversion overlap), and `out` (the result written into the caller's buffer). The expected values
// are a plain read of the same bytes from memory, where the whole tensor is converted at once, and the
// independent reference of test/float-reference.ts on a sample.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, test } from 'vitest'
import { open, type RangeSource, type Source } from '../../src/node.ts'
import { referenceConvert } from '../float-reference.ts'
import { FIXTURES_REAL } from '../helpers.ts'
import { ROOT } from '../packed.ts'
import { buildFile, bytesOf, countingSource, expectSameBytes, rng } from '../read-helpers.ts'

const r = rng(99)
const MiB = 1 << 20

/** A source that fills each read front to back in parts of random sizes, reporting each part as it lands. */
function tricklingSource(bytes: Uint8Array, partsSeen: number[]): RangeSource {
  const parts = rng(5)
  return {
    size: bytes.length,
    async read(offset, length) {
      return bytes.slice(offset, offset + length)
    },
    async readInto(offset, target, _signal, onBytes) {
      for (let done = 0; done < target.length; ) {
        const n = Math.min(target.length - done, parts.int(1, 2 * MiB))
        target.set(bytes.subarray(offset + done, offset + done + n), done)
        done += n
        partsSeen.push(n)
        onBytes?.(n)
        await new Promise((resolve) => setImmediate(resolve))
      }
    },
  }
}

// Sizes past several conversion chunks, each ending with a partial chunk; byte lengths hold whole elements.
const CASES = [
  { dtype: 'BF16', to: 'F32', bytes: 20 * MiB + 6 }, // result over 32 MiB: converted in a memory of its own
  { dtype: 'BF16', to: 'F16', bytes: 7 * MiB + 2 },
  { dtype: 'F6_E3M2', to: 'F32', bytes: 9 * MiB + 3 },
  { dtype: 'F8_E4M3', to: 'BF16', bytes: 5 * MiB + 1 },
  { dtype: 'F64', to: 'F16', bytes: 8 * MiB + 8 },
] as const

describe.each(CASES)('$dtype -> $to over $bytes bytes', ({ dtype, to, bytes }) => {
  const width = dtype === 'F6_E3M2' ? 0.75 : dtype === 'F8_E4M3' ? 1 : dtype === 'F64' ? 8 : 2
  const raw = r.bytes(bytes)
  const file = buildFile([
    { name: 't', dtype, shape: [bytes / width], bytes: raw },
    { name: 'pad', dtype: 'U8', shape: [3], bytes: r.bytes(3) },
  ])

  test.each(['little', 'big'] as const)('converted as it arrives (%s-endian file) equals the whole-tensor conversion', async (byteOrder) => {
    const plain = await (await open(file, { byteOrder })).getTensor('t', { dtype: to })
    const parts: number[] = []
    const trickled = await (await open(tricklingSource(file, parts), { byteOrder })).getTensor('t', { dtype: to })
    expect(parts.length).toBeGreaterThan(2)
    expectSameBytes(trickled.data, plain.data, `${dtype} -> ${to}`)
    if (byteOrder === 'little') {
      // A sample against the reference, so the plain read is not the only witness.
      const sample = raw.subarray(0, 3 * 1024)
      const expected = referenceConvert(dtype, to, sample)
      expectSameBytes(bytesOf(trickled.data).subarray(0, expected.byteLength), expected, 'reference sample')
    }
  })

  test("out: the result lands in the caller's buffer at its offset, nothing outside it changes", async () => {
    const plain = await (await open(file)).getTensor('t', { dtype: to })
    const before = 64
    const buffer = new ArrayBuffer(before + plain.data.byteLength + 32)
    new Uint8Array(buffer).fill(0xa5)
    const out = new Uint8Array(buffer, before)
    const t = await (await open(tricklingSource(file, []))).getTensor('t', { dtype: to, out })
    expect(t.data.buffer).toBe(buffer)
    expect(t.data.byteOffset).toBe(before)
    expectSameBytes(t.data, plain.data, 'out')
    const all = new Uint8Array(buffer)
    expect(all.subarray(0, before).every((b) => b === 0xa5)).toBe(true)
    expect(all.subarray(before + plain.data.byteLength).every((b) => b === 0xa5)).toBe(true)
  })
})

describe('out', () => {
  const values = r.bytes(4 * 1000)
  const file = buildFile([{ name: 'w', dtype: 'F32', shape: [10, 100], bytes: values }])

  test('raw and sliced reads: data is a view of out, equal to the plain read', async () => {
    const f = await open(file)
    const out = new Float32Array(1000)
    const t = await f.getTensor('w', { out })
    expect(t.data.buffer).toBe(out.buffer)
    expectSameBytes(t.data, new Float32Array(values.buffer))
    const slice = await f.getSlice('w', [null, [10, 20]], { dtype: 'BF16', out: new ArrayBuffer(200) })
    expect(slice.data.byteLength).toBe(200)
    expectSameBytes(slice.data, (await f.getSlice('w', [null, [10, 20]], { dtype: 'BF16' })).data)
  })

  test('too small, misaligned or not a buffer: RangeError or TypeError before any read', async () => {
    const counting = countingSource(file)
    const f = await open(counting.source)
    counting.reset()
    await expect(f.getTensor('w', { dtype: 'F32', out: new Float32Array(999) })).rejects.toThrow(RangeError)
    await expect(f.getTensor('w', { dtype: 'F16', out: new Uint8Array(new ArrayBuffer(2001), 1) })).rejects.toThrow(RangeError)
    await expect(f.getTensor('w', { out: [] as unknown as ArrayBuffer })).rejects.toThrow(TypeError)
    expect(counting.reads).toEqual([])
  })
})

describe("the open's signal", () => {
  const bytes = buildFile([{ name: 'w', dtype: 'U8', shape: [4], bytes: new Uint8Array([1, 2, 3, 4]) }])
  test.each([
    ['bytes', (): Source => bytes],
    ['a Blob', (): Source => new Blob([bytes.slice()])],
    ['a RangeSource', (): Source => countingSource(bytes).source],
  ])('aborts the open of %s, and no read of the file it opened', async (_, source) => {
    await expect(open(source(), { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'Aborted' })
    const controller = new AbortController()
    const file = await open(source(), { signal: controller.signal })
    controller.abort()
    expect(bytesOf((await file.getTensor('w')).data)).toEqual(new Uint8Array([1, 2, 3, 4]))
  })
})

describe('a local file, however it is named and however it is let go', () => {
  const path = `${FIXTURES_REAL}fluxml__safetensors.jl__model.safetensors`

  test('a file: URL as a string opens the file it names, as a URL object does', async () => {
    const fromString = await open(pathToFileURL(path).href)
    const fromUrl = await open(pathToFileURL(path))
    expect(fromString.names()).toEqual(fromUrl.names())
    expect(fromString.names().length).toBeGreaterThan(0)
    await Promise.all([fromString.close(), fromUrl.close()])
  })

  test('Symbol.asyncDispose closes the file, as `await using` calls it', async () => {
    const file = await open(path)
    expect(typeof file[Symbol.asyncDispose]).toBe('function')
    await file[Symbol.asyncDispose]()
    await expect(file.getTensor(file.names()[0])).rejects.toMatchObject({ code: 'Io' })
  })

  test('40 files opened and dropped without close(): no warning of a descriptor closed on garbage collection', () => {
    const script = `import { open } from ${JSON.stringify(pathToFileURL(join(ROOT, 'dist/node.js')).href)}
for (let i = 0; i < 40; i++) await open(${JSON.stringify(path)})
for (let i = 0; i < 10; i++) {
  globalThis.gc()
  await new Promise((resolve) => setTimeout(resolve, 20))
}
console.log('done')`
    const run = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' })
    expect(run.stdout).toBe('done\n')
    expect(run.stderr).not.toMatch(/Closing file descriptor|DEP0137/)
    expect(run.status).toBe(0)
  })
})
