// Reads from a server that ignores Range (src/sources/http/whole-file.ts), against the tests' own server and
// Debian's nginx (max_ranges 0): every read settles with its bytes whatever its order (ahead of the download it
// waits for it, behind every download it starts a new one), reads that alternate between two places of the file
// follow a download each, and a read that cannot be served fails with a code. The servers count the requests
// and the bytes they send. A 600 MiB file, sparse, is made here: its last tensor, then its first, then one in
// its middle, through the API and the CLI.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, type MockInstance, test, vi } from 'vitest'
import { open } from '../../../src/node.ts'
import { WHOLE_FILE } from '../../../src/sources/http/whole-file.ts'
import { fileResource, ignoreRangeHandler, rangeHandler, startServer, type TestServer } from '../../http-server.ts'
import { serverCases } from '../../nginx.ts'
import { buildFile, bytesOf, expectError, expectSameBytes, headerOf, rng, tensorBytes } from '../../read-helpers.ts'
import { shortRetryDelays } from '../../retry-delays.ts'
import { cli } from '../../run-cli.ts'
import { writeSparseFile } from '../../sparse-file.ts'

const MiB = 1 << 20
const ROOT = mkdtempSync(join(tmpdir(), 'safetensors-whole-file-'))
afterAll(() => rmSync(ROOT, { recursive: true, force: true }))

/** Seeded random F32 values. */
function randomFloats(count: number, seed: number): Float32Array {
  const { next } = rng(seed)
  return Float32Array.from({ length: count }, () => next() * 2 - 1)
}

// The 600 MiB file: three tensors of values with 300 MiB of zeros (holes in the file) between them.
const FIRST = randomFloats(4096, 1)
const MIDDLE = randomFloats(4096, 2)
const LAST = randomFloats(4096, 3)
const HOLE = 300 * MiB
const LARGE_NAME = 'large.safetensors'
const LARGE_TENSORS = [
  { name: 'first', dtype: 'F32', shape: [FIRST.length], bytes: bytesOf(FIRST) },
  { name: 'zeros_a', dtype: 'U8', shape: [HOLE], bytes: new Uint8Array(0) },
  { name: 'middle', dtype: 'F32', shape: [MIDDLE.length], bytes: bytesOf(MIDDLE) },
  { name: 'zeros_b', dtype: 'U8', shape: [HOLE], bytes: new Uint8Array(0) },
  { name: 'last', dtype: 'F32', shape: [LAST.length], bytes: bytesOf(LAST) },
]

/** Writes the 600 MiB file sparse: its header and three tensors, the zeros as holes; returns its size. */
const writeLarge = (path: string) =>
  writeSparseFile(
    path,
    LARGE_TENSORS.map(({ bytes, ...t }) => ({ ...t, blocks: [[0, bytes]] })),
  )

// A file of 24 tensors of 128 KiB of random bytes, for reads in every order through small windows.
const random = rng(7)
const MANY = buildFile(Array.from({ length: 24 }, (_, i) => ({ name: `t${i}`, dtype: 'U8', shape: [128 << 10], bytes: random.bytes(128 << 10) })))
const MANY_NAME = 'many.safetensors'
// Two tensors of 64 rows of 32 KiB, whose rows are read in turn: a row of `a`, a row of `b`, ...
const TWO = buildFile(['a', 'b'].map((name) => ({ name, dtype: 'U8', shape: [64, 32 << 10], bytes: random.bytes(64 * (32 << 10)) })))
const TWO_NAME = 'two.safetensors'

let largeSize = 0
beforeAll(() => {
  largeSize = writeLarge(join(ROOT, LARGE_NAME))
  writeFileSync(join(ROOT, MANY_NAME), MANY)
  writeFileSync(join(ROOT, TWO_NAME), TWO)
})

const onDisk = (path: string) => {
  try {
    return fileResource(join(ROOT, path.slice(1)))
  } catch {
    return undefined
  }
}

/** The windows made small, for the duration of a test: `keep` the most kept whole, `window` each download's. */
function smallWindows(keep: number, window: number): void {
  const saved = { ...WHOLE_FILE }
  beforeEach(() => void Object.assign(WHOLE_FILE, { keepBytes: keep, windowBytes: window }))
  afterEach(() => void Object.assign(WHOLE_FILE, saved))
}

