// The package in an edge worker: workerd (the runtime of Cloudflare Workers, from the npm package
// `workerd`) runs test/workerd/worker.js, which imports the package through its `workerd` export
// condition, opens a fixture served over loopback HTTP by open(url) (Range requests through fetch), and
// returns a converted tensor. workerd refuses to compile wasm from bytes at run time, so this is the only
// way to know that entry works.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import workerdBinary, { version as workerdVersion } from 'workerd'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { open } from '../../src/node.ts'
import { serveFiles, type TestServer } from '../http-server.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const FIXTURE = 'fluxml__safetensors.jl__model.safetensors'
const FIXTURE_PATH = join(ROOT, 'test/fixtures/real', FIXTURE)
const INVALID = 'syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors'
const INVALID_PATH = join(ROOT, 'test/fixtures/real/invalid', INVALID)

/** What `import 'safetensors-wasm'` means under the `workerd` condition, resolved by Node itself. */
function resolveWorkerdEntry(): string {
  const url = execFileSync(process.execPath, ['--conditions=workerd', '--input-type=module', '-e', "console.log(import.meta.resolve('safetensors-wasm'))"], {
    cwd: ROOT,
    encoding: 'utf8',
  })
  return fileURLToPath(url.trim())
}

/** The config: one worker, one socket on 127.0.0.1 (port chosen by the OS), outbound fetch to loopback only. */
function workerdConfig(configDir: string, entry: string): string {
  const wasm = readdirSync(dirname(entry)).filter((f) => f.endsWith('.wasm'))
  // embed takes a path relative to the config file (an absolute one is looked up in the import path).
  const embed = (path: string) => `embed ${JSON.stringify(relative(configDir, path))}`
  // Module names are how imports resolve: the worker imports 'safetensors-wasm', and the entry's
  // './core-simd.wasm' resolves, relative to that name, to 'core-simd.wasm'.
  const modules = [
    `(name = "worker.js", esModule = ${embed(join(ROOT, 'test/workerd/worker.js'))})`,
    `(name = "safetensors-wasm", esModule = ${embed(entry)})`,
    ...wasm.map((f) => `(name = ${JSON.stringify(f)}, wasm = ${embed(join(dirname(entry), f))})`),
  ]
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    # fetch() from the worker may reach 127.0.0.1 and nothing else (the default allows only public addresses).
    (name = "loopback", network = (allow = ["127.0.0.1/32"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);

const worker :Workerd.Worker = (
  modules = [
    ${modules.join(',\n    ')}
  ],
  compatibilityDate = "2025-06-01",
  globalOutbound = "loopback",
);
`
}

/** Starts workerd; resolves with its base URL once it reports the port it listens on (--control-fd). */
function startWorkerd(configPath: string): Promise<{ child: ChildProcess; url: string; log: () => string }> {
  const child = spawn(workerdBinary, ['serve', configPath, '--control-fd=3'], { stdio: ['ignore', 'pipe', 'pipe', 'pipe'] })
  let log = ''
  child.stdout!.on('data', (d) => (log += d))
  child.stderr!.on('data', (d) => (log += d))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`workerd did not start within 20 s:\n${log}`)), 20_000)
    child.on('exit', (code) => reject(new Error(`workerd exited with ${code}:\n${log}`)))
    let control = ''
    ;(child.stdio[3] as NodeJS.ReadableStream).on('data', (d) => {
      control += d
      for (const line of control.split('\n')) {
        const message = line.trim() && JSON.parse(line)
        if (message?.event === 'listen' && message.socket === 'http') {
          clearTimeout(timer)
          resolve({ child, url: `http://127.0.0.1:${message.port}/`, log: () => log })
        }
      }
    })
  })
}

/** The fixture's header, parsed here with JSON.parse, independently of the library. */
function headerJson(bytes: Uint8Array): { dataStart: number; tensors: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> } {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true))
  return { dataStart: 8 + n, tensors: JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) }
}

describe('workerd', () => {
  let dir: string
  let files: TestServer
  let workerd: Awaited<ReturnType<typeof startWorkerd>>

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'safetensors-workerd-'))
    const entry = resolveWorkerdEntry()
    expect(entry).toBe(join(ROOT, 'dist/workerd.js'))
    writeFileSync(join(dir, 'config.capnp'), workerdConfig(dir, entry))
    files = await serveFiles({ [FIXTURE]: FIXTURE_PATH, [INVALID]: INVALID_PATH })
    workerd = await startWorkerd(join(dir, 'config.capnp'))
    // One line in the CI log that says what ran where.
    console.log(`workerd ${workerdVersion} at ${workerd.url} runs test/workerd/worker.js with ${relative(ROOT, entry)} (workerd condition)`)
  }, 30_000)

  afterAll(async () => {
    workerd?.child.kill()
    await files?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const ask = (params: Record<string, string>) => fetch(`${workerd.url}?${new URLSearchParams(params)}`)

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

  test('outbound fetch is limited to loopback: another address is refused', async () => {
    // 192.0.2.1 is TEST-NET-1 (never routed); the network service must refuse it before any connection.
    const response = await ask({ url: 'http://192.0.2.1/x.safetensors', tensor: 'x' })
    expect(response.status).toBe(422)
    expect((await response.json()).code).toBe('Io')
    // Refused by the config's allow list, not merely unreachable from this machine.
    await vi.waitFor(() => expect(workerd.log()).toContain('connecting to 192.0.2.1:80 is not allowed'))
  })
})
