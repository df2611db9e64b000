// GGUF -> Hugging Face folder, judged by the original model: the GGUFs of test/fixtures/gguf-to-hf/ were written by
// llama.cpp's own convert_hf_to_gguf.py from the tiny models of test/fixtures/gguf/ (saved again by transformers
// in float32), with golden.json (the original's parameters: names, shapes, sha256 of their float32 bytes; its
// config.json), all made once by scripts/make-gguf-to-hf-fixtures.py. From an F32 GGUF every parameter must be
// the original's, bit for bit; from F16 and Q8_0 ones, ggml's own dequantization of the stored tensor (libggml-base
// through koffi) with the converter's changes undone by this test's own code. config.json's fields and the
// tokenizer's vocabulary, merges, special tokens and pieces must be the original's.
//
// The K types: the fixtures' rows (32 to 128 values) are narrower than a K block of 256, where llama.cpp's quantizer
// falls back to the 32-value types, so test/fixtures/gguf-to-hf-wide/ holds the same nine architectures with rows of
// 256 (made by the same script with --wide), each as the converter writes it from its bfloat16 (float16) original:
// every value the original's. llama.cpp's own quantizer (llama_model_quantize, as llama-quantize runs it) makes
// the K-quant GGUFs from that file here, and each parameter converted from them must be ggml's dequantization of
// its stored tensor, undone as above.
//
// GGUF_TO_HF_OUT=FOLDER keeps the converted folders and the K-quant GGUFs in FOLDER, for
// scripts/check-gguf-to-hf.py to measure their logits with transformers.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { readSentencePiece } from '../../src/gguf/sentencepiece.ts'
import { openGguf, writeGguf } from '../../src/gguf-node.ts'
import { convertModel, openModel, SafetensorsError } from '../../src/node.ts'
import { type Ggml, type GgmlTypeName, ggmlUnsupported, loadGgml, loadLlamaQuantize } from '../ggml.ts'
import { serveFiles } from '../http-server.ts'
import { serverCases } from '../nginx.ts'
import { expectOneLine, cli as runCli } from '../run-cli.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/gguf-to-hf/', import.meta.url))
const WIDE = fileURLToPath(new URL('../fixtures/gguf-to-hf-wide/', import.meta.url))
const ORIGINALS = fileURLToPath(new URL('../fixtures/gguf/', import.meta.url))
/** Llama 3, a SentencePiece Llama, Qwen3, Qwen3-MoE, Mixtral, Gemma 2 and 3, Phi-3, GPT-2. */
const MODELS = ['llama3', 'llama2-spm', 'qwen3', 'qwen3moe', 'mixtral', 'gemma2', 'gemma3', 'phi3', 'gpt2'].filter(
  (m) => process.env.GGUF_TO_HF_ONLY === undefined || process.env.GGUF_TO_HF_ONLY.split(',').includes(m),
)

interface Golden {
  config: Record<string, unknown>
  /** Each parameter: its shape, the sha256 of its float32 bytes, the GGUF tensor llama.cpp's converter maps it to, its expert there. */
  parameters: Record<string, { shape: number[]; sha256: string; gguf: string; expert?: number }>
}
const golden = (model: string, fixtures = FIXTURES): Golden => JSON.parse(readFileSync(join(fixtures, model, 'golden.json'), 'utf8'))
const json = (path: string) => JSON.parse(readFileSync(path, 'utf8'))

const keep = process.env.GGUF_TO_HF_OUT
let scratch: string
beforeAll(() => {
  if (keep) mkdirSync(keep, { recursive: true })
  scratch = keep ?? mkdtempSync(join(tmpdir(), 'gguf-to-hf-'))
})
afterAll(() => {
  if (!keep) rmSync(scratch, { recursive: true, force: true })
})

