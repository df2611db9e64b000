// The R2 versions of the three Workers (test/integration/r2/*.js, shown verbatim in docs/streams-and-workers.md) run
// in Miniflare (workerd with a local R2) with an R2 binding seeded from the fixtures. They import the
// package by name, which resolves through its `workerd` export condition (dist/workerd.js and dist/gguf/workerd.js:
// npm run build).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Miniflare } from 'miniflare'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { writeGguf } from '../../../src/gguf-node.ts'
import { referenceConvert } from '../../float-reference.ts'
import { FIXTURES_REAL } from '../../helpers.ts'
import { headerOf, tensorBytes } from '../../read-helpers.ts'
import { badUploads, expectConvertedToF16, FIXTURE, fixture } from '../workerd/worker-checks.ts'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const ENTRY = join(ROOT, 'dist/workerd.js')
const SHARDS = join(FIXTURES_REAL, 'sharded', 'fluxml__safetensors.jl')
const WORKERS = ['tensor-endpoint.js', 'upload-gateway.js', 'convert-proxy.js']
const QWEN2 = join(ROOT, 'test/fixtures/gguf/qwen2')
// A SentencePiece model: its tokenizer.model reader is a chunk the Worker loads on demand.
const GEMMA2 = join(ROOT, 'test/fixtures/gguf/gemma2')

interface Bucket {
  put(key: string, value: Uint8Array): Promise<unknown>
  get(key: string): Promise<{ arrayBuffer(): Promise<ArrayBuffer> } | null>
  head(key: string): Promise<unknown>
}

/** A Worker of its file here, importing the package's workerd entry as 'safetensors-wasm' and its .wasm files as compiled modules. */
function worker(file: string, bindings: Record<string, string> = {}) {
  const root = '/worker'
  const dist = dirname(ENTRY)
  const wasm = readdirSync(dist).filter((f) => f.endsWith('.wasm'))
  const chunks = readdirSync(dist).filter((f) => /^workerd-.*\.js$/.test(f))
  const esModule = (path: string, file: string) => ({ type: 'ESModule' as const, path: `${root}/${path}`, contents: readFileSync(file, 'utf8') })
  return {
    name: file.replace(/\.js$/, ''),
    modulesRoot: root,
    // Named as test/integration/workerd/workerd.test.ts names them: the entries after the package, the rest by file name.
    modules: [
      esModule('worker.js', join(ROOT, 'test/integration/r2', file)),
      esModule('safetensors-wasm', ENTRY),
      esModule('safetensors-wasm/gguf', join(dist, 'gguf/workerd.js')),
      ...chunks.map((f) => esModule(f, join(dist, f))),
      ...wasm.map((f) => ({ type: 'CompiledWasm' as const, path: `${root}/${f}`, contents: readFileSync(join(dist, f)) })),
    ],
    compatibilityDate: '2025-06-01',
    // One bucket behind every Worker's binding.
    r2Buckets: { BUCKET: 'models' },
    bindings,
  }
}

