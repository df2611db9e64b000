// The persistent cache in Chromium: createCache() in OPFS, against the dev server's fixtures, with a fetch
// that records every request. The expected bytes are the fixture as one plain fetch gives it.
import { afterEach, expect, test } from 'vitest'
import { createCache, open } from '../../src/index.ts' // aliased to dist/index.js by vitest.browser.config.ts

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

afterEach(async () => {
  await (await navigator.storage.getDirectory()).removeEntry(NAME, { recursive: true })
})

test('OPFS: a second open reads every tensor from the cache, after a one-byte revalidation', async () => {
  const cache = await createCache({ name: NAME })
  const first = recording()
  await readAll(cache, first.fetch)
  expect(first.ranges.length).toBeGreaterThan(0)
  expect(await cache.usage()).toBeGreaterThan(0)
  const second = recording()
  await readAll(await createCache({ name: NAME }), second.fetch)
  expect(second.ranges).toEqual(['bytes=0-0'])
})

test('OPFS: a corrupted entry is fetched again, never served; clear() empties the cache', async () => {
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