/** Every parameter of a converted folder as F32. */
async function parametersOf(folder: string): Promise<Map<string, { shape: number[]; values: Float32Array }>> {
  const model = await openModel(folder)
  try {
    const out = new Map<string, { shape: number[]; values: Float32Array }>()
    for (const name of model.names()) {
      const t = await model.getTensor(name, { dtype: 'F32' })
      out.set(name, { shape: t.shape, values: t.data as Float32Array })
    }
    return out
  } finally {
    await model.close()
  }
}

const sha256 = (values: Float32Array) =>
  createHash('sha256')
    .update(new Uint8Array(values.buffer, values.byteOffset, values.byteLength))
    .digest('hex')

/**
 * What a parameter holds, from its GGUF tensor's dequantized values (rows outermost first): the expert's rows, the
 * Q/K rows of each head back from pairs to halves, a Conv1D weight transposed, Gemma's norm minus 1.
 */
function expected(values: Float32Array, shape: number[], how: { expert?: number; heads: number; transpose: boolean; shift: boolean }): Float32Array {
  let rows = shape[0]
  let data = values
  if (how.expert !== undefined) {
    const size = values.length / shape[0]
    data = values.slice(how.expert * size, (how.expert + 1) * size)
    rows = shape[1]
  }
  const columns = data.length / rows
  const out = new Float32Array(data.length)
  if (how.transpose) {
    for (let r = 0; r < rows; r++) for (let c = 0; c < columns; c++) out[c * rows + r] = data[r * columns + c]
    return out
  }
  const perHead = how.heads > 0 ? rows / how.heads : 0
  for (let r = 0; r < rows; r++) {
    // HF row (head h, half k, index j) is the GGUF's row 2j + k of head h.
    const from = perHead === 0 ? r : Math.floor(r / perHead) * perHead + 2 * (r % (perHead / 2)) + Math.floor((r % perHead) / (perHead / 2))
    for (let c = 0; c < columns; c++) out[r * columns + c] = how.shift ? Math.fround(data[from * columns + c] - 1) : data[from * columns + c]
  }
  return out
}

/** config.json's RoPE in either form transformers writes it: theta, type and the scaling's fields. */
function ropeOf(config: Record<string, unknown>): Record<string, unknown> {
  const parameters = (config.rope_parameters ?? {}) as Record<string, Record<string, unknown>>
  const full = (parameters.full_attention ?? parameters) as Record<string, unknown>
  const scaling = { ...((config.rope_scaling as Record<string, unknown>) ?? {}), ...full }
  const type = scaling.rope_type ?? scaling.type ?? 'default'
  const local = parameters.sliding_attention?.rope_theta ?? config.rope_local_base_freq
  const { rope_type: _, type: __, rope_theta: ___, ...fields } = scaling
  // transformers 5 moves a top-level original context and partial rotary factor into the dict.
  const original = fields.original_max_position_embeddings ?? config.original_max_position_embeddings
  const partial = fields.partial_rotary_factor ?? config.partial_rotary_factor ?? 1
  return {
    theta: config.rope_theta ?? full.rope_theta ?? 10000,
    type,
    local,
    ...fields,
    original_max_position_embeddings: original,
    partial_rotary_factor: partial,
  }
}

/** The config.json fields a GGUF holds, which the converted folder's config.json must have as the original's. */
const CONFIG_FIELDS = [
  'architectures',
  'vocab_size',
  'hidden_size',
  'intermediate_size',
  'num_hidden_layers',
  'num_attention_heads',
  'num_key_value_heads',
  'head_dim',
  'max_position_embeddings',
  'rms_norm_eps',
  'tie_word_embeddings',
  'eos_token_id',
  'num_local_experts',
  'num_experts_per_tok',
  'moe_intermediate_size',
  'sliding_window',
  'attn_logit_softcapping',
  'final_logit_softcapping',
  'layer_types',
  'original_max_position_embeddings',
  'n_embd',
  'n_head',
  'n_layer',
  'n_positions',
  'layer_norm_epsilon',
]

