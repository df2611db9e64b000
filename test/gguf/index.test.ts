// The GGUF converter (src/gguf/), judged from outside: each test model of test/fixtures/gguf/ converted to
// each dtype, the file read back with @huggingface/gguf (a GGUF reader of its own), every metadata key
// against config.json, tokenizer.json and tokenizer_config.json as read here, every tensor's name, dims,
// type, offset and bytes against the source tensors read here by hand (the SafeTensors header and bytes)
// and converted by test/float-reference.ts, with the Q/K permutation written here from its definition
// (llama.cpp's convert_hf_to_gguf.py: reshape(heads, 2, rows / heads / 2, cols).swapaxes(1, 2)).
// Whether llama.cpp runs the files is test/integration/gguf-llama.test.ts.
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GGMLQuantizationType, type GGUFTypedMetadata, GGUFValueType } from '@huggingface/gguf'
import { afterAll, afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { GGUF_CHUNKS } from '../../src/gguf/chunks.ts'
import { ggufStream, writeGguf } from '../../src/gguf-node.ts'
import { convertModel, type ModelFolder, memorySource, serialize } from '../../src/node.ts'
import { WHOLE_FILE } from '../../src/sources/http/whole-file.ts'
import { referenceConvert } from '../float-reference.ts'
import { GGUF_FIXTURES, ggufTensorHashes, ggufTensors, modelCopies, parseGguf, readJson } from '../gguf-fixtures.ts'
import { mostOpen, type RangeOptions, serveFiles } from '../http-server.ts'
import { referenceQ8_0 } from '../q8_0-reference.ts'
import { expectError, expectSameBytes } from '../read-helpers.ts'
import { cli } from '../run-cli.ts'

const FIXTURES = GGUF_FIXTURES
const MODELS = ['llama-gqa', 'mistral', 'qwen2'] as const
const DTYPES = ['F32', 'F16', 'BF16', 'Q8_0'] as const
type Dtype = (typeof DTYPES)[number]

const dir = mkdtempSync(join(tmpdir(), 'safetensors-gguf-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const { modelCopy, withConfig } = modelCopies(dir)

/** What the tests read of config.json, tokenizer.json and tokenizer_config.json. */
interface Config {
  architectures: string[]
  num_attention_heads: number
  num_key_value_heads: number
  num_hidden_layers: number
  max_position_embeddings: number
  hidden_size: number
  intermediate_size: number
  rms_norm_eps: number
  vocab_size: number
  head_dim?: number
  rope_parameters: { rope_theta: number }
  bos_token_id?: number
  eos_token_id?: number
}
interface Tokenizer {
  model: { vocab: Record<string, number>; merges: Array<string | string[]> }
  added_tokens: Array<{ id: number; content: string; special: boolean }>
  pre_tokenizer: unknown
  post_processor?: unknown
}
interface TokenizerConfig {
  bos_token?: string
  eos_token: string
  chat_template: string
  [key: string]: unknown
}
/** A SafeTensors header's tensor entry. */
interface Entry {
  dtype: string
  shape: number[]
  data_offsets: [number, number]
}
interface SourceTensor {
  dtype: string
  shape: number[]
  bytes: Uint8Array
}

/** The model's tensors, read by hand: model.safetensors, or the shards the index names. */
function sourceTensors(folder: string): Map<string, SourceTensor> {
  let files = ['model.safetensors']
  try {
    files = [...new Set(Object.values(readJson<{ weight_map: Record<string, string> }>(join(folder, 'model.safetensors.index.json')).weight_map))]
  } catch {}
  const tensors = new Map<string, SourceTensor>()
  for (const file of files) {
    const bytes = new Uint8Array(readFileSync(join(folder, file)))
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true))
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)))
    for (const [name, t] of Object.entries<Entry>(header)) {
      if (name === '__metadata__') continue
      tensors.set(name, { dtype: t.dtype, shape: t.shape, bytes: bytes.slice(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]) })
    }
  }
  return tensors
}

/** llama.cpp's names for the Hugging Face ones (gguf-py's tensor_mapping.py), written out for these models. */
function ggufNameOf(name: string): string {
  const top: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight',
    'model.norm.weight': 'output_norm.weight',
    'lm_head.weight': 'output.weight',
  }
  if (top[name]) return top[name]
  const [, block, part, kind] = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(name)!
  const parts: Record<string, string> = {
    input_layernorm: 'attn_norm',
    'self_attn.q_proj': 'attn_q',
    'self_attn.k_proj': 'attn_k',
    'self_attn.v_proj': 'attn_v',
    'self_attn.o_proj': 'attn_output',
    post_attention_layernorm: 'ffn_norm',
    'mlp.gate_proj': 'ffn_gate',
    'mlp.up_proj': 'ffn_up',
    'mlp.down_proj': 'ffn_down',
  }
  return `blk.${block}.${parts[part]}.${kind}`
}

/**
 * numpy's weights.reshape(heads, 2, rows // heads // 2, *rest).swapaxes(1, 2).reshape(weights.shape), on
 * rows of `rowBytes` bytes: output row [h, j, i] (shape heads, half, 2) is input row [h, i, j] (shape heads, 2, half).
 */
function permute(bytes: Uint8Array, rows: number, heads: number): Uint8Array {
  const half = rows / heads / 2
  const rowBytes = bytes.length / rows
  const out = new Uint8Array(bytes.length)
  for (let h = 0; h < heads; h++)
    for (let j = 0; j < half; j++)
      for (let i = 0; i < 2; i++) {
        const to = (h * half + j) * 2 + i
        const from = (h * 2 + i) * half + j
        out.set(bytes.subarray(from * rowBytes, (from + 1) * rowBytes), to * rowBytes)
      }
  return out
}

const GGML_TYPE: Record<string, GGMLQuantizationType> = {
  F32: GGMLQuantizationType.F32,
  F16: GGMLQuantizationType.F16,
  BF16: GGMLQuantizationType.BF16,
  Q8_0: GGMLQuantizationType.Q8_0,
}

/** What the GGUF of `model` as `dtype` must hold, tensor by tensor: name, dims, type and bytes. */
function expectedTensors(model: string, dtype: Dtype): Map<string, { dims: number[]; type: string; bytes: Uint8Array }> {
  const folder = join(FIXTURES, model)
  const config = readJson<Config>(join(folder, 'config.json'))
  const llama = config.architectures[0] !== 'Qwen2ForCausalLM'
  const expected = new Map<string, { dims: number[]; type: string; bytes: Uint8Array }>()
  for (const [name, t] of sourceTensors(folder)) {
    const gguf = ggufNameOf(name)
    const dims = [...t.shape].reverse()
    // Norms and biases (every 1-D tensor) are F32 whatever the dtype; Q8_0 needs rows of whole 32-value blocks, else F16.
    const type = t.shape.length === 1 ? 'F32' : dtype === 'Q8_0' && dims[0] % 32 !== 0 ? 'F16' : dtype
    const heads = /attn_q\./.test(gguf) ? config.num_attention_heads : /attn_k\./.test(gguf) ? config.num_key_value_heads : 0
    const rows = llama && heads > 0 ? permute(t.bytes, t.shape[0], heads) : t.bytes
    const as = (to: string) => (to === t.dtype ? rows : referenceConvert(t.dtype, to, rows))
    const bytes = type === 'Q8_0' ? referenceQ8_0(new Float32Array(as('F32').slice().buffer)) : as(type)
    expected.set(gguf, { dims, type, bytes })
  }
  return expected
}

