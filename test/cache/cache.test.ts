// The persistent range cache (createCache, open's `cache` option) on Node: a folder on disk, against the
// tests' HTTP server, which counts the body bytes it sends. Every tensor read is compared with the bytes of
// the file as served (sliced by the test's own header parse), never with another read of the library.
import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createServer as createViteServer } from 'vite'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test, vi } from 'vitest'
import { rangeCache } from '../../src/cache/cache.ts'
import { withCache } from '../../src/cache/hook.ts'
import { createCache, open, openModel, type Progress, type RangeCache } from '../../src/node.ts'
import { cacheFolder } from '../../src/platform/node-cache-folder.ts'
import type { CacheStorage } from '../../src/platform/platform.ts'
import { httpSource } from '../../src/sources/http/source.ts'
import { FIXTURES_REAL } from '../helpers.ts'
import { bytesResource, type Resource, rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { buildFile, expectSameBytes, headerOf, rng, sha256, tensorBytes } from '../read-helpers.ts'

const LORA = new Uint8Array(readFileSync(`${FIXTURES_REAL}catundchat__stable-diffusion-v1.5-lora__pytorch_lora_weights.safetensors`))
const FLUX = new Uint8Array(readFileSync(`${FIXTURES_REAL}fluxml__safetensors.jl__model.safetensors`))
const SHARDS = join(FIXTURES_REAL, 'sharded', 'fluxml__safetensors.jl')
// A tensor of several cache blocks (1 MiB each) between two small ones.
const random = rng(12)
const BIG = buildFile([
  { name: 'head', dtype: 'F32', shape: [3], bytes: random.bytes(12) },
  { name: 'big', dtype: 'U8', shape: [3_500_000], bytes: random.bytes(3_500_000) },
  { name: 'tail', dtype: 'I16', shape: [5], bytes: random.bytes(10) },
])
const KiB = 1024

/** What the server has at each path now; tests change it (a new version of a file). */
const served = new Map<string, Resource>()
let server: TestServer
let dir: string

beforeAll(async () => {
  server = await startServer(rangeHandler((path) => served.get(path)))
})
afterAll(() => server.close())

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'safetensors-cache-test-'))
  served.clear()
  served.set('/lora.safetensors', bytesResource(LORA, { etag: '"lora-1"' }))
  served.set('/big.safetensors', bytesResource(BIG, { etag: '"big-1"' }))
  server.clear()
})
afterEach(() => {
  vi.restoreAllMocks()
  rmSync(dir, { recursive: true, force: true })
})

/** Body bytes the server sent since the last call, once every response is over. */
async function sent(): Promise<number> {
  await server.settled()
  const bytes = server.bytesSent()
  server.clear()
  return bytes
}

/** Opens `path` on the server and reads every tensor, each checked against `file`'s own bytes. */
async function readAll(path: string, file: Uint8Array, options: { cache?: RangeCache; onProgress?: (p: Progress) => void } = {}): Promise<void> {
  const opened = await open(server.url + path.slice(1), options)
  const names = Object.keys(headerOf(file).tensors)
  expect(opened.names().sort()).toEqual(names.sort())
  // All at once: neighbouring tensors share blocks, and must not fetch them twice.
  const tensors = await Promise.all(names.map((name) => opened.getTensor(name)))
  tensors.forEach((t, i) => expectSameBytes(t.data, tensorBytes(file, names[i]), names[i]))
}

const cacheFiles = () => readdirSync(dir).map((name) => join(dir, name))