function expectConfig(folder: string, original: Record<string, unknown>): void {
  const config = json(join(folder, 'config.json'))
  for (const key of CONFIG_FIELDS) {
    // A field the original leaves to its class's default (null, absent) is the GGUF's value or absent.
    if (original[key] === undefined || original[key] === null) continue
    expect(config[key], key).toEqual(original[key])
  }
  if (original.model_type !== 'gpt2') expect(ropeOf(config)).toEqual(ropeOf(original))
}

/** The original's tokenizer: tokenizer.json's vocabulary, merges and added tokens, or tokenizer.model's pieces; the special tokens. */
function expectTokenizer(folder: string, model: string): void {
  const original = join(ORIGINALS, model)
  const files = readdirSync(original)
  const converted = readdirSync(folder)
  const config = json(join(folder, 'tokenizer_config.json'))
  const originalConfig = json(join(original, 'tokenizer_config.json'))
  const tokenText = (t: unknown) => (typeof t === 'object' && t !== null ? (t as { content: string }).content : t)
  for (const key of ['bos_token', 'eos_token', 'add_bos_token', 'chat_template'])
    if (originalConfig[key] !== undefined && originalConfig[key] !== null) expect(tokenText(config[key]), key).toEqual(tokenText(originalConfig[key]))
  const size = json(join(folder, 'config.json')).vocab_size as number
  if (files.includes('tokenizer.json')) {
    const ours = json(join(folder, 'tokenizer.json'))
    const theirs = json(join(original, 'tokenizer.json'))
    expect(ours.model.vocab).toEqual(theirs.model.vocab)
    const pairs = (merges: Array<string | string[]>) => merges.map((m) => (typeof m === 'string' ? m.split(' ') : m))
    expect(pairs(ours.model.merges)).toEqual(pairs(theirs.model.merges))
    // Added tokens past config.json's vocab_size (Gemma's <mask>) are not in the GGUF.
    const added = (t: { added_tokens: Array<{ id: number; content: string; special: boolean }> }) =>
      t.added_tokens.filter(({ id }) => id < size).map(({ id, content, special }) => ({ id, content, special }))
    expect(added(ours)).toEqual(added(theirs))
    expect(ours.pre_tokenizer).toEqual(theirs.pre_tokenizer)
    expect(ours.normalizer).toEqual(theirs.normalizer)
  }
  if (files.includes('tokenizer.model')) {
    expect(converted).toContain('tokenizer.model')
    const ours = readSentencePiece(readFileSync(join(folder, 'tokenizer.model')))!
    const theirs = readSentencePiece(readFileSync(join(original, 'tokenizer.model')))!
    expect(ours.pieces).toEqual(theirs.pieces)
    expect(ours.addDummyPrefix).toBe(theirs.addDummyPrefix)
  }
}

/** The converted folder is the original: every parameter bit for bit (its float32 bytes' sha256), config.json and tokenizer. */
async function expectOriginal(out: string, { parameters, config }: Golden, model: string): Promise<void> {
  const got = await parametersOf(out)
  expect([...got.keys()].sort()).toEqual(Object.keys(parameters).sort())
  for (const [name, { shape, sha256: hash }] of Object.entries(parameters)) {
    expect(got.get(name)!.shape, name).toEqual(shape)
    expect(sha256(got.get(name)!.values), name).toBe(hash)
  }
  expectConfig(out, config)
  expectTokenizer(out, model)
}

describe.each(MODELS)('%s', (model) => {
  const gguf = (type: string) => join(FIXTURES, model, `${model}-${type}.gguf`)

  test('from F32: every parameter bit for bit the original, config.json and tokenizer as its', async () => {
    const out = join(scratch, `${model}-f32`)
    await convertModel(gguf('f32'), out)
    await expectOriginal(out, golden(model), model)
  })

  describe.skipIf(ggmlUnsupported())('from quantized GGUFs', () => {
    let ggml: Ggml
    beforeAll(() => {
      ggml = loadGgml()
    }, 120_000)

    test.each(['f16', 'q8_0'])('from %s: every parameter ggml dequantization of its tensor, undone as the converter did', async (type) => {
      const out = join(scratch, `${model}-${type}`)
      await convertModel(gguf(type), out)
      await expectDequantized(ggml, out, gguf(type), golden(model), model)
    })
  })
})

