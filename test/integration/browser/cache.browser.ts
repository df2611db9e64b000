// The persistent cache in each engine: createCache() in OPFS, against the dev server's fixtures, with a fetch
// that records every request. The expected bytes are the fixture as one plain fetch gives it. WebKitGTK has
// no OPFS (navigator.storage is absent under WebDriver); there, and in the others with OPFS taken away,
// the cache warns once and every read comes from the network.
import { afterEach, describe, expect, test, vi } from 'vitest'
import { server } from 'vitest/browser'
import { createCache, open } from '../../../src/index.ts' // aliased to dist/index.js by vitest.browser.config.ts

const FIXTURE = '/test/fixtures/real/huggingface__candle__voices.safetensors'
const NAME = 'safetensors-wasm-cache-test'

/** A fetch that notes each request's Range header. */
function recording() {
  const ranges: string[] = []
  const fetchImpl: typeof fetch = (input, init) => {
    ranges.push(new Headers(init?.headers).get('Range') ?? '')
    return fetch(input, init)
  }
  return { ranges, fetch: fetchImpl }
}

/** Every tensor of the fixture through `cache`, each compared with the fixture's own bytes. */
async function readAll(cache: Awaited<ReturnType<typeof createCache>>, fetchImpl: typeof fetch): Promise<void> {
  const whole = new Uint8Array(await (await fetch(FIXTURE)).arrayBuffer())
  const n = Number(new DataView(whole.buffer).getBigUint64(0, true))
  const header = JSON.parse(new TextDecoder().decode(whole.subarray(8, 8 + n))) as Record<string, { data_offsets: [number, number] }>
  delete header.__metadata__
  const file = await open(FIXTURE, { cache, fetch: fetchImpl })
  for (const [
    name,
    {
      data_offsets: [begin, end],
    },
  ] of Object.entries(header)) {
    const { data } = await file.getTensor(name)
    const got = new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    expect(got.length, name).toBe(end - begin)
    expect(
      got.every((byte, i) => byte === whole[8 + n + begin + i]),
      name,
    ).toBe(true)
  }
}

const hasOpfs = typeof navigator.storage?.getDirectory === 'function'

afterEach(async () => {
  vi.restoreAllMocks()
  if (hasOpfs) await (await navigator.storage.getDirectory()).removeEntry(NAME, { recursive: true }).catch(() => {})
})

test('OPFS is there in Chromium and Firefox, not in WebKitGTK', () => {
  expect(hasOpfs, server.browser).toBe(server.browser !== 'MiniBrowser')
})

describe('without a usable OPFS, the cache warns once and reads from the network', () => {
  /** Runs `body` with no OPFS: as it is in WebKitGTK, or with getDirectory taken away where there is one. */
  async function withoutOpfs(body: () => Promise<void>): Promise<void> {
    if (!hasOpfs) return body()
    const proto = StorageManager.prototype as { getDirectory?: unknown }
    const getDirectory = proto.getDirectory
    delete proto.getDirectory
    try {
      await body()
    } finally {
      proto.getDirectory = getDirectory
    }
  }

  test('createCache() resolves; every open reads each tensor exactly, from the network; one warning', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    await withoutOpfs(async () => {
      const cache = await createCache({ name: NAME })
      const first = recording()
      await readAll(cache, first.fetch)
      const second = recording()
      await readAll(cache, second.fetch)
      // Nothing was stored, so no one-byte revalidation: the same reads again.
      expect(second.ranges).toEqual(first.ranges)
      expect(second.ranges.join()).not.toContain('bytes=0-0')
      expect(await cache.usage()).toBe(0)
    })
    expect(warn).toHaveBeenCalledTimes(1)
    expect(String(warn.mock.calls[0][0])).toMatch(/Origin Private File System.*read from the network/)
  })
})

test.runIf(hasOpfs)('OPFS: a second open reads every tensor from the cache, after a one-byte revalidation', async () => {
  const cache = await createCache({ name: NAME })
  const first = recording()
  await readAll(cache, first.fetch)
  expect(first.ranges.length).toBeGreaterThan(0)
  expect(await cache.usage()).toBeGreaterThan(0)
  const second = recording()
  await readAll(await createCache({ name: NAME }), second.fetch)
  expect(second.ranges).toEqual(['bytes=0-0'])
})

test.runIf(hasOpfs)('OPFS: a corrupted entry is fetched again, never served; clear() empties the cache', async () => {
  const cache = await createCache({ name: NAME })
  await readAll(cache, recording().fetch)
  const folder = await (await navigator.storage.getDirectory()).getDirectoryHandle(NAME)
  for await (const [name] of (folder as unknown as { entries(): AsyncIterable<[string]> }).entries()) {
    const handle = await folder.getFileHandle(name)
    const bytes = new Uint8Array(await (await handle.getFile()).arrayBuffer())
    bytes[bytes.length - 1] ^= 0xff
    const writable = await handle.createWritable()
    await writable.write(bytes)
    await writable.close()
  }
  const again = recording()
  await readAll(await createCache({ name: NAME }), again.fetch)
  expect(again.ranges.length).toBeGreaterThan(1)
  await cache.clear()
  expect(await cache.usage()).toBe(0)
})