describe('repeat reads come from the cache', () => {
  test.each([
    ['a real file of 256 small tensors', '/lora.safetensors', LORA],
    ['a tensor of several blocks', '/big.safetensors', BIG],
  ])('%s: the first open fetches each byte once, a second sends at most 1 KiB', async (_, path, file) => {
    const cache = await createCache({ dir })
    await readAll(path, file, { cache })
    const first = await sent()
    expect(first).toBeGreaterThanOrEqual(file.length - headerOf(file).dataStart)
    expect(first).toBeLessThanOrEqual(file.length)
    await readAll(path, file, { cache })
    expect(await sent()).toBeLessThanOrEqual(KiB)
  })

  test('a new cache object on the same folder finds the entries', async () => {
    await readAll('/lora.safetensors', LORA, { cache: await createCache({ dir }) })
    await sent()
    await readAll('/lora.safetensors', LORA, { cache: await createCache({ dir }) })
    expect(await sent()).toBeLessThanOrEqual(KiB)
    // One request per open: the one-byte revalidation.
    expect(server.log.length).toBe(0)
  })

  test('a new process finds the entries (the built Node entry in a child node)', async () => {
    await readAll('/lora.safetensors', LORA, { cache: await createCache({ dir }) })
    await sent()
    const entry = fileURLToPath(new URL('../../dist/node.js', import.meta.url))
    const script = `
      const { createCache, open } = await import(${JSON.stringify(entry)});
      const { createHash } = await import('node:crypto');
      const file = await open(process.argv[1], { cache: await createCache({ dir: process.argv[2] }) });
      const out = {};
      for await (const t of file.tensors()) out[t.name] = createHash('sha256').update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)).digest('hex');
      console.log(JSON.stringify(out));`
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, `${server.url}lora.safetensors`, dir])
    const hashes = JSON.parse(stdout) as Record<string, string>
    const names = Object.keys(headerOf(LORA).tensors)
    expect(Object.keys(hashes).sort()).toEqual(names.sort())
    for (const name of names) expect(hashes[name], name).toBe(sha256(tensorBytes(LORA, name)))
    expect(await sent()).toBeLessThanOrEqual(KiB)
  })

  test('openModel: the index and every shard', async () => {
    for (const name of readdirSync(SHARDS)) served.set(`/model/${name}`, bytesResource(new Uint8Array(readFileSync(join(SHARDS, name))), { etag: `"${name}"` }))
    const readModel = async (cache: RangeCache) => {
      const model = await openModel(`${server.url}model/model.safetensors.index.json`, { cache })
      for (const name of model.names()) {
        const shard = model.shardOf(name)
        const file = new Uint8Array(readFileSync(join(SHARDS, shard)))
        expectSameBytes((await model.getTensor(name)).data, tensorBytes(file, name), name)
      }
    }
    await readModel(await createCache({ dir }))
    expect(await sent()).toBeGreaterThan(0)
    await readModel(await createCache({ dir }))
    // One byte per file (the index and 6 shards): the revalidations.
    expect(await sent()).toBeLessThanOrEqual(KiB)
  })

  test('a read partly cached fetches only its missing blocks, in one request', async () => {
    const cache = await rangeCache(await cacheFolder(dir), { blockBytes: 4096 })
    const source = withCache(httpSource(`${server.url}big.safetensors`), cache)
    const part = new Uint8Array(3 * 4096)
    await source.readInto!(0, part)
    expectSameBytes(part, BIG.subarray(0, 3 * 4096))
    await sent()
    const whole = new Uint8Array(8 * 4096 - 100)
    await source.readInto!(50, whole)
    expectSameBytes(whole, BIG.subarray(50, 50 + whole.length))
    expect(server.ranges()).toEqual([`bytes=${3 * 4096}-${8 * 4096 - 1}`])
  })

  test('cached reads report progress as network reads do', async () => {
    const events = async (cache: RangeCache | undefined) => {
      const seen: Progress[] = []
      const file = await open(`${server.url}big.safetensors`, { cache, onProgress: (p) => seen.push({ ...p }) })
      const perRead: Progress[] = []
      await file.getTensor('big', { onProgress: (p) => perRead.push({ ...p }) })
      return { last: seen.at(-1)!, perRead }
    }
    const network = await events(undefined)
    const cache = await createCache({ dir })
    await events(cache)
    await sent()
    const cached = await events(cache)
    expect(await sent()).toBeLessThanOrEqual(KiB)
    expect(cached.last).toEqual(network.last)
    expect(cached.last.loaded).toBe(cached.last.total)
    // The 3.5 MB tensor arrives in parts (a block at a time), and its last event is the whole of it.
    expect(cached.perRead.length).toBeGreaterThan(2)
    expect(cached.perRead.at(-1)).toEqual({ loaded: 3_500_000, total: 3_500_000 })
  })
})

