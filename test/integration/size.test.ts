// What the package weighs in a page, measured as a web developer measures a dependency: the packed tarball
// installed in a fresh folder, a small app bundled there by esbuild's defaults for the browser
// (--bundle --minify --format=esm --platform=browser, with --splitting so that code loaded on demand goes to
// chunks of its own) and gzipped at level 9: the chunks the app loads before it runs, not those it may load later. Each app has a budget, and
// esbuild's metafile says which of the package's modules landed in it: what the app does not import must not.
// Each bundle is also run, so that a small one is small because it holds only what it needs. The startup
// cost, the first parseHeader in a fresh Chromium (the wasm decoded, compiled and instantiated), goes to the
// log: a figure to watch, not a timed test.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { gzipSync } from 'node:zlib'
import { build } from 'esbuild'
import { chromium } from 'playwright'
import { beforeAll, describe, expect, test } from 'vitest'
import { ggufBytes } from '../gguf-bytes.ts'
import { FIXTURES_GOLDEN, FIXTURES_REAL, goldenName } from '../helpers.ts'
import { type PackedConsumer, packedConsumer } from '../packed.ts'
import { chromiumChoice } from './browser/chromium.ts'

const FIXTURE = 'fluxml__safetensors.jl__model.safetensors'
const bytes = new Uint8Array(readFileSync(FIXTURES_REAL + FIXTURE))
const golden = JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(FIXTURE), 'utf8'))

interface App {
  name: string
  source: string
  /** Most gzipped bytes the house issue (30) allows. */
  budget: number
  /** Modules of dist/ that must be in the bundle (so that the check of the absent ones means something). */
  present: string[]
  /** Modules of dist/ that must not be in the bundle. */
  absent: string[]
  /** Modules of dist/ that the app loads on demand only: in chunks of their own, not counted. */
  onDemand?: string[]
}

const WRITER = ['write/writer.js', 'format/layout.js']
const CACHE = ['cache/cache.js', 'cache/storage.js', 'core/checksum.js', 'hash.wasm.js']
const STATS = ['core/stats.js', 'stats.wasm.js']
const QUANT = ['quant/index.js', 'quant/kernels.js', 'quant/mlx.js', 'quant/gptq.js', 'quant/bitsandbytes.js', 'quant.wasm.js']
/** ggml's dequantization kernels and their wasm; dequantizeGgml is the module that brings them statically. */
const GGML = ['gguf/ggml-kernels.js', 'ggml.wasm.js']
const GGUF = ['gguf/index.js', 'gguf/format.js', 'gguf/metadata.js', 'gguf/tensors.js', 'gguf/tokenizer.js', 'gguf/file-types.js']
/** ggml's quantizers and their wasm, and llama.cpp's choice of each tensor's type: what a GGUF of a file type loads. */
const QUANTIZERS = ['gguf/ggml-quantizers.js', 'ggml-quant.wasm.js', 'gguf/mixtures.js']

