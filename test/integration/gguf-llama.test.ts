// The GGUF files of `convert <model folder> <out.gguf> --dtype D`, judged by llama.cpp itself. Every model of
// test/fixtures/gguf/ (made by scripts/make-gguf-models.py, with transformers' float32 logits and tokenization
// beside it) is converted once to each dtype by the CLI (node dist/cli.js: run `npm run build` first) and loaded
// once in llama.cpp (test/llama.ts); its next-token probabilities must match softmax(reference logits) within the
// dtype's tolerance, measured and explained in docs/gguf.md "How it is tested", and its tokenization of a sentence
// must be the Hugging Face tokenizer's. Negative controls show that the comparison catches a converter that leaves
// out any one of its transformations: each is the F16 GGUF with that step undone (test/gguf-patch.ts), which must
// fail clearly.
//
// GGUF_DIR=<folder> judges <folder>/<model>.<dtype>.gguf instead of the CLI's output: the files of
// scripts/gguf-reference.py (gguf-py), with which the tolerances were measured; after its --cases N, on the
// sequences of <folder>/<model>.cases.json instead of reference.json's.
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { KeyValue } from '../../src/gguf/format.ts'
import { type GgufPatch, type GgufTensor, patchGguf } from '../gguf-patch.ts'
import { type LlamaModel, llamaUnsupported, loadLlamaModel, startLlamaCpp } from '../llama.ts'
import { CLI, cli } from '../run-cli.ts'
import { tempDir } from '../writer-reference.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/gguf/', import.meta.url))
// Every folder with a reference.json is a model (q8_0/ holds the Q8_0 kernel's vectors).
const MODELS = readdirSync(FIXTURES)
  .filter((name) => existsSync(join(FIXTURES, name, 'reference.json')))
  .sort()
const DTYPES = ['F32', 'F16', 'BF16', 'Q8_0'] as const
type Dtype = (typeof DTYPES)[number]

/**
 * How far llama.cpp may be from the transformers reference, per dtype: `probability`, the largest
 * |p_llama - p_reference| over the vocabulary; `logit`, the largest move of one logit relative to another (the
 * range over the vocabulary of log p_llama - log p_reference, which no common shift of the logits changes).
 * About twice the largest measured over 180 sequences of these models (F32: the 1e-4); docs/gguf.md
 * "How it is tested" has the figures and why.
 */
const TOLERANCE: Record<Dtype, { probability: number; logit: number }> = {
  F32: { probability: 1e-4, logit: 1e-4 },
  F16: { probability: 3e-3, logit: 5e-2 },
  BF16: { probability: 2e-2, logit: 0.5 },
  Q8_0: { probability: 6e-2, logit: 0.75 },
}
/**
 * The tolerance of a model in a dtype. llama.cpp's CPU GELU looks its input up in a table of F16 values
 * (ggml-cpu's GGML_GELU_FP16), so an F32 model with GELU (Gemma's, GPT-2's, GPT-NeoX's, Phi-2's, Falcon's) is
 * rounded through F16 there: it is judged by F16's tolerance (measured, docs/gguf.md: up to 1.4e-4 in probability,
 * 7.3e-3 in logit). gpt-oss's experts stay MXFP4 in every file, and llama.cpp multiplies MXFP4 weights by
 * activations rounded to Q8_0 blocks: its files are judged by Q8_0's tolerance whatever their dtype.
 */
function toleranceOf(model: string, dtype: Dtype) {
  const config = JSON.parse(readFileSync(join(FIXTURES, model, 'config.json'), 'utf8'))
  if (config.quantization_config?.quant_method === 'mxfp4') return TOLERANCE.Q8_0
  const activation = String(config.hidden_activation ?? config.hidden_act ?? config.activation_function ?? config.activation)
  return TOLERANCE[dtype === 'F32' && activation.startsWith('gelu') ? 'F16' : dtype]
}
/** A negative control's GGUF is off by at least this in the logit measure somewhere: 20 times F16's tolerance. */
const CLEARLY_WRONG_LOGIT = 1
/** node-llama-cpp's first install downloads about 85 MB from npm (8 s here). */
const INSTALL_TIMEOUT = 10 * 60_000