/**
 * Every parameter of the folder converted from `path` is ggml's dequantization (dequantize_row_<type> through koffi)
 * of the GGUF tensor llama.cpp's converter made of it, with what the converter did undone by expected(); the
 * parameters are the original's names and shapes.
 */
async function expectDequantized(ggml: Ggml, out: string, path: string, { config, parameters }: Golden, model: string): Promise<void> {
  const file = await openGguf(path)
  const bytes = readFileSync(path)
  const gemma = String(config.model_type).startsWith('gemma')
  const llama = ['llama', 'mixtral'].includes(String(config.model_type))
  try {
    const got = await parametersOf(out)
    expect([...got.keys()].sort()).toEqual(Object.keys(parameters).sort())
    for (const [name, { shape, values }] of got) {
      const source = { name: parameters[name].gguf, expert: parameters[name].expert }
      const info = file.info(source.name)
      const blocks = new Uint8Array(bytes.subarray(info.offset, info.offset + info.byteLength))
      const count = info.shape.reduce((a, b) => a * b, 1)
      // ggml has no dequantize_row_f32: an F32 tensor is its bytes.
      const dequantized = info.type === 'F32' ? new Float32Array(blocks.buffer, 0, count) : ggml.dequantize(info.type as GgmlTypeName, blocks, count)
      const role = /attn_([qk])\.weight$/.exec(source.name)?.[1]
      const heads = llama && role ? ((role === 'q' ? config.num_attention_heads : config.num_key_value_heads) as number) : 0
      const transpose = model === 'gpt2' && /\.c_(attn|proj|fc)\.weight$/.test(name)
      const want = expected(dequantized, info.shape, { expert: source.expert, heads, transpose, shift: gemma && name.endsWith('norm.weight') })
      expect(shape, name).toEqual(transpose ? [...info.shape].reverse() : source.expert === undefined ? info.shape : info.shape.slice(1))
      expect(sha256(values), `${name} (${info.type})`).toBe(sha256(want))
    }
  } finally {
    await file.close()
  }
}

/** llama-quantize's K file types (llama.h's llama_ftype) and the ggml type each is named after. */
const K_FILE_TYPES: Array<[name: string, ftype: number, type: GgmlTypeName]> = [
  ['Q2_K', 10, 'Q2_K'],
  ['Q3_K_M', 12, 'Q3_K'],
  ['Q4_K_M', 15, 'Q4_K'],
  ['Q5_K_M', 17, 'Q5_K'],
  ['Q6_K', 18, 'Q6_K'],
]
const K_TYPES = new Set<string>(['Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K'])

describe.each(MODELS)('%s with rows of 256', (model) => {
  const stored = readdirSync(join(WIDE, model)).find((file) => file.endsWith('.gguf'))!

  test("from the converter's GGUF in the original's dtype: every parameter bit for bit the original, config.json and tokenizer as its", async () => {
    const out = join(scratch, `${model}-wide`)
    await convertModel(join(WIDE, model, stored), out)
    await expectOriginal(out, golden(model, WIDE), model)
  })

  describe.skipIf(ggmlUnsupported())("K-quant GGUFs by llama.cpp's quantizer", () => {
    let ggml: Ggml
    beforeAll(() => {
      ggml = loadGgml()
    }, 120_000)

    test.each(K_FILE_TYPES)('%s: every parameter ggml dequantization of its tensor, undone as the converter did', async (name, ftype, type) => {
      const quantized = join(scratch, `${model}-wide-${name}.gguf`)
      loadLlamaQuantize()(join(WIDE, model, stored), quantized, ftype, 2)
      // The file type's own K type is written, and no matrix is left as it was stored or fell back to a 32-value type.
      const file = await openGguf(quantized)
      const types = file.names().map((tensor) => file.info(tensor).type)
      await file.close()
      expect(types).toContain(type)
      for (const t of types) expect(K_TYPES.has(t) || t === 'F32', `${name}: a tensor of ${t}`).toBe(true)
      const out = join(scratch, `${model}-wide-${name}`)
      await convertModel(quantized, out)
      const wide = golden(model, WIDE)
      await expectDequantized(ggml, out, quantized, wide, model)
      expectConfig(out, wide.config)
      expectTokenizer(out, model)
    })
  })
})