const APPS: App[] = [
  {
    name: 'open + getTensor',
    source: `import { open } from 'safetensors-wasm'
export async function first(source) {
  const file = await open(source)
  return file.getTensor(file.names()[0])
}
`,
    budget: 26_000,
    // tensor-stream.js stays: file.stream() is a method of the SafetensorsFile that open() returns, so the code
    // of tensor streams comes with it (the other stream functions do not).
    present: ['read/file.js', 'sources/http/source.js', 'format/header.js', 'header.wasm.js', 'convert.wasm.js'],
    absent: [...WRITER, ...CACHE, ...STATS, ...GGUF, 'read/model.js', 'read/validate-stream.js', 'sources/http/multipart.js', 'sources/http/whole-file.js'],
    // A slice of many runs over HTTP (a multi-range request) loads its parser when it first needs it, a server
    // that ignores Range the download every read then takes its bytes from.
    onDemand: ['sources/http/multipart.js', 'sources/http/whole-file.js'],
  },
  {
    name: 'parseHeader',
    source: "export { parseHeader } from 'safetensors-wasm'\n",
    budget: 10_000,
    present: ['format/header.js', 'header.wasm.js'],
    absent: [...WRITER, ...CACHE, 'read/tensor-stream.js', ...STATS, ...GGUF, 'read/file.js', 'sources/http/source.js', 'core/convert.js', 'convert.wasm.js'],
  },
  {
    name: 'openModel + getTensor',
    source: `import { openModel } from 'safetensors-wasm'
export async function first(source) {
  const model = await openModel(source)
  return model.getTensor(model.names()[0])
}
`,
    budget: 29_000,
    present: ['read/model.js', 'read/file.js', 'format/model-index.js', 'sources/http/source.js', 'header.wasm.js', 'convert.wasm.js'],
    absent: [...WRITER, ...CACHE, ...STATS, ...GGUF, ...QUANT],
    // A quantized model (its config.json has a quantization block) loads the layouts and their kernels when it opens.
    onDemand: QUANT,
  },
  {
    name: 'the whole main entry',
    source: "export * from 'safetensors-wasm'\n",
    budget: 40_000,
    // All but the GGUF converter, which has its own entry.
    present: [...WRITER, ...CACHE, 'read/tensor-stream.js', 'write/convert-stream.js', ...STATS, 'read/model.js', 'header.wasm.js', 'convert.wasm.js'],
    absent: GGUF,
  },
  {
    name: 'openGguf + getTensor',
    source: `import { openGguf } from 'safetensors-wasm/gguf'
export async function first(source) {
  const file = await openGguf(source)
  return file.getTensor(file.names()[0])
}
`,
    budget: 32_000,
    present: ['gguf/file.js', 'gguf/reader.js', 'read/file.js', 'sources/http/source.js', 'convert.wasm.js'],
    // The reader, without the converter to GGUF or the SafeTensors header scanner.
    absent: [...WRITER, ...CACHE, ...STATS, ...GGUF, 'read/model.js', 'header.wasm.js', 'read/validate-stream.js', ...GGML, 'gguf/dequantize.js'],
    // The dequantization kernels, loaded with the first quantized tensor's read.
    onDemand: GGML,
  },
  {
    name: 'ggufStream',
    source: "export { ggufStream } from 'safetensors-wasm/gguf'\n",
    budget: 40_000,
    present: [...GGUF, 'read/model.js', 'header.wasm.js', 'convert.wasm.js'],
    absent: [
      ...WRITER,
      ...CACHE.filter((module) => module !== 'cache/storage.js'),
      ...STATS,
      'write/convert-stream.js',
      'gguf/dequantize.js',
      ...GGML,
      ...QUANTIZERS,
    ],
    // The reader of a SentencePiece tokenizer.model, loaded for models that have one; the table of architectures,
    // loaded when a conversion starts; the reads of a quantized checkpoint's values, loaded for one; the quantizers
    // and the mixtures, for a file type (Q4_K_M, ...).
    onDemand: ['gguf/sentencepiece.js', 'gguf/architectures.js', 'gguf/quantized-values.js', ...QUANTIZERS],
  },
]

interface Bundle {
  /** The entry chunk, written to disk beside the chunks it loads, so that it can be imported. */
  file: string
  /** The gzipped bytes of what the page loads before the app runs: the entry chunk and the chunks it imports statically. */
  gzipped: number
  /** dist/ modules with bytes in those chunks; code loaded on demand (a dynamic import()) is in chunks of its own, not counted. */
  modules: string[]
  /** Those chunks' text, the chunks the entry imports first. */
  text: string
  /** dist/ modules in the chunks loaded on demand only. */
  lazy: string[]
}