/** The tokenizer's tokens and types by id, from tokenizer.json as llama.cpp's converter lists them (added special tokens CONTROL, 3). */
function expectedVocabulary(folder: string, vocabSize: number): { tokens: string[]; types: number[] } {
  const tokenizer = readJson<Tokenizer>(join(folder, 'tokenizer.json'))
  const tokens: string[] = []
  const types: number[] = []
  for (const [token, id] of Object.entries<number>(tokenizer.model.vocab)) {
    tokens[id] = token
    types[id] = 1
  }
  for (const added of tokenizer.added_tokens) {
    tokens[added.id] = added.content
    types[added.id] = added.special ? 3 : 4
  }
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] !== undefined) continue
    tokens[id] = `[PAD${id}]`
    types[id] = 5
  }
  return { tokens, types }
}

const FILE_TYPE: Record<string, number> = { F32: 0, F16: 1, Q8_0: 7, BF16: 32 }

/** Every key-value pair the GGUF must hold, with its GGUF type, from the model's files. */
function expectedMetadata(model: string, dtype: Dtype): Record<string, { value: unknown; type: GGUFValueType; subType?: GGUFValueType }> {
  const folder = join(FIXTURES, model)
  const config = readJson<Config>(join(folder, 'config.json'))
  const tokenizer = readJson<Tokenizer>(join(folder, 'tokenizer.json'))
  const tokenizerConfig = readJson<TokenizerConfig>(join(folder, 'tokenizer_config.json'))
  const arch = config.architectures[0] === 'Qwen2ForCausalLM' ? 'qwen2' : 'llama'
  const u32 = (value: number) => ({ value, type: GGUFValueType.UINT32 })
  const f32 = (value: number) => ({ value: Math.fround(value), type: GGUFValueType.FLOAT32 })
  const string = (value: string) => ({ value, type: GGUFValueType.STRING })
  const bool = (value: boolean) => ({ value, type: GGUFValueType.BOOL })
  const { tokens, types } = expectedVocabulary(folder, config.vocab_size)
  const idOf = (content: string) => tokenizer.added_tokens.find((t) => t.content === content)!.id
  const expected: Record<string, { value: unknown; type: GGUFValueType; subType?: GGUFValueType }> = {
    'general.architecture': string(arch),
    'general.type': string('model'),
    'general.file_type': u32(FILE_TYPE[dtype]),
    'general.quantization_version': u32(2),
    'general.alignment': u32(32),
    [`${arch}.block_count`]: u32(config.num_hidden_layers),
    [`${arch}.context_length`]: u32(config.max_position_embeddings),
    [`${arch}.embedding_length`]: u32(config.hidden_size),
    [`${arch}.feed_forward_length`]: u32(config.intermediate_size),
    [`${arch}.attention.head_count`]: u32(config.num_attention_heads),
    [`${arch}.attention.head_count_kv`]: u32(config.num_key_value_heads),
    [`${arch}.rope.freq_base`]: f32(config.rope_parameters.rope_theta),
    [`${arch}.attention.layer_norm_rms_epsilon`]: f32(config.rms_norm_eps),
    'tokenizer.ggml.model': string('gpt2'),
    // The tokenizers' pre-tokenizer is ByteLevel with GPT-2's regex, which llama.cpp's llama-vocab.cpp calls "gpt-2".
    'tokenizer.ggml.pre': string('gpt-2'),
    'tokenizer.ggml.tokens': { value: tokens, type: GGUFValueType.ARRAY, subType: GGUFValueType.STRING },
    'tokenizer.ggml.token_type': { value: types, type: GGUFValueType.ARRAY, subType: GGUFValueType.INT32 },
    'tokenizer.ggml.merges': {
      value: tokenizer.model.merges.map((m: string | string[]) => (typeof m === 'string' ? m : m.join(' '))),
      type: GGUFValueType.ARRAY,
      subType: GGUFValueType.STRING,
    },
    'tokenizer.ggml.eos_token_id': u32(idOf(tokenizerConfig.eos_token)),
    'tokenizer.chat_template': string(tokenizerConfig.chat_template),
  }
  if (tokenizerConfig.bos_token) expected['tokenizer.ggml.bos_token_id'] = u32(idOf(tokenizerConfig.bos_token))
  // A pair template "<s> $A <s> $B": gguf-py takes a token between A and B for a separator only if it is the SEP or
  // the EOS, so it writes add_sep_token false (llama-cpp-f16.json, llama.cpp's own converter's file, says so too).
  const pair = (tokenizer.post_processor as { pair?: Array<{ SpecialToken?: { id: string } }> } | undefined)?.pair
  if (pair?.length === 4) {
    expect(pair[2].SpecialToken?.id).toBe(tokenizerConfig.bos_token)
    expected['tokenizer.ggml.add_sep_token'] = bool(false)
  }
  for (const kind of ['bos', 'eos']) {
    const add = tokenizerConfig[`add_${kind}_token`]
    if (typeof add === 'boolean') expected[`tokenizer.ggml.add_${kind}_token`] = bool(add)
  }
  if (config.head_dim !== undefined) {
    expected[`${arch}.attention.key_length`] = u32(config.head_dim)
    expected[`${arch}.attention.value_length`] = u32(config.head_dim)
  }
  if (arch === 'llama') {
    expected['llama.vocab_size'] = u32(config.vocab_size)
    expected['llama.rope.dimension_count'] = u32(config.head_dim ?? config.hidden_size / config.num_attention_heads)
  }
  return expected
}

const align = (n: number) => Math.ceil(n / 32) * 32

describe.each(MODELS)('%s', (model) => {
  test.each(DTYPES)('as %s: metadata, tensors and bytes as llama.cpp converts them', async (dtype) => {
    const out = join(dir, `${model}-${dtype}.gguf`)
    const written = await writeGguf(join(FIXTURES, model), out, { dtype })
    const file = new Uint8Array(readFileSync(out))
    const { typedMetadata } = await parseGguf(out)

    const { version, tensor_count, kv_count, ...metadata } = typedMetadata
    expect(version.value).toBe(3)
    const expected = expectedMetadata(model, dtype)
    expect(Object.keys(metadata).sort()).toEqual(Object.keys(expected).sort())
    for (const [key, want] of Object.entries(expected)) expect(metadata[key], key).toEqual(want)
    expect(kv_count.value).toBe(BigInt(Object.keys(expected).length))

    expect(tensor_count.value).toBe(BigInt(expectedTensors(model, dtype).size))
    await expectTensors(out, model, dtype)
    expect(written.bytes).toBe(file.length)
    expect(written.tensors).toBe(Number(tensor_count.value))
  })
})

/** The GGUF at `out` holds the tensors of `model` as `dtype`, as llama.cpp converts them, each aligned after the one before, and nothing after them. */
async function expectTensors(out: string, model: string, dtype: Dtype): Promise<void> {
  const file = new Uint8Array(readFileSync(out))
  const { tensorInfos, tensorDataOffset } = await parseGguf(out)
  const tensors = expectedTensors(model, dtype)
  expect(tensorInfos.map((t) => t.name).sort()).toEqual([...tensors.keys()].sort())
  // The data section starts aligned, and each tensor at the next aligned offset after the one before.
  expect(Number(tensorDataOffset) % 32).toBe(0)
  let next = 0
  for (const info of tensorInfos) {
    const want = tensors.get(info.name)!
    expect(info.shape.map(Number), info.name).toEqual(want.dims)
    expect(info.dtype, info.name).toBe(GGML_TYPE[want.type])
    expect(Number(info.offset), info.name).toBe(next)
    const start = Number(tensorDataOffset + info.offset)
    expectSameBytes(file.subarray(start, start + want.bytes.length), want.bytes, `${info.name} as ${want.type}`)
    next = align(next + want.bytes.length)
  }
  expect(file.length).toBe(Number(tensorDataOffset) + next)
}

