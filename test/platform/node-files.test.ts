// Fixes found by a review of the code (issue 11), each with a test that failed before it: no plain Error
// escapes the library (misuse is a TypeError, data and I/O failures a SafetensorsError), file handles do
// not leak, and every temporary file gets a unique name.
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test, vi } from 'vitest'
import { fileSource, SafetensorsError, SafetensorsWriter, saveModel, streamSink } from '../../src/node.ts'

// open() of node:fs/promises as it is, unless a test gives the next handle.
const nextHandle = vi.hoisted(() => ({ value: undefined as unknown }))
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>()
  return { ...fs, open: (...args: Parameters<typeof fs.open>) => (nextHandle.value ? Promise.resolve(nextHandle.value as FileHandle) : fs.open(...args)) }
})

const tmp = mkdtempSync(join(tmpdir(), 'review-'))
afterAll(() => rmSync(tmp, { recursive: true, force: true }))

test('a stream sink given bytes out of order: a SafetensorsError (it was a plain Error)', async () => {
  const sink = streamSink(new WritableStream())
  await sink.write(new Uint8Array(4), 0)
  const error = await sink.write(new Uint8Array(4), 100).catch((e: unknown) => e)
  expect(error).toBeInstanceOf(SafetensorsError)
  expect((error as SafetensorsError).code).toBe('Io')
})

test('abort() without a reason aborts with a SafetensorsError, not a plain Error', async () => {
  let reason: unknown
  const stream = new WritableStream({ abort: (r) => void (reason = r) })
  const writer = SafetensorsWriter.create(streamSink(stream), [{ name: 'w', dtype: 'U8', shape: [1] }])
  await writer.abort()
  expect(reason).toBeInstanceOf(SafetensorsError)
})

test('saveModel writes its index under a unique temporary name: a stale fixed-name .tmp does not break it', async () => {
  const folder = join(tmp, 'model')
  // What the old writeIndex used as its fixed temporary name; a folder there made the rename fail.
  mkdirSync(join(folder, 'model.safetensors.index.json.tmp'), { recursive: true })
  const tensors = { a: { dtype: 'U8' as const, shape: [4], data: new Uint8Array(4) }, b: { dtype: 'U8' as const, shape: [4], data: new Uint8Array(4) } }
  const names = await saveModel(folder, tensors, { maxShardSize: 4 })
  expect(names).toContain('model.safetensors.index.json')
  expect(readdirSync(folder).filter((f) => f.endsWith('.tmp') && f !== 'model.safetensors.index.json.tmp')).toEqual([])
})

describe('fileSource when stat() fails', () => {
  test('closes the file handle it opened, and the error is a SafetensorsError naming the path', async () => {
    const close = vi.fn(async () => {})
    nextHandle.value = { stat: async () => Promise.reject(new Error('EIO: stat failed')), close }
    try {
      const error = await fileSource('/some/model.safetensors').catch((e: unknown) => e)
      expect(error).toBeInstanceOf(SafetensorsError)
      expect((error as SafetensorsError).message).toContain('/some/model.safetensors')
      expect(close).toHaveBeenCalledOnce()
    } finally {
      nextHandle.value = undefined
    }
  })
})