test('the CLI converts a GGUF into a folder and says what it wrote', () => {
  const out = join(scratch, 'cli-gpt2')
  const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url))
  const line = execFileSync(process.execPath, [cli, 'convert', join(FIXTURES, 'gpt2', 'gpt2-q8_0.gguf'), out, '--dtype', 'bf16'], { encoding: 'utf8' })
  expect(line).toMatch(/wrote 28 tensors \(28 BF16\)/)
  expect(readdirSync(out).sort()).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
  expect(json(join(out, 'config.json')).dtype).toBe('bfloat16')
})

describe('a GGUF of an architecture it does not map', () => {
  const gguf = join(ORIGINALS, 'reader', 'alignment-8.gguf')

  test('is UnsupportedConversion naming it, nothing written', async () => {
    const out = join(scratch, 'unmapped')
    const arch = (await openGguf(gguf)).metadata['general.architecture']
    const error = await convertModel(gguf, out).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SafetensorsError)
    expect((error as SafetensorsError).code).toBe('UnsupportedConversion')
    expect((error as SafetensorsError).message).toContain(`GGUF architecture ${JSON.stringify(arch)}`)
    expect(readdirSync(scratch)).not.toContain('unmapped')
  })

  test('the CLI exits 1 with one line naming it and writes nothing; with --raw it writes the tensors', async () => {
    const out = join(scratch, 'unmapped-cli')
    const refused = await runCli('convert', gguf, out)
    expect(refused.code).toBe(1)
    expect(expectOneLine(refused.stderr)).toMatch(new RegExp(`^${gguf}: UnsupportedConversion: GGUF architecture "test" has no Hugging Face mapping`))
    expect(readdirSync(scratch)).not.toContain('unmapped-cli')
    const raw = await runCli('convert', gguf, out, '--raw')
    expect(raw.code, raw.stderr).toBe(0)
    expect(readdirSync(out)).toEqual(['model.safetensors'])
  })

  test('raw: every tensor under its GGUF name and shape, values as stored, the keys in __metadata__', async () => {
    const out = join(scratch, 'raw')
    await convertModel(gguf, out, { raw: true })
    const file = await openGguf(gguf)
    const model = await openModel(out)
    try {
      expect(model.names().sort()).toEqual(file.names().sort())
      for (const name of file.names()) {
        const ours = await model.getTensor(name, { dtype: 'F32' })
        const stored = await file.getTensor(name, { dtype: 'F32' })
        expect(ours.shape, name).toEqual(stored.shape)
        expect(sha256(ours.data as Float32Array), name).toBe(sha256(stored.data as Float32Array))
      }
      const metadata = model.shards.get('model.safetensors')!.metadata!
      expect(metadata['general.architecture']).toBe(file.metadata['general.architecture'])
      expect(Object.keys(metadata).sort()).toEqual(['format', ...Object.keys(file.metadata)].sort())
    } finally {
      await model.close()
      await file.close()
    }
  })
})

