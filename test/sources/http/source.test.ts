// open() over HTTP against real servers on 127.0.0.1: the tests' own (node:http) and Debian's nginx,
// each both serving Range requests and ignoring Range (answering 200). The servers count requests and
// the body bytes they send, so these tests check what the reader asks for, not only what it returns.
// Broken servers and networks are in http-faults.test.ts.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, beforeEach, describe, expect, test, vi } from 'vitest'
import { open, SafetensorsError } from '../../../src/node.ts'
import { WHOLE_FILE } from '../../../src/sources/http/whole-file.ts'
import { FIXTURES_REAL, realFixtures } from '../../helpers.ts'
import { fileResource, ignoreRangeHandler, parseRange, rangeHandler, startServer, type TestServer } from '../../http-server.ts'
import { findNginx, startNginx } from '../../nginx.ts'
import { buildFile, bytesOf, errorOf, expectError, expectSameBytes, headerOf, rng, tensorBytes } from '../../read-helpers.ts'
import { shortRetryDelays } from '../../retry-delays.ts'

const LORA_NAME = 'catundchat__stable-diffusion-v1.5-lora__pytorch_lora_weights.safetensors'
const FLUX_NAME = 'fluxml__safetensors.jl__model.safetensors'
const read = (f: string) => new Uint8Array(readFileSync(FIXTURES_REAL + f))
const LORA = read(LORA_NAME)
const FLUX = read(FLUX_NAME)
const loraHeader = headerOf(LORA)
const fluxHeader = headerOf(FLUX)

/** Tensors of a header in data order. */
function inDataOrder(h: ReturnType<typeof headerOf>) {
  return Object.entries(h.tensors)
    .map(([name, t]) => ({ name, ...t, begin: t.data_offsets[0], end: t.data_offsets[1] }))
    .sort((a, b) => a.begin - b.begin || a.end - b.end)
}
const loraTensors = inDataOrder(loraHeader)
const fluxTensors = inDataOrder(fluxHeader)

// A 64 MiB file for the server that ignores Range: a small tensor first, a big one, a small one last.
const SMALL = new Float32Array([1.5, -2.25, 3.125, 0, -0, 1e-30, 65504, -7])
const LAST = new Float32Array([42, -42, 0.5, 0.25])
const BIG_DATA = 64 * 1024 * 1024
const BIG = buildFile([
  { name: 'small', dtype: 'F32', shape: [8], bytes: bytesOf(SMALL) },
  { name: 'big', dtype: 'U8', shape: [BIG_DATA], bytes: new Uint8Array(BIG_DATA).fill(7) },
  { name: 'last', dtype: 'F32', shape: [4], bytes: bytesOf(LAST) },
])
// A zero-sized tensor at the very end of the data: reading it must not need a Range request past the end.
const ZERO = buildFile([
  { name: 'a', dtype: 'I16', shape: [3], bytes: bytesOf(new Int16Array([1, -2, 3])) },
  { name: 'empty', dtype: 'F32', shape: [0, 4], bytes: new Uint8Array(0) },
])

const files: Record<string, Uint8Array> = {
  [LORA_NAME]: LORA,
  [FLUX_NAME]: FLUX,
  'big.safetensors': BIG,
  'zero.safetensors': ZERO,
}
for (const f of realFixtures().valid) files[f] = read(f)
// Every server serves these files from one folder, as they are on disk at each request.
const ROOT = mkdtempSync(join(tmpdir(), 'safetensors-http-'))
for (const [name, bytes] of Object.entries(files)) {
  mkdirSync(dirname(join(ROOT, name)), { recursive: true })
  writeFileSync(join(ROOT, name), bytes)
}
afterAll(() => rmSync(ROOT, { recursive: true, force: true }))
const onDisk = (name: string) => {
  try {
    return fileResource(join(ROOT, name))
  } catch {
    return undefined
  }
}

