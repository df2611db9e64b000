// The package as a browser app gets it: `npm pack`'s tarball installed into a fresh folder, the small page
// in test/integration/consumers/page/ bundled there by the default setup of esbuild, webpack 5, Vite 8 and Rollup 4
// (no plugin or alias for `node:`), and each bundle run in Chromium, Firefox and WebKit (those on the machine:
// scripts/browser-engines.js), on the page and in a module Web Worker. The page opens a real fixture over
// HTTP Range from a loopback server; what it must read is worked out here from the fixture's bytes. Then
// the page loads a 256 MiB BF16 file made here as F32 on the conversion pool (over HTTP and from a Blob)
// and with `workers: 0`, timing its main thread's longest task; the same page under a CSP that forbids blob:
// workers, and cross-origin isolated, loads a smaller one. One line per bundler and engine in the log says
// what ran and how it went.
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { chromium } from 'playwright'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { remote } from 'webdriverio'
import { type Engine, missing } from '../../../scripts/browser-engines.js'
import { writeGguf } from '../../../src/gguf-node.ts'
import { rangeHandler, startServer, type TestServer } from '../../http-server.ts'
import { packedConsumer } from '../../packed.ts'
import { mulberry32 } from '../../random.ts'
import { buildFile, headerOf, sha256 } from '../../read-helpers.ts'
import { tempDir } from '../../writer-reference.ts'
import { chromiumChoice } from '../browser/chromium.ts'
import { launchFirefox, startWebKit } from '../browser/engines.ts'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const PAGE = join(ROOT, 'test/integration/consumers/page')
const GGUF_MODEL = join(ROOT, 'test/fixtures/gguf/qwen2')
const run = promisify(execFile)

// The URL paths the page fetches (see page/checks.js) and the files behind them.
const FIXTURE = '/fixtures/model.safetensors'
const FIXTURES = new Map([
  [FIXTURE, new Uint8Array(readFileSync(join(ROOT, 'test/fixtures/real/fluxml__safetensors.jl__model.safetensors')))],
  [
    '/fixtures/invalid.safetensors',
    new Uint8Array(readFileSync(join(ROOT, 'test/fixtures/real/invalid/syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors'))),
  ],
  // A model for the GGUF entry: its weights, config and tokenizer.
  ...readdirSync(GGUF_MODEL).map((file): [string, Uint8Array] => [`/fixtures/qwen2/${file}`, new Uint8Array(readFileSync(join(GGUF_MODEL, file)))]),
])

/** A file of BF16 tensors for the pool's loads, every bit pattern likely (NaNs and infinities too). */
interface PoolFile {
  path: string
  bytes: Uint8Array
  /** Per tensor: its element count, and the SHA-256 of its exact F32 form (BF16 bits shifted up 16). */
  expected: Record<string, { length: number; sha256: string }>
  /** Element `i` of tensor `name` as F32 bits, from the file's bytes. */
  f32Bits(name: string, i: number): number
}

function poolFile(path: string, tensors: number, shape: [number, number], seed: number): PoolFile {
  const length = shape[0] * shape[1]
  const next = mulberry32(seed)
  const specs = Array.from({ length: tensors }, (_, t) => {
    const words = new Uint32Array(length / 2)
    for (let i = 0; i < words.length; i++) words[i] = next()
    return { name: `layers.${t}.weight`, dtype: 'BF16', shape, bytes: new Uint8Array(words.buffer) }
  })
  const expected = Object.fromEntries(
    specs.map(({ name, bytes }) => {
      const bf16 = new Uint16Array(bytes.buffer)
      const f32 = new Uint32Array(bf16.length)
      for (let i = 0; i < bf16.length; i++) f32[i] = bf16[i] << 16
      return [name, { length, sha256: sha256(new Uint8Array(f32.buffer)) }]
    }),
  )
  const bf16 = new Map(specs.map(({ name, bytes }) => [name, new Uint16Array(bytes.buffer)]))
  return { path, bytes: buildFile(specs), expected, f32Bits: (name, i) => (bf16.get(name)![i] << 16) >>> 0 }
}

