// Progress (onProgress on open/openModel and on each read): bytes as they arrive, for every kind of
// source; loaded never decreases, and loaded === total once nothing is pending. The bytes each source
// really delivered are counted by the test itself (a counting source, file sizes, fixture headers).
import { mkdtempSync, openAsBlob, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { open, openModel, type Progress } from '../../src/node.ts'
import { DOWNLOAD } from '../../src/sources/downloads.ts'
import { FIXTURES_REAL } from '../helpers.ts'
import { rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { buildFile, countingSource, headerOf, rng } from '../read-helpers.ts'

const MODEL = `${FIXTURES_REAL}fluxml__safetensors.jl__model.safetensors`
const SHARDS = `${FIXTURES_REAL}sharded/fluxml__safetensors.jl`

/** Checks the rules every sequence of events obeys and returns the last one. */
function expectWellFormed(events: Progress[], what: string): Progress {
  expect(events.length, `${what}: events`).toBeGreaterThan(0)
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    expect(e.loaded, `${what}: event ${i} loaded <= total`).toBeLessThanOrEqual(e.total)
    if (i > 0) expect(e.loaded, `${what}: event ${i} loaded never decreases`).toBeGreaterThanOrEqual(events[i - 1].loaded)
  }
  const last = events[events.length - 1]
  expect(last.loaded, `${what}: ends at loaded === total`).toBe(last.total)
  return last
}

const tmp = mkdtempSync(join(tmpdir(), 'progress-'))
afterAll(() => rmSync(tmp, { recursive: true, force: true }))

// A file large enough for many events: 24 MiB of BF16 plus a small F32 tensor.
const big = (() => {
  const r = rng(7)
  const file = buildFile([
    { name: 'w', dtype: 'BF16', shape: [3 << 22], bytes: r.bytes(24 << 20) },
    { name: 'b', dtype: 'F32', shape: [5], bytes: r.bytes(20) },
  ])
  const path = join(tmp, 'big.safetensors')
  writeFileSync(path, file)
  return { file, path }
})()
const dataStart = 8 + Number(new DataView(big.file.buffer).getBigUint64(0, true))

describe.each([
  ['bytes', async () => big.file],
  ['a Blob', async () => new Blob([big.file as Uint8Array<ArrayBuffer>])],
  ['a file path', async () => big.path],
  ['a Blob of a file (openAsBlob)', async () => openAsBlob(big.path)],
])('%s', (_, source) => {
  test('open + getTensor: cumulative events end at the header plus the tensor bytes; the read alone ends at its bytes', async () => {
    const fileEvents: Progress[] = []
    const file = await open(await source(), { onProgress: (p) => fileEvents.push({ ...p }) })
    const afterHeader = expectWellFormed(fileEvents, 'header')
    expect(afterHeader.total).toBeGreaterThanOrEqual(dataStart)

    const readEvents: Progress[] = []
    const t = await file.getTensor('w', { dtype: 'F32', onProgress: (p) => readEvents.push({ ...p }) })
    expect(t.data.length).toBe(3 << 22)
    const read = expectWellFormed(readEvents, 'getTensor')
    expect(read.total).toBe(24 << 20)
    // Bytes as they arrive, not only at the end: several events, but throttled to one per 64 KiB at most.
    expect(readEvents.length).toBeLessThanOrEqual((24 << 20) / (64 << 10) + 1)
    const all = expectWellFormed(fileEvents, 'file')
    expect(all.total).toBe(afterHeader.total + (24 << 20))
    await file.close()
  })
})

test('streaming sources report before the read ends (a file, a file Blob): more than one event for 24 MiB', async () => {
  for (const input of [big.path, await openAsBlob(big.path)]) {
    const events: Progress[] = []
    const file = await open(input)
    await file.getTensor('w', { onProgress: (p) => events.push({ ...p }) })
    expect(events.length, String(input)).toBeGreaterThan(1)
    expect(events[0].loaded).toBeLessThan(events[0].total)
    await file.close()
  }
})

test('a custom RangeSource that does not stream: each read counted when it resolves, totals match what it was asked', async () => {
  const counting = countingSource(big.file)
  const events: Progress[] = []
  const file = await open(counting.source, { onProgress: (p) => events.push({ ...p }) })
  await file.getSlice('w', [[1000, 3000]])
  await file.getTensor('b', { dtype: 'F32' })
  const last = expectWellFormed(events, 'custom')
  expect(last.total).toBe(counting.bytesRead())
  await file.close()
})

test('a zero-copy view of bytes in memory still counts as read', async () => {
  const events: Progress[] = []
  const file = await open(big.file, { onProgress: (p) => events.push({ ...p }) })
  const header = events[events.length - 1].total
  const t = await file.getTensor('b')
  expect(t.data.buffer).toBe(big.file.buffer)
  expect(expectWellFormed(events, 'view').total).toBe(header + 20)
})

test('openModel: one sequence over the index and every shard, ending at their bytes read', async () => {
  const events: Progress[] = []
  const model = await openModel(SHARDS, { onProgress: (p) => events.push({ ...p }) })
  const opened = expectWellFormed(events, 'openModel')
  const index = readFileSync(join(SHARDS, 'model.safetensors.index.json'))
  const shards = [...model.shards.keys()]
  // Each shard's header read is at most the file (they are small) and at least its header.
  const headers = shards.reduce((sum, f) => sum + 8 + Number(readFileSync(join(SHARDS, f)).readBigUInt64LE(0)), 0)
  const files = shards.reduce((sum, f) => sum + readFileSync(join(SHARDS, f)).length, 0)
  expect(opened.total).toBeGreaterThanOrEqual(index.length + headers)
  expect(opened.total).toBeLessThanOrEqual(index.length + files)
  let tensorBytes = 0
  for await (const t of model.tensors()) tensorBytes += t.data.byteLength
  const all = expectWellFormed(events, 'model')
  expect(all.total).toBe(opened.total + tensorBytes)
  await model.close()
})

test('a failed read is withdrawn from the total, so the sequence still ends at loaded === total', async () => {
  const counting = countingSource(big.file)
  let fail = false
  const source = { size: big.file.length, read: (o: number, n: number) => (fail ? Promise.reject(new Error('gone')) : counting.source.read(o, n)) }
  const events: Progress[] = []
  const file = await open(source, { onProgress: (p) => events.push({ ...p }) })
  fail = true
  await expect(file.getTensor('b')).rejects.toThrow()
  fail = false
  await file.getTensor('b')
  expect(expectWellFormed(events, 'after failure').total).toBe(counting.bytesRead())
})

test('onProgress must be a function', async () => {
  await expect(open(MODEL, { onProgress: 'yes' as never })).rejects.toThrow(TypeError)
})

describe('over HTTP', () => {
  let server: TestServer
  let dropNext = false
  beforeAll(async () => {
    server = await startServer(
      rangeHandler((path) => (path === '/big.safetensors' ? big.file : undefined), {
        // One dropped connection half-way through the first tensor read, to check a resumed read's count.
        fault: (_, log) => {
          if (!dropNext || log.range === undefined || log.range.startsWith('bytes=0-')) return undefined
          dropNext = false
          return { kind: 'drop', at: 0.5 }
        },
      }),
    )
  })
  afterAll(() => server.close())

  test.each([false, true])('events name the URL and end at the bytes the server sent (a connection dropped half-way: %s)', async (drop) => {
    server.clear()
    const url = `${server.url}big.safetensors`
    const events: Progress[] = []
    const file = await open(url, { onProgress: (p) => events.push({ ...p }) })
    dropNext = drop
    const readEvents: Progress[] = []
    await file.getTensor('w', { dtype: 'F32', onProgress: (p) => readEvents.push({ ...p }) })
    await server.settled()
    // The header, the tensor's chunks (cut at multiples of the chunk size, in parallel: their bytes land
    // out of order, and the progress must still only grow), and the resumed one.
    const [begin, end] = headerOf(big.file).tensors.w.data_offsets.map((offset) => dataStart + offset)
    const chunks = Math.floor((end - 1) / DOWNLOAD.chunkBytes) - Math.floor(begin / DOWNLOAD.chunkBytes) + 1
    expect(chunks).toBeGreaterThan(1)
    expect(server.log.length).toBe(1 + chunks + (drop ? 1 : 0))
    const last = expectWellFormed(events, 'http')
    expect(last.url).toBe(url)
    // Every byte counted once, the resumed part included: what the server sent, header and tensor.
    expect(last.total).toBe(server.bytesSent())
    expect(expectWellFormed(readEvents, 'http read').total).toBe(24 << 20)
    expect(readEvents.length).toBeGreaterThan(2)
  })
})