describe('R2 Workers (Miniflare)', () => {
  let mf: Miniflare
  let bucket: Bucket
  const call = async (name: string, path: string, init?: RequestInit): Promise<Response> => {
    const fetcher = (await mf.getWorker(name)) as unknown as { fetch(url: string, init?: RequestInit): Promise<Response> }
    return fetcher.fetch(`http://worker/${path}`, init)
  }

  // As a client sends a file (Miniflare's fetch would stream it chunked, without one).
  const upload = (bytes: Uint8Array<ArrayBuffer>) => ({ method: 'POST', body: bytes, headers: { 'content-length': String(bytes.length) } })

  beforeAll(async () => {
    mf = new Miniflare({
      workers: [worker('tensor-endpoint.js', { PREFIX: 'sharded/' }), worker('upload-gateway.js'), worker('convert-proxy.js'), worker('gguf-to-r2.js')],
    })
    bucket = (await mf.getR2Bucket('BUCKET', 'tensor-endpoint')) as unknown as Bucket
    for (const name of readdirSync(SHARDS)) await bucket.put(`sharded/${name}`, new Uint8Array(readFileSync(join(SHARDS, name))))
    await bucket.put(FIXTURE, fixture())
    for (const folder of [QWEN2, GEMMA2])
      for (const name of readdirSync(folder)) await bucket.put(`gguf/${basename(folder)}/${name}`, new Uint8Array(readFileSync(join(folder, name))))
  }, 60_000)

  afterAll(async () => {
    await mf?.dispose()
  })

  const weightMap = () => (JSON.parse(readFileSync(join(SHARDS, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> }).weight_map

  test('tensor endpoint: every tensor of the sharded model, as stored and as F32, byte-exact', async () => {
    for (const [name, shard] of Object.entries(weightMap())) {
      const file = new Uint8Array(readFileSync(join(SHARDS, shard)))
      const info = headerOf(file).tensors[name]
      const raw = tensorBytes(file, name)
      const targets = info.dtype === 'F32' || !['BF16', 'F16', 'F64'].includes(info.dtype) ? [undefined] : [undefined, 'F32']
      for (const dtype of targets) {
        const response = await call('tensor-endpoint', `tensor/${encodeURIComponent(name)}${dtype ? `?dtype=${dtype}` : ''}`)
        expect(response.status, await response.clone().text()).toBe(200)
        const expected = dtype ? referenceConvert(info.dtype, dtype, raw) : raw
        expect(Buffer.compare(new Uint8Array(await response.arrayBuffer()), expected), `${name} as ${dtype ?? info.dtype}`).toBe(0)
        expect(JSON.parse(response.headers.get('x-shape')!)).toEqual(info.shape)
      }
    }
    const missing = await call('tensor-endpoint', 'tensor/nope')
    expect(missing.status).toBe(404)
    expect((await missing.json()).code).toBe('TensorNotFound')
  })

  test('upload gateway: a good file is answered 201 with its tensor count and stored byte-identical', async () => {
    const bytes = fixture()
    const response = await call('upload-gateway', 'uploads/good.safetensors', upload(bytes))
    expect(response.status, await response.clone().text()).toBe(201)
    expect((await response.json()).tensors).toBe(Object.keys(headerOf(bytes).tensors).length)
    const stored = await bucket.get('uploads/good.safetensors')
    expect(Buffer.compare(new Uint8Array(await stored!.arrayBuffer()), bytes)).toBe(0)
  })

  test.each(badUploads().map(([name, , code]) => [name, code]))('upload gateway: %s is answered 422 %s and no object is stored', async (name, code) => {
    const [, bytes] = badUploads().find(([n]) => n === name)!
    const response = await call('upload-gateway', `uploads/${name}.safetensors`, upload(bytes))
    expect(response.status, await response.clone().text()).toBe(422)
    expect((await response.json()).code).toBe(code)
    expect(await bucket.head(`uploads/${name}.safetensors`)).toBeNull()
  })

  test('converting proxy: a BF16/F32 object comes back with every float as F16, byte-exact', async () => {
    const response = await call('convert-proxy', `${FIXTURE}?dtype=F16`)
    expect(response.status, await response.clone().text()).toBe(200)
    expectConvertedToF16(fixture(), new Uint8Array(await response.arrayBuffer()))
    expect((await call('convert-proxy', 'no-such.safetensors')).status).toBe(404)
  })

  test('GGUF into R2: each model under its prefix stored as the same GGUF writeGguf writes in Node, through a FixedLengthStream', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gguf-r2-'))
    try {
      // Q4_K_M: the quantizers and the mixtures, chunks of the workerd build loaded on demand.
      for (const [folder, dtype] of [
        [QWEN2, 'Q8_0'],
        [GEMMA2, 'Q8_0'],
        [QWEN2, 'Q4_K_M'],
      ] as const) {
        const model = basename(folder)
        await writeGguf(folder, join(dir, `${model}.gguf`), { dtype })
        const response = await call('gguf-to-r2', `gguf/${model}/?dtype=${dtype}`, { method: 'POST' })
        expect(response.status, await response.clone().text()).toBe(200)
        const expected = readFileSync(join(dir, `${model}.gguf`))
        expect(await response.json()).toEqual({ key: `gguf/${model}/model.gguf`, size: expected.length })
        const stored = await bucket.get(`gguf/${model}/model.gguf`)
        expect(Buffer.compare(new Uint8Array(await stored!.arrayBuffer()), expected)).toBe(0)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    const missing = await call('gguf-to-r2', 'no-model/', { method: 'POST' })
    expect(missing.status).toBe(422)
    expect(await missing.text()).toContain('no-model/')
    // A config.json whose architectures[0] is an object: the model's fault (422), where it was a TypeError (400).
    const config = JSON.parse(readFileSync(join(QWEN2, 'config.json'), 'utf8'))
    for (const name of readdirSync(QWEN2)) await bucket.put(`bad/${name}`, new Uint8Array(readFileSync(join(QWEN2, name))))
    await bucket.put('bad/config.json', new TextEncoder().encode(JSON.stringify({ ...config, architectures: [{ toString: 1 }] })))
    const bad = await call('gguf-to-r2', 'bad/?dtype=Q8_0', { method: 'POST' })
    expect([bad.status, await bad.text()]).toEqual([422, 'config.json: "architectures"[0] must be a string, got an object'])
    // A file type of llama-quantize that this library does not write: a TypeError.
    expect((await call('gguf-to-r2', `gguf/${basename(QWEN2)}/?dtype=IQ2_XXS`, { method: 'POST' })).status).toBe(400)
  })

  test('docs/gguf.md shows gguf-to-r2.js as tested', () => {
    expect(readFileSync(join(ROOT, 'docs/gguf.md'), 'utf8')).toContain(
      `\`\`\`js worker\n${readFileSync(join(ROOT, 'test/integration/r2/gguf-to-r2.js'), 'utf8')}`,
    )
  })

  test.each(WORKERS)('docs/streams-and-workers.md, "Models in R2", shows %s as tested', (file) => {
    expect(readFileSync(join(ROOT, 'docs/streams-and-workers.md'), 'utf8')).toContain(
      `\`\`\`js worker\n${readFileSync(join(ROOT, 'test/integration/r2', file), 'utf8')}`,
    )
  })
})