// Vite's dev server (sirv), where many web developers serve their model files, answers a Range that ends
// at byte 0 with the rest of the file: it takes the end as `parseInt(end) || size - 1`. The revalidation
// of a warm cache asks for exactly that range.
describe('a server whose answer to bytes=0-0 runs to the end of the file', () => {
  /** Reads every tensor twice through one cache folder, counting the second open's requests. */
  async function secondOpenRequests(url: string, file: Uint8Array): Promise<string[]> {
    const names = Object.keys(headerOf(file).tensors)
    const readAllOf = async (fetchImpl: typeof fetch) => {
      const opened = await open(url, { cache: await createCache({ dir }), fetch: fetchImpl })
      for (const name of names) expectSameBytes((await opened.getTensor(name)).data, tensorBytes(file, name), name)
    }
    await readAllOf(fetch)
    const ranges: string[] = []
    await readAllOf((input, init) => {
      ranges.push(new Headers(init?.headers).get('Range') ?? '')
      return fetch(input, init)
    })
    return ranges
  }

  test("the tests' server: a cached second open reads exactly, with one request", async () => {
    const whole = await startServer(rangeHandler((path) => served.get(path), { fault: () => ({ kind: 'toFileEnd' }) }))
    try {
      expect(await secondOpenRequests(`${whole.url}lora.safetensors`, LORA)).toEqual(['bytes=0-0'])
    } finally {
      await whole.close()
    }
  })

  test("Vite's own dev server: a cached second open reads exactly, with one request", async () => {
    const vite = await createViteServer({ root: FIXTURES_REAL, configFile: false, logLevel: 'silent', server: { host: '127.0.0.1', port: 0, ws: false } })
    await vite.listen()
    try {
      const url = new URL('/catundchat__stable-diffusion-v1.5-lora__pytorch_lora_weights.safetensors', vite.resolvedUrls!.local[0])
      // What Vite itself answers to that range, independently of the library.
      const answer = await fetch(url, { headers: { Range: 'bytes=0-0' } })
      await answer.body?.cancel()
      expect([answer.status, answer.headers.get('Content-Range')]).toEqual([206, `bytes 0-${LORA.length - 1}/${LORA.length}`])
      expect(await secondOpenRequests(String(url), LORA)).toEqual(['bytes=0-0'])
    } finally {
      await vite.close()
    }
  })
})

describe('a file that changed on the server', () => {
  test('a new ETag: the new bytes are read, the old entries dropped', async () => {
    const cache = await createCache({ dir })
    await readAll('/lora.safetensors', LORA, { cache })
    const oldUsage = await cache.usage()
    await sent()
    served.set('/lora.safetensors', bytesResource(FLUX, { etag: '"lora-2"' }))
    await readAll('/lora.safetensors', FLUX, { cache })
    expect(await sent()).toBeGreaterThanOrEqual(FLUX.length - headerOf(FLUX).dataStart)
    // Only the new version's entries are left: far less than the old file's.
    expect(await cache.usage()).toBeLessThan(oldUsage / 10)
    await readAll('/lora.safetensors', FLUX, { cache: await createCache({ dir }) })
    expect(await sent()).toBeLessThanOrEqual(KiB)
  })

  test('no ETag: a new Last-Modified (same size) is a new version', async () => {
    const altered = LORA.slice()
    const { dataStart } = headerOf(LORA)
    for (let i = dataStart; i < altered.length; i += 1000) altered[i] ^= 0xff
    served.set('/lora.safetensors', bytesResource(LORA, { lastModified: 'Mon, 01 Jan 2024 00:00:00 GMT' }))
    const cache = await createCache({ dir })
    await readAll('/lora.safetensors', LORA, { cache })
    await sent()
    served.set('/lora.safetensors', bytesResource(altered, { lastModified: 'Tue, 02 Jan 2024 00:00:00 GMT' }))
    await readAll('/lora.safetensors', altered, { cache })
    expect(await sent()).toBeGreaterThanOrEqual(altered.length - dataStart)
  })

  test('no validator at all: nothing is cached, reads stay correct', async () => {
    served.set('/lora.safetensors', bytesResource(LORA, {}))
    const cache = await createCache({ dir })
    await readAll('/lora.safetensors', LORA, { cache })
    await readAll('/lora.safetensors', LORA, { cache })
    expect(await sent()).toBeGreaterThanOrEqual(2 * (LORA.length - headerOf(LORA).dataStart))
    expect(await cache.usage()).toBe(0)
  })
})

