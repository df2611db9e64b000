// The package as published, checked with the ecosystem's own tools on `npm pack`'s tarball: publint and
// arethetypeswrong find nothing, TypeScript consumers type-check under node16 and bundler resolution,
// CommonJS can require() it, the installed command runs, and the tarball holds only what users need (with
// the license, the changelog and the guides, and every file that its Markdown links to: npm shows the README;
// the guides ship beside it), at the size docs/runtimes.md states.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, posix } from 'node:path'
import { promisify } from 'node:util'
import { publint } from 'publint'
import { formatMessage } from 'publint/utils'
import { beforeAll, describe, expect, test } from 'vitest'
import { FIXTURES_GOLDEN, FIXTURES_REAL, goldenName } from '../helpers.ts'
import { markdownFiles, relativeLinks } from '../markdown.ts'
import { type PackedConsumer, packedConsumer, ROOT } from '../packed.ts'

const run = promisify(execFile)
const bin = (name: string) => join(ROOT, 'node_modules/.bin', name)

let consumer: PackedConsumer
beforeAll(() => void (consumer = packedConsumer()), 120_000)

describe('the packed package', () => {
  test('publint reports nothing', async () => {
    // pack: false lints the installed copy, which is exactly the tarball's files.
    const { messages, pkg } = await publint({ pkgDir: join(consumer.dir, 'node_modules/safetensors-wasm'), pack: false })
    expect(messages.map((m) => `${m.type}: ${formatMessage(m, pkg)}`)).toEqual([])
  })

  test('arethetypeswrong reports nothing', async () => {
    // attw exits non-zero on any problem; the JSON also lists them, for a readable failure.
    const { stdout } = await run(bin('attw'), [consumer.tarball, '--format', 'json'])
    expect(JSON.parse(stdout).analysis.problems).toEqual([])
  })

  test('the tarball holds the modules, the wasm, the types, the README, the guides, the license and the changelog, nothing else', () => {
    // The modules of src/ and of its folders, which dist/ keeps.
    const modules = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
      .map((f) => f.split('\\').join('/'))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
      .map((f) => f.replace(/\.ts$/, ''))
    // One wasm module a file of assembly/modules/: as a file (workerd) and inlined in a module (the rest).
    const wasm = readdirSync(join(ROOT, 'assembly/modules')).flatMap((f) => [`dist/${f.replace(/\.ts$/, '.wasm')}`, `dist/${f.replace(/\.ts$/, '.wasm.js')}`])
    // The constants of each contract that src/ imports (assembly/boundary/, scripts/inline-wasm.js).
    const sources = modules.map((m) => readFileSync(join(ROOT, `src/${m}.ts`), 'utf8')).join('\n')
    const contracts = readdirSync(join(ROOT, 'assembly/boundary'))
      .filter((f) => sources.includes(`assembly/boundary/${f}?constants`))
      .map((f) => `dist/boundary/${f.replace(/\.ts$/, '.js')}`)
    const expected = [
      ...markdownFiles(),
      'LICENSE',
      'CHANGELOG.md',
      'package.json',
      // api.ts only re-exports, so rollup leaves it out.
      ...modules.filter((m) => m !== 'api').map((m) => `dist/${m}.js`),
      ...contracts,
      ...wasm,
      // The entries' CommonJS files, entry types and workerd bundles (one chunk shared by its two entries).
      ...[
        'node.cjs',
        'gguf-node.cjs',
        'workerd.js',
        'gguf/workerd.js',
        'workerd-shared.js',
        'workerd-multipart.js',
        'workerd-whole-file.js',
        'workerd-sentencepiece.js',
        'workerd-architectures.js',
        'workerd-quantized-values.js',
        'workerd-quant.js',
        'workerd-ggml-quantizers.js',
        'workerd-mixtures.js',
        'workerd-read.js',
      ].map((f) => `dist/${f}`),
      ...['index', 'node', 'gguf', 'gguf-node'].map((entry) => `dist/${entry}.d.ts`),
      ...['node', 'gguf-node'].map((entry) => `dist/types/${entry}.d.cts`),
      ...modules.filter((m) => m !== 'cli').map((m) => `dist/types/${m}.d.ts`),
    ]
    expect(consumer.pack.files.map((f) => f.path).sort()).toEqual(expected.sort())
  })

  test('the license is the MIT license that package.json names, with its copyright line', () => {
    const installed = join(consumer.dir, 'node_modules/safetensors-wasm')
    expect(JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).license).toBe('MIT')
    const license = readFileSync(join(installed, 'LICENSE'), 'utf8')
    expect(license.split('\n').slice(0, 3)).toEqual(['MIT License', '', 'Copyright (c) 2026 the safetensors-wasm authors'])
    expect(license).toContain('Permission is hereby granted, free of charge, to any person obtaining a copy')
  })

  test('the installed command prints the version of package.json', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
    const { stdout } = await run(join(consumer.dir, 'node_modules/.bin/safetensors-wasm'), ['--version'], { cwd: consumer.dir })
    expect(stdout).toBe(`${version}\n`)
  })

  test('every relative link of the README and the guides leads to a file in the tarball', () => {
    const packed = new Set(consumer.pack.files.map((f) => f.path))
    const outside = markdownFiles()
      .flatMap(relativeLinks)
      .filter(({ file, target }) => {
        const path = target.split('#')[0]
        return path !== '' && !packed.has(posix.join(posix.dirname(file), decodeURIComponent(path)))
      })
    expect(outside.map((l) => `${l.file}:${l.line}: ${l.target}`)).toEqual([])
  })

  test('docs/runtimes.md states the tarball size to within 10%', () => {
    const guide = readFileSync(join(ROOT, 'docs/runtimes.md'), 'utf8')
    const m = /tarball is about (\d+) kB \((\d+) kB unpacked\)/.exec(guide)
    expect(m, 'docs/runtimes.md: "tarball is about N kB (M kB unpacked)"').not.toBeNull()
    const [packed, unpacked] = [Number(m![1]) * 1000, Number(m![2]) * 1000]
    console.log(`tarball: ${consumer.pack.size} bytes, ${consumer.pack.unpackedSize} unpacked`)
    expect(Math.abs(packed - consumer.pack.size) / consumer.pack.size).toBeLessThan(0.1)
    expect(Math.abs(unpacked - consumer.pack.unpackedSize) / consumer.pack.unpackedSize).toBeLessThan(0.1)
  })

  // The same consumer under each resolution. @ts-expect-error lines fail the check if the types were `any`
  // or if an entry exposed what it should not.
  const consumerSource = `import { open, parseHeader, SafetensorsError, type DType, type Tensor } from 'safetensors-wasm'
import { ggufStream, type GgufOptions } from 'safetensors-wasm/gguf'

export async function gguf(files: File[]): Promise<number> {
  const options: GgufOptions = { dtype: 'Q4_K_M' }
  await ggufStream(files, { dtype: 'q8_0' })
  // @ts-expect-error a file type of llama-quantize that this library does not write
  await ggufStream(files, { dtype: 'IQ2_XXS' })
  return (await ggufStream(files, options)).byteLength
}

export async function firstAsF32(bytes: Uint8Array): Promise<Float32Array> {
  const [first] = parseHeader(bytes).tensors
  const file = await open(bytes)
  const dtype: DType = 'F32'
  const tensor: Tensor = await file.getTensor(first.name, { dtype })
  // @ts-expect-error not a dtype
  await file.getTensor(first.name, { dtype: 'F17' })
  await file.close()
  if (!(tensor.data instanceof Float32Array)) throw new SafetensorsError('UnsupportedConversion', 'not F32')
  return tensor.data
}
`
  const nodeOnly = "export { writeFile, fileSink } from 'safetensors-wasm'\nexport { writeGguf } from 'safetensors-wasm/gguf'\n"
  const float16Source = `
export async function half(bytes: Uint8Array, name: string): Promise<globalThis.Float16Array> {
  const file = await open(bytes)
  return (await file.getTensor(name, { dtype: 'F16', float16Array: true })).data
}
`
  const node16 = ['--moduleResolution', 'node16']
  const consumers = [
    { name: 'node16, ES module', file: 'consumer.mts', source: consumerSource + nodeOnly, flags: [...node16, '--module', 'node16'] },
    // TypeScript models require(esm) (Node >= 20.19) as module node20: the CommonJS side loads the ES entry.
    { name: 'node16, CommonJS, module node20', file: 'consumer.cts', source: consumerSource + nodeOnly, flags: [...node16, '--module', 'node20'] },
    // Under module node16 (Node 16, before require(esm)) the package's CommonJS types still re-export the ES
    // ones, which only skipLibCheck (tsc --init's default) lets by; the consumer's own code checks clean.
    {
      name: 'node16, CommonJS, module node16',
      file: 'consumer.cts',
      source: consumerSource + nodeOnly,
      flags: [...node16, '--module', 'node16', '--skipLibCheck'],
    },
    // A bundler resolves the default entry, the portable one: no local files there.
    {
      name: 'bundler',
      file: 'consumer.ts',
      source: `${consumerSource}// @ts-expect-error the default entry has no local files\nexport { writeFile, fileSink } from 'safetensors-wasm'\n// @ts-expect-error nor writeGguf\nexport { writeGguf } from 'safetensors-wasm/gguf'\n// @ts-expect-error GGUF is an entry of its own\nexport { ggufStream as fromMain } from 'safetensors-wasm'\n`,
      flags: ['--moduleResolution', 'bundler', '--module', 'esnext'],
    },
    // A Node project under bundler resolution (Vite's and tsx's templates) names the node condition, as
    // docs/runtimes.md says: the Node entry's types, local files and writeGguf included.
    {
      name: 'bundler, customConditions node',
      file: 'consumer-bundler-node.ts',
      source: consumerSource + nodeOnly,
      flags: ['--moduleResolution', 'bundler', '--module', 'esnext', '--customConditions', 'node'],
    },
    // A Node project without the DOM library, whose checker reads the package's .d.ts too: the few web types
    // they name must come from the package or from Node's types. And `await using` of a file and a model.
    {
      name: 'node16, ES module, lib ES2022 and Node types only, skipLibCheck false',
      file: 'consumer-node.mts',
      source: `${consumerSource + nodeOnly}
import { openModel } from 'safetensors-wasm'
export async function disposed(path: string, folder: string): Promise<number> {
  await using file = await open(path)
  await using model = await openModel(folder)
  return file.names().length + model.names().length
}
`,
      flags: [
        ...node16,
        '--module',
        'node16',
        '--lib',
        'es2022',
        '--types',
        'node',
        '--typeRoots',
        join(ROOT, 'node_modules/@types'),
        '--skipLibCheck',
        'false',
      ],
    },
    // A page's project: the DOM library, no Node types; ES2022, whose lib has no Symbol.asyncDispose.
    {
      name: 'bundler, lib ES2022 and DOM, no Node types, skipLibCheck false',
      file: 'consumer-dom.ts',
      source: `${consumerSource}
export async function closeBoth(bytes: Uint8Array): Promise<void> {
  const file = await open(bytes)
  await file[Symbol.asyncDispose]()
}
`,
      flags: ['--moduleResolution', 'bundler', '--module', 'esnext', '--lib', 'es2022,dom', '--skipLibCheck', 'false'],
    },
    // Where the consumer's lib has Float16Array, an opted-in F16 read is typed as that very global.
    {
      name: 'bundler, a lib with Float16Array',
      file: 'consumer-f16.ts',
      source: consumerSource + float16Source,
      flags: ['--moduleResolution', 'bundler', '--module', 'esnext', '--lib', 'es2022,dom,esnext.float16'],
    },
  ]

  // Eight compilers at once on two cores take longer than the default minute.
  test.concurrent.each(consumers)(
    'a TypeScript consumer type-checks: $name',
    async ({ file, source, flags }) => {
      writeFileSync(join(consumer.dir, file), source)
      const tsc = join(ROOT, 'node_modules/typescript/bin/tsc')
      await expect(run(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022', ...flags, file], { cwd: consumer.dir })).resolves.toBeDefined()
    },
    180_000,
  )

  // #platform is chosen by the package's conditions (package.json "imports"), not registered by an entry at import
  // time: under Node a relative path is a file whichever entry came first; under the browser condition it is not.
  test.each([[['safetensors-wasm']], [['safetensors-wasm/gguf', 'safetensors-wasm']], [['safetensors-wasm', 'safetensors-wasm/gguf']]])(
    'importing %j in that order: open(relative path) reads the file',
    async (entries) => {
      const fixture = readdirSync(FIXTURES_REAL).find((f) => f.endsWith('.safetensors'))!
      writeFileSync(join(consumer.dir, 'order.safetensors'), readFileSync(join(FIXTURES_REAL, fixture)))
      const script = `${entries.map((entry) => `await import(${JSON.stringify(entry)})`).join('\n')}
const { open } = await import('safetensors-wasm')
const file = await open('order.safetensors')
console.log(file.names().length)`
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: consumer.dir })
      expect(Number(stdout)).toBeGreaterThan(0)
    },
  )

  test('under the browser condition a relative path is not a file: a TypeError that names the runtimes that have them', async () => {
    const script = `const { open } = await import('safetensors-wasm')
await open('order.safetensors').then(() => console.log('opened'), (error) => console.log(error.constructor.name, error.message))`
    const { stdout } = await run(process.execPath, ['--conditions=browser', '--input-type=module', '-e', script], { cwd: consumer.dir })
    expect(stdout).toMatch(/^TypeError .*local files can only be read under Node, Deno or Bun/)
  })

  test('require() gives CommonJS the same module as import (Node >= 20.19)', async () => {
    const fixture = 'fluxml__safetensors.jl__model.with_metadata.safetensors'
    const script = `const m = require('safetensors-wasm')
const h = m.parseHeader(require('node:fs').readFileSync(process.argv[1]))
import('safetensors-wasm').then((esm) => console.log(JSON.stringify({ names: h.tensors.map((t) => t.name), metadata: h.metadata, same: esm.SafetensorsError === m.SafetensorsError })))`
    const { stdout } = await run(process.execPath, ['-e', script, FIXTURES_REAL + fixture], { cwd: consumer.dir })
    const golden = JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(fixture), 'utf8'))
    expect(JSON.parse(stdout)).toEqual({ names: golden.tensors.map((t: { name: string }) => t.name), metadata: golden.metadata, same: true })
  })

  test('safetensors-wasm/gguf from ES modules and CommonJS: one library with the main entry, writeGguf writes the file', async () => {
    const model = join(ROOT, 'test/fixtures/gguf/qwen2')
    const script = `const main = require('safetensors-wasm')
const gguf = require('safetensors-wasm/gguf')
const out = require('node:path').join(require('node:os').tmpdir(), 'package-test-' + process.pid + '.gguf')
;(async () => {
  const esm = await import('safetensors-wasm/gguf')
  const written = await gguf.writeGguf(process.argv[1], out, { dtype: 'F16' })
  const bytes = require('node:fs').readFileSync(out)
  require('node:fs').rmSync(out)
  const error = await esm.ggufStream(require('node:os').tmpdir()).catch((e) => e)
  console.log(JSON.stringify({
    same: esm.ggufStream === gguf.ggufStream,
    magic: bytes.subarray(0, 4).toString('latin1'),
    size: bytes.length === written.bytes,
    mainHasGguf: 'ggufStream' in main,
    sameError: error instanceof main.SafetensorsError,
  }))
})()`
    const { stdout } = await run(process.execPath, ['-e', script, model], { cwd: consumer.dir })
    expect(JSON.parse(stdout)).toEqual({ same: true, magic: 'GGUF', size: true, mainHasGguf: false, sameError: true })
  })
})