interface Reference {
  cases: Array<{ ids: number[]; logits: number[] }>
  sentence: string
  sentence_ids: number[]
  sentence_ids_without_special: number[]
  /** The Hugging Face tokenizer's decode of sentence_ids_without_special (the models of the third set). */
  sentence_decoded?: string
  /** Text the tokenizer spells partly in byte tokens (<0xXX>), and its ids. */
  byte_text?: string
  byte_text_ids?: number[]
}
const reference = (model: string): Reference => JSON.parse(readFileSync(join(FIXTURES, model, 'reference.json'), 'utf8'))

/** softmax in double precision. */
function softmax(logits: readonly number[]): Float64Array {
  const max = Math.max(...logits)
  const out = Float64Array.from(logits, (l) => Math.exp(l - max))
  const sum = out.reduce((a, b) => a + b, 0)
  return out.map((e) => e / sum)
}

const argmax = (values: ArrayLike<number>): number => {
  let best = 0
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i
  return best
}

/** How far llama.cpp's distribution is from the reference's, in the two measures of TOLERANCE. */
function distance(probabilities: Float64Array, logits: readonly number[]): { probability: number; logit: number } {
  const expected = softmax(logits)
  let probability = 0
  let low = Infinity
  let high = -Infinity
  for (let i = 0; i < expected.length; i++) {
    probability = Math.max(probability, Math.abs(probabilities[i] - expected[i]))
    const moved = Math.log(probabilities[i]) - Math.log(expected[i])
    low = Math.min(low, moved)
    high = Math.max(high, moved)
  }
  return { probability, logit: high - low }
}

/** The reference's top logit minus its second. */
function topGap(logits: readonly number[]): number {
  const sorted = [...logits].sort((a, b) => b - a)
  return sorted[0] - sorted[1]
}

const OUT = tempDir('st-gguf-llama-')
afterAll(() => rmSync(OUT, { recursive: true, force: true }))

const converted = new Map<string, Promise<string>>()
/** The GGUF of `model` in `dtype`: converted once by the CLI, or GGUF_DIR's file. */
function ggufOf(model: string, dtype: Dtype): Promise<string> {
  const key = `${model}.${dtype}`
  let path = converted.get(key)
  if (!path) {
    path = (async () => {
      if (process.env.GGUF_DIR) return join(process.env.GGUF_DIR, `${key}.gguf`)
      const out = join(OUT, `${key}.gguf`)
      const run = await cli('convert', join(FIXTURES, model), out, '--dtype', dtype)
      if (run.code !== 0) throw new Error(`convert ${model} --dtype ${dtype} exited ${run.code}: ${run.stderr}`)
      return out
    })()
    converted.set(key, path)
  }
  return path
}

/**
 * What llama.cpp makes of a GGUF of `model`: the largest distances over the cases it takes (those no longer than its
 * context), each one's argmaxes, the lengths of those it does not take, and its tokenization of the sentence.
 */
interface Judgement {
  worst: { probability: number; logit: number }
  argmaxes: Array<{ ids: number[]; gap: number; expected: number; got: number }>
  /** The lengths of the cases longer than llama.cpp's context, which it does not take. */
  beyondContext: number[]
  /** llama.cpp's ids for the reference's byte_text, and its text for the reference's ids of it. */
  byteText?: { tokens: number[]; text: string }
  /** llama.cpp's ids for the sentence as plain text, and with the BOS its add_bos_token says to put first. */
  tokens: number[]
  withBos: number[]
  /** llama.cpp's text of the Hugging Face tokenizer's ids for the sentence. */
  decoded: string
}

/** Loads `path` in llama.cpp once, and judges it against `model`'s reference. */
async function judge(path: string, model: string): Promise<Judgement> {
  const llama: LlamaModel = await loadLlamaModel(path)
  try {
    const worst = { probability: 0, logit: 0 }
    const argmaxes: Judgement['argmaxes'] = []
    const beyondContext: number[] = []
    const more = process.env.GGUF_DIR && join(process.env.GGUF_DIR, `${model}.cases.json`)
    const { cases } = more && existsSync(more) ? (JSON.parse(readFileSync(more, 'utf8')) as Pick<Reference, 'cases'>) : reference(model)
    for (const { ids, logits } of cases) {
      if (ids.length > llama.contextSize) {
        beyondContext.push(ids.length)
        continue
      }
      const probabilities = await llama.nextTokenProbabilities(ids)
      expect(probabilities.length, `${model}: llama.cpp's vocabulary`).toBe(logits.length)
      const d = distance(probabilities, logits)
      worst.probability = Math.max(worst.probability, d.probability)
      worst.logit = Math.max(worst.logit, d.logit)
      argmaxes.push({ ids, gap: topGap(logits), expected: argmax(logits), got: argmax(probabilities) })
    }
    const { sentence, sentence_ids_without_special, byte_text, byte_text_ids } = reference(model)
    const tokens = llama.tokenize(sentence)
    const withBos = llama.addsBos && llama.bos !== null ? [llama.bos, ...tokens] : tokens
    const byteText = byte_text === undefined ? undefined : { tokens: llama.tokenize(byte_text), text: llama.detokenize(byte_text_ids!) }
    return { worst, argmaxes, beyondContext, byteText, tokens, withBos, decoded: llama.detokenize(sentence_ids_without_special) }
  } finally {
    await llama.dispose()
  }
}

