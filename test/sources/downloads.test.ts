// Large reads over several connections at once (src/sources/downloads.ts), against the tests' server with a
// bandwidth budget per connection (as CDNs cap each one) or one shared by all. Chunks are 1 MiB and the
// measurement windows short here, so that a 24 MiB tensor is many chunks and the concurrency has time to
// move; the budgets are low enough that this process (server and client, on a shared machine) keeps up. The server counts the responses open at each moment: how many connections a read really used.
// Every read is compared with the bytes of the file as built here.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest'
import { convertFile, createCache, open } from '../../src/node.ts'
import { DOWNLOAD } from '../../src/sources/downloads.ts'
import { mostOpen, type RangeOptions, rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { buildFile, bytesOf, expectSameBytes, headerOf, rng } from '../read-helpers.ts'

const MiB = 1 << 20
const random = rng(21)
const WEIGHT = random.bytes(24 * MiB)
const SMALL = random.bytes(100)
const FILE = buildFile([
  { name: 'small', dtype: 'U8', shape: [100], bytes: SMALL },
  { name: 'weight', dtype: 'U8', shape: [24, MiB], bytes: WEIGHT },
])
const { dataStart } = headerOf(FILE)

const saved = { ...DOWNLOAD }
beforeAll(() => Object.assign(DOWNLOAD, { chunkBytes: MiB, windowMs: 150, warmUpMs: 30 }))
afterAll(() => Object.assign(DOWNLOAD, saved))

let server: TestServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function serve(options: RangeOptions = {}): Promise<string> {
  server = await startServer(rangeHandler(() => FILE, options))
  return `${server.origin}/model.safetensors`
}

test('a cap per connection: connections are added while they pay, up to `connections`, and the bytes are exact', async () => {
  // 1 connection: 24 MiB at 8 MB/s is 3.1 s; 6 of them: about 0.5 s, plus the ramp.
  const url = await serve({ bandwidth: { perConnection: 8e6 } })
  const file = await open(url, { connections: 6 })
  const { result, most } = await mostOpen(server!, () => file.getTensor('weight'))
  expectSameBytes(bytesOf(result.data), WEIGHT)
  // What that gains in time is measured by npm run bench (bench/download.js, nginx's per-connection cap).
  expect(most, 'connections used at once').toBeGreaterThanOrEqual(4)
  expect(most).toBeLessThanOrEqual(6)
  await server!.settled()
  // Every data request is one 1 MiB chunk (or the part of one the tensor covers), each asked once.
  const ranges = server!.ranges().slice(1)
  expect(new Set(ranges).size).toBe(ranges.length)
  expect(ranges.length).toBe(Math.floor((dataStart + 100 + WEIGHT.length - 1) / MiB) - Math.floor((dataStart + 100) / MiB) + 1)
})

test('one budget for all connections: more connections bring nothing, so the read stays at few', async () => {
  const url = await serve({ bandwidth: { shared: 16e6 } })
  const file = await open(url, { connections: 8 })
  const { result, most } = await mostOpen(server!, () => file.getTensor('weight'))
  expectSameBytes(bytesOf(result.data), WEIGHT)
  // It starts at 2 and tries a third; noise may keep one or two more for a while, never all 8.
  expect(most).toBeLessThanOrEqual(5)
})

test('connections: 1 reads a large tensor in one request, as before', async () => {
  const url = await serve()
  const file = await open(url, { connections: 1 })
  expectSameBytes(bytesOf((await file.getTensor('weight')).data), WEIGHT)
  await server!.settled()
  expect(server!.ranges().slice(1)).toEqual([`bytes=${dataStart + 100}-${dataStart + 100 + WEIGHT.length - 1}`])
})

test('a server that ignores Range: a large tensor is still one request (chunks would each bring the whole file)', async () => {
  const url = await serve({ fault: () => ({ kind: 'ignoreRange' }) })
  const file = await open(url)
  expectSameBytes(bytesOf((await file.getTensor('weight')).data), WEIGHT)
  await server!.settled()
  expect(server!.log.length).toBe(2)
})

test.each([
  [{ connections: 0 }, RangeError],
  [{ connections: -2 }, RangeError],
  [{ connections: 2.5 }, RangeError],
  [{ connections: NaN }, RangeError],
  [{ connections: '4' }, TypeError],
])('misuse: %o is a %O, for a URL and for bytes alike, before any request', async (options, kind) => {
  const url = await serve()
  await expect(open(url, options as object)).rejects.toThrow(kind)
  await expect(open(FILE, options as object)).rejects.toThrow(kind)
  expect(server!.log.length).toBe(0)
})

test('a stream reads ahead in parallel, but never more than `connections` + 2 chunks beyond what was consumed', async () => {
  const url = await serve({ bandwidth: { perConnection: 50e6 } })
  const file = await open(url, { connections: 4 })
  await server!.settled()
  server!.clear()
  const reader = file.stream('weight').getReader()
  const chunks: Uint8Array[] = []
  let consumed = 0
  let most = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    chunks.push(value)
    consumed += value.length
    // A slow consumer: the reads ahead must wait for it.
    await new Promise((resolve) => setTimeout(resolve, 2))
    const requested = server!.log.length
    most = Math.max(most, await server!.open())
    // The chunks taken, the one being taken, at most 4 in flight and 2 ready.
    expect(requested, `requests after ${consumed} bytes consumed`).toBeLessThanOrEqual(Math.floor(consumed / MiB) + 1 + 4 + 2)
  }
  const all = new Uint8Array(consumed)
  let at = 0
  for (const c of chunks) {
    all.set(c, at)
    at += c.length
  }
  expectSameBytes(all, WEIGHT)
  expect(most).toBeGreaterThan(1)
})

test('a read through the cache goes parallel too, and the next read comes from the cache', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'safetensors-parallel-cache-'))
  try {
    const url = await serve({ bandwidth: { perConnection: 50e6 } })
    const cache = await createCache({ dir })
    const first = await mostOpen(server!, async () => (await open(url, { cache })).getTensor('weight'))
    expectSameBytes(bytesOf(first.result.data), WEIGHT)
    expect(first.most).toBeGreaterThan(1)
    await server!.settled()
    server!.clear()
    const again = await (await open(url, { cache })).getTensor('weight')
    expectSameBytes(bytesOf(again.data), WEIGHT)
    await server!.settled()
    // The revalidation: one byte.
    expect(server!.bytesSent()).toBe(1)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('convertFile from a URL reads in parallel and writes the same file as from a local copy', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'safetensors-parallel-convert-'))
  try {
    const url = await serve({ bandwidth: { perConnection: 50e6 } })
    writeFileSync(join(dir, 'in.safetensors'), FILE)
    const { most } = await mostOpen(server!, () => convertFile(url, join(dir, 'from-url.safetensors')))
    await convertFile(join(dir, 'in.safetensors'), join(dir, 'from-file.safetensors'))
    expectSameBytes(readFileSync(join(dir, 'from-url.safetensors')), readFileSync(join(dir, 'from-file.safetensors')))
    expect(most).toBeGreaterThan(1)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