/** llama.cpp's converter's own F16 GGUF of a test model, as scripts/gguf-reference.py --llama-cpp dumped it. */
interface Golden {
  notes: string[]
  metadata: Array<{ key: string; type: string; value: unknown }>
  tensors: Array<{ name: string; type: string; shape: number[]; sha256: string }>
}
const GOLDEN_MODELS = readdirSync(FIXTURES).filter((name) => existsSync(join(FIXTURES, name, 'llama-cpp-f16.json')))

/** The GGUF at `out` holds the tensors of llama.cpp's converter's F16 GGUF of `model`: their names, types, shapes and bytes. */
async function expectGoldenTensors(out: string, model: string): Promise<void> {
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1)
  const golden = readJson<Golden>(join(FIXTURES, model, 'llama-cpp-f16.json'))
  expect((await ggufTensorHashes(out)).sort(byName)).toEqual([...golden.tensors].sort(byName))
}

/** An array as the golden summarizes one of more than 16 values: its length, first and last five, and a sha256 of its bytes as the GGUF stores them (strings each followed by a 0 byte). */
function summary(values: unknown[], type: string): unknown {
  if (values.length <= 16) return values
  const hash = createHash('sha256')
  if (type === 'STRING') for (const v of values) hash.update(Buffer.concat([Buffer.from(v as string), Buffer.alloc(1)]))
  else hash.update(new Uint8Array((type === 'FLOAT32' ? Float32Array : Int32Array).from(values as number[]).buffer))
  return { length: values.length, first: values.slice(0, 5), last: values.slice(-5), sha256: hash.digest('hex') }
}

/**
 * Where this converter writes, on purpose, what llama.cpp's does not, by model: general.alignment everywhere (its
 * default, written), general.name, general.size_label, general.basename and general.version nowhere (informational,
 * from the folder's name).
 */
const DIFFERENCES: Record<string, string[]> = {
  // Scores from the merges' ranks, which llama.cpp tokenizes as transformers does (the golden's own note says why).
  'mistral-spm': ['tokenizer.ggml.scores'],
  // llama.cpp's default RoPE base is these models' 10000; this converter writes config.json's, which a fine-tune may change.
  gemma2: ['gemma2.rope.freq_base'],
  gptneox: ['gptneox.rope.freq_base', 'general.file_type'],
  phi2: ['phi2.rope.freq_base'],
  stablelm: ['stablelm.rope.freq_base'],
  falcon: ['falcon.rope.freq_base'],
  // 0 for a config.json without q_lora_rank, which llama.cpp needs unless the model has V2-Lite's 26 or 27 layers.
  'deepseek-v2-lite': ['deepseek2.attention.q_lora_rank'],
}

describe.each(GOLDEN_MODELS)('%s as llama.cpp’s own converter writes it', (model) => {
  test('every metadata key and value; every tensor’s name, type, shape and bytes', async () => {
    const golden = readJson<Golden>(join(FIXTURES, model, 'llama-cpp-f16.json'))
    const out = join(dir, `${model}-golden.gguf`)
    await writeGguf(join(FIXTURES, model), out, { dtype: 'F16' })
    const { typedMetadata } = await parseGguf(out)
    const { version, tensor_count, kv_count, ...metadata } = typedMetadata
    const ignored = new Set(['general.name', 'general.size_label', 'general.basename', 'general.version', 'general.alignment', ...(DIFFERENCES[model] ?? [])])
    const ours = Object.keys(metadata).filter((key) => !ignored.has(key))
    expect(ours.sort()).toEqual(
      golden.metadata
        .map((m) => m.key)
        .filter((key) => !ignored.has(key))
        .sort(),
    )
    for (const { key, type, value } of golden.metadata) {
      if (ignored.has(key)) continue
      const got = metadata[key]!
      if (got.type === GGUFValueType.ARRAY) {
        const subType = GGUFValueType[(got as { subType: GGUFValueType }).subType]
        expect(`ARRAY[${subType}]`, key).toBe(type)
        expect(summary(got.value as unknown[], subType), key).toEqual(value)
      } else {
        expect(GGUFValueType[got.type], key).toBe(type)
        expect(got.value, key).toEqual(value)
      }
    }
    await expectGoldenTensors(out, model)
  })
})

