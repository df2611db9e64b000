// Atomic writes (src/node/atomic-files.ts), split from the writer's tests (issue 5): a sink or a source that fails
// half-way leaves no file and no temporary, and an existing target as it was. Expected bytes come from
// test/writer-reference.ts.

import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { convertFile, fileSink, type RangeSource, SafetensorsWriter, type WriterSink, writeFile } from '../../src/node.ts'
import { prng } from '../random.ts'
import { declare, expectCode, rejectionOf, scratchFolders, toInput } from '../write-helpers.ts'
import { byteSize, ls, type RefTensor, randomBytes, referenceFile, splitFile } from '../writer-reference.ts'

const scratch = scratchFolders()

// ------------------------------------------------------------------------------------------------------
// 4. Atomic writes: a sink or a source that fails half-way

/** fileSink whose write() stores the first `failAfter` bytes and then throws, as a full disk would. */
async function failingFileSink(path: string, failAfter: number, log: string[]): Promise<WriterSink> {
  const inner = await fileSink(path)
  let written = 0
  return {
    seekable: true,
    async write(bytes, position) {
      if (written + bytes.length > failAfter) {
        const part = failAfter - written
        if (part > 0) await inner.write(bytes.subarray(0, part), position)
        written += Math.max(0, part)
        log.push(`failed after ${written} bytes`)
        throw new Error('ENOSPC: simulated disk full')
      }
      written += bytes.length
      await inner.write(bytes, position)
    },
    commit: () => inner.commit(),
    abort: (reason) => {
      log.push('abort')
      return inner.abort(reason)
    },
  }
}

describe('atomic writes', () => {
  const tensors = (() => {
    const next = prng(61)
    return ['a', 'b', 'c', 'd'].map((name): RefTensor => ({ name, dtype: 'F32', shape: [256, 16], bytes: randomBytes(byteSize('F32', [256, 16]), next) }))
  })()

  test.each([
    ['absent', false],
    ['existing', true],
  ])('a sink failing half-way: the target (%s) is unchanged and no temporary file is left', async (_, existed) => {
    const dir = scratch()
    const target = join(dir, 'model.safetensors')
    const old = new Uint8Array([1, 2, 3, 4, 5])
    if (existed) writeFileSync(target, old)
    const log: string[] = []
    const total = referenceFile(tensors).length
    const writer = SafetensorsWriter.create(await failingFileSink(target, Math.floor(total / 2), log), declare(tensors))
    let error: unknown
    for (const t of tensors) {
      error = await rejectionOf(writer.write(t.name, t.bytes))
      if (error) break
    }
    expectCode(error, 'Io')
    expect(log[0]).toMatch(/^failed after \d+ bytes$/)
    expect(log).toContain('abort')
    expectCode(await rejectionOf(writer.close()), ['Io', 'TensorInvalidInfo', 'Aborted'])
    expect(ls(dir)).toEqual(existed ? ['model.safetensors'] : [])
    if (existed) expect(new Uint8Array(readFileSync(target))).toEqual(old)
  })

  test('a sink failing on the header write: the error comes from write(), with no unhandled rejection', async () => {
    const dir = scratch()
    const target = join(dir, 'model.safetensors')
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const writer = SafetensorsWriter.create(await failingFileSink(target, 0, []), declare(tensors))
      // A caller typically awaits something (reading the source) before its first write.
      await new Promise((resolve) => setTimeout(resolve, 20))
      expectCode(await rejectionOf(writer.write('a', tensors[0].bytes)), 'Io')
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    expect(unhandled.map((e) => String(e))).toEqual([])
    expect(ls(dir)).toEqual([])
  })

  test('the final rename failing (the target is a non-empty directory): no temporary file is left', async () => {
    const dir = scratch()
    const target = join(dir, 'model.safetensors')
    mkdirSync(target)
    writeFileSync(join(target, 'keep'), 'x')
    expect(
      await rejectionOf(
        writeFile(
          target,
          tensors.map((t) => toInput(t, false)),
        ),
      ),
    ).toBeDefined()
    expect(ls(dir)).toEqual(['model.safetensors'])
    expect(statSync(target).isDirectory()).toBe(true)
    expect(ls(target)).toEqual(['keep'])
  })

  /** An in-memory RangeSource that fails once a read reaches `failFrom`. */
  function failingSource(bytes: Uint8Array, failFrom: number, reads: Array<[number, number]>): RangeSource {
    return {
      size: bytes.length,
      async read(offset, length) {
        reads.push([offset, length])
        if (offset + length > failFrom) throw new Error(`simulated network failure reading ${length} bytes at ${offset}`)
        return bytes.slice(offset, offset + length)
      },
    }
  }

  test.each([
    ['absent', false],
    ['existing', true],
  ])('convertFile with a source failing half-way: the target (%s) is unchanged and no temporary file is left', async (_, existed) => {
    // four BF16 tensors of 32 KiB: the header read (64 KiB from 0) ends before the failure point
    const next = prng(62)
    const input = referenceFile(['a', 'b', 'c', 'd'].map((name) => ({ name, dtype: 'BF16', shape: [256, 64], bytes: randomBytes(32768, next) })))
    const dataStart = splitFile(input).dataStart
    const dir = scratch()
    const target = join(dir, 'out.safetensors')
    const old = 'previous version'
    if (existed) writeFileSync(target, old)
    const reads: Array<[number, number]> = []
    // fail while reading the third of four tensors: two are already converted and written
    const source = failingSource(input, dataStart + 2 * 32768 + 100, reads)
    const error = await rejectionOf(convertFile(source as unknown as string, target, { dtype: 'F32' }))
    expect(error).toBeDefined()
    expect(reads.filter(([o]) => o >= dataStart).length, 'data reads before the failure').toBe(3)
    expect(ls(dir)).toEqual(existed ? ['out.safetensors'] : [])
    if (existed) expect(readFileSync(target, 'utf8')).toBe(old)
  })
})
