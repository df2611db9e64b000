// openGguf's reads (src/gguf/file.ts), split from the reader's tests: reads that read only what they need, plain
// tensors converted as open() converts them, and quantized reads of rows; expected values from the fixtures'
// golden JSON (gguf-py), the format's definitions and ggml's own dequantization.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { POOL_MIN_BYTES } from '../../src/core/convert.ts'
import { isDType } from '../../src/core/dtypes.ts'
import { dequantizeGgml } from '../../src/gguf/dequantize.ts'
import { GGML_TYPES, type GgmlType, ggmlByteLength } from '../../src/gguf/ggml-types.ts'
import { openGguf } from '../../src/gguf-node.ts'
import { firstF32Difference } from '../ggml-compare.ts'
import { ggufBytes, type Value } from '../gguf-bytes.ts'
import { fileBytes, golden } from '../gguf-reader-fixtures.ts'
import { prng } from '../random.ts'
import { bytesOf, countingSource, expectError, expectSameBytes, sha256 } from '../read-helpers.ts'
import { scratchFolders } from '../write-helpers.ts'

/** An F16's value from its bits, by the format's definition. */
function f16Value(h: number): number {
  const e = (h >> 10) & 31
  const m = h & 1023
  const v = e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15)
  return h & 0x8000 ? -v : v
}

describe('lazy reads', () => {
  test('a header larger than the first read is read in ranges that grow, never past twice its end', async () => {
    // 20,000 tokens of about 17 bytes each (about 500 KB of header), then 8 MiB of tensor data.
    const tokens: Value = { type: 'ARRAY', of: 'STRING', values: Array.from({ length: 20_000 }, (_, i) => `token number ${i}`) }
    const data = new Uint8Array(8 << 20)
    const bytes = ggufBytes({ metadata: [['tokenizer.ggml.tokens', tokens]], tensors: [{ name: 'w', ne: [data.length / 4], type: 'F32', data }] })
    const counting = countingSource(bytes)
    const file = await openGguf(counting.source)
    expect((file.metadata['tokenizer.ggml.tokens'] as string[])[19_999]).toBe('token number 19999')
    const ends = counting.reads.map(([offset, length]) => offset + length)
    expect(counting.reads[0]).toEqual([0, 64 * 1024])
    counting.reads.forEach(([offset], i) => expect(offset, `read ${i} continues the one before`).toBe(i === 0 ? 0 : ends[i - 1]))
    for (let i = 1; i < ends.length; i++) expect(ends[i], `read ${i} at least doubles what was read`).toBeGreaterThanOrEqual(2 * ends[i - 1])
    expect(ends.at(-1)).toBeLessThan(2 * file.header.dataStart)
    expect(counting.bytesRead()).toBeLessThan(bytes.length / 4)
  })

  test('a tensor reads its bytes, a slice of rows the bytes of those rows', async () => {
    const rows = Array.from({ length: 6 }, (_, i) => Float32Array.from({ length: 8 }, (_, j) => i * 8 + j))
    const data = new Uint8Array(Float32Array.from(rows.flatMap((r) => [...r])).buffer)
    const counting = countingSource(
      ggufBytes({
        tensors: [
          { name: 'a', ne: [4], type: 'I32', data: new Uint8Array(16) },
          { name: 'w', ne: [8, 3, 2], type: 'F32', data },
        ],
      }),
    )
    const file = await openGguf(counting.source)
    const { offset } = file.info('w')
    counting.reset()
    const whole = await file.getTensor('w')
    expect(whole.shape).toEqual([2, 3, 8])
    expect(Array.from(whole.data as Float32Array)).toEqual(rows.flatMap((r) => [...r]))
    expect(counting.reads).toEqual([[offset, data.length]])
    counting.reset()
    const slice = await file.getSlice('w', [1, [1, 3]])
    expect(slice.shape).toEqual([2, 8])
    expect(Array.from(slice.data as Float32Array)).toEqual([...rows[4], ...rows[5]])
    expect(counting.reads).toEqual([[offset + 4 * 32, 2 * 32]])
  })
})

describe('reads', () => {
  const file = () => openGguf(fileBytes('every-type.gguf'))

  test('plain tensors convert as open() converts: F16 to F32, F32 to BF16, an integer to F32', async () => {
    await using f = await file()
    const f16 = await f.getTensor('F16.2d')
    const asF32 = await f.getTensor('F16.2d', { dtype: 'F32' })
    // F16 -> F32 is exact.
    expect(Array.from(asF32.data as Float32Array)).toEqual(Array.from(f16.data as Uint16Array, f16Value))
    const i32 = await f.getTensor('I32.1d')
    expect(Array.from((await f.getTensor('I32.1d', { dtype: 'F32' })).data as Float32Array)).toEqual(Array.from(i32.data as Int32Array, Math.fround))
    const bf16 = await f.getTensor('F32.1d', { dtype: 'BF16' })
    expect(bf16.dtype).toBe('BF16')
    await expectError(() => f.getTensor('I32.1d', { dtype: 'F16' }), 'UnsupportedConversion')
  })

  test('a big-endian file`s tensors come in the host`s order, converted or not', async () => {
    await using big = await openGguf(fileBytes('big-endian.gguf'))
    const expected = golden('big-endian.gguf').tensors.find((t) => t.name === 'F16.3d')!
    const f16 = await big.getTensor('F16.3d')
    expect(sha256(bytesOf(f16.data))).toBe(expected.valuesSha256)
    const asF32 = await big.getTensor('F16.3d', { dtype: 'F32' })
    expect(Array.from(asF32.data as Float32Array)).toEqual(Array.from(f16.data as Uint16Array, f16Value))
  })

  test('names, info, a missing tensor, out, and close', async () => {
    const f = await file()
    expect(f.names().length).toBe(122)
    await expectError(() => f.info('nope'), 'TensorNotFound')
    await expectError(() => f.getTensor('nope'), 'TensorNotFound')
    const out = new Float32Array(12)
    const t = await f.getTensor('F32.2d', { out })
    expect(t.data.buffer).toBe(out.buffer)
    expect(Object.getPrototypeOf(f.metadata)).toBe(null)
    await f.close()
  })
})

