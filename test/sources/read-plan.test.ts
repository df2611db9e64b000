// Slices read by cost (src/sources/read-plan.ts): gaps just under and over the merge threshold, the column
// block of a 16384x1024 BF16 weight at a 10 ms round trip against a whole read. Expected values are sliced by
// hand from the bytes written.
import { randomFillSync } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { open } from '../../src/index.ts'
import { rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { buildFile, bytesOf, columns, countingSource, expectSameBytes, headerOf } from '../read-helpers.ts'

describe('merging runs at the request cost', () => {
  // Three rows of W bytes; the first 100 columns leave gaps of W - 100 bytes between the runs.
  test.each([
    ['just under the cost: one read over the three runs', 1099, 1],
    ['equal to the cost: three reads', 1100, 3],
    ['just over the cost: three reads', 1101, 3],
  ])('a gap %s', async (_, width, reads) => {
    const data = randomFillSync(new Uint8Array(3 * width))
    const file = buildFile([{ name: 'm', dtype: 'U8', shape: [3, width], bytes: data }])
    const base = headerOf(file).dataStart
    const counting = countingSource(file, { requestCost: 1000 })
    const f = await open(counting.source)
    counting.reset()
    const t = await f.getSlice('m', [null, [0, 100]])
    expectSameBytes(bytesOf(t.data), columns(data, 3, width, 1, 0, 100))
    const want: Array<[number, number]> = reads === 1 ? [[base, 2 * width + 100]] : [0, 1, 2].map((r) => [base + r * width, 100])
    expect([...counting.reads].sort((a, b) => a[0] - b[0])).toEqual(want)
  })

  test('a row block reads exactly its rows, whatever the cost', async () => {
    const data = randomFillSync(new Uint8Array(8 * 4096))
    const file = buildFile([{ name: 'm', dtype: 'U8', shape: [8, 4096], bytes: data }])
    const counting = countingSource(file, { requestCost: 1 << 20 })
    const f = await open(counting.source)
    counting.reset()
    const t = await f.getSlice('m', [[2, 5]])
    expectSameBytes(bytesOf(t.data), data.subarray(2 * 4096, 5 * 4096))
    expect(counting.reads).toEqual([[headerOf(file).dataStart + 2 * 4096, 3 * 4096]])
  })

  test('requestCost must be a non-negative number', async () => {
    for (const bad of [-1, Number.NaN, Infinity, '1'] as unknown[]) {
      await expect(open('http://127.0.0.1:9/x', { requestCost: bad as number })).rejects.toBeInstanceOf(RangeError)
    }
  })
})

describe('a column block of a 16384x1024 BF16 weight at a 10 ms round trip', () => {
  const ROWS = 16384
  const COLS = 1024
  const data = randomFillSync(new Uint8Array(ROWS * COLS * 2))
  const file = buildFile([{ name: 'w', dtype: 'BF16', shape: [ROWS, COLS], bytes: data }])
  let server: TestServer
  beforeAll(async () => {
    server = await startServer(rangeHandler(() => file, { delay: 10 }))
  })
  afterAll(() => server.close())

  /** Median of three runs of `read`, with the requests and bytes of the last. */
  async function measure<T>(read: () => Promise<T>): Promise<{ ms: number; requests: number; bytes: number; result: T }> {
    const times: number[] = []
    let result!: T
    for (let i = 0; i < 3; i++) {
      server.clear()
      const start = performance.now()
      result = await read()
      times.push(performance.now() - start)
      await server.settled()
    }
    return { ms: times.sort((a, b) => a - b)[1], requests: server.log.length, bytes: server.bytesSent(), result }
  }

  test('1/8 of the columns: at most 16 requests, no more bytes than the tensor, exact values (the time to the log)', async () => {
    const f = await open(`${server.url}w.safetensors`)
    const whole = await measure(() => f.getTensor('w'))
    expectSameBytes(bytesOf(whole.result.data), data)
    const block = await measure(() => f.getSlice('w', [null, [384, 512]]))
    expect(block.result.shape).toEqual([ROWS, 128])
    expectSameBytes(bytesOf(block.result.data), columns(data, ROWS, COLS, 2, 384, 512))
    console.log(
      `column block: ${block.requests} requests, ${block.bytes} bytes, ${block.ms.toFixed(0)} ms; whole tensor: ${whole.requests} request, ${whole.bytes} bytes, ${whole.ms.toFixed(0)} ms`,
    )
    expect(block.requests).toBeLessThanOrEqual(16)
    expect(block.bytes).toBeLessThanOrEqual(data.length)
    // As F32 too: the same reads, converted once they have all landed.
    const f32 = await f.getSlice('w', [null, [384, 512]], { dtype: 'F32' })
    const bits = new Uint32Array(f32.data.buffer, f32.data.byteOffset, f32.data.length)
    const want = new Uint16Array(columns(data, ROWS, COLS, 2, 384, 512).buffer)
    expect(bits.every((b, i) => b === (want[i] << 16) >>> 0)).toBe(true)
  })

  test('a row block reads exactly its rows, in one request', async () => {
    const f = await open(`${server.url}w.safetensors`)
    const rows = await measure(() => f.getSlice('w', [[4096, 6144]]))
    expectSameBytes(bytesOf(rows.result.data), data.subarray(4096 * COLS * 2, 6144 * COLS * 2))
    expect(rows.requests).toBe(1)
    expect(rows.bytes).toBe(2048 * COLS * 2)
  })
})
