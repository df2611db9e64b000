// No call leaves a listener on the caller's AbortSignal once it settles: a server or a page keeps one
// signal for its lifetime, and a listener per call would pile up (and warn, MaxListenersExceededWarning).
// Each API that takes a `signal` is called 1,000 times with one signal, succeeding and failing, and with
// signals aborted before and during the call; Node's getEventListeners counts what is left on them.
import { getEventListeners } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { ggufStream } from '../../src/gguf-node.ts'
import { convertFile, convertStream, createCache, open, openModel, SafetensorsError, validateStream } from '../../src/node.ts'
import { rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { buildFile, rng } from '../read-helpers.ts'
import { shortRetryDelays } from '../retry-delays.ts'

const CALLS = 1000

const r = rng(19)
const FILE = buildFile([
  { name: 'a', dtype: 'BF16', shape: [4, 8], bytes: r.bytes(64) },
  { name: 'b', dtype: 'F32', shape: [3], bytes: r.bytes(12) },
]) as Uint8Array<ArrayBuffer>
const BROKEN = FILE.subarray(0, FILE.length - 1)
const INDEX = new TextEncoder().encode(JSON.stringify({ weight_map: { a: 'model.safetensors', b: 'model.safetensors' } }))

const listenersOn = (signal: AbortSignal) => getEventListeners(signal, 'abort').length

/** Settles `call`, whatever its outcome; anything but a SafetensorsError is a failure of the test. */
async function settle(call: () => Promise<unknown>): Promise<'ok' | string> {
  try {
    await call()
    return 'ok'
  } catch (error) {
    if (error instanceof SafetensorsError) return error.code
    throw error
  }
}

/** Reads a stream to its end. */
async function drain(stream: ReadableStream<Uint8Array>): Promise<void> {
  for await (const _ of stream as unknown as AsyncIterable<Uint8Array>);
}

let server: TestServer
let base: string
const scratch = mkdtempSync(join(tmpdir(), 'signal-listeners-'))
shortRetryDelays()

beforeAll(async () => {
  // /ok/ serves the file and its index; /broken/ a file cut short; /flaky/ answers 503 to every other
  // request (a retry and its wait); /gone/ answers a data read 404; /stall/ never answers one.
  server = await startServer(
    rangeHandler(
      (path) => {
        if (path.endsWith('.index.json')) return INDEX
        if (path.startsWith('/broken/')) return BROKEN
        return FILE
      },
      {
        fault: (n, log) => {
          if (log.path.startsWith('/flaky/') && n % 2 === 0) return { kind: 'status', status: 503 }
          const dataRead = !log.range?.startsWith('bytes=0-')
          if (log.path.startsWith('/gone/') && dataRead) return { kind: 'status', status: 404 }
          if (log.path.startsWith('/stall/') && dataRead) return { kind: 'stall', at: 'headers' }
          return undefined
        },
      },
    ),
  )
  base = server.url
  writeFileSync(join(scratch, 'in.safetensors'), FILE)
})
afterAll(async () => {
  await server.close()
  rmSync(scratch, { recursive: true, force: true })
})

/**
 * Calls `call` CALLS times with one signal (the outcomes must be `expected`, so a call that fails for
 * another reason does not pass unnoticed), then once with a signal aborted before the call and once
 * with one aborted during it: no listener may be left on any of them.
 */
async function expectNoListenersLeft(expected: string, call: (signal: AbortSignal) => Promise<unknown>, calls = CALLS): Promise<void> {
  const shared = new AbortController().signal
  const outcomes = new Set<string>()
  for (let i = 0; i < calls; i++) outcomes.add(await settle(() => call(shared)))
  expect([...outcomes]).toEqual([expected])
  expect(listenersOn(shared), `listeners left after ${calls} calls`).toBe(0)
  // A call may be over before it looks at an aborted signal (a custom source that ignores it, a read
  // that completes first): either way, nothing may be left.
  const before = new AbortController()
  before.abort()
  expect([expected, 'Aborted']).toContain(await settle(() => call(before.signal)))
  expect(listenersOn(before.signal), 'listeners left after an abort before the call').toBe(0)
  const during = new AbortController()
  const pending = settle(() => call(during.signal))
  await new Promise((resolve) => setTimeout(resolve, 1))
  during.abort()
  expect([expected, 'Aborted']).toContain(await pending)
  expect(listenersOn(during.signal), 'listeners left after an abort during the call').toBe(0)
}

describe('no listener is left on a caller signal', () => {
  test('open over HTTP: succeeding, failing (404), retried after a 503', async () => {
    await expectNoListenersLeft('ok', (signal) => open(`${base}ok/model.safetensors`, { signal }).then((f) => f.close()))
    await expectNoListenersLeft('MetadataIncompleteBuffer', (signal) => open(`${base}broken/model.safetensors`, { signal }))
    await expectNoListenersLeft('ok', (signal) => open(`${base}flaky/model.safetensors`, { signal, retries: 1 }))
  }, 60_000)

  test('open over a custom RangeSource', async () => {
    const source = { size: FILE.length, read: async (offset: number, length: number) => FILE.slice(offset, offset + length) }
    const failing = { size: FILE.length, read: async () => Promise.reject(new SafetensorsError('Io', 'no')) }
    await expectNoListenersLeft('ok', (signal) => open(source, { signal }))
    await expectNoListenersLeft('Io', (signal) => open(failing, { signal }))
  })

  test('getTensor, getSlice, tensors() over HTTP; reads of a file opened with a signal', async () => {
    const file = await open(`${base}ok/model.safetensors`)
    await expectNoListenersLeft('ok', (signal) => file.getTensor('a', { signal, dtype: 'F32' }))
    await expectNoListenersLeft('ok', (signal) => file.getSlice('a', [[1, 3]], { signal }))
    await expectNoListenersLeft('ok', async (signal) => {
      for await (const _ of file.tensors({ signal }));
    })
    const gone = await open(`${base}gone/model.safetensors`)
    await expectNoListenersLeft('Io', (signal) => gone.getTensor('b', { signal }))
    // Aborted while the server sends nothing at all.
    const stalling = await open(`${base}stall/model.safetensors`)
    const controller = new AbortController()
    const pending = settle(() => stalling.getTensor('b', { signal: controller.signal }))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(listenersOn(controller.signal)).toBeGreaterThan(0)
    controller.abort()
    expect(await pending).toBe('Aborted')
    expect(listenersOn(controller.signal)).toBe(0)
    // The open's own signal, which only the open listens to.
    const opened = new AbortController().signal
    const withSignal = await open(`${base}ok/model.safetensors`, { signal: opened })
    for (let i = 0; i < CALLS; i++) await withSignal.getTensor('b')
    expect(listenersOn(opened)).toBe(0)
  }, 60_000)

  test('file.stream: read to the end, cancelled, failing', async () => {
    const file = await open(`${base}ok/model.safetensors`)
    await expectNoListenersLeft('ok', (signal) => drain(file.stream('a', { signal, dtype: 'F32' })))
    await expectNoListenersLeft('ok', async (signal) => {
      const reader = file.stream('a', { signal }).getReader()
      await reader.read()
      await reader.cancel()
    })
    const broken = await open({
      size: FILE.length,
      read: async (offset: number, length: number) => (offset === 0 ? FILE.slice(0, length) : Promise.reject(new Error('gone'))),
    })
    await expectNoListenersLeft('Io', (signal) => drain(broken.stream('a', { signal })))
  }, 60_000)

  test('validateStream: valid, invalid, forwarded', async () => {
    await expectNoListenersLeft('ok', (signal) => validateStream(new Blob([FILE]).stream(), { signal }))
    await expectNoListenersLeft('MetadataIncompleteBuffer', (signal) => validateStream(new Blob([BROKEN]).stream(), { signal }))
    await expectNoListenersLeft('ok', (signal) => validateStream(new Blob([FILE]).stream(), { signal, forward: new WritableStream() }))
  }, 60_000)

  test('convertStream of a stream and of a file: converted, invalid, cancelled', async () => {
    const file = await open(FILE)
    await expectNoListenersLeft('ok', (signal) => drain(convertStream(new Blob([FILE]).stream(), { signal, dtype: 'F16' })))
    await expectNoListenersLeft('MetadataIncompleteBuffer', (signal) => drain(convertStream(new Blob([BROKEN]).stream(), { signal })))
    await expectNoListenersLeft('ok', (signal) => drain(convertStream(file, { signal, dtype: 'F32' })))
    await expectNoListenersLeft('ok', (signal) => convertStream(new Blob([FILE]).stream(), { signal }).cancel())
  }, 60_000)

  test('openModel over HTTP; reads through a persistent cache', async () => {
    await expectNoListenersLeft('ok', (signal) => openModel(`${base}ok/`, { signal }).then((m) => m.close()))
    const cache = await createCache({ dir: join(scratch, 'cache') })
    const file = await open(`${base}ok/model.safetensors`, { cache })
    await expectNoListenersLeft('ok', (signal) => file.getTensor('a', { signal }))
    await expectNoListenersLeft('ok', (signal) => open(`${base}ok/model.safetensors`, { cache, signal }))
  }, 60_000)

  test('ggufStream of a model folder: read to the end, cancelled (100 calls each)', async () => {
    const model = fileURLToPath(new URL('../fixtures/gguf/qwen2/', import.meta.url))
    await expectNoListenersLeft('ok', async (signal) => drain(await ggufStream(model, { signal, dtype: 'Q8_0' })), 100)
    await expectNoListenersLeft('ok', async (signal) => (await ggufStream(model, { signal })).cancel(), 100)
  }, 60_000)

  test('convertFile (100 calls: each writes and syncs a file)', async () => {
    let i = 0
    const convert = (signal: AbortSignal) => convertFile(join(scratch, 'in.safetensors'), join(scratch, `out-${i++ % 4}.safetensors`), { dtype: 'F16', signal })
    await expectNoListenersLeft('ok', convert, 100)
  }, 60_000)
})