describe('in chunks smaller than a head, transposed tensors a block of columns at a time (as a tensor of gigabytes is)', () => {
  const saved = { ...GGUF_CHUNKS, ...WHOLE_FILE }
  // Chunks of 64 values: each head of llama-gqa's q_proj and k_proj (16 rows of 64) a row of each half at a time.
  beforeEach(() => void Object.assign(GGUF_CHUNKS, { elements: 64, transposed: 64 }))
  afterEach(() => {
    Object.assign(GGUF_CHUNKS, { elements: saved.elements, transposed: saved.transposed, gapBytes: saved.gapBytes })
    Object.assign(WHOLE_FILE, { keepBytes: saved.keepBytes, windowBytes: saved.windowBytes })
  })

  /** The GGUF of `folder` as `dtype` in the pieces the test set, then whole: the same bytes. */
  async function expectSameAsWhole(folder: string, name: string, dtype: Dtype): Promise<void> {
    const pieces = join(dir, `${name}-pieces-${dtype}.gguf`)
    await writeGguf(folder, pieces, { dtype })
    Object.assign(GGUF_CHUNKS, saved)
    const whole = join(dir, `${name}-whole-${dtype}.gguf`)
    await writeGguf(folder, whole, { dtype })
    expectSameBytes(readFileSync(pieces), readFileSync(whole), `${name} ${dtype} in pieces against whole`)
  }

  test.each(['F16', 'Q8_0'] as const)('llama-gqa and mistral as %s: the tensors as llama.cpp converts them', async (dtype) => {
    for (const model of ['llama-gqa', 'mistral']) {
      const out = join(dir, `${model}-pieces-${dtype}.gguf`)
      await writeGguf(join(FIXTURES, model), out, { dtype })
      await expectTensors(out, model, dtype)
    }
  })

  // The runs of a column of GPT-2's Conv1D weights (rows of 64 to 256 F16 values) are copied out of whole rows; with
  // gapBytes 0, read one by one.
  test.each([0, 64 << 10])(
    'gpt2, runs of rows at least %d bytes apart read on their own: F16 as llama.cpp’s converter writes it, Q8_0 as converted whole',
    async (gapBytes) => {
      GGUF_CHUNKS.gapBytes = gapBytes
      const out = join(dir, `gpt2-pieces-${gapBytes}.gguf`)
      await writeGguf(join(FIXTURES, 'gpt2'), out, { dtype: 'F16' })
      await expectGoldenTensors(out, 'gpt2')
      await expectSameAsWhole(join(FIXTURES, 'gpt2'), `gpt2-${gapBytes}`, 'Q8_0')
    },
  )

  // The third set's transforms in pieces: fused QKV regrouped (gptneox, falcon), per-head norms stacked (stablelm),
  // kv_b_proj split and its k part transposed a few columns at a time (deepseek), experts' halves of gate_up
  // transposed by blocks of columns (llama4), the experts' biases split (gpt-oss).
  test.each(GOLDEN_MODELS)('%s as F16: the tensors llama.cpp’s converter writes', async (model) => {
    const out = join(dir, `${model}-pieces-golden.gguf`)
    await writeGguf(join(FIXTURES, model), out, { dtype: 'F16' })
    await expectGoldenTensors(out, model)
  })

  test('gpt-oss with its experts dequantized (gate and up interleaved, transposed) in blocks of 3 columns: the same bytes as whole', async () => {
    const plain = join(dir, 'gpt-oss-plain-pieces')
    await convertModel(join(FIXTURES, 'gpt-oss'), plain, { dtype: 'BF16' })
    for (const name of ['tokenizer.json', 'tokenizer_config.json']) cpSync(join(FIXTURES, 'gpt-oss', name), join(plain, name))
    // gate_up_proj is [experts, 64, 128]: 3 of the 64 columns gate (or up) takes are 5 of the 128 stored.
    GGUF_CHUNKS.transposed = 64 * 2 * 3
    await expectSameAsWhole(plain, 'gpt-oss-plain', 'F32')
  })

  test('from a server that ignores Range, through windows smaller than a tensor: the same bytes as from the folders', async () => {
    const files: Record<string, string> = {}
    for (const model of ['llama-gqa', 'gpt2']) for (const name of readdirSync(join(FIXTURES, model))) files[`${model}/${name}`] = join(FIXTURES, model, name)
    const server = await serveFiles(files, { fault: () => ({ kind: 'ignoreRange' }) })
    // GPT-2's Conv1D weights in blocks of 16 to 64 columns, each block a download of the file from its start.
    Object.assign(GGUF_CHUNKS, { transposed: 4096 })
    Object.assign(WHOLE_FILE, { keepBytes: 16 << 10, windowBytes: 16 << 10 })
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    try {
      for (const [model, entry] of [
        ['llama-gqa', 'model.safetensors.index.json'],
        ['gpt2', 'model.safetensors'],
      ]) {
        const local = join(dir, `${model}-local-pieces.gguf`)
        await writeGguf(join(FIXTURES, model), local, { dtype: 'Q8_0' })
        const stream = await ggufStream(`${server.url}${model}/${entry}`, { dtype: 'Q8_0' })
        expectSameBytes(new Uint8Array(await new Response(stream).arrayBuffer()), readFileSync(local), `${model} over HTTP without Range`)
        await server.settled()
        const size = readdirSync(join(FIXTURES, model)).reduce((sum, name) => sum + statSync(join(FIXTURES, model, name)).size, 0)
        if (model === 'gpt2') {
          // A download per block of columns of each Conv1D weight larger than a block, and the reads in file order.
          const blocks = [...sourceTensors(join(FIXTURES, model))]
            .filter(([name, t]) => /\.c_(attn|proj|fc)\.weight$/.test(name) && t.shape[0] * t.shape[1] > 4096)
            .reduce(
              (
                sum,
                [
                  ,
                  {
                    shape: [rows, columns],
                  },
                ],
              ) => sum + Math.ceil(columns / Math.max(1, Math.floor(4096 / rows))),
              0,
            )
          expect(server.bytesSent()).toBeLessThan((blocks + 2) * size)
        } else {
          // The rows of a head's two halves, a row of each in turn, from the download that brings them or the one after it.
          expect(server.bytesSent()).toBeLessThan(3 * size)
        }
        server.clear()
      }
    } finally {
      warn.mockRestore()
      await server.close()
    }
  })

  test("a quantized model's q_proj and k_proj (GPTQ): the same bytes in pieces as whole", async () => {
    const folder = join(dir, 'gptq-pieces')
    cpSync(join(FIXTURES, '../quantized/gptq-8bit'), folder, { recursive: true })
    const tokenizer = {
      model: { type: 'BPE', vocab: { a: 0, b: 1 }, merges: [] },
      pre_tokenizer: { type: 'ByteLevel', use_regex: true },
      decoder: { type: 'ByteLevel' },
    }
    writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(tokenizer))
    const config = readJson<Record<string, unknown>>(join(folder, 'config.json'))
    writeFileSync(join(folder, 'config.json'), JSON.stringify({ ...config, architectures: ['LlamaForCausalLM'] }))
    await expectSameAsWhole(folder, 'gptq', 'F16')
  })
})

test('Qwen2 keeps its q/k/v biases, unpermuted; Llama and Mistral have their q and k rows permuted (the test fails without it)', () => {
  // A guard on the fixtures themselves: with rows equal under the permutation, the tests above could not tell.
  const llama = sourceTensors(join(FIXTURES, 'llama-gqa')).get('model.layers.0.self_attn.q_proj.weight')!
  expect(Buffer.compare(permute(llama.bytes, llama.shape[0], 4), llama.bytes)).not.toBe(0)
  const qwen = [...sourceTensors(join(FIXTURES, 'qwen2')).keys()].filter((name) => name.endsWith('_proj.bias'))
  expect(qwen.length).toBeGreaterThan(0)
})

test('ggufStream: the same bytes as writeGguf, from a model given as File objects (as a page gets them) and as a ModelFolder (as r2Model gives one)', async () => {
  const folder = join(FIXTURES, 'qwen2')
  const names = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']
  const out = join(dir, 'qwen2-files.gguf')
  await writeGguf(folder, out, { dtype: 'BF16' })
  const files = names.map((name) => new File([readFileSync(join(folder, name))], name))
  const stream = await ggufStream(files, { dtype: 'BF16' })
  // Known before the first byte, as a Worker's FixedLengthStream needs it (test/integration/r2/workers.test.ts stores one in R2).
  expect(stream.byteLength).toBe(statSync(out).size)
  const fromFiles = new Uint8Array(await new Response(stream).arrayBuffer())
  expectSameBytes(fromFiles, readFileSync(out), 'the stream of the files against the file')
  const storage: ModelFolder = {
    where: 'a test folder',
    find: async (name) => (names.includes(name) ? memorySource(readFileSync(join(folder, name))) : undefined),
    open: (name) => memorySource(readFileSync(join(folder, name))),
  }
  const fromStorage = new Uint8Array(await new Response(await ggufStream(storage, { dtype: 'BF16' })).arrayBuffer())
  expectSameBytes(fromStorage, readFileSync(out), 'the stream of the ModelFolder against the file')
})

/** A copy of qwen2 whose tokenizer.json has the pre-tokenizer (JSON text, as tokenizer.json holds it) and merges given. */
async function withTokenizer(name: string, preTokenizer: string, merges?: unknown[]): Promise<GGUFTypedMetadata> {
  const folder = modelCopy('qwen2', name, (f) => {
    const tokenizer = readJson<Tokenizer>(join(f, 'tokenizer.json'))
    tokenizer.pre_tokenizer = JSON.parse(preTokenizer)
    if (merges) tokenizer.model.merges = merges as Tokenizer['model']['merges']
    writeFileSync(join(f, 'tokenizer.json'), JSON.stringify(tokenizer))
  })
  const out = join(dir, `${name}.gguf`)
  await writeGguf(folder, out)
  return (await parseGguf(out)).typedMetadata
}

/** Llama 3's and Qwen2's pre-tokenizers as their tokenizer.json files spell them (meta-llama/Meta-Llama-3-8B, Qwen/Qwen2.5-1.5B). */
const SPLIT_THEN_BYTES = (regex: string) =>
  `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"${regex}"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`
const LLAMA3_REGEX = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`
const QWEN2_REGEX = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`

test("tokenizer.ggml.pre: Llama 3's split regex is llama-bpe, Qwen2's is qwen2; a space inside an [a, b] merge becomes U+0120, as gguf-py writes it", async () => {
  expect((await withTokenizer('pre-llama3', SPLIT_THEN_BYTES(LLAMA3_REGEX)))['tokenizer.ggml.pre']?.value).toBe('llama-bpe')
  const qwen = await withTokenizer('pre-qwen2', SPLIT_THEN_BYTES(QWEN2_REGEX), [['a b', 'c'], 'd e'])
  expect(qwen['tokenizer.ggml.pre']?.value).toBe('qwen2')
  expect(qwen['tokenizer.ggml.merges']?.value).toEqual(['a\u0120b c', 'd e'])
})