describe('quantized reads', () => {
  const every = () => openGguf(fileBytes('every-type.gguf'))

  test('a slice of rows reads only their blocks and gives their values', async () => {
    const bytes = fileBytes('every-type.gguf')
    const counting = countingSource(bytes)
    const file = await openGguf(counting.source)
    const info = file.info('Q4_K.3d')
    expect(info.shape).toEqual([2, 2, 512])
    const whole = (await file.getTensor('Q4_K.3d')).data as Float32Array
    counting.reset()
    const rowBytes = 2 * 144
    const slice = await file.getSlice('Q4_K.3d', [1, [1, 2]])
    expect(slice.shape).toEqual([1, 512])
    expect(counting.reads).toEqual([[info.offset + 3 * rowBytes, rowBytes]])
    expect(firstF32Difference(slice.data as Float32Array, whole.subarray(3 * 512))).toBeUndefined()
    // The last dimension on block boundaries: the second block of each row.
    const blocks = await file.getSlice('Q4_K.3d', [null, null, [256, 512]])
    expect(blocks.shape).toEqual([2, 2, 256])
    const expected = Float32Array.from({ length: 4 * 256 }, (_, i) => whole[Math.floor(i / 256) * 512 + 256 + (i % 256)])
    expect(firstF32Difference(blocks.data as Float32Array, expected)).toBeUndefined()
  })

  test('a slice inside a block, a dtype that is not a float, Q8_1: coded errors', async () => {
    await using file = await every()
    const inside = await expectError(() => file.getSlice('Q8_0.2d', [null, [0, 16]]), 'MisalignedSlice')
    expect(inside.message).toContain('cuts a Q8_0 block of 32 values')
    await expectError(() => file.getSlice('Q8_0.2d', [null, 5]), 'MisalignedSlice')
    await expectError(() => file.getSlice('Q8_0.2d', [[0, 4]]), 'SliceOutOfRange')
    await expectError(() => file.getTensor('Q8_0.2d', { dtype: 'I32' }), 'UnsupportedConversion')
    const q8_1 = await openGguf(ggufBytes({ tensors: [{ name: 'q', ne: [32], type: 'Q8_1', data: new Uint8Array(36) }] }))
    const error = await expectError(() => q8_1.getTensor('q'), 'UnsupportedQuantization')
    expect(error.message).toContain('Q8_1')
  })

  test('out and progress', async () => {
    // A Blob reports its bytes as they arrive.
    await using file = await openGguf(new Blob([fileBytes('every-type.gguf')]))
    const info = file.info('Q6_K.2d')
    const out = new Float32Array(3 * 256 + 4)
    const events: number[] = []
    const tensor = await file.getTensor('Q6_K.2d', { out, onProgress: ({ loaded, total }) => events.push(loaded, total) })
    expect(tensor.data.buffer).toBe(out.buffer)
    expect(tensor.data.length).toBe(3 * 256)
    expect(events.slice(-2)).toEqual([info.byteLength, info.byteLength])
    await expect(file.getTensor('Q6_K.2d', { out: new Float32Array(10) })).rejects.toThrow(RangeError)
  })
})

describe('quantized reads on the pool', () => {
  // Every block type the kernels read, as a tensor of random blocks whose F32 values are past the pool's threshold
  // and cut in several calls; the file on disk, which the workers read themselves, and in memory, which is sent.
  const VALUES = POOL_MIN_BYTES / 4 + 1024
  const random = prng(40)
  const types = (Object.keys(GGML_TYPES) as GgmlType[]).filter((type) => {
    if (isDType(type)) return false
    try {
      dequantizeGgml(type, new Uint8Array(0), 0)
      return true
    } catch {
      return false
    }
  })
  const bytes = ggufBytes({
    tensors: types.map((type) => ({
      name: type,
      ne: [VALUES / 4, 4],
      type,
      data: Uint8Array.from({ length: ggmlByteLength(type, VALUES) }, () => random() * 256),
    })),
  })
  const scratch = scratchFolders()

  test.each([
    [
      'a local file',
      () => {
        const path = join(scratch(), 'every.gguf')
        writeFileSync(path, bytes)
        return path
      },
    ],
    ['bytes in memory', () => bytes],
  ])('%s: every type the same bits as on the calling thread, slices of rows too', async (_, source) => {
    const input = source()
    await using single = await openGguf(input, { workers: 0 })
    await using pooled = await openGguf(input)
    expect(types.length).toBeGreaterThan(20)
    for (const type of types) {
      const expected = (await single.getTensor(type)).data
      const data = (await pooled.getTensor(type)).data
      expect(data.buffer, type).toBeInstanceOf(SharedArrayBuffer)
      expectSameBytes(data, expected, type)
      const rows: Array<[number, number]> = [[1, 3]]
      expectSameBytes((await pooled.getSlice(type, rows)).data, (await single.getSlice(type, rows)).data, `rows of ${type}`)
    }
  })
})