/** The tests' own servers: under /auth/ only with "Authorization: Bearer s3cret", as the nginx config says. */
async function nodeServers(): Promise<{ ranged: TestServer; ignoring: TestServer; close(): Promise<void> }> {
  const ranged = await startServer((req, res, log) => {
    if (log.path.startsWith('/auth/') && req.headers.authorization !== 'Bearer s3cret') {
      res.writeHead(401, { 'WWW-Authenticate': 'Bearer' })
      res.end('unauthorized')
      return
    }
    return rangeHandler((path) => onDisk(path.replace(/^\/(auth\/)?/, '')))(req, res, log)
  })
  const ignoring = await startServer(ignoreRangeHandler((path) => onDisk(path.slice(1))))
  return { ranged, ignoring, close: async () => void (await Promise.all([ranged.close(), ignoring.close()])) }
}

async function nginxServers(binary: string): ReturnType<typeof nodeServers> {
  const nginx = await startNginx(binary, ROOT)
  return { ranged: nginx.server('/ranged'), ignoring: nginx.server('/norange'), close: () => nginx.close() }
}

// A failed run or a refused connection is retried; these tests are not about how long that waits.
shortRetryDelays()

const NGINX = findNginx()
if (!NGINX) console.log('nginx not found: skipping the nginx run (CI installs it)')
const servers: Array<[string, () => ReturnType<typeof nodeServers>]> = [['node:http', nodeServers]]
if (NGINX) servers.push([`nginx (${NGINX})`, () => nginxServers(NGINX)])

/** Exact bytes of a tensor's data. */
const dataBytes = (t: { data: ArrayBufferView }) => bytesOf(t.data)