// The page's pool loads (page/pool.js): 256 MiB of BF16 in 8 tensors as a model has them; a smaller file for the
// pages under other policies, where only what the pool decides matters. Made in beforeAll (a second or two).
const POOL_SHAPE: [number, number] = [4096, 4096]
let POOL: PoolFile
let POOL_SMALL: PoolFile

/** The page under a policy of its server: `?policy=` says which headers its HTML gets. */
const POLICIES: Record<string, Record<string, string>> = {
  // Blob URLs are not 'self': the pool's workers are refused, and wasm still compiles (worker-src alone).
  csp: { 'Content-Security-Policy': "worker-src 'self'" },
  isolated: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' },
}

interface Bundler {
  name: string
  /** The npm package whose version the log names. */
  pkg: string
  /** The CLI and its arguments, run in the consumer folder, writing to `out`. */
  command(out: string): string[]
}

// Each bundler's own CLI with its defaults, as its docs show it for a browser app. esbuild and Rollup do
// not bundle `new Worker(new URL(...))`, so worker.js is their second entry point; webpack and Vite do.
const BUNDLERS: Bundler[] = [
  {
    name: 'esbuild',
    pkg: 'esbuild',
    command: (out) => ['esbuild', 'app.js', 'worker.js', '--bundle', '--platform=browser', '--format=esm', `--outdir=${out}`],
  },
  {
    name: 'webpack',
    pkg: 'webpack',
    command: (out) => ['webpack', './app.js', '--mode', 'production', '--target', 'web', '--output-path', out, '--output-filename', 'app.js'],
  },
  { name: 'Vite', pkg: 'vite', command: (out) => ['vite', 'build', '--outDir', out] },
  {
    name: 'Rollup',
    pkg: 'rollup',
    command: (out) => ['rollup', 'app.js', 'worker.js', '--plugin', 'node-resolve={browser:true}', '--format', 'es', '--dir', out],
  },
]

const versionOf = (pkg: string): string => JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version

/**
 * A bundler's error or warning about a `node:` import: esbuild `Could not resolve "node:fs"`, webpack
 * `"node:" URIs`, Vite `Module "node:fs" has been externalized`; not Node's `(node:1234)` warning prefix.
 * Rollup with node-resolve keeps such an import as an external one without a word: the check of the
 * output files catches that.
 */
const NODE_IMPORT = /node:[a-z"]/

interface Built {
  ms: number
  log: string
  /** Every output file: path relative to the output folder -> size in bytes. */
  files: Record<string, number>
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((f) => join(dir, f))
    .filter((f) => statSync(f).isFile())
}

async function build(bundler: Bundler, consumer: string): Promise<Built> {
  const out = join(consumer, 'out', bundler.name)
  const [bin, ...args] = bundler.command(out)
  // The environment of a user's shell, not of this test run (Vite reads NODE_ENV, which vitest sets).
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => key !== 'NODE_ENV' && !key.startsWith('VITEST')))
  const started = performance.now()
  const { stdout, stderr } = await run(join(ROOT, 'node_modules/.bin', bin), args, { cwd: consumer, env: { ...env, NO_COLOR: '1' }, encoding: 'utf8' })
  const ms = Math.round(performance.now() - started)
  // Vite turns index.html into its own; the others get the page beside their output.
  if (!existsSync(join(out, 'index.html'))) cpSync(join(PAGE, 'index.html'), join(out, 'index.html'))
  return { ms, log: stdout + stderr, files: Object.fromEntries(filesUnder(out).map((f) => [relative(out, f), statSync(f).size])) }
}

const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' }

/** A site per bundle, as it would be deployed: its output folder at the root, the fixtures (with Range) under /fixtures/. */
function serveSite(dir: string): Promise<TestServer> {
  const fixtures = rangeHandler((path) => FIXTURES.get(path))
  return startServer((request, response, log) => {
    if (log.path.startsWith('/fixtures/')) return fixtures(request, response, log)
    const path = resolve(dir, `.${log.path === '/' ? '/index.html' : log.path}`)
    const found = path.startsWith(dir + sep) && existsSync(path)
    const policy = POLICIES[new URL(request.url ?? '/', 'http://site').searchParams.get('policy') ?? '']
    response.writeHead(found ? 200 : 404, { 'Content-Type': TYPES[extname(path)] ?? 'application/octet-stream', ...policy })
    response.end(found ? readFileSync(path) : undefined)
  })
}

