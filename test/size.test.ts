// What the package weighs in a page, measured as a web developer measures a dependency: the packed tarball
// installed in a fresh folder, a small app bundled there by esbuild's defaults for the browser
// (--bundle --minify --format=esm --platform=browser) and gzipped at level 9. Each app has a budget, and
// esbuild's metafile says which of the package's modules landed in it: what the app does not import must not.
// Each bundle is also run, so that a small one is small because it holds only what it needs. The startup
// cost, the first parseHeader in a fresh Chromium (the wasm decoded, compiled and instantiated), goes to the
// log: a figure to watch, not a timed test.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { gzipSync } from 'node:zlib'
import { build } from 'esbuild'
import { chromium } from 'playwright'
import { beforeAll, describe, expect, test } from 'vitest'
import { chromiumChoice } from './browser/chromium.ts'
import { FIXTURES_GOLDEN, FIXTURES_REAL, goldenName } from './helpers.ts'
import { type PackedConsumer, packedConsumer } from './packed.ts'

const FIXTURE = 'fluxml__safetensors.jl__model.safetensors'
const bytes = new Uint8Array(readFileSync(FIXTURES_REAL + FIXTURE))
const golden = JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(FIXTURE), 'utf8'))

interface App {
  name: string
  source: string
  /** Most gzipped bytes issue 24 asks for. */
  target: number
  /** Most gzipped bytes this test accepts: the target, or a ceiling against growth where the target is not met yet. */
  budget: number
  /** Modules of dist/ that must be in the bundle (so that the check of the absent ones means something). */
  present: string[]
  /** Modules of dist/ that must not be in the bundle. */
  absent: string[]
}

const WRITER = ['writer.js', 'layout.js']
const CACHE = ['cache.js', 'cache-storage.js', 'cache-folder.js', 'checksum.js', 'hash.wasm.js']
const STATS = ['stats.js', 'stats.wasm.js']
const GGUF = ['gguf/index.js', 'gguf/format.js', 'gguf/metadata.js', 'gguf/tensors.js', 'gguf/tokenizer.js', 'gguf/q8_0.js', 'q8_0.wasm.js']

const APPS: App[] = [
  {
    name: 'open + getTensor',
    source: `import { open } from 'safetensors-wasm'
export async function first(source) {
  const file = await open(source)
  return file.getTensor(file.names()[0])
}
`,
    target: 25_000,
    budget: 25_000,
    // stream.js stays: file.stream() is a method of the SafetensorsFile that open() returns, so the code of
    // tensor streams comes with it (the other stream functions do not).
    present: ['file.js', 'http.js', 'header.js', 'header.wasm.js', 'convert.wasm.js'],
    absent: [...WRITER, ...CACHE, ...STATS, ...GGUF, 'model.js'],
  },
  {
    name: 'parseHeader',
    source: "export { parseHeader } from 'safetensors-wasm'\n",
    target: 15_000,
    budget: 15_000,
    present: ['header.js', 'header.wasm.js'],
    absent: [...WRITER, ...CACHE, 'stream.js', ...STATS, ...GGUF, 'file.js', 'http.js', 'convert.js', 'convert.wasm.js'],
  },
  {
    name: 'the whole API',
    source: "export * from 'safetensors-wasm'\n",
    target: 35_000,
    // Not met yet: 36,982 once parallel downloads came, 42,472 with the GGUF converter (its tokenizer and
    // metadata code, and the Q8_0 kernel: 5.5 kB), 41,063 with the wasm ahead of the JS (src/wasm-code.ts), 41,314 with GGUF's read-ahead over HTTP.
    budget: 41_400,
    // All but cache-folder.js, the Node cache's storage, which the browser entry does not reach.
    present: [
      ...WRITER,
      ...CACHE.filter((module) => module !== 'cache-folder.js'),
      'stream.js',
      ...STATS,
      ...GGUF,
      'model.js',
      'header.wasm.js',
      'convert.wasm.js',
    ],
    absent: [],
  },
]

interface Bundle {
  file: string
  gzipped: number
  /** dist/ modules with bytes in the output. */
  modules: string[]
  text: string
}

async function bundle(consumer: PackedConsumer, app: App): Promise<Bundle> {
  const result = await build({
    stdin: { contents: app.source, resolveDir: consumer.dir, sourcefile: 'app.js' },
    absWorkingDir: consumer.dir,
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    metafile: true,
    logLevel: 'silent',
  })
  const [output] = result.outputFiles
  const file = join(consumer.dir, `${app.name.replace(/\W+/g, '-')}.js`)
  writeFileSync(file, output.contents)
  const [meta] = Object.values(result.metafile.outputs)
  const modules = Object.entries(meta.inputs)
    .filter(([path, input]) => path.startsWith('node_modules/safetensors-wasm/dist/') && input.bytesInOutput > 0)
    .map(([path]) => path.slice('node_modules/safetensors-wasm/dist/'.length))
  return { file, gzipped: gzipSync(output.contents, { level: 9 }).length, modules, text: output.text }
}