async function bundle(consumer: PackedConsumer, app: App): Promise<Bundle> {
  const name = app.name.replace(/\W+/g, '-')
  const dir = join(consumer.dir, name)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'app.js'), app.source)
  // Code splitting, as a page's bundler does for a dynamic import(): what the app loads on demand is not in its budget.
  const result = await build({
    entryPoints: [join(dir, 'app.js')],
    absWorkingDir: consumer.dir,
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    splitting: true,
    outdir: join(dir, 'out'),
    write: true,
    metafile: true,
    logLevel: 'silent',
  })
  const outputs = result.metafile.outputs
  // The app's own output: the modules imported on demand are entry points of their chunks too.
  const entry = Object.keys(outputs).find((path) => outputs[path].entryPoint?.endsWith('app.js'))!
  // The static closure of the entry, the imported chunks first.
  const loaded: string[] = []
  const visit = (path: string) => {
    if (loaded.includes(path)) return
    for (const imported of outputs[path].imports) if (imported.kind === 'import-statement') visit(imported.path)
    loaded.push(path)
  }
  visit(entry)
  const contents = (path: string) => readFileSync(join(consumer.dir, path))
  const modulesOf = (paths: string[]) =>
    paths.flatMap((path) =>
      Object.entries(outputs[path].inputs)
        .filter(([input, { bytesInOutput }]) => input.startsWith('node_modules/safetensors-wasm/dist/') && bytesInOutput > 0)
        .map(([input]) => input.slice('node_modules/safetensors-wasm/dist/'.length)),
    )
  return {
    file: join(consumer.dir, entry),
    gzipped: loaded.reduce((sum, path) => sum + gzipSync(contents(path), { level: 9 }).length, 0),
    modules: modulesOf(loaded),
    text: loaded.map((path) => contents(path).toString('utf8')).join(''),
    lazy: modulesOf(Object.keys(outputs).filter((path) => !loaded.includes(path) && path.endsWith('.js'))),
  }
}

describe('the browser bundle', () => {
  let consumer: PackedConsumer
  const bundles = new Map<string, Bundle>()

  beforeAll(async () => {
    consumer = packedConsumer()
    for (const app of APPS) bundles.set(app.name, await bundle(consumer, app))
    console.log(
      `bundle sizes (esbuild --bundle --minify --format=esm --platform=browser --splitting, gzip -9, what loads before the app runs): ${APPS.map((app) => `${app.name} ${bundles.get(app.name)!.gzipped} bytes (budget ${app.budget})`).join(', ')}`,
    )
  }, 180_000)

  test.each(APPS)('$name: within its budget, without the modules it does not use', (app) => {
    const { gzipped, modules, lazy } = bundles.get(app.name)!
    expect(modules).toEqual(expect.arrayContaining(app.present))
    expect(modules.filter((module) => app.absent.includes(module))).toEqual([])
    expect(lazy).toEqual(expect.arrayContaining(app.onDemand ?? []))
    expect(gzipped).toBeLessThanOrEqual(app.budget)
  })

  test.each(APPS)('$name: the wasm in one block ahead of the JS, where gzip packs it best (src/core/wasm-code.ts)', (app) => {
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

  test('the openGguf + getTensor bundle reads a Q8_0 tensor, its kernels loaded on demand', async () => {
    const { first } = await import(pathToFileURL(bundles.get('openGguf + getTensor')!.file).href)
    // One block: the scale 1 (F16 0x3c00), then the values -16 to 15.
    const block = Uint8Array.from({ length: 34 }, (_, i) => (i < 2 ? [0x00, 0x3c][i] : (i - 18) & 0xff))
    const tensor = await first(ggufBytes({ tensors: [{ name: 'q', ne: [32], type: 'Q8_0', data: block }] }))
    expect([tensor.dtype, Array.from(tensor.data)]).toEqual(['F32', Array.from({ length: 32 }, (_, i) => i - 16)])
  })

  test('the whole-entry bundle exports what the installed browser entry does', async () => {
    const whole = await import(pathToFileURL(bundles.get('the whole main entry')!.file).href)
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