describe.each(servers)('%s', (_, start) => {
  let ranged: TestServer
  let ignoring: TestServer
  let close: () => Promise<void>
  beforeAll(async () => {
    ;({ ranged, ignoring, close } = await start())
  })
  afterAll(() => close?.())
  beforeEach(async () => {
    // nginx logs a request only once it is done with it: the last test's lines must be in before clear().
    await Promise.all([ranged.settled(), ignoring.settled()])
    ranged.clear()
    ignoring.clear()
  })

  describe('a server that serves Range requests', () => {
    test("a real fixture's 38 KB header (256 tensors) arrives in one request", async () => {
      expect(loraHeader.dataStart).toBeGreaterThan(38_000)
      const file = await open(`${ranged.origin}/${LORA_NAME}`)
      await ranged.settled()
      expect(ranged.log.length).toBe(1)
      expect(ranged.log[0].range).toMatch(/^bytes=0-\d+$/)
      expect(file.names().length).toBe(256)
      expect(file.header.fileSize).toBe(LORA.length)
      expect(file.metadata).toEqual({ format: 'pt' })
    })

    test.each(realFixtures().valid)('%s: open() makes exactly one request', async (f) => {
      const file = await open(`${ranged.origin}/${f}`)
      await ranged.settled()
      expect(ranged.log.length).toBe(1)
      expect(file.header.fileSize).toBe(files[f].length)
    })

    test('getTensor reads exactly its bytes, in one request, for every tensor of the 256-tensor file', async () => {
      const file = await open(new URL(`${ranged.origin}/${LORA_NAME}`))
      for (const t of loraTensors) {
        await ranged.settled()
        ranged.clear()
        const tensor = await file.getTensor(t.name)
        await ranged.settled()
        expect(ranged.log.length, t.name).toBe(1)
        const a = loraHeader.dataStart + t.begin
        expect(ranged.log[0].range, t.name).toBe(`bytes=${a}-${a + t.end - t.begin - 1}`)
        expect(ranged.bytesSent(), t.name).toBe(t.end - t.begin)
        expectSameBytes(dataBytes(tensor), tensorBytes(LORA, t.name), t.name)
        expect(tensor.shape).toEqual(t.shape)
      }
    })

    test('a row slice of a 2-D tensor reads only those rows', async () => {
      const t = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] === 4 && x.shape[1] === 1280)!
      expect(t).toBeDefined()
      const rowBytes = 1280 * 4
      const file = await open(`${ranged.origin}/${LORA_NAME}`)
      const all = tensorBytes(LORA, t.name)

      await ranged.settled()
      ranged.clear()
      const rows = await file.getSlice(t.name, [[1, 3]])
      expect(rows.shape).toEqual([2, 1280])
      await ranged.settled()
      expect(ranged.bytesSent()).toBe(2 * rowBytes)
      expect(ranged.log.length).toBe(1) // two adjacent rows are one run
      expectSameBytes(dataBytes(rows), all.subarray(rowBytes, 3 * rowBytes))

      await ranged.settled()
      ranged.clear()
      const row = await file.getSlice(t.name, [3, null])
      expect(row.shape).toEqual([1280])
      await ranged.settled()
      expect(ranged.bytesSent()).toBe(rowBytes)
      expectSameBytes(dataBytes(row), all.subarray(3 * rowBytes))

      // A [1280, 4] tensor: 64 rows of 16 bytes.
      const up = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] === 1280 && x.shape[1] === 4)!
      await ranged.settled()
      ranged.clear()
      const block = await file.getSlice(up.name, [[100, 164]])
      expect(block.shape).toEqual([64, 4])
      await ranged.settled()
      expect(ranged.bytesSent()).toBe(64 * 16)
      expectSameBytes(dataBytes(block), tensorBytes(LORA, up.name).subarray(100 * 16, 164 * 16))
    })

    test.each([
      // Rows of 5120 bytes are far closer than a request's cost: one request from the first run to the last.
      ['by default, one request over the 4 runs and the rows between them', {}, 3 * 1280 * 4 + 8, 1],
      ['with requestCost 0, only the columns (4 runs of 8 bytes)', { requestCost: 0 }, 4 * 2 * 4, 4],
    ])('a column slice: %s', async (_, options, bytes, requests) => {
      const t = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] === 4 && x.shape[1] === 1280)!
      const file = await open(`${ranged.origin}/${LORA_NAME}`, options)
      await ranged.settled()
      ranged.clear()
      const cols = await file.getSlice(t.name, [null, [10, 12]])
      expect(cols.shape).toEqual([4, 2])
      await ranged.settled()
      expect(ranged.bytesSent()).toBe(bytes)
      expect(ranged.log.length).toBe(requests)
      const all = new Float32Array(tensorBytes(LORA, t.name).slice().buffer)
      const want = [0, 1, 2, 3].flatMap((r) => [all[r * 1280 + 10], all[r * 1280 + 11]])
      expect(Array.from(cols.data as Float32Array)).toEqual(want)
    })

    test('tensors() reads the data section once: bytes sent equal the sum of the tensor sizes', async () => {
      const file = await open(`${ranged.origin}/${LORA_NAME}`)
      await ranged.settled()
      ranged.clear()
      const names: string[] = []
      for await (const t of file.tensors()) {
        names.push(t.name)
        expectSameBytes(dataBytes(t), tensorBytes(LORA, t.name), t.name)
      }
      expect(names).toEqual(loraTensors.map((t) => t.name))
      await ranged.settled()
      expect(ranged.bytesSent()).toBe(LORA.length - loraHeader.dataStart)
    })

    test('every tensor of a file with 12 dtypes is read right, raw and as F32 through the same bytes', async () => {
      const file = await open(`${ranged.origin}/${FLUX_NAME}`)
      for (const t of fluxTensors) {
        const tensor = await file.getTensor(t.name)
        expect(tensor.dtype).toBe(t.dtype)
        expectSameBytes(dataBytes(tensor), tensorBytes(FLUX, t.name), t.name)
      }
      const bf = await file.getTensor('bfloat16_3', { dtype: 'F32' })
      const bits = new Uint16Array(tensorBytes(FLUX, 'bfloat16_3').slice().buffer)
      expect(Array.from(bf.data as Float32Array)).toEqual(Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]))
    })

    test('a zero-sized tensor at the end of the file reads as empty, with no bytes sent', async () => {
      const file = await open(`${ranged.origin}/zero.safetensors`)
      await ranged.settled()
      ranged.clear()
      const empty = await file.getTensor('empty')
      expect(empty.shape).toEqual([0, 4])
      expect(empty.data).toBeInstanceOf(Float32Array)
      expect(empty.data.length).toBe(0)
      await ranged.settled()
      expect(ranged.bytesSent()).toBe(0)
      expect(Array.from((await file.getTensor('a')).data as Int16Array)).toEqual([1, -2, 3])
    })

    test('custom headers reach the server on every request', async () => {
      await expectError(() => open(`${ranged.origin}/auth/${FLUX_NAME}`), 'Io')
      await ranged.settled()
      ranged.clear()
      const file = await open(`${ranged.origin}/auth/${FLUX_NAME}`, { headers: { Authorization: 'Bearer s3cret', 'X-Test': 'yes' } })
      await file.getTensor('float32_35')
      await file.getSlice('int64_357', [1])
      await ranged.settled()
      expect(ranged.log.length).toBe(3)
      for (const entry of ranged.log) {
        expect(entry.headers.authorization).toBe('Bearer s3cret')
        expect(entry.headers['x-test']).toBe('yes')
        expect(entry.status).toBe(206)
      }
      const h = new Headers({ Authorization: 'Bearer s3cret' })
      const again = await open(`${ranged.origin}/auth/${FLUX_NAME}`, { headers: h })
      expectSameBytes(dataBytes(await again.getTensor('int8_35')), tensorBytes(FLUX, 'int8_35'))
    })

    test('a custom fetch is used for every request', async () => {
      const calls: string[] = []
      const myFetch: typeof fetch = (input, init) => {
        calls.push(String(input instanceof Request ? input.url : input))
        return fetch(input, init)
      }
      const file = await open(`${ranged.origin}/${FLUX_NAME}`, { fetch: myFetch })
      await file.getTensor('float64_357')
      await ranged.settled()
      expect(calls.length).toBe(ranged.log.length)
      expect(calls.length).toBeGreaterThanOrEqual(2)
      for (const c of calls) expect(c).toBe(`${ranged.origin}/${FLUX_NAME}`)
    })
  })

  describe('a server that ignores Range and answers 200 with the whole body', () => {
    test('every tensor of a real fixture is still read correctly', async () => {
      const file = await open(`${ignoring.origin}/${FLUX_NAME}`)
      expect(file.names().length).toBe(36)
      for (const t of fluxTensors) {
        const tensor = await file.getTensor(t.name)
        expectSameBytes(dataBytes(tensor), tensorBytes(FLUX, t.name), t.name)
      }
      const slice = await file.getSlice('float32_357', [[1, 2], null, [2, 4]])
      const all = new Float32Array(tensorBytes(FLUX, 'float32_357').slice().buffer)
      const want: number[] = []
      for (let j = 0; j < 5; j++) for (let k = 2; k < 4; k++) want.push(all[35 + j * 7 + k])
      expect(slice.shape).toEqual([1, 5, 2])
      expect(Array.from(slice.data as Float32Array)).toEqual(want)
      await ignoring.settled()
      expect(ignoring.log.every((e) => e.status === 200)).toBe(true)
    })

    test('a 64 MiB file: the header and a small tensor are read without the server sending the whole file', async () => {
      const file = await open(`${ignoring.origin}/big.safetensors`)
      expect(file.header.fileSize).toBe(BIG.length)
      await ignoring.settled()
      expect(ignoring.log.length).toBe(1)
      expect(ignoring.log[0].bytesSent).toBeLessThan(BIG.length / 2)
      ignoring.clear()
      const small = await file.getTensor('small')
      expect(Array.from(small.data as Float32Array)).toEqual(Array.from(SMALL))
      // The download stops where the reads stop (its response waits, open): not settled, but sent no more.
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(ignoring.bytesSent()).toBeLessThan(BIG.length / 2)
      // The last tensor needs the whole stream; it comes from the same download.
      const last = await file.getTensor('last')
      expect(Array.from(last.data as Float32Array)).toEqual(Array.from(LAST))
      await ignoring.settled()
      expect(ignoring.log.length).toBe(1)
      expect(ignoring.bytesSent()).toBe(BIG.length)
    })

    test('every tensor of a 36-tensor file, read one by one: the file sent at most twice (the header read, one download)', async () => {
      const file = await open(`${ignoring.origin}/${FLUX_NAME}`)
      for (const name of [...file.names()].reverse()) expectSameBytes(dataBytes(await file.getTensor(name)), tensorBytes(FLUX, name), name)
      await file.close()
      await ignoring.settled()
      expect(ignoring.log.length).toBe(2)
      expect(ignoring.bytesSent()).toBeLessThanOrEqual(2 * FLUX.length)
    })

    test('a file larger than what is kept whole: read forward through a window, with one warning; a read behind it starts again', async () => {
      const keep = { ...WHOLE_FILE }
      Object.assign(WHOLE_FILE, { keepBytes: 1 << 20, windowBytes: 1 << 20 })
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
      try {
        const file = await open(`${ignoring.origin}/big.safetensors`)
        // nginx logs a request when its answer ends: the header read's, cancelled, once the server has seen it end.
        await ignoring.settled()
        ignoring.clear()
        for await (const tensor of file.tensors()) {
          const expected = tensor.name === 'small' ? SMALL : tensor.name === 'last' ? LAST : undefined
          if (expected) expect(Array.from(tensor.data as Float32Array)).toEqual(Array.from(expected))
        }
        await ignoring.settled()
        // In file order, one download: the file once.
        expect(ignoring.log.length).toBe(1)
        expect(ignoring.bytesSent()).toBe(BIG.length)
        expect(warn).toHaveBeenCalledTimes(1)
        expect(String(warn.mock.calls[0][0])).toMatch(/ignores Range requests and is \d+ bytes, more than the 1048576 kept in memory/)
        // Behind the window: the file from its start again.
        expect(Array.from((await file.getTensor('small')).data as Float32Array)).toEqual(Array.from(SMALL))
        await file.close()
        await ignoring.settled()
        expect(ignoring.log.length).toBe(2)
      } finally {
        Object.assign(WHOLE_FILE, keep)
        warn.mockRestore()
      }
    })
  })

  describe('the file changes on the server', () => {
    const NAME = 'changing.safetensors'
    beforeEach(() => writeFileSync(join(ROOT, NAME), FLUX))

    test('replaced between two reads (same size, other bytes): the next read is an Io error that says so, in one request', async () => {
      const file = await open(`${ranged.origin}/${NAME}`)
      expectSameBytes(dataBytes(await file.getTensor('int8_35')), tensorBytes(FLUX, 'int8_35'))
      const other = FLUX.slice()
      other.fill(0x5a, fluxHeader.dataStart)
      writeFileSync(join(ROOT, NAME), other)
      // Both servers make the ETag from the modification time; make sure it moves even within a second.
      utimesSync(join(ROOT, NAME), new Date(Date.now() + 10_000), new Date(Date.now() + 10_000))
      await ranged.settled()
      ranged.clear()
      const error = await expectError(() => file.getTensor('float32_357'), 'Io')
      expect(error.message).toMatch(/changed/)
      expect(error.message).toContain(`${ranged.origin}/${NAME}`)
      await ranged.settled()
      expect(ranged.log.length).toBe(1)
      expect(ranged.log[0].headers['if-range'], 'the validator of the first response').toMatch(/^"[^"]+"$/)
    })

    test('deleted after open(): HTTP 404 at once, the message names the status and the URL', async () => {
      const file = await open(`${ranged.origin}/${NAME}`)
      unlinkSync(join(ROOT, NAME))
      await ranged.settled()
      ranged.clear()
      const error = await expectError(() => file.getTensor('float32_357'), 'Io')
      expect(error.message).toMatch(/HTTP 404/)
      expect(error.message).toContain(`${ranged.origin}/${NAME}`)
      await ranged.settled()
      expect(ranged.log.length).toBe(1)
    })
  })

  test('random slices over HTTP read exactly the bytes they cover', async () => {
    // [4, 1280] and [1280, 4] F32 tensors: random row ranges; bytes sent = rows × row bytes.
    const r = rng(4)
    const file = await open(`${ranged.origin}/${LORA_NAME}`)
    const candidates = loraTensors.filter((t) => t.shape.length === 2 && t.dtype === 'F32')
    for (let i = 0; i < 20; i++) {
      const t = candidates[r.int(0, candidates.length - 1)]
      const [rows, cols] = t.shape
      const a = r.int(0, rows - 1)
      const b = r.int(a + 1, rows)
      await ranged.settled()
      ranged.clear()
      const s = await file.getSlice(t.name, [[a, b]])
      expect(s.shape).toEqual([b - a, cols])
      await ranged.settled()
      expect(ranged.bytesSent()).toBe((b - a) * cols * 4)
      expectSameBytes(dataBytes(s), tensorBytes(LORA, t.name).subarray(a * cols * 4, b * cols * 4))
    }
  })
})