describe('the browser bundle', () => {
  let consumer: PackedConsumer
  const bundles = new Map<string, Bundle>()

  beforeAll(async () => {
    consumer = packedConsumer()
    for (const app of APPS) bundles.set(app.name, await bundle(consumer, app))
    console.log(
      `bundle sizes (esbuild --bundle --minify --format=esm --platform=browser, gzip -9): ${APPS.map((app) => `${app.name} ${bundles.get(app.name)!.gzipped} bytes (issue 24's budget ${app.target}${bundles.get(app.name)!.gzipped > app.target ? ': NOT MET' : ''})`).join(', ')}`,
    )
  }, 180_000)

  test.each(APPS)('$name: within its budget, without the modules it does not use', (app) => {
    const { gzipped, modules } = bundles.get(app.name)!
    expect(modules).toEqual(expect.arrayContaining(app.present))
    expect(modules.filter((module) => app.absent.includes(module))).toEqual([])
    expect(gzipped).toBeLessThanOrEqual(app.budget)
  })

  test.each(APPS)('$name: the wasm in one block ahead of the JS, where gzip packs it best (src/wasm-code.ts)', (app) => {
    const { text } = bundles.get(app.name)!
    // Each module's code as esbuild writes it: a declaration of its hex (the bytes start "\0asm", version 1).
    const wasm = [...text.matchAll(/var [\w$]+="0061736d01000000[0-9a-f]*";/g)]
    expect(wasm.length).toBe(app.present.filter((module) => module.endsWith('.wasm.js')).length)
    expect(text.slice(0, wasm.at(-1)!.index + wasm.at(-1)![0].length)).toBe(wasm.map(([declaration]) => declaration).join(''))
  })

  test('the parseHeader bundle reads a real header as its golden file has it', async () => {
    const { parseHeader } = await import(pathToFileURL(bundles.get('parseHeader')!.file).href)
    expect(parseHeader(bytes).tensors.map((t: { name: string; dtype: string }) => [t.name, t.dtype])).toEqual(
      golden.tensors.map((t: { name: string; dtype: string }) => [t.name, t.dtype]),
    )
  })

  test('the open + getTensor bundle reads the first tensor, byte for byte', async () => {
    const { first } = await import(pathToFileURL(bundles.get('open + getTensor')!.file).href)
    const [begin, end] = golden.tensors[0].dataOffsets
    const tensor = await first(bytes)
    expect(tensor.name).toBe(golden.tensors[0].name)
    expect(new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength)).toEqual(
      bytes.subarray(golden.dataStart + begin, golden.dataStart + end),
    )
  })

  test('the whole-API bundle exports what the installed browser entry does', async () => {
    const whole = await import(pathToFileURL(bundles.get('the whole API')!.file).href)
    const entry = await import(pathToFileURL(join(consumer.dir, 'node_modules/safetensors-wasm/dist/index.js')).href)
    expect(Object.keys(whole).sort()).toEqual(Object.keys(entry).sort())
  })

  test('the parseHeader bundle in a fresh Chromium: the first call, wasm compile included, logged', async () => {
    const choice = await chromiumChoice()
    const browser = await chromium.launch({ executablePath: choice.executablePath, args: choice.args })
    try {
      const page = await browser.newPage()
      // A string, not a function: vitest would rewrite a function's import() into its own loader.
      const run: { names: string[]; importMs: number; firstMs: number; secondMs: number } = await page.evaluate(`(async () => {
        const url = URL.createObjectURL(new Blob([${JSON.stringify(bundles.get('parseHeader')!.text)}], { type: 'text/javascript' }))
        const bytes = new Uint8Array(${JSON.stringify([...bytes])})
        const started = performance.now()
        const { parseHeader } = await import(url)
        const imported = performance.now()
        const names = parseHeader(bytes).tensors.map((t) => t.name)
        const first = performance.now()
        parseHeader(bytes)
        return { names, importMs: imported - started, firstMs: first - imported, secondMs: performance.now() - first }
      })()`)
      expect(run.names).toEqual(golden.tensors.map((t: { name: string }) => t.name))
      const ms = (value: number) => `${value.toFixed(2)} ms`
      console.log(
        `startup in Chromium ${browser.version()}: the parseHeader bundle imported in ${ms(run.importMs)}, first parseHeader (wasm compiled) ${ms(run.firstMs)}, second ${ms(run.secondMs)}`,
      )
    } finally {
      await browser.close()
    }
  })
})
