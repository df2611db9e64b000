// The package as a browser app gets it: `npm pack`'s tarball installed into a fresh folder, the small page
// in test/integration/consumers/page/ bundled there by the default setup of esbuild, webpack 5, Vite 8 and Rollup 4
// (no plugin or alias for `node:`), and each bundle run in Chromium, Firefox and WebKit (those on the machine:
// scripts/browser-engines.js), on the page and in a module Web Worker. The page opens a real fixture over
// HTTP Range from a loopback server; what it must read is worked out here from the fixture's bytes. One
// line per bundler and engine in the log says what ran and how it went.
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
import { headerOf } from '../../read-helpers.ts'
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
    response.writeHead(found ? 200 : 404, { 'Content-Type': TYPES[extname(path)] ?? 'application/octet-stream' })
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

const RESULTS_TIMEOUT = 30_000
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
          // Workers are not counted here (as in WebKit): the results say where the checks ran.
          return { results: await page.evaluate(() => (window as { consumerResults?: unknown }).consumerResults), problems, workers: undefined }
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

  test.each(RUNS)('$name: default build, then the page and a module Worker read the fixture in $engine', async (bundler) => {
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
    try {
      page = await browser.run(`${site.origin}/`)
    } finally {
      await site.close()
    }
    const ms = Math.round(performance.now() - started)

    expect(page.results).not.toHaveProperty('error')
    const gguf = await expectedGguf()
    expect(page.results).toEqual({ page: expectedResults('page', gguf), worker: expectedResults('worker', gguf) })
    if (page.workers) expect(page.workers).toHaveLength(1)
    // GGUF looks for optional files beside the model (tokenizer.model, chat_template.jinja); the browser logs each 404, which is no problem.
    const optional = site.log.filter((entry) => entry.path.startsWith('/fixtures/qwen2/') && entry.status === 404)
    const beside = ['/fixtures/qwen2/tokenizer.model', '/fixtures/qwen2/chat_template.jinja']
    expect(optional.map((entry) => entry.path).filter((path) => !beside.includes(path))).toEqual([])
    expect(page.problems.filter((problem) => !/404 \(Not Found\)/.test(problem))).toEqual([])
    expect(page.problems.length).toBeLessThanOrEqual(optional.length)
    // Every read of the fixture was a Range request, answered 206; each BF16 tensor was read by its exact range.
    const reads = site.log.filter((entry) => entry.path === FIXTURE)
    expect(reads.map((entry) => [entry.range, entry.status]).filter(([range, status]) => !/^bytes=\d+-\d+$/.test(String(range)) || status !== 206)).toEqual([])
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
      `${bundler.name} ${versionOf(bundler.pkg)}: built in ${built.ms} ms with no node: error (${sizes}); in ${browser.version} (${browser.origin}): page passed, module Worker${worker} passed, ${reads.length} Range reads, ${ms} ms`,
    )
  })
})
