// The examples as a user runs them. examples/ranks.js: two ranks over HTTP from the tests' server, each
// holding its Megatron share of every tensor (rows of q_proj, columns of o_proj, all of a norm), values
// sliced by hand. The documentation (README.md, docs/*.md): every JS/TS code block runs with Node against
// the package's built entry, in a folder holding real files from test/fixtures/real under the names the
// guides use, with https://example.com/ served from that folder by the tests' server; a block followed by
// a ```text block must print exactly that; a block that cannot run here says why in a
// `<!-- not run: reason -->` line right before it. Every relative link resolves to a file and heading.
import { execFile } from 'node:child_process'
import { randomFillSync } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { promisify } from 'node:util'
import { transformSync } from 'esbuild'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FIXTURES_REAL } from '../helpers.ts'
import { fileResource, rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { codeBlocks, headingAnchors, markdownFiles, relativeLinks } from '../markdown.ts'
import { ROOT } from '../packed.ts'
import { buildFile, bytesOf, expectSameBytes } from '../read-helpers.ts'

const run = promisify(execFile)

const q = randomFillSync(new Uint8Array(64 * 32 * 2))
const o = randomFillSync(new Uint8Array(32 * 64 * 2))
const norm = randomFillSync(new Uint8Array(32 * 2))
const files: Record<string, Uint8Array> = {
  'a.safetensors': buildFile([{ name: 'model.layers.0.self_attn.q_proj.weight', dtype: 'BF16', shape: [64, 32], bytes: q }]),
  'b.safetensors': buildFile([
    { name: 'model.layers.0.self_attn.o_proj.weight', dtype: 'BF16', shape: [32, 64], bytes: o },
    { name: 'model.norm.weight', dtype: 'BF16', shape: [32], bytes: norm },
  ]),
  'model.safetensors.index.json': new TextEncoder().encode(
    JSON.stringify({
      weight_map: {
        'model.layers.0.self_attn.q_proj.weight': 'a.safetensors',
        'model.layers.0.self_attn.o_proj.weight': 'b.safetensors',
        'model.norm.weight': 'b.safetensors',
      },
    }),
  ),
}
let server: TestServer
beforeAll(async () => {
  server = await startServer(rangeHandler((path) => files[path.slice(1)]))
})
afterAll(() => server.close())

test('each rank loads its share: q_proj by rows, o_proj by columns, the norm whole', async () => {
  const { loadRank } = await import('../../examples/ranks.js')
  for (const rank of [0, 1]) {
    const { tensors } = await loadRank(`${server.url}model.safetensors.index.json`, rank, 2)
    expectSameBytes(bytesOf(tensors.get('model.layers.0.self_attn.q_proj.weight')!.data), q.subarray(rank * 32 * 32 * 2, (rank + 1) * 32 * 32 * 2))
    const columns = new Uint8Array(32 * 32 * 2)
    for (let r = 0; r < 32; r++) columns.set(o.subarray((r * 64 + rank * 32) * 2, (r * 64 + rank * 32 + 32) * 2), r * 32 * 2)
    expectSameBytes(bytesOf(tensors.get('model.layers.0.self_attn.o_proj.weight')!.data), columns)
    expectSameBytes(bytesOf(tensors.get('model.norm.weight')!.data), norm)
  }
})

test('node examples/ranks.js <index URL> 2 runs and reports each rank', async () => {
  const { stdout } = await run(process.execPath, ['examples/ranks.js', `${server.url}model.safetensors.index.json`, '2'])
  expect(stdout).toMatch(/^rank 0\/2: 3 tensors, [\d.]+ MiB in \d+ requests, \d+ ms\nrank 1\/2: 3 tensors/)
})

// The files the guides' examples open, by the names they use: a file of twelve dtypes (BF16, F8, ... with
// metadata) written by safetensors.jl, and a model of six shards with its index.
const GUIDE_FILES: Record<string, string> = {
  'model.safetensors': 'fluxml__safetensors.jl__model.with_metadata.safetensors',
  model: 'sharded/fluxml__safetensors.jl',
}

describe('the documentation', () => {
  let folder: string
  let origin: TestServer
  beforeAll(async () => {
    folder = mkdtempSync(join(tmpdir(), 'safetensors-docs-'))
    writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module' }))
    // 'safetensors-wasm' resolves to this repository's built entries, as an installed copy would.
    mkdirSync(join(folder, 'node_modules'))
    symlinkSync(ROOT, join(folder, 'node_modules/safetensors-wasm'), 'dir')
    symlinkSync(join(ROOT, 'examples'), join(folder, 'examples'), 'dir')
    for (const [name, fixture] of Object.entries(GUIDE_FILES)) cpSync(join(FIXTURES_REAL, fixture), join(folder, name), { recursive: true })
    // The types the blocks are checked against (see 'type-checks' below), where TypeScript looks for them.
    for (const scope of ['@types', '@webgpu', '@cloudflare']) symlinkSync(join(ROOT, 'node_modules', scope), join(folder, 'node_modules', scope), 'dir')
    // docs/gguf.md converts a model folder (the Qwen2 test model) and reads a GGUF (llama.cpp's of the Qwen3 one).
    cpSync(join(ROOT, 'test/fixtures/gguf/qwen2'), join(folder, 'qwen2'), { recursive: true })
    cpSync(join(ROOT, 'test/fixtures/gguf/reader/qwen3-converter.gguf'), join(folder, 'model.gguf'))
    // docs/quantized.md reads two quantized test models: MLX 4-bit (two shards) and GPTQ 4-bit.
    for (const [name, fixture] of [
      ['mlx-4bit', 'mlx-affine-4bit'],
      ['gptq-4bit', 'gptq-4bit-sym'],
    ])
      cpSync(join(ROOT, 'test/fixtures/quantized', fixture), join(folder, name), { recursive: true })
    origin = await startServer(
      rangeHandler((path) => {
        const file = join(folder, path)
        return file.startsWith(folder) && existsSync(file) && statSync(file).isFile() ? fileResource(file) : undefined
      }),
    )
  })
  afterAll(async () => {
    await origin?.close()
    rmSync(folder, { recursive: true, force: true })
  })

  test('README.md is at most 250 lines and keeps the quick start that a hook checks', () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n')
    expect(lines.length).toBeLessThanOrEqual(250)
    expect(lines.filter((l) => /^npm ci && npm (start|test)\b/.test(l)).map((l) => l.split('  ')[0].trim())).toEqual([
      'npm ci && npm start',
      'npm ci && npm test',
    ])
  })

  test("the README's headline figures are figures of docs/benchmarks.md", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    const benchmarks = readFileSync(join(ROOT, 'docs/benchmarks.md'), 'utf8')
    const rows = readme
      .split('## How fast')[1]
      .split('\n## ')[0]
      .split('\n')
      .filter((l) => /^\| .* \|$/.test(l))
      .slice(1)
    const figures = rows.flatMap((row) => row.split(' | ')[1].match(/\d[\d,.]*(?:-\d[\d,.]*)?/g) ?? [])
    expect(figures.length).toBeGreaterThan(5)
    const asPattern = (figure: string) => figure.replace(/[.]/g, '\\.')
    expect(figures.filter((f) => !new RegExp(`(?<![\\d.])${asPattern(f)}(?![\\d])`).test(benchmarks))).toEqual([])
  })

  const blocks = markdownFiles().flatMap(codeBlocks)
  const runnable = blocks.filter((b) => (b.lang === 'js' || b.lang === 'ts') && b.notRun === undefined)
  test.concurrent.each(runnable.map((b) => ({ ...b, where: `${b.file}:${b.line}` })))('$where runs', async (block) => {
    const cjs = /^\/\/ \S+\.cjs\n/.test(block.code)
    let code = block.code.replaceAll('https://example.com/', origin.url)
    if (block.lang === 'ts') code = transformSync(code, { loader: 'ts', format: cjs ? 'cjs' : 'esm' }).code
    const script = join(folder, `${block.file.replace(/\W/g, '-')}-${block.line}.${cjs ? 'cjs' : 'mjs'}`)
    writeFileSync(script, code)
    const { stdout } = await run(process.execPath, [script], { cwd: folder, timeout: 30_000 })
    if (block.output !== undefined) expect(stdout).toBe(block.output)
  })

  // Each runtime's types: Node's; a page's (the DOM, WebGPU, the File System Access API), which resolves the
  // package's default entry; a Worker's (workerd's globals and bindings), which resolves its workerd entry.
  const RUNTIMES: Record<string, Record<string, unknown>> = {
    node: { lib: ['es2023'], types: ['node'], module: 'nodenext', moduleResolution: 'nodenext' },
    page: { lib: ['es2023', 'dom', 'dom.iterable'], types: ['@webgpu/types', 'wicg-file-system-access'], module: 'esnext', moduleResolution: 'bundler' },
    worker: { lib: ['es2022'], types: ['@cloudflare/workers-types'], module: 'esnext', moduleResolution: 'bundler', customConditions: ['workerd'] },
  }

  test('every JS and TS block type-checks under tsc --strict, against the types of the runtime its fence names', async () => {
    // Each block a module of its own, beside those that run: a JS block checked as JS (checkJs), a TS one as TS.
    const checked = new Map<string, string>()
    for (const block of blocks.filter((b) => b.lang === 'js' || b.lang === 'ts')) {
      const kind = /^\/\/ \S+\.cjs\n/.test(block.code) ? 'c' : 'm'
      const name = `types-${block.file.replace(/\W/g, '-')}-${block.line}.${kind}${block.lang}`
      writeFileSync(join(folder, name), block.code)
      checked.set(name, `${block.file}:${block.line} (${block.runtime})`)
    }
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc')
    const errors = await Promise.all(
      Object.entries(RUNTIMES).map(async ([runtime, options]) => {
        const files = [...checked].filter(([, where]) => where.endsWith(`(${runtime})`)).map(([name]) => name)
        const compilerOptions = { strict: true, noEmit: true, target: 'es2022', allowJs: true, checkJs: true, skipLibCheck: true, ...options }
        writeFileSync(join(folder, `tsconfig.${runtime}.json`), JSON.stringify({ compilerOptions, files }))
        const result = await run(process.execPath, [tsc, '-p', `tsconfig.${runtime}.json`, '--pretty', 'false'], { cwd: folder }).catch((e) => e)
        return String(result.stdout)
          .split('\n')
          .filter((line) => /error TS\d+/.test(line))
          .map((line) => line.replace(/^(types-[\w-]+\.\w+)\((\d+),\d+\): /, (_, name, at) => `${checked.get(name) ?? name}, line ${at} of the block: `))
      }),
    )
    expect(errors.flat()).toEqual([])
  })

  test("a block's runtime is node, page or worker", () => {
    expect(blocks.filter((b) => !(b.runtime in RUNTIMES)).map((b) => `${b.file}:${b.line}: ${b.runtime}`)).toEqual([])
  })

  test('JS and TS blocks are fenced as js or ts, which the runner runs', () => {
    const aliases = new Set(['javascript', 'mjs', 'cjs', 'jsx', 'typescript', 'mts', 'cts', 'tsx'])
    expect(blocks.filter((b) => aliases.has(b.lang)).map((b) => `${b.file}:${b.line}: ${b.lang}`)).toEqual([])
  })

  test('a block marked as not run is JS or TS, and says why', () => {
    const marked = blocks.filter((b) => b.notRun !== undefined)
    expect(marked.filter((b) => b.lang !== 'js' && b.lang !== 'ts').map((b) => `${b.file}:${b.line}`)).toEqual([])
    expect(marked.filter((b) => b.notRun!.length < 10).map((b) => `${b.file}:${b.line}`)).toEqual([])
  })

  test('every relative link resolves to a file, and a #anchor to one of its headings', () => {
    const broken = markdownFiles()
      .flatMap(relativeLinks)
      .filter(({ file, target }) => {
        const [path, anchor] = target.split('#')
        const linked = path ? relative(ROOT, resolve(ROOT, dirname(file), decodeURIComponent(path))) : file
        if (!existsSync(join(ROOT, linked))) return true
        return anchor !== undefined && !headingAnchors(linked).has(anchor)
      })
    expect(broken.map((l) => `${l.file}:${l.line}: ${l.target}`)).toEqual([])
  })
})