describe('damaged entries are never served', () => {
  test.each([
    [
      'bytes flipped in the middle',
      (path: string) => {
        const bytes = readFileSync(path)
        for (let i = bytes.length >> 1; i < bytes.length; i += 4099) bytes[i] ^= 0x5a
        writeFileSync(path, bytes)
      },
    ],
    [
      'one bit flipped in the first bytes',
      (path: string) => {
        const bytes = readFileSync(path)
        bytes[9] ^= 1
        writeFileSync(path, bytes)
      },
    ],
    ['truncated to half', (path: string) => truncateSync(path, readFileSync(path).length >> 1)],
    ['truncated to nothing', (path: string) => truncateSync(path, 0)],
    ['one byte appended', (path: string) => writeFileSync(path, Buffer.concat([readFileSync(path), Buffer.from([0])]))],
  ])('%s: the reads return the file, fetched again, and the entries are repaired', async (_, damage) => {
    await readAll('/big.safetensors', BIG, { cache: await createCache({ dir }) })
    await sent()
    const files = cacheFiles()
    expect(files.length).toBeGreaterThan(1)
    files.forEach(damage)
    const cache = await createCache({ dir })
    await readAll('/big.safetensors', BIG, { cache })
    expect(await sent()).toBeGreaterThanOrEqual(BIG.length - headerOf(BIG).dataStart)
    await readAll('/big.safetensors', BIG, { cache: await createCache({ dir }) })
    expect(await sent()).toBeLessThanOrEqual(KiB)
  })

  test('an entry of another URL is not served, though its checksum is right', async () => {
    served.set('/copy.safetensors', bytesResource(LORA, { etag: '"lora-1"' }))
    await readAll('/lora.safetensors', LORA, { cache: await createCache({ dir }) })
    await readAll('/copy.safetensors', LORA, { cache: await createCache({ dir }) })
    // Entry names end in the block index: swap each block's entries between the two URLs.
    const byBlock = new Map<string, string[]>()
    for (const name of readdirSync(dir)) byBlock.set(name.slice(name.lastIndexOf('-')), [...(byBlock.get(name.slice(name.lastIndexOf('-'))) ?? []), name])
    for (const pair of byBlock.values()) {
      expect(pair.length).toBe(2)
      const [a, b] = pair.map((name) => readFileSync(join(dir, name)))
      writeFileSync(join(dir, pair[0]), b)
      writeFileSync(join(dir, pair[1]), a)
    }
    await sent()
    await readAll('/lora.safetensors', LORA, { cache: await createCache({ dir }) })
    await readAll('/copy.safetensors', LORA, { cache: await createCache({ dir }) })
    expect(await sent()).toBeGreaterThanOrEqual(2 * (LORA.length - headerOf(LORA).dataStart))
  })
})