describe("the tests' own server only", () => {
  const lookup = (path: string) => onDisk(path.slice(1))

  test('the runs of a column slice are requested several at a time, and a failed run stops the rest', async () => {
    const t = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] >= 64)!
    const [rows, columns] = t.shape
    // A server that holds every data request for a moment, so overlapping requests show.
    let inFlight = 0
    let most = 0
    let failAfter = Infinity
    const slow = await startServer(async (req, res, log) => {
      const data = !(req.headers.range ?? '').startsWith('bytes=0-')
      if (data && --failAfter < 0) return void res.destroy()
      inFlight++
      most = Math.max(most, inFlight)
      if (data) await new Promise((resolve) => setTimeout(resolve, 20))
      inFlight--
      return rangeHandler(lookup)(req, res, log)
    })
    try {
      // requestCost 0: one request per run, however close they are.
      const file = await open(`${slow.origin}/${LORA_NAME}`, { requestCost: 0 })
      const column = await file.getSlice(t.name, [null, [0, 1]])
      const all = new Float32Array(tensorBytes(LORA, t.name).slice().buffer)
      expect(Array.from(column.data as Float32Array)).toEqual(Array.from({ length: rows }, (_, r) => all[r * columns]))
      expect(most).toBeGreaterThan(1)
      expect(most).toBeLessThanOrEqual(8)
      slow.clear()
      failAfter = 3
      const error = await file.getSlice(t.name, [null, [0, 1]]).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(SafetensorsError)
      expect((error as SafetensorsError).code).toBe('Io')
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(slow.log.length, 'requests after the failure').toBeLessThan(rows)
    } finally {
      await slow.close()
    }
  })

  test('a custom fetch with no server behind it at all is enough', async () => {
    const requests: string[] = []
    const fakeFetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
      const range = new Headers(init?.headers).get('Range') ?? ''
      requests.push(range)
      const r = parseRange(range, FLUX.length)
      if (typeof r !== 'object') return new Response(FLUX.slice(), { status: 200, headers: { 'Content-Length': String(FLUX.length) } })
      return new Response(FLUX.slice(r.start, r.end + 1), {
        status: 206,
        headers: { 'Content-Range': `bytes ${r.start}-${r.end}/${FLUX.length}`, 'Content-Length': String(r.end - r.start + 1) },
      })
    }) as typeof fetch
    // Port 9 (discard) on 127.0.0.1: the global fetch would fail here.
    const file = await open('http://127.0.0.1:9/model.safetensors', { fetch: fakeFetch })
    expectSameBytes(dataBytes(await file.getTensor('uint8_357')), tensorBytes(FLUX, 'uint8_357'))
    expect(requests.length).toBeGreaterThanOrEqual(2)
  })

  test('a connection refused is an Io error', async () => {
    const gone = await startServer(() => undefined)
    const url = `${gone.origin}/x.safetensors`
    await gone.close()
    await expectError(() => open(url), 'Io')
  })
})

