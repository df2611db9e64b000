import { spawnSync } from 'node:child_process'
import { randomFillSync } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test, vi } from 'vitest'
import { fileSource, SafetensorsError } from '../../src/node.ts'
import { nodeFiles } from '../../src/platform/node-files.ts'

// open() of node:fs/promises as it is, unless a test gives the next handle.
const nextHandle = vi.hoisted(() => ({ value: undefined as unknown }))
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>()
  return { ...fs, open: (...args: Parameters<typeof fs.open>) => (nextHandle.value ? Promise.resolve(nextHandle.value as FileHandle) : fs.open(...args)) }
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

describe('fileSource', () => {
  const folder = mkdtempSync(join(tmpdir(), 'safetensors-node-files-'))
  afterAll(() => rmSync(folder, { recursive: true, force: true }))
  // 20 MiB and a bit: reads cross the 8 MiB chunks a read is made of.
  const bytes = randomFillSync(new Uint8Array((20 << 20) + 12_345))
  const path = join(folder, 'random.bin')
  writeFileSync(path, bytes)

  test('its size, and reads anywhere: the bytes on disk, in chunks of at most 8 MiB whose counts add up', async () => {
    const source = await fileSource(path)
    try {
      expect(source.size).toBe(statSync(path).size)
      for (const [offset, length] of [
        [0, 8],
        [12_345, 1000],
        [(8 << 20) - 3, 6],
        [1, bytes.length - 1],
        [bytes.length, 0],
      ]) {
        const parts: number[] = []
        const target = new Uint8Array(length)
        await source.readInto!(offset, target, undefined, (n) => parts.push(n))
        expect(Buffer.compare(target, bytes.subarray(offset, offset + length)), `${offset}+${length}`).toBe(0)
        expect(parts.reduce((a, b) => a + b, 0)).toBe(length)
        expect(Math.max(0, ...parts)).toBeLessThanOrEqual(8 << 20)
        expect(Buffer.compare(await source.read(offset, length), bytes.subarray(offset, offset + length))).toBe(0)
      }
    } finally {
      await source.close?.()
    }
  })

  test('a read past the end, an aborted read, a file that shrank: Io or Aborted, naming what', async () => {
    const copy = join(folder, 'shrinking.bin')
    writeFileSync(copy, bytes.subarray(0, 1 << 20))
    const source = await fileSource(copy)
    try {
      await expect(source.read((1 << 20) - 4, 8)).rejects.toMatchObject({ code: 'Io', message: expect.stringContaining('past the end') })
      const controller = new AbortController()
      controller.abort()
      await expect(source.readInto!(0, new Uint8Array(16), controller.signal)).rejects.toMatchObject({ code: 'Aborted' })
      truncateSync(copy, 1000)
      await expect(source.read(0, 4096)).rejects.toMatchObject({
        code: 'Io',
        path: copy,
        message: `${copy}: unexpected end of file at byte 1000 (the file shrank?)`,
      })
    } finally {
      await source.close?.()
    }
  })

  test('what is not a file: Io saying what it is, at once (a named pipe would block an open)', async () => {
    await expect(fileSource(folder)).rejects.toMatchObject({ code: 'Io', path: folder, message: `cannot open ${folder}: it is a folder, not a file` })
    const pipe = join(folder, 'pipe')
    if (spawnSync('mkfifo', [pipe]).status === 0)
      await expect(fileSource(pipe)).rejects.toMatchObject({ code: 'Io', message: `cannot open ${pipe}: it is a named pipe, not a file` })
    const missing = join(folder, 'missing.safetensors')
    await expect(fileSource(missing)).rejects.toMatchObject({
      code: 'Io',
      path: missing,
      message: `cannot open ${missing}: no such file or directory (ENOENT)`,
    })
  })
})

describe('nodeFiles.locateModel', () => {
  const folder = mkdtempSync(join(tmpdir(), 'safetensors-locate-'))
  afterAll(() => rmSync(folder, { recursive: true, force: true }))
  const names = ['model.safetensors', 'model.safetensors.index.json']

  test('a folder: the first of the names that is a file there; its shards beside it', async () => {
    mkdirSync(join(folder, 'model.safetensors'))
    writeFileSync(join(folder, 'model.safetensors.index.json'), '{}')
    const found = await nodeFiles.locateModel(folder, names)
    expect([found?.file, found?.name, found?.shard('a.safetensors')]).toEqual([
      join(folder, 'model.safetensors.index.json'),
      'model.safetensors.index.json',
      join(folder, 'a.safetensors'),
    ])
  })

  test('a file: itself, its shards in its folder; a folder with none of the names: undefined', async () => {
    const found = await nodeFiles.locateModel(join(folder, 'x.index.json'), names)
    expect([found?.file, found?.name, found?.shard('b.safetensors')]).toEqual([join(folder, 'x.index.json'), 'x.index.json', join(folder, 'b.safetensors')])
    const empty = mkdtempSync(join(folder, 'empty-'))
    expect(await nodeFiles.locateModel(empty, names)).toBeUndefined()
  })
})
