// GGUF -> Hugging Face folder, judged by the original model: the GGUFs of test/fixtures/gguf-to-hf/ were written by
// llama.cpp's own convert_hf_to_gguf.py from the tiny models of test/fixtures/gguf/ (saved again by transformers
// in float32), with golden.json (the original's parameters: names, shapes, sha256 of their float32 bytes; its
// config.json), all made once by scripts/make-gguf-to-hf-fixtures.py. From an F32 GGUF every parameter must be
// the original's, bit for bit; from F16 and Q8_0 ones, ggml's own dequantization of the stored tensor (libggml-base
// through koffi) with the converter's changes undone by this test's own code. config.json's fields and the
// tokenizer's vocabulary, merges, special tokens and pieces must be the original's.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { readSentencePiece } from '../../src/gguf/sentencepiece.ts'
import { openGguf, writeGguf } from '../../src/gguf-node.ts'
import { convertModel, openModel, SafetensorsError } from '../../src/node.ts'
import { type Ggml, type GgmlTypeName, ggmlUnsupported, loadGgml } from '../ggml.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/gguf-to-hf/', import.meta.url))
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
const golden = (model: string): Golden => JSON.parse(readFileSync(join(FIXTURES, model, 'golden.json'), 'utf8'))
const json = (path: string) => JSON.parse(readFileSync(path, 'utf8'))

let scratch: string
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'gguf-to-hf-'))
})
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

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

describe.each(MODELS)('%s', (model) => {
  const gguf = (type: string) => join(FIXTURES, model, `${model}-${type}.gguf`)

  test('from F32: every parameter bit for bit the original, config.json and tokenizer as its', async () => {
    const out = join(scratch, `${model}-f32`)
    await convertModel(gguf('f32'), out)
    const { parameters, config } = golden(model)
    const got = await parametersOf(out)
    expect([...got.keys()].sort()).toEqual(Object.keys(parameters).sort())
    for (const [name, { shape, sha256: hash }] of Object.entries(parameters)) {
      expect(got.get(name)!.shape, name).toEqual(shape)
      expect(sha256(got.get(name)!.values), name).toBe(hash)
    }
    expectConfig(out, config)
    expectTokenizer(out, model)
  })

  describe.skipIf(ggmlUnsupported())('from quantized GGUFs', () => {
    let ggml: Ggml
    beforeAll(() => {
      ggml = loadGgml()
    }, 120_000)

    test.each(['f16', 'q8_0'])('from %s: every parameter ggml dequantization of its tensor, undone as the converter did', async (type) => {
      const out = join(scratch, `${model}-${type}`)
      await convertModel(gguf(type), out)
      const file = await openGguf(gguf(type))
      const { config } = golden(model)
      const gemma = String(config.model_type).startsWith('gemma')
      const llama = ['llama', 'mixtral'].includes(String(config.model_type))
      try {
        const got = await parametersOf(out)
        expect([...got.keys()].sort()).toEqual(Object.keys(golden(model).parameters).sort())
        for (const [name, { shape, values }] of got) {
          const source = { name: golden(model).parameters[name].gguf, expert: golden(model).parameters[name].expert }
          const info = file.info(source.name)
          const blocks = new Uint8Array(readFileSync(gguf(type)).subarray(info.offset, info.offset + info.byteLength))
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