const judged = new Map<string, Promise<Judgement>>()
/** The judgement of the CLI's GGUF of `model` in `dtype`: one conversion, one load, whichever tests ask. */
function judgementOf(model: string, dtype: Dtype): Promise<Judgement> {
  const key = `${model}.${dtype}`
  if (!judged.has(key))
    judged.set(
      key,
      ggufOf(model, dtype).then((path) => judge(path, model)),
    )
  return judged.get(key)!
}

/** A negative control: the CLI's F16 GGUF of `model` with one step of the conversion undone, which must fail. */
interface Control {
  model: string
  /** The step undone. */
  undone: string
  patch: GgufPatch
  /**
   * What shows it: the probabilities (off clearly), the tokenization of the sentence (not the Hugging Face one), or
   * the text of the byte tokens (not the Hugging Face one).
   */
  judged: 'probabilities' | 'tokens' | 'bytes'
}

const configOf = (model: string) => JSON.parse(readFileSync(join(FIXTURES, model, 'config.json'), 'utf8'))

/** Data of `count` equal slices (a stack's experts) with the slices in reverse order. */
function reversedSlices(bytes: Uint8Array, count: number): Uint8Array {
  const size = bytes.length / count
  const out = new Uint8Array(bytes.length)
  for (let i = 0; i < count; i++) out.set(bytes.subarray(i * size, (i + 1) * size), (count - 1 - i) * size)
  return out
}

/** A square F16 matrix transposed. */
function transposedF16({ bytes, dims: [n] }: GgufTensor): Uint8Array {
  const from = new Uint16Array(bytes.slice().buffer)
  const to = new Uint16Array(from.length)
  for (let row = 0; row < n; row++) for (let column = 0; column < n; column++) to[column * n + row] = from[row * n + column]
  return new Uint8Array(to.buffer)
}

/**
 * Rows back in transformers' order, undoing llama.cpp's permutation, which interleaves each head's two halves (row
 * h*d + 2i + s holds the source's row h*d + s*d/2 + i).
 */
function unpermuted({ bytes, dims }: GgufTensor, heads: number): Uint8Array {
  const rows = dims[1]
  const rowBytes = bytes.length / rows
  const headDim = rows / heads
  const out = new Uint8Array(bytes.length)
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < headDim / 2; i++)
      for (let s = 0; s < 2; s++) {
        const permuted = h * headDim + 2 * i + s
        const original = h * headDim + s * (headDim / 2) + i
        out.set(bytes.subarray(permuted * rowBytes, (permuted + 1) * rowBytes), original * rowBytes)
      }
  return out
}

/** An F32 norm's values minus 1: Gemma's w, where llama.cpp needs 1 + w. */
const minusOne = ({ bytes }: GgufTensor) => new Uint8Array(new Float32Array(bytes.slice().buffer).map((v) => v - 1).buffer)

const dropKeys = (...keys: string[]): GgufPatch => ({ dropKeys: keys })
const scaling = (arch: string, ...keys: string[]) => dropKeys(...keys.map((key) => `${arch}.rope.scaling.${key}`))
/** The tensors whose name `matches` changed by `change`. */
const changed = (matches: RegExp, change: (t: GgufTensor) => Uint8Array): GgufPatch => ({ tensor: (t) => (matches.test(t.name) ? change(t) : undefined) })
const expertsReversed = (model: string) => {
  const config = configOf(model)
  return changed(/_exps\.weight$/, (t) => reversedSlices(t.bytes, config.num_local_experts ?? config.num_experts ?? config.n_routed_experts))
}
const swapped = (a: string, b: string): GgufPatch => ({ renameTensors: { [a]: b, [b]: a } })

