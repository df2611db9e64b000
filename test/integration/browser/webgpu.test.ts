// End to end in a browser with WebGPU: BF16 weights in a file made here, served over HTTP by the shared
// test server (Cache-Control: no-store), read in the page with getTensor(name, { dtype: 'F32', out })
// straight into GPUBuffers mapped at creation, multiplied by a WGSL compute shader, read back and compared
// with a CPU reference computed here from the BF16 bits. Chromium from @sparticuz/chromium, with WebGPU on
// SwiftShader (test/integration/browser/chromium.ts, webgpuChromium), in a persistent profile (a user data dir), as a
// returning visitor's browser would be.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type BrowserContext, chromium, type JSHandle, type Page } from 'playwright'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type * as Library from '../../../src/index.ts'
import { fileResource, rangeHandler, startServer, type TestServer } from '../../http-server.ts'
import { prng } from '../../random.ts'
import { bf16ToNumber, buildFile, headerOf, sha256 } from '../../read-helpers.ts'
import { webgpuChromium } from './chromium.ts'

const DIST = fileURLToPath(new URL('../../../dist/', import.meta.url))
const MODEL = '/model.safetensors'
/** The page again, served cross-origin isolated (COOP and COEP): the pool's results are SharedArrayBuffers there. */
const ISOLATED = 'isolated'
// Neither a multiple of the workgroup size (64) nor of anything else a wrong stride could hide behind.
const ROWS = 1000
const COLS = 1531
/** Unit roundoff of float32. */
const U = 2 ** -24

/** BF16 bits of `n` values in [-1, 1): the top half of a float32, so every bit pattern is a plain BF16 value. */
function randomBf16(n: number, seed: number): Uint16Array {
  const next = prng(seed)
  const f32 = Float32Array.from({ length: n }, () => 2 * next() - 1)
  return Uint16Array.from(new Uint32Array(f32.buffer), (bits) => bits >>> 16)
}

const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
/** What the page's buffer must hold: each BF16 value widened to float32, which is exact (the bits shifted up). */
const widened = (bits: Uint16Array) => bytesOf(Uint32Array.from(bits, (b) => b << 16))