/** What a page reported, and what the engine saw besides: errors, and the workers it started where it says. */
interface PageRun {
  results: unknown
  problems: string[]
  /** undefined where the driver does not report workers (classic WebDriver). */
  workers: string[] | undefined
}

/** A browser engine that opens a page and waits for its `window.consumerResults`. */
interface Browser {
  version: string
  /** Where the browser came from, for the log. */
  origin: string
  run(url: string): Promise<PageRun>
  close(): Promise<void>
}

// The default page loads 256 MiB four times (page/pool.js): 10-30 s here, more on a busy machine.
const RESULTS_TIMEOUT = 120_000
const waitedTooLong = (problems: string[]) =>
  new Error(`no consumerResults after ${RESULTS_TIMEOUT} ms; in the page: ${problems.join('\n') || 'nothing reported'}`)

async function launch(engine: Engine): Promise<Browser> {
  if (engine === 'chromium') {
    const choice = await chromiumChoice()
    const browser = await chromium.launch({ executablePath: choice.executablePath, args: choice.args })
    return {
      version: `Chromium ${browser.version()}`,
      origin: choice.origin,
      async run(url) {
        const page = await browser.newPage()
        const problems: string[] = []
        page.on('pageerror', (error) => problems.push(String(error)))
        page.on('console', (message) => void (message.type() === 'error' && problems.push(message.text())))
        const workers: string[] = []
        page.on('worker', (worker) => workers.push(worker.url()))
        try {
          await page.goto(url)
          await page
            .waitForFunction(() => 'consumerResults' in window, undefined, { timeout: RESULTS_TIMEOUT })
            .catch(() => {
              throw waitedTooLong(problems)
            })
          return { results: await page.evaluate(() => (window as { consumerResults?: unknown }).consumerResults), problems, workers }
        } finally {
          await page.close()
        }
      },
      close: () => browser.close(),
    }
  }
  if (engine === 'firefox') {
    const browser = await launchFirefox()
    return {
      version: `Firefox ${(await browser.version()).replace(/^firefox\//, '')}`,
      origin: 'firefox-esr (Debian) through puppeteer-core',
      async run(url) {
        const page = await browser.newPage()
        const problems: string[] = []
        page.on('pageerror', (error) => problems.push(String(error)))
        page.on('console', (message) => void (message.type() === 'error' && problems.push(message.text())))
        try {
          await page.goto(url)
          await page
            .waitForFunction(() => 'consumerResults' in window, { timeout: RESULTS_TIMEOUT })
            .catch(() => {
              throw waitedTooLong(problems)
            })
          // Workers are not counted here (as in WebKit): the results say where the checks ran. As JSON text:
          // WebDriver BiDi's serialization leaves out an object's second reference.
          const json = await page.evaluate(() => JSON.stringify((window as { consumerResults?: unknown }).consumerResults))
          return { results: JSON.parse(json), problems, workers: undefined }
        } finally {
          await page.close()
        }
      },
      close: () => browser.close(),
    }
  }
  const driver = await startWebKit()
  const browser = await remote({ hostname: driver.hostname, port: driver.port, logLevel: 'silent', capabilities: driver.capabilities })
  return {
    version: `WebKitGTK ${browser.capabilities.browserVersion}`,
    origin: 'webkit2gtk-driver (Debian) through webdriverio',
    async run(url) {
      await browser.url(url)
      // Classic WebDriver reports neither errors nor workers: what the page caught is in its results.
      await browser
        .waitUntil(() => browser.execute(() => 'consumerResults' in window), { timeout: RESULTS_TIMEOUT, interval: 100 })
        .catch(() => {
          throw waitedTooLong([])
        })
      // As JSON text: WebDriver's own serialization turns an undefined property into null.
      const json = await browser.execute(() => JSON.stringify((window as { consumerResults?: unknown }).consumerResults))
      return { results: JSON.parse(json), problems: [], workers: undefined }
    },
    async close() {
      await browser.deleteSession()
      driver.close()
    },
  }
}