/** A copy of qwen2 (512 tokens) whose embeddings have `rows` rows, config.json's vocab_size `vocabSize`. */
function withVocabulary(name: string, rows: number, vocabSize: number): string {
  return modelCopy('qwen2', name, (f) => {
    const tensors = Object.fromEntries(
      [...sourceTensors(f)].map(([tensor, t]) => {
        const shape = tensor === 'model.embed_tokens.weight' ? [rows, t.shape[1]] : t.shape
        const data = tensor === 'model.embed_tokens.weight' ? new Uint8Array(rows * t.shape[1] * 4) : t.bytes
        return [tensor, { dtype: t.dtype as 'F32', shape, data }]
      }),
    )
    writeFileSync(join(f, 'model.safetensors'), serialize(tensors))
    const config = readJson<Config>(join(f, 'config.json'))
    config.vocab_size = vocabSize
    writeFileSync(join(f, 'config.json'), JSON.stringify(config))
  })
}

test('a vocabulary padded past its tokenizer (as Qwen pads 151,665 tokens to 151,936): every id without a token is [PAD<id>], UNUSED', async () => {
  // 4,096 ids of padding at most for a tokenizer of 512 (an eighth of a larger one).
  const folder = withVocabulary('padded-vocab', 4608, 4608)
  const out = join(dir, 'padded-vocab.gguf')
  await writeGguf(folder, out)
  const { typedMetadata } = await parseGguf(out)
  const tokens = typedMetadata['tokenizer.ggml.tokens']!.value as string[]
  const types = typedMetadata['tokenizer.ggml.token_type']!.value as number[]
  const { tokens: known } = expectedVocabulary(join(FIXTURES, 'qwen2'), 512)
  expect(tokens.length).toBe(4608)
  expect(tokens.slice(0, 512)).toEqual(known)
  expect(tokens[4607]).toBe('[PAD4607]')
  expect(new Set(types.slice(512))).toEqual(new Set([5]))
})

test('a vocab_size the embeddings do not have, or padding past the bound: InvalidHeaderDeserialization naming it, before the vocabulary is made', async () => {
  const unlike = await expectError(() => ggufStream(withVocabulary('vocab-unlike', 512, 100_000)), 'InvalidHeaderDeserialization')
  expect(unlike.message).toBe('config.json: tensor "model.embed_tokens.weight" is [512, 48], where vocab_size 100000 and a hidden size of 48 make [100000, 48]')
  const padded = await expectError(() => ggufStream(withVocabulary('vocab-too-padded', 4609, 4609)), 'InvalidHeaderDeserialization')
  expect(padded.message).toBe(
    "config.json: vocab_size 4609 pads the tokenizer's 512 tokens with 4097 ids, more than the 4096 a vocabulary of that size is padded with",
  )
})

/**
 * config.json as transformers 5 saves it (its standardize_rope_params, seen in its output): rope_theta and
 * transformers 4's rope_scaling moved into rope_parameters, whose type is rope_type.
 */
function asTransformers5(config: Record<string, unknown>): void {
  const scaling = (config.rope_scaling ?? {}) as Record<string, unknown>
  config.rope_parameters = { ...scaling, rope_theta: config.rope_theta, rope_type: scaling.rope_type ?? scaling.type ?? 'default' }
  delete config.rope_scaling
  delete config.rope_theta
}

/** config.json as transformers 4 saved it: rope_theta at the top, scaling in rope_scaling (null without), Gemma 3's local base and pattern at the top. */
function asTransformers4(config: Record<string, unknown>): void {
  const parameters = config.rope_parameters as Record<string, Record<string, unknown>>
  const { rope_theta, rope_type, ...scaling } = (parameters.full_attention ?? parameters) as Record<string, unknown>
  Object.assign(config, { rope_theta, rope_scaling: rope_type === 'default' ? null : { rope_type, ...scaling } })
  if (parameters.sliding_attention) Object.assign(config, { rope_local_base_freq: parameters.sliding_attention.rope_theta, sliding_window_pattern: 6 })
  delete config.rope_parameters
  delete config.layer_types
}

test.each([
  ['llama3', 'transformers 5', asTransformers5],
  ['qwen3', 'transformers 5', asTransformers5],
  ['phi3', 'transformers 5', asTransformers5],
  ['mistral-spm', 'transformers 5', asTransformers5],
  ['llama-yarn', 'transformers 4', asTransformers4],
  ['gemma3', 'transformers 4', asTransformers4],
] as const)('%s: config.json in the %s form gives the same GGUF', async (model, _, form) => {
  const out = join(dir, `${model}-form.gguf`)
  const other = join(dir, `${model}-other-form.gguf`)
  await writeGguf(join(FIXTURES, model), out)
  await writeGguf(withConfig(model, `${model}-other-form`, form), other)
  expectSameBytes(readFileSync(other), readFileSync(out), `${model} in the other form`)
})

/** The sentence a GGUF's context cut to an attention window gets, as docs/gguf.md shows it. */
const windowNote = (window: number, context: number, arch: string) =>
  `context_length is ${window}, config.json's sliding_window, not its max_position_embeddings ${context}: llama.cpp's ${arch} attends to every earlier token, transformers to the last ${window} only`

// Each config class's window as transformers applies it (MistralConfig's default 4096, MixtralConfig's none, Qwen's
// only with use_sliding_window and, for Qwen2 and Qwen3, on the layers layer_types or max_window_layers say), and
// context_length the window only where it is shorter than max_position_embeddings (256 in the test models).
/** A config.json edit: each of `values` set, or removed where undefined. */
const setting = (values: Record<string, unknown>) => (config: Record<string, unknown>) => {
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined) delete config[key]
    else config[key] = value
  }
}
const QWEN_WINDOW = { use_sliding_window: true, sliding_window: 16 }
test.each([
  ['mistral-swa', 'as it is (16)', setting({}), 16],
  ['mistral-swa', 'sliding_window null', setting({ sliding_window: null }), 256],
  ['mistral-swa', 'no sliding_window, 32768 positions', setting({ sliding_window: undefined, max_position_embeddings: 32768 }), 4096],
  ['mistral-swa', 'sliding_window 1024, past the context', setting({ sliding_window: 1024 }), 256],
  ['mixtral', 'as it is (null)', setting({}), 256],
  ['mixtral', 'no sliding_window', setting({ sliding_window: undefined }), 256],
  ['mixtral', 'sliding_window 16', setting({ sliding_window: 16 }), 16],
  ['qwen2', 'sliding_window 16 without use_sliding_window', setting({ sliding_window: 16 }), 256],
  ['qwen2', 'use_sliding_window, layer 1 sliding', setting({ ...QWEN_WINDOW, layer_types: ['full_attention', 'sliding_attention'] }), 16],
  ['qwen2', 'use_sliding_window, every layer full', setting(QWEN_WINDOW), 256],
  ['qwen2', 'use_sliding_window, no layer_types, max_window_layers 1', setting({ ...QWEN_WINDOW, layer_types: undefined, max_window_layers: 1 }), 16],
  ['qwen2', 'use_sliding_window, no layer_types, max_window_layers 28', setting({ ...QWEN_WINDOW, layer_types: undefined }), 256],
  ['qwen3moe', 'use_sliding_window (every layer)', setting(QWEN_WINDOW), 16],
] as const)('%s, %s: context_length is the window llama.cpp would not apply, where it is shorter, and the notes say so', async (model, name, edit, context) => {
  const folder = withConfig(model, `window-${model}-${name.replace(/\W+/g, '-')}`, edit)
  const out = `${folder}.gguf`
  const { notes } = await writeGguf(folder, out)
  const { typedMetadata } = await parseGguf(out)
  const arch = typedMetadata['general.architecture']!.value as string
  expect(typedMetadata[`${arch}.context_length`]?.value).toBe(context)
  const positions = readJson<Config>(join(folder, 'config.json')).max_position_embeddings
  expect(notes).toEqual(context < positions ? [windowNote(context, positions, arch)] : [])
  const stream = await ggufStream(folder)
  expect(stream.notes).toEqual(notes)
  await stream.cancel()
})