// What the page does, given the library (the built bundle, dist/index.js) and a file opened with it.
// Serialized by Playwright into the page: it may use nothing from this module.
async function pageApi() {
  const lib = (window as unknown as { safetensors: typeof Library }).safetensors
  /** The GPU parts used here; TypeScript 5.9's DOM lib has no WebGPU types. */
  interface GpuBuffer {
    getMappedRange(): ArrayBuffer
    unmap(): void
    mapAsync(mode: number): Promise<void>
    destroy(): void
  }
  interface GpuPass {
    setPipeline(pipeline: unknown): void
    setBindGroup(index: number, group: unknown): void
    dispatchWorkgroups(count: number): void
    end(): void
  }
  interface GpuEncoder {
    copyBufferToBuffer(source: GpuBuffer, sourceOffset: number, target: GpuBuffer, targetOffset: number, size: number): void
    beginComputePass(): GpuPass
    finish(): unknown
  }
  interface GpuDevice {
    createBuffer(descriptor: { size: number; usage: number; mappedAtCreation?: boolean }): GpuBuffer
    createCommandEncoder(): GpuEncoder
    createShaderModule(descriptor: { code: string }): unknown
    createComputePipeline(descriptor: { layout: 'auto'; compute: { module: unknown; entryPoint: string } }): { getBindGroupLayout(index: number): unknown }
    createBindGroup(descriptor: { layout: unknown; entries: Array<{ binding: number; resource: { buffer: GpuBuffer } }> }): unknown
    queue: { submit(commands: unknown[]): void; writeBuffer(buffer: GpuBuffer, offset: number, data: ArrayBufferView): void }
  }
  const STORAGE = 0x80,
    COPY_SRC = 0x04,
    COPY_DST = 0x08,
    MAP_READ = 0x01
  const gpu = (
    navigator as unknown as {
      gpu?: { requestAdapter(): Promise<{ info: { vendor: string; architecture: string }; requestDevice(): Promise<GpuDevice> } | null> }
    }
  ).gpu
  const adapter = await gpu?.requestAdapter()
  if (!adapter) throw new Error('no WebGPU adapter')
  const device = await adapter.requestDevice()

  /** A tensor as F32 in a storage buffer mapped at creation: the read writes straight into the mapped range. */
  async function upload(file: Library.SafetensorsFile, name: string) {
    const info = file.info(name)
    const size = 4 * info.shape.reduce((a, b) => a * b, 1)
    const buffer = device.createBuffer({ size, usage: STORAGE | COPY_SRC, mappedAtCreation: true })
    const range = buffer.getMappedRange()
    const tensor = await file.getTensor(name, { dtype: 'F32', out: range })
    const intoMapped = tensor.data.buffer === range && tensor.data.byteOffset === 0 && tensor.data.byteLength === size
    buffer.unmap()
    return { buffer, size, intoMapped }
  }

  /** The bytes of a GPU buffer, as their SHA-256 in hex (a few bytes to hand back instead of megabytes). */
  async function readBack(source: GpuBuffer, size: number): Promise<ArrayBuffer> {
    const staging = device.createBuffer({ size, usage: MAP_READ | COPY_DST })
    const encoder = device.createCommandEncoder()
    encoder.copyBufferToBuffer(source, 0, staging, 0, size)
    device.queue.submit([encoder.finish()])
    await staging.mapAsync(MAP_READ)
    const copy = staging.getMappedRange().slice(0)
    staging.destroy()
    return copy
  }
  const hex = async (bytes: ArrayBuffer) =>
    Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)), (b) => b.toString(16).padStart(2, '0')).join('')

  // y = W x, one invocation per row, summing in float32 in column order. Sizes come from the buffers.
  const module = device.createShaderModule({
    code: `
      @group(0) @binding(0) var<storage, read> w: array<f32>;
      @group(0) @binding(1) var<storage, read> x: array<f32>;
      @group(0) @binding(2) var<storage, read_write> y: array<f32>;
      @compute @workgroup_size(64)
      fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        let rows = arrayLength(&y);
        let cols = arrayLength(&x);
        if (id.x >= rows) { return; }
        var sum = 0.0;
        for (var c = 0u; c < cols; c++) { sum += w[id.x * cols + c] * x[c]; }
        y[id.x] = sum;
      }`,
  })
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } })

  return {
    lib,
    adapter: `${adapter.info.vendor} ${adapter.info.architecture}`,
    /** A tensor read as F32 into a new array (on the pool), given to writeBuffer, and read back from the GPU. */
    async writeRead(file: Library.SafetensorsFile, name: string) {
      const { data } = await file.getTensor(name, { dtype: 'F32' })
      const buffer = device.createBuffer({ size: data.byteLength, usage: STORAGE | COPY_SRC | COPY_DST })
      device.queue.writeBuffer(buffer, 0, data)
      const result = {
        isolated: crossOriginIsolated,
        shared: Object.prototype.toString.call(data.buffer),
        sha256: await hex(await readBack(buffer, data.byteLength)),
      }
      buffer.destroy()
      return result
    },
    /** Loads W and x from `file`, runs the product, and reports what landed on the GPU and y. */
    async matvec(file: Library.SafetensorsFile, names: { w: string; x: string }) {
      const w = await upload(file, names.w)
      const x = await upload(file, names.x)
      const rows = file.info(names.w).shape[0]
      const y = device.createBuffer({ size: 4 * rows, usage: STORAGE | COPY_SRC })
      const bindGroup = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [w.buffer, x.buffer, y].map((buffer, binding) => ({ binding, resource: { buffer } })),
      })
      const encoder = device.createCommandEncoder()
      const pass = encoder.beginComputePass()
      pass.setPipeline(pipeline)
      pass.setBindGroup(0, bindGroup)
      pass.dispatchWorkgroups(Math.ceil(rows / 64))
      pass.end()
      device.queue.submit([encoder.finish()])
      const result = {
        intoMapped: w.intoMapped && x.intoMapped,
        wSha256: await hex(await readBack(w.buffer, w.size)),
        xSha256: await hex(await readBack(x.buffer, x.size)),
        y: Array.from(new Float32Array(await readBack(y, 4 * rows))),
      }
      for (const buffer of [w.buffer, x.buffer, y]) buffer.destroy()
      return result
    },
  }
}
type PageApi = Awaited<ReturnType<typeof pageApi>>