/** A tensor's rows (a 1-D tensor's values) put back in another order: row r of the result is row from(r) of the tensor. */
function rowsFrom({ bytes, dims }: GgufTensor, from: (row: number) => number): Uint8Array {
  const rows = dims[1] ?? dims[0]
  const rowBytes = bytes.length / rows
  const out = new Uint8Array(bytes.length)
  for (let row = 0; row < rows; row++) out.set(bytes.subarray(from(row) * rowBytes, (from(row) + 1) * rowBytes), row * rowBytes)
  return out
}

/** GPT-NeoX's fused QKV back in transformers' order, q, k and v of each head in turn, from llama.cpp's every q, every k, every v. */
function perHeadQkv(t: GgufTensor, heads: number): Uint8Array {
  const size = (t.dims[1] ?? t.dims[0]) / heads / 3
  return rowsFrom(t, (row) => {
    const [head, part, i] = [Math.floor(row / (3 * size)), Math.floor(row / size) % 3, row % size]
    return (part * heads + head) * size + i
  })
}

/** Falcon's fused QKV back in transformers' order, each key-value group's q heads then its k and v, from llama.cpp's every q, every k, every v. */
function groupedQkv(t: GgufTensor, heads: number, groups: number): Uint8Array {
  const perGroup = heads / groups
  const size = (t.dims[1] ?? t.dims[0]) / (heads + 2 * groups)
  return rowsFrom(t, (row) => {
    const group = Math.floor(row / ((perGroup + 2) * size))
    const within = row % ((perGroup + 2) * size)
    if (within < perGroup * size) return group * perGroup * size + within
    const kv = within < (perGroup + 1) * size ? 0 : 1
    return (heads + kv * groups + group) * size + (within - (perGroup + kv) * size)
  })
}
const setKey = (...kv: KeyValue): GgufPatch => ({ setKeys: [kv] })