test('the CLI says a context cut to the window in one line on stderr, before what it wrote', async () => {
  const out = join(dir, 'cli-window.gguf')
  const run = await cli('convert', join(FIXTURES, 'mistral-swa'), out, '--dtype', 'f16')
  expect(run.code, run.stderr).toBe(0)
  expect(run.stderr).toBe(`${out}: ${windowNote(16, 256, 'llama')}\n`)
  expect(run.stdout).toMatch(new RegExp(`^${out}: wrote \\d+ tensors .*\\n$`))
})

/** Whether a token is one of SentencePiece's byte tokens, <0x00> to <0xFF>. */
const isByteToken = (content: string) => /^<0x[0-9A-F]{2}>$/.test(content)

// tokenizers' BpeTrainer, given the byte tokens as special tokens, lists them among tokenizer.json's special added
// tokens (and tokenizer_config.json's added_tokens_decoder) as well as in the vocabulary; transformers' conversion of
// a tokenizer.model lists them in the vocabulary only. llama.cpp's detokenizer gives back the bytes of BYTE (6) only.
test.each(['among the special added tokens too', 'in the vocabulary only'])('<0xXX> tokens listed %s: typed BYTE, 6', async (form) => {
  const folder = modelCopy('mistral-swa', `bytes-${form.replace(/\W+/g, '-')}`, (f) => {
    const tokenizer = readJson<Tokenizer>(join(f, 'tokenizer.json'))
    expect(tokenizer.added_tokens.filter((t) => t.special && isByteToken(t.content))).toHaveLength(256)
    if (form === 'among the special added tokens too') return
    tokenizer.added_tokens = tokenizer.added_tokens.filter((t) => !isByteToken(t.content))
    writeFileSync(join(f, 'tokenizer.json'), JSON.stringify(tokenizer))
    const config = readJson<{ added_tokens_decoder: Record<string, { content: string }> }>(join(f, 'tokenizer_config.json'))
    for (const [id, t] of Object.entries(config.added_tokens_decoder)) if (isByteToken(t.content)) delete config.added_tokens_decoder[id]
    writeFileSync(join(f, 'tokenizer_config.json'), JSON.stringify(config))
  })
  const out = join(dir, 'bytes.gguf')
  await writeGguf(folder, out)
  const { typedMetadata } = await parseGguf(out)
  const tokens = typedMetadata['tokenizer.ggml.tokens']!.value as string[]
  const types = typedMetadata['tokenizer.ggml.token_type']!.value as number[]
  // As the vocabulary lists them, <unk>, <s> and </s> CONTROL (special added tokens), the bytes BYTE.
  const { model, added_tokens } = readJson<Tokenizer>(join(FIXTURES, 'mistral-swa', 'tokenizer.json'))
  const special = new Set(added_tokens.filter((t) => t.special && !isByteToken(t.content)).map((t) => t.content))
  const expected = Object.entries(model.vocab).map(([content, id]) => [id, content, isByteToken(content) ? 6 : special.has(content) ? 3 : 1] as const)
  expect(expected.filter(([, , type]) => type === 6)).toHaveLength(256)
  for (const [id, content, type] of expected) expect([tokens[id], types[id]], `id ${id}`).toEqual([content, type])
})

test('a tokenizer.model whose byte pieces tokenizer_config.json also lists as special added tokens: still BYTE', async () => {
  const base = join(dir, 'spm-base.gguf')
  await writeGguf(join(FIXTURES, 'llama2-spm'), base)
  const { typedMetadata: before } = await parseGguf(base)
  const tokens = before['tokenizer.ggml.tokens']!.value as string[]
  const bytes = tokens.flatMap((content, id) => (isByteToken(content) ? [id] : []))
  expect(bytes).toHaveLength(256)
  expect(new Set(bytes.map((id) => (before['tokenizer.ggml.token_type']!.value as number[])[id]))).toEqual(new Set([6]))
  const folder = modelCopy('llama2-spm', 'spm-bytes-special', (f) => {
    const config = readJson<{ added_tokens_decoder: Record<string, unknown> }>(join(f, 'tokenizer_config.json'))
    for (const id of bytes)
      config.added_tokens_decoder[id] = { content: tokens[id], special: true, lstrip: false, rstrip: false, normalized: false, single_word: false }
    writeFileSync(join(f, 'tokenizer_config.json'), JSON.stringify(config))
  })
  const out = join(dir, 'spm-bytes-special.gguf')
  await writeGguf(folder, out)
  expectSameBytes(readFileSync(out), readFileSync(base), 'the GGUF with the byte pieces listed as special added tokens')
})

test('GPT-2 with its tensors named as the Hub’s gpt2 names them (without transformer.) gives the same tensors', async () => {
  // The Hub's openai-community/gpt2 was saved from GPT2Model: h.0.attn.c_attn.weight, wte.weight, ...
  const folder = modelCopy('gpt2', 'gpt2-hub-names', (f) => {
    const tensors = Object.fromEntries(
      [...sourceTensors(f)].map(([name, t]) => [name.replace(/^transformer\./, ''), { dtype: t.dtype as 'F16', shape: t.shape, data: t.bytes }]),
    )
    writeFileSync(join(f, 'model.safetensors'), serialize(tensors))
  })
  const [ours, hub] = await Promise.all(
    [join(FIXTURES, 'gpt2'), folder].map(async (input, i) => {
      const out = join(dir, `gpt2-names-${i}.gguf`)
      await writeGguf(input, out)
      return new Map((await ggufTensors(out)).map((t) => [t.name, t.bytes]))
    }),
  )
  expect([...hub.keys()].sort()).toEqual([...ours.keys()].sort())
  for (const [name, bytes] of ours) expectSameBytes(hub.get(name)!, bytes, name)
})

const SUPPORTED_ARCHITECTURES = [
  'LlamaForCausalLM',
  'MistralForCausalLM',
  'MixtralForCausalLM',
  'Qwen2ForCausalLM',
  'Qwen3ForCausalLM',
  'Qwen3MoeForCausalLM',
  'Gemma2ForCausalLM',
  'Gemma3ForCausalLM',
  'Phi3ForCausalLM',
  'GPT2LMHeadModel',
  'SmolLM3ForCausalLM',
  'GraniteForCausalLM',
  'Olmo2ForCausalLM',
  'GPTNeoXForCausalLM',
  'PhiForCausalLM',
  'StableLmForCausalLM',
  'FalconForCausalLM',
  'CohereForCausalLM',
  'Qwen2MoeForCausalLM',
  'DeepseekV2ForCausalLM',
  'DeepseekV3ForCausalLM',
  'GptOssForCausalLM',
  'Llama4ForCausalLM',
]

