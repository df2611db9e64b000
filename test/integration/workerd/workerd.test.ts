// The package in an edge worker: workerd (the runtime of Cloudflare Workers, from the npm package
// `workerd`) runs test/integration/workerd/worker.js, which imports the package through its `workerd` export
// condition, opens a fixture served over loopback HTTP by open(url) (Range requests through fetch), and
// returns a converted tensor. workerd refuses to compile wasm from bytes at run time, so this is the only
// way to know that entry works.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import workerdBinary, { version as workerdVersion } from 'workerd'
import { open } from '../../../src/node.ts'
import { referenceConvert } from '../../float-reference.ts'
import { serveFiles, startServer, type TestServer } from '../../http-server.ts'
import { badUploads, expectConvertedToF16, FIXTURE, INVALID } from './worker-checks.ts'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const FIXTURE_PATH = join(ROOT, 'test/fixtures/real', FIXTURE)
const INVALID_PATH = join(ROOT, 'test/fixtures/real/invalid', INVALID)

/** What `import 'safetensors-wasm'` means under the `workerd` condition, resolved by Node itself. */
function resolveWorkerdEntry(): string {
  const url = execFileSync(process.execPath, ['--conditions=workerd', '--input-type=module', '-e', "console.log(import.meta.resolve('safetensors-wasm'))"], {
    cwd: ROOT,
    encoding: 'utf8',
  })
  return fileURLToPath(url.trim())
}

/** A worker of the config: its file in test/integration/workerd, and text bindings (env.NAME) such as the URLs it talks to. */
interface WorkerSpec {
  name: string
  file: string
  bindings?: Record<string, string>
}

/** The config: each worker on a socket of its own on 127.0.0.1 (port chosen by the OS), outbound fetch to loopback only. */
function workerdConfig(configDir: string, entry: string, workers: WorkerSpec[]): string {
  const dist = dirname(entry)
  const wasm = readdirSync(dist).filter((f) => f.endsWith('.wasm'))
  const chunks = readdirSync(dist).filter((f) => /^workerd-.*\.js$/.test(f))
  // embed takes a path relative to the config file (an absolute one is looked up in the import path).
  const embed = (path: string) => `embed ${JSON.stringify(relative(configDir, path))}`
  // Module names are how imports resolve: the worker imports 'safetensors-wasm' (and 'safetensors-wasm/gguf'),
  // and an entry's './workerd-shared.js' or './header.wasm' resolves, relative to that name, to
  // 'workerd-shared.js' or 'header.wasm' ('../' from the GGUF entry, a folder deeper in dist/ as in its name).
  const worker = (w: WorkerSpec) => {
    const modules = [
      `(name = "worker.js", esModule = ${embed(join(ROOT, 'test/integration/workerd', w.file))})`,
      `(name = "safetensors-wasm", esModule = ${embed(entry)})`,
      `(name = "safetensors-wasm/gguf", esModule = ${embed(join(dist, 'gguf/workerd.js'))})`,
      ...chunks.map((f) => `(name = ${JSON.stringify(f)}, esModule = ${embed(join(dist, f))})`),
      ...wasm.map((f) => `(name = ${JSON.stringify(f)}, wasm = ${embed(join(dist, f))})`),
    ]
    const bindings = Object.entries(w.bindings ?? {}).map(([name, text]) => `(name = ${JSON.stringify(name)}, text = ${JSON.stringify(text)})`)
    return `const ${w.name} :Workerd.Worker = (
  modules = [
    ${modules.join(',\n    ')}
  ],
  bindings = [${bindings.join(', ')}],
  compatibilityDate = "2025-06-01",
  globalOutbound = "loopback",
);
`
  }
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    ${workers.map((w) => `(name = ${JSON.stringify(w.name)}, worker = .${w.name}),`).join('\n    ')}
    # fetch() from the workers may reach 127.0.0.1 and nothing else (the default allows only public addresses).
    (name = "loopback", network = (allow = ["127.0.0.1/32"])),
  ],
  sockets = [${workers.map((w) => `(name = ${JSON.stringify(w.name)}, address = "127.0.0.1:0", http = (), service = ${JSON.stringify(w.name)})`).join(', ')}],
);