describe('limits', () => {
  test('maxBytes evicts the least recently used entries', async () => {
    // Reads block k of big.safetensors (4 KiB blocks) through a cache of at most `maxBytes` on the folder.
    const blockReader = async (maxBytes: number) => {
      const cache = await rangeCache(await cacheFolder(dir), { blockBytes: 4096, maxBytes })
      const source = withCache(httpSource(`${server.url}big.safetensors`), cache)
      const read = async (k: number) => {
        const bytes = new Uint8Array(4096)
        await source.readInto!(k * 4096, bytes)
        expectSameBytes(bytes, BIG.subarray(k * 4096, (k + 1) * 4096), `block ${k}`)
      }
      return { cache, read }
    }
    const first = await blockReader(1 << 30)
    await first.read(0)
    const entry = await first.cache.usage()
    // Room for three entries of this size; block 0 is one of them already.
    const { cache: small, read } = await blockReader(Math.floor(3.5 * entry))
    await read(1)
    await read(2)
    await read(0)
    await read(3)
    expect(await small.usage()).toBeLessThanOrEqual(3.5 * entry)
    await sent()
    // 1 is the least recently used (0 was read after it): 0, 2 and 3 are still there.
    await read(0)
    await read(2)
    await read(3)
    expect(await sent()).toBe(0)
    await read(1)
    expect(await sent()).toBe(4096)
  })

  test.each([
    ['ENOSPC (a full disk)', () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' })],
    ['QuotaExceededError (a full origin quota)', () => new DOMException('The quota has been exceeded.', 'QuotaExceededError')],
  ])('a write that fails with %s warns once, and the reads go on from the network', async (_, failure) => {
    const folder = await cacheFolder(dir)
    const full: CacheStorage = {
      ...folder,
      write: async () => {
        throw failure()
      },
    }
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    const cache = await rangeCache(full, { blockBytes: 64 * KiB })
    await readAll('/lora.safetensors', LORA, { cache })
    await readAll('/big.safetensors', BIG, { cache })
    expect(warn).toHaveBeenCalledTimes(1)
    expect(String(warn.mock.calls[0][0])).toMatch(/full/)
    expect(await cache.usage()).toBe(0)
    await sent()
    await readAll('/lora.safetensors', LORA, { cache })
    expect(await sent()).toBeGreaterThanOrEqual(LORA.length - headerOf(LORA).dataStart)
  })
})

describe('usage() and clear()', () => {
  test('usage counts the stored bytes; clear removes the entries and nothing else in the folder', async () => {
    writeFileSync(join(dir, 'notes.txt'), "not the cache's")
    const cache = await createCache({ dir })
    expect(await cache.usage()).toBe(0)
    await readAll('/lora.safetensors', LORA, { cache })
    const usage = await cache.usage()
    expect(usage).toBeGreaterThanOrEqual(LORA.length)
    expect(usage).toBeLessThan(LORA.length + 16 * KiB)
    await cache.clear()
    expect(await cache.usage()).toBe(0)
    expect(readdirSync(dir)).toEqual(['notes.txt'])
    await sent()
    await readAll('/lora.safetensors', LORA, { cache })
    expect(await sent()).toBeGreaterThanOrEqual(LORA.length - headerOf(LORA).dataStart)
  })
})

describe('misuse', () => {
  test.each([
    [{ maxBytes: -1 }, RangeError],
    [{ maxBytes: 0 }, RangeError],
    [{ maxBytes: 1.5 }, RangeError],
    [{ maxBytes: '1GB' }, TypeError],
    [{ dir: 5 }, TypeError],
    [{ name: 5 }, TypeError],
    [{ dir: 'a', name: 'b' }, TypeError],
    [null, TypeError],
  ])('createCache(%j) is a %o', async (options, type) => {
    await expect(createCache(options as never)).rejects.toThrow(type)
  })

  test('without dir, Node has no OPFS: a TypeError that says to pass dir', async () => {
    await expect(createCache()).rejects.toThrow(/pass \{ dir \}/)
  })

  test('a cache not made by createCache is a TypeError, whatever the source', async () => {
    const fake = { usage: async () => 0, clear: async () => {} }
    await expect(open(`${server.url}lora.safetensors`, { cache: fake as RangeCache })).rejects.toThrow(TypeError)
    await expect(open(`${FIXTURES_REAL}fluxml__safetensors.jl__model.safetensors`, { cache: fake as RangeCache })).rejects.toThrow(TypeError)
  })
})
