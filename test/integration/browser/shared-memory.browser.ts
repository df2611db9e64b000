// Runs in Chromium, Firefox and WebKit (vitest.browser.config.ts), against dist/index.js. A tensor read on the
// conversion pool in a cross-origin isolated page is a view of a SharedArrayBuffer (docs/memory.md, "Results
// in shared memory"); these tests pin what each engine's APIs do with such a view, and that a page that is not
// isolated (these test pages are not) gets ordinary memory from the pool. The shared view here comes from a
// shared WebAssembly.Memory, which every engine makes without isolation (the SharedArrayBuffer global it
// lacks then). Where a pooled read really gives shared memory: test/integration/consumers/bundlers.test.ts
// (an isolated page in each engine) and webgpu.test.ts (writeBuffer of a pooled result).
import { expect, test } from 'vitest'
import { server } from 'vitest/browser'
import { open } from '../../../src/index.ts' // aliased to dist/index.js by vitest.browser.config.ts
import { mulberry32 } from '../../random.ts'
import { buildFile } from '../../read-helpers.ts'

/**
 * A view of shared memory holding `bytes`, typed as ordinary memory: TypeScript's DOM types refuse a shared
 * view where Chromium and Firefox do, and these tests must pass one.
 */
function sharedView(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const pages = Math.ceil(bytes.length / 65536)
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true })
  const view = new Uint8Array(memory.buffer, 0, bytes.length)
  view.set(bytes)
  return view as unknown as Uint8Array<ArrayBuffer>
}

const isShared = (buffer: ArrayBufferLike) => Object.prototype.toString.call(buffer) === '[object SharedArrayBuffer]'

const TEXT = 'weights: \u00e9\u4e2d'

// Blob and TextDecoder take no [AllowShared] BufferSource: Chromium and Firefox throw a TypeError; WebKit does not.
const REFUSES_SHARED = server.browser !== 'MiniBrowser'

test(`new Blob([sharedView]) ${REFUSES_SHARED ? 'throws a TypeError' : 'holds the view as text'} in ${server.browser}; a copy (slice()) works everywhere`, async () => {
  const bytes = new TextEncoder().encode(TEXT)
  const view = sharedView(bytes)
  expect(isShared(view.buffer)).toBe(true)
  if (REFUSES_SHARED) expect(() => new Blob([view])).toThrow(TypeError)
  else {
    // WebKit takes a shared view for no BufferSource and converts it as a string: the Blob holds "119,101,...",
    // not the bytes, and no error says so.
    const blob = new Blob([view])
    expect(new TextDecoder().decode(await blob.arrayBuffer())).toBe(Array.from(bytes).join(','))
  }
  const copied = view.slice()
  expect(isShared(copied.buffer)).toBe(false)
  expect(new Uint8Array(await new Blob([copied]).arrayBuffer())).toEqual(bytes)
})

test(`new TextDecoder().decode(sharedView) ${REFUSES_SHARED ? 'throws a TypeError' : 'decodes'} in ${server.browser}; a copy decodes everywhere`, () => {
  const view = sharedView(new TextEncoder().encode(TEXT))
  if (REFUSES_SHARED) expect(() => new TextDecoder().decode(view)).toThrow(TypeError)
  else expect(new TextDecoder().decode(view)).toBe(TEXT)
  expect(new TextDecoder().decode(view.slice())).toBe(TEXT)
})

test(`crypto.subtle.digest(sharedView) rejects with a TypeError in ${server.browser}; a copy hashes`, async () => {
  const bytes = new TextEncoder().encode(TEXT)
  const view = sharedView(bytes)
  await expect(crypto.subtle.digest('SHA-256', view)).rejects.toThrow(TypeError)
  expect(new Uint8Array(await crypto.subtle.digest('SHA-256', view.slice()))).toEqual(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)))
})

test('in a page that is not cross-origin isolated, a read on the pool gives ordinary memory, which Blob takes', async () => {
  expect(globalThis.crossOriginIsolated).toBe(false)
  // 8 MiB as F32: past the pool's threshold (POOL_MIN_BYTES: 1 MiB of output at e8efdf8, 4 MiB on main since).
  const count = 1 << 21
  const next = mulberry32(40)
  const bf16 = Uint16Array.from({ length: count }, () => next() & 0xffff)
  const bytes = buildFile([{ name: 'w', dtype: 'BF16', shape: [count], bytes: new Uint8Array(bf16.buffer) }]) as Uint8Array<ArrayBuffer>
  const file = await open(new Blob([bytes]))
  const { data } = await file.getTensor('w', { dtype: 'F32' })
  expect(isShared(data.buffer)).toBe(false)
  const stored = new Uint32Array(await new Blob([data as Float32Array<ArrayBuffer>]).arrayBuffer())
  const mismatch = stored.findIndex((bits, i) => bits !== (bf16[i] << 16) >>> 0)
  expect(mismatch, `element ${mismatch}`).toBe(-1)
  expect(stored.length).toBe(count)
  await file.close()
})