describe("this library's own GGUF back: the model folder it was written from", () => {
  test.each(['qwen2', 'llama-gqa', 'mistral'])('%s: every parameter the original, as F32', async (model) => {
    const gguf = join(scratch, `${model}-own.gguf`)
    await writeGguf(join(ORIGINALS, model), gguf, { dtype: 'F32' })
    const out = join(scratch, `${model}-own`)
    await convertModel(gguf, out)
    const original = await parametersOf(join(ORIGINALS, model))
    const got = await parametersOf(out)
    expect([...got.keys()].sort()).toEqual([...original.keys()].sort())
    for (const [name, { shape, values }] of original) {
      expect(got.get(name)!.shape, name).toEqual(shape)
      expect(sha256(got.get(name)!.values), name).toBe(sha256(values))
    }
    // GGUF's llama is Mistral's architecture too: it comes back as LlamaForCausalLM, the same computation.
    const config = json(join(ORIGINALS, model, 'config.json'))
    expectConfig(out, model === 'mistral' ? { ...config, architectures: ['LlamaForCausalLM'], model_type: 'llama' } : config)
  })
})

test('sharded above maxShardSize, with an index, as transformers writes it', async () => {
  const out = join(scratch, 'sharded')
  const written = await convertModel(join(FIXTURES, 'llama3', 'llama3-q8_0.gguf'), out, { maxShardSize: 200_000 })
  const shards = written.filter((name) => name.endsWith('.safetensors'))
  expect(shards.length).toBeGreaterThan(1)
  expect(written).toContain('model.safetensors.index.json')
  const whole = join(scratch, 'unsharded')
  await convertModel(join(FIXTURES, 'llama3', 'llama3-q8_0.gguf'), whole)
  const [a, b] = [await parametersOf(out), await parametersOf(whole)]
  expect([...a.keys()].sort()).toEqual([...b.keys()].sort())
  for (const [name, { values }] of b) expect(sha256(a.get(name)!.values), name).toBe(sha256(values))
})

/** The GGUFs read over HTTP: a Q8_0 one with llama's Q/K permutation, a BF16 one with stacked experts. */
const SERVED = ['gguf-to-hf/llama3/llama3-q8_0.gguf', 'gguf-to-hf-wide/mixtral/mixtral-bf16.gguf']
const ROOT = fileURLToPath(new URL('../fixtures/', import.meta.url))
const SERVERS = serverCases("the tests' server", () => serveFiles(Object.fromEntries(SERVED.map((path) => [path, join(ROOT, path)]))), ROOT, '/ranged')

/** Every file of a folder, by name, as its bytes' sha256. */
const folderHashes = (folder: string) => {
  const hash = (name: string) =>
    createHash('sha256')
      .update(readFileSync(join(folder, name)))
      .digest('hex')
  return Object.fromEntries(readdirSync(folder).map((name) => [name, hash(name)]))
}

describe.each(SERVERS)('a GGUF URL (%s): the same folder as from disk', (server, start) => {
  let running: Awaited<ReturnType<typeof start>>
  beforeAll(async () => {
    running = await start()
  })
  afterAll(async () => {
    await running?.close()
  })

  test.each(SERVED)('%s by convertModel and the CLI, reading each byte about once', async (path) => {
    const name = `${basename(path, '.gguf')}-${server.startsWith('nginx') ? 'nginx' : 'own'}`
    const local = join(scratch, `${name}-local`)
    await convertModel(join(ROOT, path), local)
    const want = folderHashes(local)
    const url = running.server.url + path
    await running.server.settled()
    running.server.clear()
    const remote = join(scratch, `${name}-http`)
    await convertModel(url, remote)
    await running.server.settled()
    expect(folderHashes(remote)).toEqual(want)
    // The header's window, then each tensor's bytes (a piece at a time): the file about once, not once a piece.
    expect(running.server.bytesSent()).toBeLessThan(statSync(join(ROOT, path)).size + 65_536)
    const cli = join(scratch, `${name}-cli`)
    const run = await runCli('convert', url, cli)
    expect(run.code, run.stderr).toBe(0)
    expect(folderHashes(cli)).toEqual(want)
  })
})