let dir: string
let server: TestServer
let context: BrowserContext
const w = randomBf16(ROWS * COLS, 12)
const x = randomBf16(COLS, 34)
const file = buildFile(
  [
    { name: 'x', dtype: 'BF16', shape: [COLS], bytes: bytesOf(x) },
    { name: 'W', dtype: 'BF16', shape: [ROWS, COLS], bytes: bytesOf(w) },
  ],
  { format: 'pt' },
)

/** The browser, on the profile in `dir` (a returning visitor's: its storage outlives a restart). */
async function launch(): Promise<BrowserContext> {
  const { executablePath, args } = await webgpuChromium()
  return chromium.launchPersistentContext(join(dir, 'profile'), { executablePath, args })
}

/** A new tab on the test server's page, with the bundle loaded and the GPU set up; at `path`, under that path's headers (ISOLATED). */
async function visit(path = ''): Promise<{ page: Page; api: JSHandle<PageApi> }> {
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(String(error)))
  page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())))
  await page.goto(server.url + path)
  await page.waitForFunction(() => 'safetensors' in window)
  const api = await page.evaluateHandle(pageApi)
  expect(errors).toEqual([])
  return { page, api }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'safetensors-webgpu-'))
  writeFileSync(join(dir, 'model.safetensors'), file)
  const model = rangeHandler((path) => (path === MODEL ? fileResource(join(dir, 'model.safetensors')) : undefined))
  // The page and the bundle (dist/index.js and the modules it imports, in dist/ and its folders) come from the same origin as the
  // file: a secure context (127.0.0.1), and no CORS.
  server = await startServer((req, res, log) => {
    const script = /^\/dist\/(?:[\w-]+\/)*[\w.-]+\.js$/.test(log.path) && join(DIST, log.path.slice('/dist/'.length))
    const isolated = log.path === `/${ISOLATED}`
    if (log.path !== '/' && !isolated && !(script && existsSync(script))) return model(req, res, log)
    res.writeHead(200, {
      'Content-Type': script ? 'text/javascript' : 'text/html',
      'Cache-Control': 'no-store',
      ...(isolated ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {}),
    })
    res.end(
      script
        ? readFileSync(script)
        : '<!doctype html><meta charset="utf-8"><title>WebGPU</title><script type="importmap">{"imports":{"#platform":"/dist/platform/portable.js","#workers":"/dist/platform/web-workers.js"}}</script><script type="module">import * as s from "/dist/index.js"; window.safetensors = s</script>',
    )
  })
  context = await launch()
}, 60_000)

