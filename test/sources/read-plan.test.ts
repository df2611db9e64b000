// Slices read by cost (src/sources/read-plan.ts) and HTTP multi-range reads (src/sources/http/source.ts): gaps just under and
// over the merge threshold, the column block of a 16384x1024 BF16 weight at a 10 ms round trip against
// a whole read, and servers that answer several ranges with parts (the tests' own, nginx), refuse them
// (200, or the first range alone), drop the answer half-way, or change the file in between. Expected
// values are sliced by hand from the bytes written.
import { randomFillSync } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { open } from '../../src/index.ts'
import { bytesResource, type RangeOptions, rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { findNginx, startNginx } from '../nginx.ts'
import { buildFile, bytesOf, countingSource, expectError, expectSameBytes, headerOf } from '../read-helpers.ts'

/** Rows [0, rows) and columns [from, to) of a row-major matrix of `width` elements of `unit` bytes, by hand. */
function columns(bytes: Uint8Array, rows: number, width: number, unit: number, from: number, to: number): Uint8Array {
  const out = new Uint8Array(rows * (to - from) * unit)
  for (let r = 0; r < rows; r++) out.set(bytes.subarray((r * width + from) * unit, (r * width + to) * unit), r * (to - from) * unit)
  return out
}

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

describe('several ranges in one request', () => {
  // 64 rows of 1 MiB: the 512 columns from 100 are 64 runs with 1 MiB - 512 bytes between them, more
  // than a request costs, so the reads stay 64 ranges: 6 multi-range requests where the server answers them.
  const ROWS = 64
  const WIDTH = 1 << 20
  const data = randomFillSync(new Uint8Array(ROWS * WIDTH))
  const file = buildFile([{ name: 'm', dtype: 'U8', shape: [ROWS, WIDTH], bytes: data }])
  const want = columns(data, ROWS, WIDTH, 1, 100, 612)
  const slice = (f: Awaited<ReturnType<typeof open>>) => f.getSlice('m', [null, [100, 612]])

  async function serve(options: RangeOptions, lookup: (n: number) => Uint8Array | ReturnType<typeof bytesResource> = () => file) {
    const server = await startServer(rangeHandler((_, n) => lookup(n), options))
    const f = await open(`${server.url}m.safetensors`)
    server.clear()
    return { server, f }
  }

  test('a server that answers multipart/byteranges: 6 requests, one of them first and alone', async () => {
    const { server, f } = await serve({ multiRange: 'multipart' })
    try {
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      expect(server.ranges().length).toBe(6)
      expect(server.ranges().every((r) => r.split(',').length > 1)).toBe(true)
      expect(server.log.every((e) => e.status === 206)).toBe(true)
    } finally {
      await server.close()
    }
  })

  test.each([
    ['200 with the whole file', 'whole', 200],
    ['206 with the first range alone', 'first', 206],
  ] as const)('a server that refuses, answering %s: one request is spent learning it, once', async (_, mode, status) => {
    const { server, f } = await serve({ multiRange: mode })
    try {
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      const several = server.log.filter((e) => (e.range ?? '').includes(','))
      expect(several.length).toBe(1)
      expect(several[0].status).toBe(status)
      // The first range comes in the refusal's single range; the others one request each.
      expect(server.log.length).toBe(mode === 'first' ? ROWS : ROWS + 1)
      server.clear()
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      expect(server.ranges().filter((r) => r.includes(','))).toEqual([])
      expect(server.log.length).toBe(ROWS)
    } finally {
      await server.close()
    }
  })

  test('a multipart answer dropped half-way: the request is made again for the ranges not yet complete', async () => {
    const { server, f } = await serve({ multiRange: 'multipart', fault: (n) => (n === 0 ? { kind: 'drop', at: 0.5 } : undefined) })
    try {
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      const [first, again] = server.ranges()
      expect(again.split(',').length).toBeLessThan(first.split(',').length)
      expect(server.log.length).toBe(7)
    } finally {
      await server.close()
    }
  })

  test('the file changes before a multi-range request: an Io error, never bytes of two versions', async () => {
    const changed = file.slice()
    changed.fill(0xee, headerOf(file).dataStart)
    const { server, f } = await serve({ multiRange: 'multipart' }, (n) => (n === 0 ? bytesResource(file) : bytesResource(changed, { etag: '"v2"' })))
    try {
      const error = await expectError(() => slice(f), 'Io')
      expect(error.message).toMatch(/changed/)
    } finally {
      await server.close()
    }
  })

  const NGINX = findNginx()
  test.skipIf(!NGINX)("nginx's multipart/byteranges answer", async () => {
    const root = mkdtempSync(join(tmpdir(), 'safetensors-multirange-'))
    writeFileSync(join(root, 'm.safetensors'), file)
    const nginx = await startNginx(NGINX!, root)
    try {
      const server = nginx.server('/ranged')
      const f = await open(`${server.url}m.safetensors`)
      // nginx logs a request when its answer ends: the header read's, once the server has seen it end.
      await server.settled()
      server.clear()
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      expect(server.ranges().length).toBe(6)
      expect(server.log.every((e) => e.status === 206 && (e.range ?? '').includes(','))).toBe(true)
    } finally {
      await nginx.close()
      rmSync(root, { recursive: true, force: true })
    }
  })
})