shortRetryDelays()

const servers = serverCases('node:http', () => startServer(ignoreRangeHandler(onDisk)), ROOT, '/norange')

/** The GET requests the server has had since it was cleared. */
const gets = (server: TestServer) => server.log.filter((e) => e.method === 'GET')

describe.each(servers)('%s, ignoring Range', (_, start) => {
  let server: TestServer
  let close: () => Promise<void>
  beforeAll(async () => {
    ;({ server, close } = await start())
  })
  afterAll(() => close?.())
  // The warning a file larger than what is kept whole gives, once.
  let warn: MockInstance<typeof console.warn>
  beforeEach(async () => {
    warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    await server.settled()
    server.clear()
  })
  afterEach(() => {
    expect(warn.mock.calls.length).toBeLessThanOrEqual(1)
    warn.mockRestore()
  })

  test('a 600 MiB file: the last tensor, then the first, then the middle one, each with its values, from two downloads', async () => {
    const file = await open(`${server.origin}/${LARGE_NAME}`)
    expect(file.header.fileSize).toBe(largeSize)
    await server.settled()
    server.clear()
    const seconds: string[] = []
    const timed = async <T>(name: string, read: () => Promise<T>) => {
      const started = performance.now()
      const result = await read()
      seconds.push(`${name} ${((performance.now() - started) / 1000).toFixed(1)} s`)
      return result
    }
    expectSameBytes((await timed('last', () => file.getTensor('last'))).data, LAST, 'last')
    expectSameBytes((await timed('first', () => file.getTensor('first'))).data, FIRST, 'first')
    // Ahead of the second download, which goes on to it; told of its bytes as they come.
    const events: Array<{ loaded: number; total: number }> = []
    expectSameBytes((await timed('middle', () => file.getTensor('middle', { onProgress: (p) => events.push(p) }))).data, MIDDLE, 'middle')
    expect(events.at(-1)).toEqual({ loaded: MIDDLE.byteLength, total: MIDDLE.byteLength })
    await file.close()
    await server.settled()
    // One download to the end, one from the start to the middle; what the servers had in flight when the
    // second was closed comes on top.
    console.log(
      `whole file: ${(largeSize / MiB).toFixed(0)} MiB, ${seconds.join(', ')}; ${gets(server).length} GETs, ${(server.bytesSent() / MiB).toFixed(0)} MiB sent`,
    )
    expect(gets(server).length).toBe(2)
    expect(server.bytesSent()).toBeLessThan(largeSize + largeSize / 2 + 64 * MiB)
  }, 120_000)

  test("inspect <url> --tensor of the 600 MiB file's last tensor prints it", async () => {
    const { code, stdout, stderr } = await cli('inspect', `${server.origin}/${LARGE_NAME}`, '--tensor', 'last')
    expect(code, stderr).toBe(0)
    expect(stdout).toContain(`last: F32 [${LAST.length}], ${LAST.length.toLocaleString('en-US')} elements`)
    const min = LAST.reduce((a, b) => Math.min(a, b))
    const max = LAST.reduce((a, b) => Math.max(a, b))
    expect(stdout).toContain(`min ${min}  max ${max}`)
  }, 120_000)

  describe('windows smaller than the file (keep 256 KiB, windows of 256 KiB)', () => {
    smallWindows(256 << 10, 256 << 10)

    test('every tensor, one at a time in a shuffled order, then all at once in another: each with its bytes', async () => {
      const file = await open(`${server.origin}/${MANY_NAME}`)
      await server.settled()
      server.clear()
      const { next: shuffle } = rng(11)
      const names = file.names()
      const order = [...names].sort(() => shuffle() - 0.5)
      for (const name of order) expectSameBytes((await file.getTensor(name)).data, tensorBytes(MANY, name), name)
      // At most a download per read, each one started by a read behind the others.
      await server.settled()
      expect(gets(server).length).toBeLessThanOrEqual(order.length)
      const again = [...names].sort(() => shuffle() - 0.5)
      const tensors = await Promise.all(again.map((name) => file.getTensor(name)))
      tensors.forEach((t, i) => expectSameBytes(t.data, tensorBytes(MANY, again[i]), again[i]))
      await file.close()
    })

    test('rows of two tensors read in turn: a download follows each tensor, not one download per row', async () => {
      const file = await open(`${server.origin}/${TWO_NAME}`)
      await server.settled()
      server.clear()
      const rowBytes = 32 << 10
      for (let row = 0; row < 64; row++) {
        for (const name of ['a', 'b']) {
          const slice = await file.getSlice(name, [[row, row + 1]])
          expectSameBytes(slice.data, tensorBytes(TWO, name).subarray(row * rowBytes, (row + 1) * rowBytes), `${name} row ${row}`)
        }
      }
      await file.close()
      await server.settled()
      // The first download goes on to b's first row; a's second row, behind it, starts the other.
      expect(gets(server).length).toBe(2)
      expect(server.bytesSent()).toBeLessThan(2 * TWO.length + 8 * MiB)
    })
  })

  describe('a file kept whole after a read behind the window (keep 16 MiB, windows of 256 KiB)', () => {
    smallWindows(16 * MiB, 256 << 10)

    test('the second download holds the whole file: no read after it downloads again', async () => {
      const file = await open(`${server.origin}/${MANY_NAME}`)
      await server.settled()
      server.clear()
      const names = file.names()
      const backwards = [...names].reverse()
      for (const name of [...backwards, ...names, ...backwards]) expectSameBytes((await file.getTensor(name)).data, tensorBytes(MANY, name), name)
      await file.close()
      await server.settled()
      expect(gets(server).length).toBe(2)
    })
  })
})