describe('errors', () => {
  test('another architecture: UnsupportedConversion naming it and the supported ones; the CLI exits 1 and writes nothing', async () => {
    const folder = modelCopy('qwen2', 'mamba-arch', (f) => {
      const config = readJson<Config>(join(f, 'config.json'))
      config.architectures = ['MambaForCausalLM']
      writeFileSync(join(f, 'config.json'), JSON.stringify(config))
    })
    const error = await expectError(() => ggufStream(folder), 'UnsupportedConversion')
    expect(error.message).toContain('MambaForCausalLM')
    // The architectures the DESIGN and docs/gguf.md promise.
    for (const supported of SUPPORTED_ARCHITECTURES) expect(error.message).toContain(supported)
    const out = join(dir, 'mamba.gguf')
    const run = await cli('convert', folder, out, '--dtype', 'F16')
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('MambaForCausalLM')
    expect(run.stderr.trim().split('\n')).toHaveLength(1)
    expect(() => readFileSync(out)).toThrow(/ENOENT/)
  })

  test('a RoPE type llama.cpp does not implement for the architecture: UnsupportedConversion naming it and those it takes; the CLI says so in one line', async () => {
    const dynamic = withConfig('llama-gqa', 'rope-dynamic', (c) => {
      c.rope_parameters = { rope_type: 'dynamic', factor: 2, rope_theta: 10000 }
    })
    const error = await expectError(() => ggufStream(dynamic), 'UnsupportedConversion')
    expect(error.message).toBe('config.json: RoPE type "dynamic" is not supported for GGUF architecture llama, which takes default, linear, yarn, llama3')
    const run = await cli('convert', dynamic, join(dir, 'dynamic.gguf'))
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(`${dynamic}: UnsupportedConversion: ${error.message}\n`)
    // Llama 3's scaling is a tensor only llama.cpp's llama reads; Qwen3 has no such tensor.
    const qwen = withConfig('qwen3', 'rope-llama3-qwen3', (c) => {
      c.rope_scaling = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 }
    })
    expect((await expectError(() => ggufStream(qwen), 'UnsupportedConversion')).message).toContain('"llama3" is not supported for GGUF architecture qwen3')
  })

  test('what llama.cpp cannot run as transformers does: Qwen3-MoE without renormalized expert weights, Gemma layers global where llama.cpp makes them local', async () => {
    const qwen = withConfig('qwen3moe', 'no-norm-topk', (c) => {
      c.norm_topk_prob = false
    })
    expect((await expectError(() => ggufStream(qwen), 'UnsupportedConversion')).message).toContain('norm_topk_prob false')
    const gemma = withConfig('gemma2', 'all-global', (c) => {
      c.layer_types = ['full_attention', 'full_attention']
    })
    expect((await expectError(() => ggufStream(gemma), 'UnsupportedConversion')).message).toContain('every 2th layer global')
  })

  test('experts that do not match config.json: TensorNotFound for a missing one, UnsupportedConversion for one too many, each named', async () => {
    const five = withConfig('mixtral', 'five-experts', (c) => {
      c.num_local_experts = 5
    })
    expect((await expectError(() => ggufStream(five), 'TensorNotFound')).message).toMatch(
      /^blk\.\d+\.ffn_\w+_exps\.weight: the model has no tensor for expert 4 of the 5/,
    )
    const three = withConfig('mixtral', 'three-experts', (c) => {
      c.num_local_experts = 3
    })
    expect((await expectError(() => ggufStream(three), 'UnsupportedConversion')).message).toMatch(/experts\.3\.w\d\.weight": config\.json has 3 experts$/)
  })

  test('Phi-3 longrope factors of the wrong length: InvalidHeaderDeserialization naming them', async () => {
    const phi = withConfig('phi3', 'short-factors', (c) => {
      ;(c.rope_scaling as { long_factor: number[] }).long_factor.pop()
    })
    expect((await expectError(() => ggufStream(phi), 'InvalidHeaderDeserialization')).message).toBe(
      "config.json: long_factor must be 8 numbers for phi3's 16 rotated dimensions",
    )
  })

  test('a tokenizer.model that is not a SentencePiece model: InvalidHeaderDeserialization naming it; neither tokenizer file: Io naming tokenizer.json', async () => {
    const garbled = modelCopy('llama2-spm', 'garbled-spm', (f) => writeFileSync(join(f, 'tokenizer.model'), Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f])))
    expect((await expectError(() => ggufStream(garbled), 'InvalidHeaderDeserialization')).message).toContain('tokenizer.model')
    const none = modelCopy('llama2-spm', 'no-tokenizer', (f) => rmSync(join(f, 'tokenizer.model')))
    expect((await expectError(() => ggufStream(none), 'Io')).message).toContain('tokenizer.json is missing')
  })

  test('a missing tokenizer.json or config.json: Io naming the file', async () => {
    for (const name of ['tokenizer.json', 'config.json']) {
      const folder = modelCopy('mistral', `no-${name}`, (f) => rmSync(join(f, name)))
      const error = await expectError(() => ggufStream(folder), 'Io')
      expect(error.message).toContain(name)
    }
  })

  test('the CLI names the input, not the output, when the model or its config.json is missing', async () => {
    const out = join(dir, 'never.gguf')
    const nowhere = join(dir, 'no-such-model')
    const missing = await cli('convert', nowhere, out)
    expect(missing.code).toBe(1)
    // Named once: the line begins with it.
    expect(missing.stderr).toBe(`${nowhere}: Io: cannot open: no such file or directory (ENOENT)\n`)
    const folder = modelCopy('qwen2', 'cli-no-config', (f) => rmSync(join(f, 'config.json')))
    const noConfig = await cli('convert', folder, out)
    expect(noConfig.code).toBe(1)
    expect(noConfig.stderr).toBe(`${folder}: Io: ${join(folder, 'config.json')} is missing, and a GGUF needs it\n`)
  })

  test('a tensor that maps to no GGUF name: UnsupportedConversion naming it, as llama.cpp fails', async () => {
    const folder = modelCopy('mistral', 'extra-tensor', (f) => {
      const bytes = readFileSync(join(f, 'model.safetensors'))
      const n = Number(bytes.readBigUInt64LE(0))
      const header = JSON.parse(bytes.subarray(8, 8 + n).toString())
      const end = Math.max(
        ...Object.entries<Entry>(header)
          .filter(([k]) => k !== '__metadata__')
          .map(([, t]) => t.data_offsets[1]),
      )
      header['model.layers.0.self_attn.extra.weight'] = { dtype: 'BF16', shape: [2], data_offsets: [end, end + 4] }
      let json = JSON.stringify(header)
      while (json.length % 8) json += ' '
      const head = Buffer.alloc(8)
      head.writeBigUInt64LE(BigInt(json.length))
      writeFileSync(join(f, 'model.safetensors'), Buffer.concat([head, Buffer.from(json), bytes.subarray(8 + n), Buffer.alloc(4)]))
    })
    const error = await expectError(() => ggufStream(folder), 'UnsupportedConversion')
    expect(error.message).toContain('"model.layers.0.self_attn.extra.weight"')
  })

  test('a split regex llama.cpp does not implement: UnsupportedConversion naming it', async () => {
    const error = await expectError(() => withTokenizer('pre-digits', SPLIT_THEN_BYTES(String.raw`\\p{N}{1,2}| ?\\p{L}+`)), 'UnsupportedConversion')
    expect(error.message).toContain(String.raw`\\p{N}{1,2}`)
  })

  test('a pre-tokenizer llama.cpp does not implement: UnsupportedConversion naming it, not a guess', async () => {
    const folder = modelCopy('qwen2', 'metaspace', (f) => {
      const tokenizer = readJson<Tokenizer>(join(f, 'tokenizer.json'))
      tokenizer.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false }
      writeFileSync(join(f, 'tokenizer.json'), JSON.stringify(tokenizer))
    })
    const error = await expectError(() => ggufStream(folder), 'UnsupportedConversion')
    expect(error.message).toContain('Metaspace')
  })

  test('the CLI: --max-shard-size with a .gguf output is bad usage (exit 2); a dtype it does not write is bad usage', async () => {
    const folder = join(FIXTURES, 'mistral')
    const sharded = await cli('convert', folder, join(dir, 'x.gguf'), '--max-shard-size', '1GB')
    expect(sharded.code).toBe(2)
    expect(sharded.stderr).toContain('--max-shard-size')
    const bad = await cli('convert', folder, join(dir, 'x.gguf'), '--dtype', 'IQ2_XXS')
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('Q4_K_M')
  })
})