const CONTROLS: Control[] = [
  { model: 'llama3', undone: 'rope_freqs (Llama 3 RoPE) left out', patch: { dropTensors: ['rope_freqs.weight'] } },
  { model: 'llama-yarn', undone: 'YaRN keys left out', patch: scaling('llama', 'type', 'factor', 'original_context_length') },
  {
    model: 'llama-yarn',
    undone: 'original_context_length from max_position_embeddings, not the rope dict',
    patch: setKey('llama.rope.scaling.original_context_length', 'u32', configOf('llama-yarn').max_position_embeddings),
  },
  { model: 'qwen3', undone: 'YaRN keys left out', patch: scaling('qwen3', 'type', 'factor', 'original_context_length') },
  { model: 'mistral-spm', undone: 'linear RoPE scaling left out', patch: scaling('llama', 'type', 'factor') },
  { model: 'mixtral', undone: 'experts stacked in reverse order', patch: expertsReversed('mixtral') },
  { model: 'qwen3moe', undone: 'experts stacked in reverse order', patch: expertsReversed('qwen3moe') },
  { model: 'gemma2', undone: 'norms without + 1', patch: changed(/_norm\.weight$/, minusOne) },
  { model: 'gemma2', undone: 'attention soft-capping left out', patch: dropKeys('gemma2.attn_logit_softcapping') },
  { model: 'gemma2', undone: 'final soft-capping left out', patch: dropKeys('gemma2.final_logit_softcapping') },
  { model: 'gemma2', undone: 'sliding window left out', patch: dropKeys('gemma2.attention.sliding_window') },
  { model: 'gemma3', undone: 'norms without + 1', patch: changed(/_norm\.weight$/, minusOne) },
  { model: 'gemma3', undone: 'q/k norms without + 1', patch: changed(/attn_[qk]_norm\.weight$/, minusOne) },
  { model: 'gemma3', undone: 'local layers’ RoPE base left out', patch: dropKeys('gemma3.rope.freq_base_swa') },
  { model: 'gemma3', undone: 'linear RoPE scaling left out', patch: scaling('gemma3', 'type', 'factor') },
  { model: 'gemma3', undone: 'sliding window left out', patch: dropKeys('gemma3.attention.sliding_window') },
  {
    model: 'phi3',
    undone: 'long and short RoPE factors swapped',
    patch: { renameTensors: { 'rope_factors_long.weight': 'rope_factors_short.weight', 'rope_factors_short.weight': 'rope_factors_long.weight' } },
  },
  { model: 'phi3', undone: 'longrope attention factor left out', patch: scaling('phi3', 'attn_factor') },
  { model: 'phi3', undone: 'original_context_length left out', patch: scaling('phi3', 'original_context_length') },
  {
    model: 'gpt2',
    undone: 'attn_output (Conv1D c_proj) not transposed',
    patch: changed(/attn_output\.weight$/, transposedF16),
  },
  { model: 'gptneox', undone: 'fused q/k/v left per head', patch: changed(/attn_qkv\./, (t) => perHeadQkv(t, configOf('gptneox').num_attention_heads)) },
  { model: 'gptneox', undone: 'use_parallel_residual false', patch: setKey('gptneox.use_parallel_residual', 'bool', false) },
  { model: 'falcon', undone: 'fused q/k/v left in key-value groups', patch: changed(/attn_qkv\./, (t) => groupedQkv(t, 4, 2)) },
  { model: 'phi2', undone: 'RoPE on every dimension of a head', patch: setKey('phi2.rope.dimension_count', 'u32', 16) },
  {
    model: 'stablelm',
    undone: 'per-head q and k norms stacked in reverse order',
    patch: changed(/attn_[qk]_norm\.weight$/, (t) => reversedSlices(t.bytes, t.dims[1])),
  },
  {
    model: 'olmo2',
    undone: 'norms after attention and after the FFN swapped',
    patch: swapped('blk.0.post_attention_norm.weight', 'blk.0.post_ffw_norm.weight'),
  },
  { model: 'granite', undone: 'residual_scale left out', patch: dropKeys('granite.residual_scale') },
  { model: 'granite', undone: 'attention.scale left out', patch: dropKeys('granite.attention.scale') },
  { model: 'granite', undone: 'embedding_scale left out', patch: dropKeys('granite.embedding_scale') },
  { model: 'command-r', undone: 'logit_scale left out', patch: dropKeys('command-r.logit_scale') },
  { model: 'qwen2moe', undone: 'experts stacked in reverse order', patch: expertsReversed('qwen2moe') },
  { model: 'deepseek-v2-lite', undone: 'experts stacked in reverse order', patch: expertsReversed('deepseek-v2-lite') },
  { model: 'deepseek-v3', undone: 'sigmoid gating left out (llama.cpp then takes softmax)', patch: dropKeys('deepseek2.expert_gating_func') },
  { model: 'deepseek-v3', undone: 'expert_weights_scale left out', patch: dropKeys('deepseek2.expert_weights_scale') },
  { model: 'gpt-oss', undone: 'gate and up experts swapped', patch: swapped('blk.1.ffn_gate_exps.weight', 'blk.1.ffn_up_exps.weight') },
  { model: 'llama4', undone: 'gate and up experts swapped', patch: swapped('blk.1.ffn_gate_exps.weight', 'blk.1.ffn_up_exps.weight') },
  // Past the window llama.cpp's llama attends farther back than transformers' Mistral: context_length is what stops it.
  { model: 'mistral-swa', undone: 'context_length max_position_embeddings, not the window', patch: setKey('llama.context_length', 'u32', 256) },
  {
    model: 'mistral-swa',
    undone: 'byte tokens typed CONTROL, as special added tokens',
    patch: setKey(
      'tokenizer.ggml.token_type',
      'i32[]',
      Int32Array.from({ length: 512 }, (_, id) => (id < 259 ? 3 : 1)),
    ),
    judged: 'bytes' as const,
  },
  ...['llama-gqa', 'mistral', 'llama3', 'llama-yarn', 'llama2-spm', 'mistral-spm', 'mixtral', 'smollm3', 'granite'].map((model) => {
    const { num_attention_heads, num_key_value_heads } = configOf(model)
    const patch = changed(/^blk\.\d+\.attn_[qk]\.weight$/, (t) => unpermuted(t, t.name.includes('attn_q') ? num_attention_heads : num_key_value_heads))
    return { model, undone: 'Q/K permutation undone', patch }
  }),
  ...[
    // llama.cpp's converter's scores, from tokenizer.json alone: llama.cpp then merges left to right.
    { model: 'mistral-spm', undone: 'every score -1000', patch: setKey('tokenizer.ggml.scores', 'f32[]', new Float32Array(512).fill(-1000)) },
    { model: 'llama2-spm', undone: 'every score 0', patch: setKey('tokenizer.ggml.scores', 'f32[]', new Float32Array(512)) },
    { model: 'gemma2', undone: 'add_space_prefix false left out', patch: dropKeys('tokenizer.ggml.add_space_prefix') },
    { model: 'phi3', undone: 'add_bos_token false left out', patch: dropKeys('tokenizer.ggml.add_bos_token') },
    { model: 'llama3', undone: 'pre-tokenizer gpt-2 for llama-bpe', patch: setKey('tokenizer.ggml.pre', 'string', 'gpt-2') },
    { model: 'qwen3', undone: 'pre-tokenizer llama-bpe for qwen2', patch: setKey('tokenizer.ggml.pre', 'string', 'llama-bpe') },
    { model: 'gpt2', undone: 'pre-tokenizer qwen2 for gpt-2', patch: setKey('tokenizer.ggml.pre', 'string', 'qwen2') },
  ].map((control) => ({ ...control, judged: 'tokens' as const })),
].map((control) => ({ judged: 'probabilities' as const, ...control }))