describe('a read that cannot be served', () => {
  const data = MANY
  const { dataStart } = headerOf(data)
  smallWindows(256 << 10, 256 << 10)

  test('every download dropped half-way: each waiting read fails with Io once the retries are spent', async () => {
    // The header read is answered; every download after it is cut half-way through the file.
    const server = await startServer(rangeHandler(() => data, { ignoreRange: true, fault: (n) => (n > 0 ? { kind: 'drop', at: 0.5 } : undefined) }))
    try {
      const file = await open(`${server.origin}/${MANY_NAME}`, { retries: 2 })
      const names = file.names()
      const results = await Promise.allSettled([file.getTensor(names[0]), file.getTensor(names.at(-1)!)])
      // The first tensor lies in the half that came; the last one never comes.
      expect(results[0].status).toBe('fulfilled')
      const failed = results[1]
      expect(failed.status).toBe('rejected')
      expect((failed as PromiseRejectedResult).reason).toMatchObject({ code: 'Io', url: `${server.origin}/${MANY_NAME}` })
      expect(String((failed as PromiseRejectedResult).reason.message)).toMatch(/after 2 retries/)
      await file.close()
    } finally {
      await server.close()
    }
  })

  test("a read's own abort ends that read alone; close() ends the others with Aborted", async () => {
    let resume!: () => void
    const paused = new Promise<void>((resolve) => (resume = resolve))
    // Every download stalls before the last tensor, until the test lets it go on.
    const server = await startServer(
      rangeHandler(() => data, {
        ignoreRange: true,
        fault: (n) => (n > 0 ? { kind: 'pause', at: (data.length - 1000) / data.length, until: paused } : undefined),
      }),
    )
    try {
      const file = await open(`${server.origin}/${MANY_NAME}`, { idleTimeout: Infinity })
      const last = file.names().at(-1)!
      const controller = new AbortController()
      const aborted = file.getTensor(last, { signal: controller.signal })
      const waiting = file.getTensor(last)
      const first = await file.getTensor('t0')
      expectSameBytes(first.data, data.subarray(dataStart, dataStart + (128 << 10)), 't0')
      controller.abort()
      await expectError(() => aborted, 'Aborted')
      const closing = file.close()
      await expectError(() => waiting, 'Aborted')
      await closing
      resume()
    } finally {
      resume()
      await server.close()
    }
  })
})