${workers.map(worker).join('\n')}`
}

/** Starts workerd; resolves with each socket's base URL once it reports the ports it listens on (--control-fd). */
function startWorkerd(configPath: string, sockets: string[]): Promise<{ child: ChildProcess; urls: Record<string, string>; log: () => string }> {
  const child = spawn(workerdBinary, ['serve', configPath, '--control-fd=3'], { stdio: ['ignore', 'pipe', 'pipe', 'pipe'] })
  let log = ''
  child.stdout!.on('data', (d) => (log += d))
  child.stderr!.on('data', (d) => (log += d))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`workerd did not start within 20 s:\n${log}`)), 20_000)
    child.on('exit', (code) => reject(new Error(`workerd exited with ${code}:\n${log}`)))
    const urls: Record<string, string> = {}
    let control = ''
    ;(child.stdio[3] as NodeJS.ReadableStream).on('data', (d) => {
      control += d
      for (const line of control.split('\n')) {
        const message = line.trim() && JSON.parse(line)
        if (message?.event === 'listen') urls[message.socket] = `http://127.0.0.1:${message.port}/`
      }
      if (sockets.every((s) => urls[s])) {
        clearTimeout(timer)
        resolve({ child, urls, log: () => log })
      }
    })
  })
}

/** The fixture's header, parsed here with JSON.parse, independently of the library. */
function headerJson(bytes: Uint8Array): { dataStart: number; tensors: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> } {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true))
  return { dataStart: 8 + n, tensors: JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) }
}

/** What the storage server of the upload gateway got for one PUT: the bytes, and whether the request body ended (complete) or broke off. */
interface Upload {
  path: string
  state: 'receiving' | 'complete' | 'aborted'
  bytes: Buffer
}

/** A storage server: records every upload, answers 201 to a complete one. It knows nothing about the library. */
function storageServer(uploads: Upload[]): Promise<TestServer> {
  return startServer((req, res, log) => {
    const upload: Upload = { path: log.path, state: 'receiving', bytes: Buffer.alloc(0) }
    uploads.push(upload)
    const parts: Buffer[] = []
    return new Promise<void>((resolve) => {
      req.on('data', (d: Buffer) => parts.push(d))
      req.on('end', () => {
        upload.state = 'complete'
        upload.bytes = Buffer.concat(parts)
        res.writeHead(201, { 'Content-Length': 0 }).end()
        resolve()
      })
      req.on('close', () => {
        if (upload.state !== 'complete') {
          upload.state = 'aborted'
          upload.bytes = Buffer.concat(parts)
        }
        resolve()
      })
    })
  })
}