afterAll(async () => {
  await context?.close()
  await server?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('BF16 weights over HTTP into mapped GPU buffers as F32, a WGSL matrix-vector product, checked against the CPU', async () => {
  const { page, api } = await visit()
  expect(await api.evaluate((a) => a.adapter)).toBe('google swiftshader')
  server.clear()
  const result = await api.evaluate((a, url) => a.lib.open(url).then((f) => a.matvec(f, { w: 'W', x: 'x' })), server.url + MODEL.slice(1))
  await server.settled()

  // Every response said no-store. The header came in the first read (64 KiB), then each tensor's bytes
  // in one Range request of its own, and nothing else.
  const { dataStart, tensors } = headerOf(file)
  const modelLog = server.log.filter((e) => e.path === MODEL)
  expect(modelLog.map((e) => e.status)).toEqual(modelLog.map(() => 206))
  for (const name of ['W', 'x']) {
    const [begin, end] = tensors[name].data_offsets
    expect(server.ranges()).toContain(`bytes=${dataStart + begin}-${dataStart + end - 1}`)
  }
  expect(modelLog.reduce((s, e) => s + e.bytesSent, 0)).toBeLessThanOrEqual(64 * 1024 + file.length - dataStart)

  // What the reads wrote into the mapped ranges is the exact F32 form of the file's BF16 bits.
  expect(result.intoMapped).toBe(true)
  expect(result.wSha256).toBe(sha256(widened(w)))
  expect(result.xSha256).toBe(sha256(widened(x)))

  // The reference: each product of two BF16 values is exact in float32 (8 + 8 significant bits), so the
  // GPU's only rounding is in the COLS - 1 float32 additions. For any order of those additions (and with
  // or without FMA) the error is at most gamma(COLS - 1) * sum |w_c x_c| (Higham, Accuracy and Stability
  // of Numerical Algorithms, 2nd ed., section 3.1), gamma(n) = n u / (1 - n u), u = 2^-24. The exact sum
  // and the bound are computed here in float64 (error below 2^-53 relative, far inside the bound).
  const xs = Array.from(x, bf16ToNumber)
  const gamma = ((COLS - 1) * U) / (1 - (COLS - 1) * U)
  let maxError = 0
  let worst = 0
  for (let r = 0; r < ROWS; r++) {
    let exact = 0
    let magnitude = 0
    for (let c = 0; c < COLS; c++) {
      const p = bf16ToNumber(w[r * COLS + c]) * xs[c]
      exact += p
      magnitude += Math.abs(p)
    }
    const error = Math.abs(result.y[r] - exact)
    expect(error, `row ${r}: GPU ${result.y[r]}, reference ${exact}`).toBeLessThanOrEqual(gamma * magnitude)
    maxError = Math.max(maxError, error)
    worst = Math.max(worst, error / (gamma * magnitude))
  }
  console.log(
    `WebGPU: W ${ROWS}x${COLS} BF16 (${w.byteLength} bytes, ${4 * w.length} as F32), max |y - reference| = ${maxError.toExponential(3)}, at most ${(100 * worst).toFixed(2)}% of the bound`,
  )
  // A product of the right shape from wrong data (zeros, a transposed or shifted W) fails the check above;
  // this one only makes sure y is not all zeros for some reason the bound would let by.
  expect(result.y.some((v) => Math.abs(v) > 1)).toBe(true)
  await page.close()
})

test('a second visit, after a browser restart on the same profile, reads every tensor from the OPFS cache: no tensor bytes from the server', async () => {
  const url = server.url + MODEL.slice(1)
  // First visit: the reads go through a cache, which keeps what they fetched.
  const first = await visit()
  const filled = await first.api.evaluate(async (a, url) => {
    const cache = await a.lib.createCache()
    await cache.clear()
    const result = await a.matvec(await a.lib.open(url, { cache }), { w: 'W', x: 'x' })
    return { result, usage: await cache.usage() }
  }, url)
  expect(filled.result.wSha256).toBe(sha256(widened(w)))
  expect(filled.usage).toBeGreaterThanOrEqual(w.byteLength + x.byteLength)

  // The browser closes and comes back on the same profile: OPFS is all that is left of the first visit.
  await context.close()
  context = await launch()
  server.clear()
  const second = await visit()
  const again = await second.api.evaluate(async (a, url) => {
    const cache = await a.lib.createCache()
    return a.matvec(await a.lib.open(url, { cache }), { w: 'W', x: 'x' })
  }, url)
  await server.settled()

  // The same numbers, with the server's no-store responses never asked for the tensor bytes again: at
  // most a revalidation per open, and no response body reaching past the header into the data.
  expect(again).toEqual(filled.result)
  const { dataStart } = headerOf(file)
  const modelLog = server.log.filter((e) => e.path === MODEL)
  expect(
    modelLog.reduce((s, e) => s + e.bytesSent, 0),
    JSON.stringify(modelLog.map((e) => [e.method, e.range, e.status, e.bytesSent])),
  ).toBeLessThanOrEqual(1024)
  for (const e of modelLog) {
    const start = Number(/^bytes=(\d+)-/.exec(e.range ?? 'bytes=0-')![1])
    expect(start + e.bytesSent, `${e.method} ${e.range}`).toBeLessThanOrEqual(dataStart)
  }
  await second.page.close()
})

test('cross-origin isolated, a read on the pool is a SharedArrayBuffer, which writeBuffer takes', async () => {
  const { page, api } = await visit(ISOLATED)
  // W as F32 is 6 MB: past the pool's threshold, so its workers write it into shared memory.
  const result = await api.evaluate((a, url) => a.lib.open(url).then((f) => a.writeRead(f, 'W')), server.url + MODEL.slice(1))
  expect(result).toEqual({ isolated: true, shared: '[object SharedArrayBuffer]', sha256: sha256(widened(w)) })
  await page.close()
})