test('the CLI: convert <folder> <out.gguf> --dtype bf16 writes the file and says what it wrote; --workers 0 the same', async () => {
  const out = join(dir, 'cli-llama.gguf')
  const run = await cli('convert', join(FIXTURES, 'llama-gqa'), out, '--dtype', 'bf16')
  expect(run.stderr).toBe('')
  expect(run.code).toBe(0)
  const { tensorInfos } = await parseGguf(out)
  const types: Record<number, number> = {}
  for (const t of tensorInfos) types[t.dtype] = (types[t.dtype] ?? 0) + 1
  expect(run.stdout).toMatch(
    new RegExp(
      `^${out}: wrote ${tensorInfos.length} tensors \\(${types[GGMLQuantizationType.BF16]} BF16, ${types[GGMLQuantizationType.F32]} F32\\), ${readFileSync(out).length.toLocaleString('en-US')} bytes, [0-9.]+ s\\n$`,
    ),
  )
  const here = join(dir, 'cli-llama-here.gguf')
  const calling = await cli('convert', join(FIXTURES, 'llama-gqa'), here, '--dtype', 'bf16', '--workers', '0')
  expect(calling, calling.stderr).toMatchObject({ code: 0, stderr: '' })
  expectSameBytes(readFileSync(here), readFileSync(out), '--workers 0 against the default')
})

describe('over HTTP, from the index URL', () => {
  const folder = join(FIXTURES, 'llama-gqa')
  const NAMES = [
    'config.json',
    'tokenizer.json',
    'tokenizer_config.json',
    'model.safetensors.index.json',
    'model-00001-of-00002.safetensors',
    'model-00002-of-00002.safetensors',
  ]
  const served = (names: string[], fault?: RangeOptions['fault'], bandwidth?: RangeOptions['bandwidth']) =>
    serveFiles(Object.fromEntries(names.map((name) => [`llama/${name}`, join(folder, name)])), { fault, bandwidth })

  test('the same bytes as from the folder, through ggufStream and the CLI', async () => {
    const local = join(dir, 'http-local.gguf')
    await writeGguf(folder, local, { dtype: 'Q8_0' })
    const server = await served(NAMES)
    try {
      const index = `${server.url}llama/model.safetensors.index.json`
      const stream = await ggufStream(index, { dtype: 'Q8_0' })
      expectSameBytes(new Uint8Array(await new Response(stream).arrayBuffer()), readFileSync(local), 'over HTTP against the folder')
      const out = join(dir, 'http-cli.gguf')
      const run = await cli('convert', index, out, '--dtype', 'q8_0')
      expect(run.code, run.stderr).toBe(0)
      expectSameBytes(readFileSync(out), readFileSync(local), 'the CLI over HTTP against the folder')
    } finally {
      await server.close()
    }
  })

  test('the tensors are read ahead, across their ends and the shards’: requests overlap, where one tensor at a time left one open', async () => {
    const local = join(dir, 'http-ahead.gguf')
    await writeGguf(folder, local, { dtype: 'F16' })
    // 1 MB/s a connection: each tensor's request lasts long enough for the next to start beside it.
    const server = await served(NAMES, undefined, { perConnection: 1e6 })
    try {
      // Once the headers are read: only tensor data is left.
      const stream = await ggufStream(`${server.url}llama/model.safetensors.index.json`, { dtype: 'F16' })
      await server.settled()
      const { result, most } = await mostOpen(server, async () => new Uint8Array(await new Response(stream).arrayBuffer()))
      expectSameBytes(result, readFileSync(local), 'read ahead over HTTP against the folder')
      expect(most, 'requests open at once').toBeGreaterThanOrEqual(2)
    } finally {
      await server.close()
    }
  })

  test('a 404 for tokenizer_config.json is a model without one; for tokenizer.json, an Io error naming its URL', async () => {
    const server = await served(NAMES.filter((name) => name !== 'tokenizer_config.json'))
    try {
      const out = join(dir, 'no-tokenizer-config.gguf')
      const run = await cli('convert', `${server.url}llama/model.safetensors.index.json`, out, '--dtype', 'F16')
      expect(run.code, run.stderr).toBe(0)
      const { typedMetadata } = await parseGguf(out)
      // Without tokenizer_config.json: no chat template, BOS and EOS from config.json's ids, add_bos_token from the post-processor's template.
      const config = readJson<Config>(join(folder, 'config.json'))
      expect(typedMetadata['tokenizer.chat_template']).toBeUndefined()
      expect(typedMetadata['tokenizer.ggml.bos_token_id']?.value).toBe(config.bos_token_id)
      expect(typedMetadata['tokenizer.ggml.eos_token_id']?.value).toBe(config.eos_token_id)
      // gguf-py: the single template [<s>, A] starts with a special token, the BOS, and ends with none.
      expect(readJson<{ post_processor: unknown }>(join(folder, 'tokenizer.json')).post_processor).toMatchObject({
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<s>' } }, { Sequence: { id: 'A' } }],
      })
      expect(typedMetadata['tokenizer.ggml.add_bos_token']?.value).toBe(true)
      expect(typedMetadata['tokenizer.ggml.add_eos_token']).toBeUndefined()
    } finally {
      await server.close()
    }
    const without = await served(NAMES.filter((name) => name !== 'tokenizer.json'))
    try {
      const error = await expectError(() => ggufStream(`${without.url}llama/model.safetensors.index.json`), 'Io')
      expect(error.message).toContain(`${without.url}llama/tokenizer.json`)
    } finally {
      await without.close()
    }
  })

  test('a shard failing part-way: the CLI exits 1 and the earlier file at the target stays as it was', async () => {
    const server = await served(NAMES, (_n, log) =>
      log.path.endsWith('-00002-of-00002.safetensors') && log.range !== undefined && !log.range.startsWith('bytes=0-')
        ? { kind: 'status', status: 403 }
        : undefined,
    )
    try {
      const out = join(dir, 'kept.gguf')
      writeFileSync(out, 'the earlier file')
      const run = await cli('convert', `${server.url}llama/model.safetensors.index.json`, out, '--dtype', 'F16')
      expect(run.code).toBe(1)
      expect(run.stderr).toContain('403')
      expect(readFileSync(out, 'utf8')).toBe('the earlier file')
    } finally {
      await server.close()
    }
  })
})

test('onProgress: one series over the source tensor bytes, ending at loaded === total; a signal aborts the stream with Aborted', async () => {
  const folder = join(FIXTURES, 'llama-gqa')
  const total = [...sourceTensors(folder).values()].reduce((sum, t) => sum + t.bytes.length, 0)
  const events: Array<{ loaded: number; total: number }> = []
  await new Response(await ggufStream(folder, { onProgress: (p) => events.push(p) })).arrayBuffer()
  expect(new Set(events.map((e) => e.total))).toEqual(new Set([total]))
  expect(events.at(-1)!.loaded).toBe(total)
  for (let i = 1; i < events.length; i++) expect(events[i].loaded).toBeGreaterThanOrEqual(events[i - 1].loaded)

  const controller = new AbortController()
  const reader = (await ggufStream(folder, { signal: controller.signal })).getReader()
  await reader.read()
  controller.abort()
  await expectError(() => reader.read(), 'Aborted')
})