describe('workerd', () => {
  let dir: string
  let files: TestServer
  let storage: TestServer
  const uploads: Upload[] = []
  let workerd: Awaited<ReturnType<typeof startWorkerd>>

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'safetensors-workerd-'))
    const entry = resolveWorkerdEntry()
    expect(entry).toBe(join(ROOT, 'dist/workerd.js'))
    files = await serveFiles({ [FIXTURE]: FIXTURE_PATH, [INVALID]: INVALID_PATH })
    storage = await storageServer(uploads)
    const workers: WorkerSpec[] = [
      { name: 'main', file: 'worker.js' },
      { name: 'tensor', file: 'tensor-endpoint.js', bindings: { ORIGIN: files.url + FIXTURE } },
      { name: 'gateway', file: 'upload-gateway.js', bindings: { STORAGE: storage.url } },
      { name: 'convert', file: 'convert-proxy.js', bindings: { ORIGIN: files.url } },
    ]
    writeFileSync(join(dir, 'config.capnp'), workerdConfig(dir, entry, workers))
    workerd = await startWorkerd(
      join(dir, 'config.capnp'),
      workers.map((w) => w.name),
    )
    // One line in the CI log that says what ran where.
    console.log(
      `workerd ${workerdVersion} runs ${workers.map((w) => `test/integration/workerd/${w.file} at ${workerd.urls[w.name]}`).join(', ')} with ${relative(ROOT, entry)} (workerd condition)`,
    )
  }, 30_000)

  afterAll(async () => {
    workerd?.child.kill()
    await files?.close()
    await storage?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const ask = (params: Record<string, string>) => fetch(`${workerd.urls.main}?${new URLSearchParams(params)}`)
  const fixture = () => new Uint8Array(readFileSync(FIXTURE_PATH))

  test.each([
    ['bfloat16_357', 'F16'],
    ['bfloat16_357', 'F32'],
    ['float32_35', 'BF16'],
  ])('tensor endpoint: GET /tensor/%s?dtype=%s streams the converted tensor, byte-exact', async (name, dtype) => {
    files.clear()
    const response = await fetch(`${workerd.urls.tensor}tensor/${name}?dtype=${dtype}`)
    expect(response.status, await response.clone().text()).toBe(200)
    const { dataStart, tensors } = headerJson(fixture())
    const info = tensors[name]
    const raw = fixture().subarray(dataStart + info.data_offsets[0], dataStart + info.data_offsets[1])
    expect(Buffer.compare(new Uint8Array(await response.arrayBuffer()), referenceConvert(info.dtype, dtype, raw))).toBe(0)
    expect(JSON.parse(response.headers.get('x-shape')!)).toEqual(info.shape)
    // The origin was asked for the header and then for this tensor's bytes only.
    expect(files.ranges().at(-1)).toBe(`bytes=${dataStart + info.data_offsets[0]}-${dataStart + info.data_offsets[1] - 1}`)
    const missing = await fetch(`${workerd.urls.tensor}tensor/nope?dtype=F16`)
    expect(missing.status).toBe(404)
    expect((await missing.json()).code).toBe('TensorNotFound')
  })

  test('upload gateway: a good file is answered 201 with its tensor count and stored byte-identical', async () => {
    const bytes = fixture()
    const response = await fetch(`${workerd.urls.gateway}good.safetensors`, { method: 'POST', body: bytes })
    expect(response.status, await response.clone().text()).toBe(201)
    expect((await response.json()).tensors).toBe(Object.keys(headerJson(bytes).tensors).length)
    await storage.settled()
    const stored = uploads.filter((u) => u.path === '/good.safetensors')
    expect(stored.map((u) => u.state)).toEqual(['complete'])
    expect(Buffer.compare(stored[0].bytes, bytes)).toBe(0)
  })

  test.each(badUploads().map(([name, , code]) => [name, code]))(
    'upload gateway: %s is answered 422 %s and storage sees no complete object',
    async (name, code) => {
      const [, bytes] = badUploads().find(([n]) => n === name)!
      const response = await fetch(`${workerd.urls.gateway}${name}.safetensors`, { method: 'POST', body: bytes })
      expect(response.status, await response.clone().text()).toBe(422)
      expect((await response.json()).code).toBe(code)
      await vi.waitFor(() => expect(uploads.filter((u) => u.path === `/${name}.safetensors` && u.state === 'receiving')).toEqual([]))
      const seen = uploads.filter((u) => u.path === `/${name}.safetensors`)
      console.log(`upload gateway, ${name}: storage saw ${seen.map((u) => `${u.state} after ${u.bytes.length} bytes`).join(', ') || 'no request'}`)
      expect(seen.filter((u) => u.state !== 'aborted')).toEqual([])
      // A file that is bad only at its end streamed to storage, which then saw the upload break off.
      if (name === 'large-cut-short') expect(seen.map((u) => u.state)).toEqual(['aborted'])
    },
  )

  test('converting proxy: an upstream BF16/F32 file comes back with every float as F16, byte-exact', async () => {
    const response = await fetch(`${workerd.urls.convert}${FIXTURE}?dtype=F16`)
    expect(response.status).toBe(200)
    expectConvertedToF16(fixture(), new Uint8Array(await response.arrayBuffer()))
  })

  test.each(['bfloat16_3', 'bfloat16_35', 'bfloat16_357'])('%s: BF16 -> F32 in the worker equals the tensor read in Node', async (name) => {
    files.clear()
    const response = await ask({ url: files.url + FIXTURE, tensor: name, dtype: 'F32' })
    expect(response.status, await response.clone().text()).toBe(200)
    const got = new Float32Array(await response.arrayBuffer())

    const bytes = new Uint8Array(readFileSync(FIXTURE_PATH))
    const { dataStart, tensors } = headerJson(bytes)
    const info = tensors[name]
    expect(info.dtype).toBe('BF16')
    expect(response.headers.get('x-dtype')).toBe('F32')
    expect(JSON.parse(response.headers.get('x-shape')!)).toEqual(info.shape)

    // The same tensor read in Node through the library, and decoded here by hand (BF16 is the top half of F32).
    const node = await open(FIXTURE_PATH)
    const fromNode = (await node.getTensor(name, { dtype: 'F32' })).data as Float32Array
    await node.close()
    const raw = bytes.slice(dataStart + info.data_offsets[0], dataStart + info.data_offsets[1])
    const byHand = Float32Array.from(new Uint16Array(raw.buffer), (bits) => new Float32Array(new Uint32Array([bits << 16]).buffer)[0])
    expect(got.length).toBe(info.shape.reduce((a, b) => a * b, 1))
    expect(Array.from(got)).toEqual(Array.from(fromNode))
    expect(Array.from(got)).toEqual(Array.from(byHand))

    // The worker asked for ranges, never the whole file: the header, then this tensor's bytes.
    expect(files.ranges().length).toBeGreaterThanOrEqual(2)
    expect(
      files.ranges().every((r) => /^bytes=\d+-\d+$/.test(r)),
      files.ranges().join(', '),
    ).toBe(true)
    expect(files.ranges().at(-1)).toBe(`bytes=${dataStart + info.data_offsets[0]}-${dataStart + info.data_offsets[1] - 1}`)
  })

  test('an invalid file: the worker gets the SafetensorsError code', async () => {
    const response = await ask({ url: files.url + INVALID, tensor: 'x' })
    expect(response.status).toBe(422)
    const bytes = readFileSync(INVALID_PATH)
    // Its prefix claims a header longer than the file: InvalidHeaderLength, by the format's rules.
    expect(Number(bytes.readBigUInt64LE(0))).toBeGreaterThan(bytes.length - 8)
    expect((await response.json()).code).toBe('InvalidHeaderLength')
  })

  test.each(['tensor-endpoint.js', 'upload-gateway.js', 'convert-proxy.js'])('docs/streams-and-workers.md, "Edge workers", shows %s as tested', (file) => {
    expect(readFileSync(join(ROOT, 'docs/streams-and-workers.md'), 'utf8')).toContain(
      `\`\`\`js worker\n${readFileSync(join(ROOT, 'test/integration/workerd', file), 'utf8')}`,
    )
  })

  test('outbound fetch is limited to loopback: another address is refused', async () => {
    // 192.0.2.1 is TEST-NET-1 (never routed); the network service must refuse it before any connection.
    const response = await ask({ url: 'http://192.0.2.1/x.safetensors', tensor: 'x' })
    expect(response.status).toBe(422)
    expect((await response.json()).code).toBe('Io')
    // Refused by the config's allow list, not merely unreachable from this machine.
    await vi.waitFor(() => expect(workerd.log()).toContain('connecting to 192.0.2.1:80 is not allowed'))
  })
})