/** The files of the browser entry's module graph in an installed package, and any import that leaves it. */
function browserGraph(pkgDir: string): { files: string[]; outside: string[] } {
  const { exports, imports } = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
  const files = [resolve(pkgDir, exports['.'].browser.default)]
  const outside: string[] = []
  // Static imports and re-exports (`from '...'`), side-effect imports and dynamic import(); the package's own
  // subpath imports (#platform) as a bundler resolves them for a page.
  for (const file of files) {
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["']([^"']+)["']/g)) {
      const target = specifier.startsWith('.') ? resolve(dirname(file), specifier) : imports[specifier] && resolve(pkgDir, imports[specifier].browser)
      if (!target) outside.push(specifier)
      else if (!files.includes(target)) files.push(target)
    }
  }
  return { files: files.map((f) => relative(pkgDir, f)), outside }
}

let written: Promise<{ bytes: number; byteLength: number; sha256: string }> | undefined
/** The GGUF the Node entry writes of the test model, once: its length and SHA-256, as checks.js reports one. */
function expectedGguf() {
  written ??= (async () => {
    const dir = tempDir('st-bundlers-gguf-')
    try {
      const { bytes } = await writeGguf(GGUF_MODEL, join(dir, 'model.gguf'), { dtype: 'F16' })
      return {
        bytes,
        byteLength: bytes,
        sha256: createHash('sha256')
          .update(readFileSync(join(dir, 'model.gguf')))
          .digest('hex'),
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })()
  return written
}

/**
 * What checks.js must report, worked out from the fixture's bytes (JSON header, raw BF16 bits); and for the
 * GGUF, the file the Node entry writes of the same model (llama.cpp judges that file: test/integration/gguf-llama.test.ts).
 */
function expectedResults(where: 'page' | 'worker', gguf: { bytes: number; byteLength: number; sha256: string }) {
  const bytes = FIXTURES.get(FIXTURE)!
  const { dataStart, tensors } = headerOf(bytes)
  const rawBits = (name: string) => {
    const [begin, end] = tensors[name].data_offsets
    return Array.from(new Uint16Array(bytes.slice(dataStart + begin, dataStart + end).buffer))
  }
  // BF16 is the upper half of an F32: converting is exact, the bits shifted left by 16.
  const f32Bits = (bf16: number) => (bf16 << 16) >>> 0
  const bf16 = Object.keys(tensors).filter((name) => tensors[name].dtype === 'BF16')
  expect(bf16.length).toBeGreaterThan(0)
  // The slice [[1, 3], 2, [4, 7]] of bfloat16_357 (shape [3, 5, 7], row-major): rows 1-2, column 2, 4..6.
  expect(tensors.bfloat16_357.shape).toEqual([3, 5, 7])
  const b357 = rawBits('bfloat16_357')
  const slice = [1, 2].flatMap((i) => [4, 5, 6].map((k) => f32Bits(b357[(i * 5 + 2) * 7 + k])))
  const invalid = FIXTURES.get('/fixtures/invalid.safetensors')!
  // Its prefix claims a header longer than the file: InvalidHeaderLength, by the format's rules.
  expect(Number(new DataView(invalid.buffer).getBigUint64(0, true))).toBeGreaterThan(invalid.length - 8)
  const safetensorsError = (code: string, message: unknown) => ({ safetensorsError: true, typeError: false, code, message })
  return {
    where,
    nodeOnly: [],
    tensors: Object.fromEntries(
      bf16.map((name) => [name, { dtype: 'F32', shape: tensors[name].shape, float32: true, bits: rawBits(name).map(f32Bits), raw: rawBits(name) }]),
    ),
    slice: { shape: [2, 3], bits: slice },
    gguf,
    errors: {
      missingTensor: safetensorsError('TensorNotFound', expect.stringContaining('"missing"')),
      sliceOutOfRange: safetensorsError('SliceOutOfRange', expect.stringContaining('bfloat16_357')),
      invalidFile: safetensorsError('InvalidHeaderLength', expect.any(String)),
      filePath: { safetensorsError: false, typeError: true, message: expect.stringContaining('under Node, Deno or Bun') },
    },
  }
}

/** The main thread during a load: its heartbeat's longest gaps and busy time (ms), and long tasks where the engine reports them. */
interface MainThread {
  beats: number
  maxGap: number
  /** The five longest gaps: [ms from the load's start, length]. */
  longest: Array<[number, number]>
  busy: number
  /** [ms from the load's start, duration]; null where the engine has no long-task timing. */
  longTasks: Array<[number, number]> | null
}

/** A load of page/pool.js. */
interface PoolLoad {
  ms: number
  main: MainThread
  tensors: Record<string, { length: number; float32: boolean; shared: boolean; samples: Record<string, number>; sha256: string }>
  /** The pool's workers started during the load, those refused, and the messages they sent. */
  workers: { started: number; failed: number; messages: number }
}

interface PoolReport {
  isolated: boolean
  sharedArrayBuffer: boolean
  cores: number
  pooled: PoolLoad
  calling: PoolLoad
  blob?: PoolLoad
}

/** Each tensor of a load is the exact F32 of `file`: its hash, length and the sampled bits. */
function expectSameBits(load: PoolLoad, file: PoolFile, what: string): void {
  expect(Object.keys(load.tensors), what).toEqual(Object.keys(file.expected))
  for (const [name, tensor] of Object.entries(load.tensors)) {
    expect({ length: tensor.length, sha256: tensor.sha256, float32: tensor.float32 }, `${what}: ${name}`).toEqual({ ...file.expected[name], float32: true })
    const samples = Object.entries(tensor.samples).map(([i, bits]) => [Number(i), bits])
    expect(samples.length, `${what}: ${name}`).toBeGreaterThanOrEqual(4)
    expect(samples, `${what}: ${name}`).toEqual(samples.map(([i]) => [i, file.f32Bits(name, i)]))
  }
}

/**
 * A load's time and its main thread, for the log: the longest gap of its heartbeat and its busy time (issue 40 asks
 * for no task over 100 ms; a gap counts the time the thread waited for a core too, and on a loaded machine Chromium
 * timed a task of 146 ms in a pooled Blob load, whose longest gaps are 8-63 ms on a quiet one: a figure of the
 * machine's load as much as of the page's, so reported, not asserted).
 */
const describeLoad = (load: PoolLoad) =>
  `${load.ms} ms, main thread max gap ${load.main.maxGap} ms, busy ${load.main.busy} ms${load.main.longTasks ? `, long tasks [${load.main.longTasks.map(([, ms]) => ms).join(', ')}]` : ''}`

const ENGINES: Engine[] = ['chromium', 'firefox', 'webkit']
const present = ENGINES.filter((engine) => missing(engine) === undefined)
// Rows of the matrix, bundler by engine (test.each takes them flat).
const RUNS = BUNDLERS.flatMap((bundler) => present.map((engine) => ({ ...bundler, engine })))

describe('the packed package in bundlers, run in each browser engine', () => {
  let dir: string
  let consumer: string
  const browsers = new Map<Engine, Promise<Browser>>()
  const builds = new Map<string, Promise<Built>>()

  beforeAll(async () => {
    POOL = poolFile('/fixtures/pool.safetensors', 8, POOL_SHAPE, 40)
    POOL_SMALL = poolFile('/fixtures/pool-small.safetensors', 2, [1024, 2048], 41)
    expect(POOL.bytes.length).toBeGreaterThan(256 * 2 ** 20)
    for (const file of [POOL, POOL_SMALL]) FIXTURES.set(file.path, file.bytes)
    dir = mkdtempSync(join(tmpdir(), 'safetensors-consumers-'))
    // The run's one pack (test/packed.ts), installed as a user installs it (it has no dependencies: nothing to download).
    const { tarball } = packedConsumer()
    consumer = join(dir, 'consumer')
    mkdirSync(consumer)
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }))
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: consumer, encoding: 'utf8' })
    cpSync(PAGE, consumer, { recursive: true })
    // All builds at once (separate processes); each test waits for its own.
    for (const bundler of BUNDLERS) {
      const built = build(bundler, consumer)
      built.catch(() => {}) // reported by its test
      builds.set(bundler.name, built)
    }
    // Each engine started once, when its first test comes.
    const skipped = ENGINES.filter((engine) => !present.includes(engine)).map((engine) => `${engine} (${missing(engine)})`)
    console.log(`consumer matrix: ${basename(tarball)} installed in a fresh folder${skipped.length > 0 ? `; skipped ${skipped.join(' and ')}` : ''}`)
  }, 120_000)

  afterAll(async () => {
    await Promise.allSettled([...browsers.values()].map(async (browser) => (await browser).close()))
    // Let running builds finish before their folder goes away.
    await Promise.allSettled(builds.values())
    rmSync(dir, { recursive: true, force: true })
  })

  test('the tarball holds the package itself, and its browser entry reaches no node: module', () => {
    const pkgDir = join(consumer, 'node_modules/safetensors-wasm')
    expect(lstatSync(pkgDir).isSymbolicLink()).toBe(false)
    const { files, outside } = browserGraph(pkgDir)
    expect(files).toEqual(expect.arrayContaining(['dist/index.js', 'dist/read/file.js', 'dist/header.wasm.js']))
    expect(outside).toEqual([])
    for (const file of files) expect(readFileSync(join(pkgDir, file), 'utf8').split('node:').length - 1, file).toBe(0)
  })

  test.each(RUNS)(
    '$name: default build, then the page and a module Worker read the fixture in $engine',
    async (bundler) => {
      const built = await builds.get(bundler.name)!
      expect(built.log).not.toMatch(NODE_IMPORT)
      const out = join(consumer, 'out', bundler.name)
      expect(Object.keys(built.files)).toContain('index.html')
      for (const file of Object.keys(built.files)) expect(readFileSync(join(out, file), 'utf8').split('node:').length - 1, file).toBe(0)

      if (!browsers.has(bundler.engine)) browsers.set(bundler.engine, launch(bundler.engine))
      const browser = await browsers.get(bundler.engine)!
      const site = await serveSite(out)
      const started = performance.now()
      let page: PageRun
      let csp: PageRun
      let isolated: PageRun
      try {
        page = await browser.run(`${site.origin}/`)
        csp = await browser.run(`${site.origin}/?policy=csp&pool=${POOL_SMALL.path}`)
        isolated = await browser.run(`${site.origin}/?policy=isolated&pool=${POOL_SMALL.path}`)
      } finally {
        await site.close()
      }
      const ms = Math.round(performance.now() - started)

      expect(page.results).not.toHaveProperty('error')
      const gguf = await expectedGguf()
      const { pool, ...checks } = page.results as { pool: PoolReport }
      expect(checks).toEqual({ page: expectedResults('page', gguf), worker: expectedResults('worker', gguf) })
      const blobWorkers = page.workers?.filter((url) => url.startsWith('blob:'))
      if (page.workers) expect(page.workers.length - blobWorkers!.length).toBe(1)

      // The pool's loads of 256 MiB: the same bits as `workers: 0` and as the file, in ordinary memory (the page is not isolated).
      for (const mode of ['pooled', 'calling', 'blob'] as const) {
        expectSameBits(pool[mode]!, POOL, mode)
        expect(Object.values(pool[mode]!.tensors).filter((t) => t.shared)).toEqual([])
      }
      // The pool ran: its workers started with the first large read, one per core, and answered with the pieces
      // (a message each, beyond their first); none took part in `workers: 0`; the Blob's load used the same workers.
      expect(pool.isolated).toBe(false)
      expect(pool.pooled.workers).toEqual({ started: Math.min(8, pool.cores), failed: 0, messages: expect.any(Number) })
      expect(pool.pooled.workers.messages).toBeGreaterThan(2 * pool.pooled.workers.started)
      expect(pool.calling.workers).toEqual({ started: 0, failed: 0, messages: 0 })
      expect(pool.blob!.workers.started).toBe(0)
      expect(pool.blob!.workers.messages).toBeGreaterThan(pool.pooled.workers.started)
      if (blobWorkers) expect(blobWorkers).toHaveLength(pool.pooled.workers.started)
      // Under a CSP that refuses blob: workers, the pool's start fails at once and the reads run here, with
      // no error: the engine's own report of the violation is all there is to see.
      expect(csp.results).not.toHaveProperty('error')
      const cspPool = (csp.results as { pool: PoolReport }).pool
      expectSameBits(cspPool.pooled, POOL_SMALL, 'under the CSP')
      expect(cspPool.pooled.workers.failed).toBeGreaterThanOrEqual(1)
      expect(cspPool.pooled.workers.messages).toBe(0)
      // Far below the pool's start timeout (20 s): the refusal was seen, not waited out.
      expect(cspPool.pooled.ms, describeLoad(cspPool.pooled)).toBeLessThan(5_000)
      expect(csp.problems.filter((problem) => !/Content[- ]Security[- ]Policy/.test(problem))).toEqual([])

      // Cross-origin isolated, the pool's results are SharedArrayBuffers that its workers wrote, where the engine
      // has them; `workers: 0` gives ordinary memory.
      expect(isolated.results).not.toHaveProperty('error')
      expect(isolated.problems).toEqual([])
      const isolatedPool = (isolated.results as { pool: PoolReport }).pool
      expect(isolatedPool.isolated).toBe(true)
      expectSameBits(isolatedPool.pooled, POOL_SMALL, 'isolated')
      expectSameBits(isolatedPool.calling, POOL_SMALL, 'isolated, workers: 0')
      // WebKitGTK's MiniBrowser has no SharedArrayBuffer even when isolated; Chromium and Firefox do.
      expect(isolatedPool.sharedArrayBuffer).toBe(bundler.engine !== 'webkit')
      expect(Object.values(isolatedPool.pooled.tensors).map((t) => t.shared)).toEqual(
        Object.keys(POOL_SMALL.expected).map(() => isolatedPool.sharedArrayBuffer),
      )
      expect(Object.values(isolatedPool.calling.tensors).filter((t) => t.shared)).toEqual([])
      expect(isolatedPool.pooled.workers.messages).toBeGreaterThan(isolatedPool.pooled.workers.started)
      // GGUF looks for optional files beside the model (tokenizer.model, chat_template.jinja); the browser logs each 404, which is no problem.
      const optional = site.log.filter((entry) => entry.path.startsWith('/fixtures/qwen2/') && entry.status === 404)
      const beside = ['/fixtures/qwen2/tokenizer.model', '/fixtures/qwen2/chat_template.jinja']
      expect(optional.map((entry) => entry.path).filter((path) => !beside.includes(path))).toEqual([])
      expect(page.problems.filter((problem) => !/404 \(Not Found\)/.test(problem))).toEqual([])
      expect(page.problems.length).toBeLessThanOrEqual(optional.length)
      // Every read of the fixture was a Range request, answered 206; each BF16 tensor was read by its exact range.
      const reads = site.log.filter((entry) => entry.path === FIXTURE)
      expect(reads.map((entry) => [entry.range, entry.status]).filter(([range, status]) => !/^bytes=\d+-\d+$/.test(String(range)) || status !== 206)).toEqual(
        [],
      )
      const { dataStart, tensors } = headerOf(FIXTURES.get(FIXTURE)!)
      for (const name of Object.keys(expectedResults('page', gguf).tensors)) {
        const [begin, end] = tensors[name].data_offsets
        expect(reads.map((entry) => entry.range)).toContain(`bytes=${dataStart + begin}-${dataStart + end - 1}`)
      }

      const sizes = Object.entries(built.files)
        .map(([file, bytes]) => `${file} ${(bytes / 1000).toFixed(1)} kB`)
        .join(', ')
      const worker = page.workers ? ` (${page.workers[0].slice(site.origin.length)})` : ''
      console.log(
        `${bundler.name} ${versionOf(bundler.pkg)}: built in ${built.ms} ms with no node: error (${sizes}); in ${browser.version} (${browser.origin}): page passed, module Worker${worker} passed, ${reads.length} Range reads, ${ms} ms; ` +
          `256 MiB BF16 as F32 on ${pool.pooled.workers.started} workers: URL ${describeLoad(pool.pooled)}; Blob ${describeLoad(pool.blob!)}; workers: 0 ${describeLoad(pool.calling)}; ` +
          `under a CSP on the calling thread in ${cspPool.pooled.ms} ms; isolated: ${isolatedPool.sharedArrayBuffer ? 'SharedArrayBuffer results' : 'no SharedArrayBuffer in this engine'}`,
      )
    },
    300_000,
  )
})