/**
 * The positions llama.cpp may take of a model: Mistral's sliding_window where it is shorter than its context (past it,
 * llama.cpp's llama graph would attend farther back than transformers), else the whole context (256 in the tests).
 */
function contextOf(model: string): number {
  const config = configOf(model)
  const window = config.architectures[0] === 'MistralForCausalLM' ? config.sliding_window : null
  return window !== null && window < config.max_position_embeddings ? window : config.max_position_embeddings
}

const measured: string[] = []
afterAll(() => {
  if (measured.length > 0) console.log(`llama.cpp against transformers (largest over each model's cases):\n${measured.join('\n')}`)
})

const unsupported = llamaUnsupported()
if (unsupported) console.log(`${unsupported}: skipping the llama.cpp tests`)

describe.skipIf(unsupported !== undefined)('llama.cpp runs the converted GGUF as transformers runs the model', () => {
  beforeAll(async () => {
    if (!process.env.GGUF_DIR && !existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`)
    await startLlamaCpp()
  }, INSTALL_TIMEOUT)

  describe.each(MODELS)('%s', (model) => {
    test.each(DTYPES)('%s: next-token probabilities within the tolerance, argmax kept where the top two logits are clearly apart', async (dtype) => {
      const { worst, argmaxes, beyondContext } = await judgementOf(model, dtype)
      // Every case up to the model's context is judged; llama.cpp's context stops it from taking one past it.
      const lengths = reference(model).cases.map(({ ids }) => ids.length)
      expect(beyondContext, `${model}: the cases llama.cpp does not take`).toEqual(lengths.filter((n) => n > contextOf(model)))
      const tolerance = toleranceOf(model, dtype)
      const kept = argmaxes.filter((a) => a.gap > tolerance.logit)
      measured.push(
        `${model} ${dtype}: |p - p_ref| ${worst.probability.toExponential(2)}, logit moves ${worst.logit.toExponential(2)}, argmax judged on ${kept.length} of ${argmaxes.length}`,
      )
      expect(worst.probability, `${model} ${dtype}: largest |p_llama - p_reference|`).toBeLessThanOrEqual(tolerance.probability)
      expect(worst.logit, `${model} ${dtype}: largest relative move of a logit`).toBeLessThanOrEqual(tolerance.logit)
      // The logits move relative to one another by at most the logit tolerance (asserted above), so a top two
      // further apart than that cannot swap: llama.cpp's most likely token must be the reference's.
      for (const a of kept) expect(a.got, `${model} ${dtype}: argmax after [${a.ids}] (top two ${a.gap.toFixed(3)} apart)`).toBe(a.expected)
    })

    test('llama.cpp tokenizes a plain sentence as the Hugging Face tokenizer does, and detokenizes it back', async () => {
      const { sentence_ids, sentence_ids_without_special, sentence_decoded } = reference(model)
      // From the F16 file's load (the tokenizer is the same in every dtype).
      const { tokens, withBos, decoded } = await judgementOf(model, 'F16')
      expect(tokens).toEqual(sentence_ids_without_special)
      // The special tokens the Hugging Face tokenizer adds: a BOS or nothing, as llama.cpp's add_bos_token says.
      expect(withBos).toEqual(sentence_ids)
      // The third set's reference.json has the Hugging Face tokenizer's own decode.
      if (sentence_decoded !== undefined) expect(decoded).toBe(sentence_decoded)
    })
  })

  // A model whose tokenizer spells a text in byte tokens (<0xXX>), with its tokenizer.json as it is (the byte tokens
  // among the special added tokens too) and with them in its vocabulary only (as transformers converts a
  // tokenizer.model): llama.cpp tokenizes the text as the Hugging Face tokenizer does, and gives it back.
  describe.skipIf(process.env.GGUF_DIR !== undefined).each(MODELS.filter((model) => reference(model).byte_text !== undefined))('%s, byte tokens', (model) => {
    test.each(['special added tokens too', 'vocabulary only'])('listed as %s: llama.cpp spells the text in them and gives it back', async (form) => {
      let out = await ggufOf(model, 'F16')
      if (form === 'vocabulary only') {
        const folder = join(OUT, `${model}-bytes-in-vocabulary`)
        cpSync(join(FIXTURES, model), folder, { recursive: true })
        const isByte = (content: string) => /^<0x[0-9A-F]{2}>$/.test(content)
        const tokenizer = JSON.parse(readFileSync(join(folder, 'tokenizer.json'), 'utf8'))
        tokenizer.added_tokens = tokenizer.added_tokens.filter((t: { content: string }) => !isByte(t.content))
        writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(tokenizer))
        const config = JSON.parse(readFileSync(join(folder, 'tokenizer_config.json'), 'utf8'))
        for (const [id, t] of Object.entries<{ content: string }>(config.added_tokens_decoder)) if (isByte(t.content)) delete config.added_tokens_decoder[id]
        writeFileSync(join(folder, 'tokenizer_config.json'), JSON.stringify(config))
        out = join(OUT, `${model}-bytes-in-vocabulary.gguf`)
        const run = await cli('convert', folder, out, '--dtype', 'F16')
        expect(run.code, run.stderr).toBe(0)
      }
      const { byte_text, byte_text_ids } = reference(model)
      const { byteText } = await judge(out, model)
      expect(byteText!.tokens).toEqual(byte_text_ids)
      expect(byteText!.text).toBe(byte_text)
    })
  })

  // The models that ship both tokenizer.model and tokenizer.json, converted from tokenizer.json alone: its byte-fallback
  // BPE, scored by merge rank, must tokenize as transformers does too.
  describe
    .skipIf(process.env.GGUF_DIR !== undefined)
    .each(MODELS.filter((model) => ['tokenizer.model', 'tokenizer.json'].every((f) => existsSync(join(FIXTURES, model, f)))))(
    '%s without tokenizer.model',
    (model) => {
      test('llama.cpp tokenizes a plain sentence as the Hugging Face tokenizer does', async () => {
        const folder = join(OUT, `${model}-json-only`)
        cpSync(join(FIXTURES, model), folder, { recursive: true })
        rmSync(join(folder, 'tokenizer.model'))
        const out = join(OUT, `${model}-json-only.gguf`)
        const run = await cli('convert', folder, out, '--dtype', 'F16')
        expect(run.code, run.stderr).toBe(0)
        const { sentence_ids, sentence_ids_without_special } = reference(model)
        const { tokens, withBos } = await judge(out, model)
        expect(tokens).toEqual(sentence_ids_without_special)
        expect(withBos).toEqual(sentence_ids)
      })
    },
  )

  describe.skipIf(process.env.GGUF_DIR !== undefined).each(CONTROLS)('negative control: $model, $undone', ({ model, undone, patch, judged: measure }) => {
    const what = {
      tokens: 'llama.cpp tokenizes the sentence otherwise',
      bytes: 'llama.cpp gives back another text',
      probabilities: 'the comparison fails clearly',
    }
    test(what[measure], async () => {
      const patched = join(OUT, `${model}.${CONTROLS.findIndex((c) => c.patch === patch)}.gguf`)
      await patchGguf(await ggufOf(model, 'F16'), patched, patch)
      const { worst, tokens, withBos, byteText } = await judge(patched, model)
      const { sentence_ids, sentence_ids_without_special, byte_text } = reference(model)
      if (measure === 'bytes') {
        expect(byteText!.text).not.toBe(byte_text)
        return
      }
      if (measure === 'tokens') {
        expect([tokens, withBos]).not.toEqual([sentence_ids_without_special, sentence_ids])
        return
      }
      measured.push(`${model} F16 with ${undone}: |p - p_ref| ${worst.probability.toExponential(2)}, logit moves ${worst.logit.toExponential(2)}`)
      expect(worst.logit).toBeGreaterThan(CLEARLY_WRONG_LOGIT)
    })
  })
})