describe('a URL that serves something else than a SafeTensors file', () => {
  let server: TestServer
  const page = new TextEncoder().encode('<!doctype html><title>Index of /models/</title><a href="model.safetensors">model.safetensors</a>\n')
  beforeAll(async () => {
    // A folder listing, as a static server answers a URL that names a folder; and an API's JSON answer.
    server = await startServer((_req, res) => {
      const json = res.req.url === '/api'
      const body = json ? new TextEncoder().encode('{"error":"not found","models":[]}') : page
      res.writeHead(200, { 'Content-Type': json ? 'application/json' : 'text/html; charset=utf-8', 'Content-Length': body.length })
      res.end(body)
    })
  })
  afterAll(() => server?.close())

  test.each([
    ['a web page (text/html)', '/models/', 'HTML or XML'],
    ['an API answer (application/json)', '/api', 'JSON'],
  ])('%s: the error names the URL and what it is, not a header length alone', async (_, path, kind) => {
    const url = `${server.origin}${path}`
    const e = await errorOf(() => open(url))
    expect(e.code).toMatch(/^(HeaderTooLarge|InvalidHeaderLength)$/)
    expect(e.url).toBe(url)
    expect(e.message).toMatch(new RegExp(`^${url}: not a SafeTensors file: it is ${kind}`))
  })
})
