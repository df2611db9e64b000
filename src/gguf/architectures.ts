// The architectures a GGUF can be made of, as data: for each transformers class (config.json's architectures[0])
// one entry, as llama.cpp's convert_hf_to_gguf.py converts it (in the llama.cpp that node-llama-cpp 3.21.1 ships:
// release v0.4.0): its GGUF architecture, its hyperparameter keys, its tensor names and the transforms its tensors
// go through, named from a small shared set (the Q/K permutation, a norm shift, fused tensors regrouped or split,
// experts or heads stacked, transposes, MXFP4 blocks kept). metadata.ts reads config.json and writes the keys,
// tensors.ts plans the tensors; docs/development.md, "Adding a GGUF architecture", says what an entry takes. It is
// data that only a conversion needs: index.ts loads it on demand, and passes it on (hf-model.ts and hf-tokenizer.ts,
// which a GGUF's conversion back to a Hugging Face folder loads, read it too). It imports nothing at run time,
// so that a bundler's chunk of it holds it alone: an entry's check says what it refuses, a transform why a tensor's
// shape does not fit it, and metadata.ts and tensors.ts throw the errors.
import type { JsonValue } from '../format/json-values.ts'

/**
 * config.json's values as metadata.ts reads them, each checked for the GGUF key it becomes (a wrong type or range is
 * InvalidHeaderDeserialization naming the key): the first of `keys` (space-separated aliases) that is set, or
 * undefined (a failure when `required`).
 */
export interface ConfigReader {
  /** The value itself, for a check of its own. */
  value(keys: string): JsonValue
  /** A positive integer below 2^32. */
  integer(keys: string, required?: boolean): number | undefined
  /** An integer from 0 below 2^32. */
  count(keys: string): number | undefined
  number(keys: string): number | undefined
  boolean(key: string): boolean | undefined
  string(key: string): string | undefined
  /** A list of strings, or of integers from 0. */
  strings(key: string): string[] | undefined
  counts(key: string): number[] | undefined
}

/** RoPE's settings, from transformers 5's rope_parameters or transformers 4's rope_theta and rope_scaling. */
export interface Rope {
  /** The RoPE type in lower case: default, linear, yarn, llama3 or longrope (`su` is its old name). */
  type: string
  /**
   * The rope dict's fields, checked when read: rope_parameters' (its full_attention entry's where layer types have
   * their own), else rope_scaling's; rope_theta also at the top level, where transformers 4 writes it.
   */
  read: ConfigReader
  /** A field of the rope dict, as config.json has it (Phi-3's factor lists). */
  field(key: string): JsonValue
  theta: number | undefined
  /** The context the model was trained with, before scaling (llama3, yarn, longrope; undefined for the others where config.json has none). */
  original: number | undefined
  /** Scaling's factor: the dict's, else as transformers computes it, the context's growth (none for linear). */
  factor: number | undefined
  /** Phi-3's longrope attention factor: the dict's, else transformers' default. */
  attentionFactor: number
  /** The fraction of a head's dimensions RoPE rotates. */
  partial: number
}

/** The table ({@link TABLE}), which index.ts loads when a conversion starts and passes on. */
export interface ArchitectureTable {
  ARCHITECTURES: Readonly<Record<string, Architecture>>
  TOP_LEVEL: Readonly<Record<string, GgufName>>
  TENSORS: Readonly<Record<string, Target>>
  GATING: Readonly<Record<string, number>>
  RESHAPES: typeof RESHAPES
  PRE_TOKENIZERS: typeof PRE_TOKENIZERS
}

/** A model's config.json, and the values every architecture needs of it. */
export interface ModelConfig {
  /** config.json, with the values its config class assumes where it has none. */
  values: JsonValue
  read: ConfigReader
  architecture: Architecture
  /** The table the architecture is of. */
  table: ArchitectureTable
  hidden: number
  /** Attention heads, and key-value heads (num_attention_heads without grouped-query attention). */
  heads: number
  kvHeads: number
  blocks: number
  vocabSize: number
  /** Experts per MoE layer, 0 for a dense model. */
  experts: number
  /** A head's dimension, and how many of them RoPE rotates (transformers': the head's times the rotated fraction). */
  headDim: number
  ropeDims: number
  rope: Rope
  /** The attention window llama.cpp would not apply, where it is shorter than the context: the GGUF's context_length. */
  window: number | undefined
}

/** Sets an architecture key (`<arch>.<key>`) to a value, or removes it where the value is undefined. */
export type AddKey = (key: string, type: 'u32' | 'f32' | 'bool' | 'string', value: number | boolean | string | undefined) => void

/** A run of values of a source tensor: its rows (first dimension) [start, end). */
export type Rows = readonly [start: number, end: number]

/** Columns start, start + step, ... (count of them) of a unit. */
export interface Take {
  start: number
  step: number
  count: number
}

/**
 * What is done to each unit of a source tensor's values on the way: a unit is `rows` rows of `columns` values (a
 * head's rows, an expert's matrix), whose columns `take` are kept, then transposed, or whose rows are reordered from
 * transformers' halves of a head to llama.cpp's pairs (`pairs`).
 */
export interface Unit {
  rows: number
  columns: number
  take?: Take
  transpose?: boolean
  pairs?: boolean
}

/** How a source tensor becomes a GGUF tensor: the runs of its rows taken, in order; what is done to each unit; the GGUF dims (ggml's order). */
interface Reshaping {
  rows: Rows[]
  unit?: Unit
  dims: number[]
}

/** A transform of the shared set: the reshaping of a source tensor of `shape` in a model of `config`, or why the shape does not fit it. */
export type Reshape = (shape: readonly number[], config: ModelConfig) => Reshaping | string

/** A tensor's GGUF name after `blk.N.` (or at the top level), with `.weight` or `.bias` where the source name has neither. */
type GgufName = string

/** Where a Hugging Face tensor goes: a GGUF name, or GGUF names each with the transform that makes it. */
type Target = GgufName | ReadonlyArray<{ to: GgufName; reshape: Reshape }>

/** What the conversion does for one transformers class. */
export interface Architecture {
  /** The GGUF architecture. */
  name: string
  /** The RoPE types llama.cpp implements for it besides the default, as config.json names them. */
  rope: readonly string[]
  /** config.json values the transformers config class assumes when they are absent (or null). */
  defaults?: (values: JsonValue) => Record<string, unknown>
  /**
   * Whether the converter writes TextModel's hyperparameters (context, sizes, heads, RoPE, norms' epsilon, experts,
   * head_dim) before the entry's own; GPT-NeoX, Phi-2, StableLM and Falcon write theirs alone.
   */
  sharedKeys: boolean
  /** The keys it writes besides, or instead of a shared one of the same name. */
  keys?: (config: ModelConfig, add: AddKey) => void
  /** What llama.cpp cannot run as transformers does, named (UnsupportedConversion), or undefined. */
  check?: (config: ModelConfig) => string | undefined
  /** Tensors whose names map otherwise than {@link TENSORS} says, by their name after the block's prefix (or at the top level) without `.weight`/`.bias`. */
  tensors?: Readonly<Record<string, Target>>
  /** Tensors the converter leaves out (a tied lm_head, layers past the model's). */
  skip?: (name: string, config: ModelConfig) => boolean
  /**
   * The attention window transformers applies (every token attends to the last `window` ones, its own included) and
   * llama.cpp's graph of this architecture does not; undefined for none.
   */
  window?: (read: ConfigReader) => number | undefined
  /** llama.cpp's fixed pattern of sliding-window layers: every `swaPeriod`-th layer global, the others local. */
  swaPeriod?: number
  /** Transforms of the whole model: Q/K permutation of attn_q and attn_k (llama's `permute`), a shift of every norm weight (Gemma's + 1). */
  permuteQK?: boolean
  normShift?: number
  /** Experts stored as MXFP4 blocks (gpt-oss) stay MXFP4 blocks in every GGUF, as the converter writes them. */
  mxfp4Experts?: boolean
  /** Key-value heads, where config.json says them otherwise than num_key_value_heads (Falcon). */
  kvHeads?: (read: ConfigReader, heads: number) => number
  /** A query head's dimension, where config.json says it otherwise than head_dim (DeepSeek's: nope + rope). */
  headDim?: (read: ConfigReader) => number
  /** The converter's add_bos_token where the tokenizer's files say nothing (Phi-2's false). */
  addsBos?: boolean
}

// ---- The tensor names every architecture shares (gguf-py's tensor_mapping.py, for the classes below) ----

/** Tensors outside the blocks, by their name without `model.`, `transformer.`, `gpt_neox.`, `.weight`, `.bias`. */
const TOP_LEVEL: Readonly<Record<string, GgufName>> = {
  embed_tokens: 'token_embd',
  embed_in: 'token_embd',
  word_embeddings: 'token_embd',
  wte: 'token_embd',
  wpe: 'position_embd',
  norm: 'output_norm',
  ln_f: 'output_norm',
  final_layer_norm: 'output_norm',
  final_layernorm: 'output_norm',
  lm_head: 'output',
  embed_out: 'output',
}

/** The tensors of block N, after its prefix (`model.layers.N.`, `gpt_neox.layers.N.`, `transformer.h.N.`), experts and stacked heads without their index. */
const TENSORS: Readonly<Record<string, Target>> = {
  input_layernorm: 'attn_norm',
  ln_1: 'attn_norm',
  // Falcon's new decoder: gguf-py names ln_mlp attn_norm and ln_attn attn_norm_2 (llama.cpp's falcon reads them so).
  ln_mlp: 'attn_norm',
  ln_attn: 'attn_norm_2',
  'self_attn.q_proj': 'attn_q',
  'self_attn.k_proj': 'attn_k',
  'self_attn.v_proj': 'attn_v',
  'self_attn.o_proj': 'attn_output',
  'self_attn.dense': 'attn_output',
  'self_attn.qkv_proj': 'attn_qkv',
  'attn.c_attn': 'attn_qkv',
  'attn.c_proj': 'attn_output',
  'attention.dense': 'attn_output',
  'self_attention.dense': 'attn_output',
  'self_attn.q_norm': 'attn_q_norm',
  'self_attn.k_norm': 'attn_k_norm',
  'self_attn.q_layernorm.norms': 'attn_q_norm',
  'self_attn.k_layernorm.norms': 'attn_k_norm',
  'self_attn.q_a_proj': 'attn_q_a',
  'self_attn.q_a_layernorm': 'attn_q_a_norm',
  'self_attn.q_b_proj': 'attn_q_b',
  'self_attn.kv_a_proj_with_mqa': 'attn_kv_a_mqa',
  'self_attn.kv_a_layernorm': 'attn_kv_a_norm',
  'self_attn.sinks': 'attn_sinks.weight',
  post_attention_layernorm: 'ffn_norm',
  pre_feedforward_layernorm: 'ffn_norm',
  ln_2: 'ffn_norm',
  post_feedforward_layernorm: 'post_ffw_norm',
  'mlp.gate_proj': 'ffn_gate',
  'mlp.up_proj': 'ffn_up',
  'mlp.down_proj': 'ffn_down',
  'mlp.gate_up_proj': 'ffn_up',
  'mlp.c_fc': 'ffn_up',
  'mlp.c_proj': 'ffn_down',
  'mlp.dense_h_to_4h': 'ffn_up',
  'mlp.dense_4h_to_h': 'ffn_down',
  'mlp.fc1': 'ffn_up',
  'mlp.fc2': 'ffn_down',
  'feed_forward.gate_proj': 'ffn_gate',
  'feed_forward.up_proj': 'ffn_up',
  'feed_forward.down_proj': 'ffn_down',
  'mlp.gate': 'ffn_gate_inp',
  'block_sparse_moe.gate': 'ffn_gate_inp',
  'mlp.router': 'ffn_gate_inp',
  'feed_forward.router': 'ffn_gate_inp',
  'mlp.gate.e_score_correction_bias': 'exp_probs_b.bias',
  'mlp.shared_expert_gate': 'ffn_gate_inp_shexp',
  'mlp.experts.gate_proj': 'ffn_gate_exps',
  'mlp.experts.up_proj': 'ffn_up_exps',
  'mlp.experts.down_proj': 'ffn_down_exps',
  'block_sparse_moe.experts.w1': 'ffn_gate_exps',
  'block_sparse_moe.experts.w3': 'ffn_up_exps',
  'block_sparse_moe.experts.w2': 'ffn_down_exps',
  'mlp.shared_expert.gate_proj': 'ffn_gate_shexp',
  'mlp.shared_expert.up_proj': 'ffn_up_shexp',
  'mlp.shared_expert.down_proj': 'ffn_down_shexp',
  'mlp.shared_experts.gate_proj': 'ffn_gate_shexp',
  'mlp.shared_experts.up_proj': 'ffn_up_shexp',
  'mlp.shared_experts.down_proj': 'ffn_down_shexp',
  'feed_forward.shared_expert.gate_proj': 'ffn_gate_shexp',
  'feed_forward.shared_expert.up_proj': 'ffn_up_shexp',
  'feed_forward.shared_expert.down_proj': 'ffn_down_shexp',
}

// ---- The tokenizers' pre-tokenizers ----

/** The split regexes of the pre-tokenizers below, as tokenizer.json files have them. */
const LLAMA3 = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
const QWEN2 = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
const O200K = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
const DEEPSEEK3 = [
  String.raw`\p{N}{1,3}`,
  '[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+',
  String.raw`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` +
    '`' +
    String.raw`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
]
// Escaped: some of the ranges' ends have canonical decompositions that an editor may normalize away.
const DEEPSEEK_LLM = [
  '[\u000d\u000a]',
  '\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\u{10400}-\u{1044f}\u{104b0}-\u{104d3}\u{104d8}-\u{104fb}\u{10c80}-\u{10cb2}\u{10cc0}-\u{10cf2}\u{118a0}-\u{118df}\u{1e900}-\u{1e943}]+',
  '\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+',
  '\\s+$',
  '[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+',
]

/**
 * The byte-level BPE pre-tokenizers llama.cpp implements, by the name tokenizer.ggml.pre gives each: their steps as
 * tokenizer.json has them (a Split's regex; tokenizer.ts reads the file's so). llama.cpp's converter tells them
 * apart by hashing the tokens of a test text; this converter has no tokenizer to run, so it reads the steps
 * themselves, and refuses ones it does not know rather than guess. Where llama.cpp has several names for one set of
 * regexes (gpt-2 and phi-2, qwen2 and stablelm2, gpt-4o and llama4...), the one given is the first: they tokenize
 * alike.
 */
const PRE_TOKENIZERS: Readonly<Record<string, ReadonlyArray<string | { split: string }>>> = {
  'gpt-2': ['ByteLevel with its regex'],
  'llama-bpe': [{ split: LLAMA3 }, 'ByteLevel'],
  qwen2: [{ split: QWEN2 }, 'ByteLevel'],
  // StarCoder's digits one by one then GPT-2's regex; command-r is the same but for cleaning spaces (clean_spaces()).
  refact: ['Digits one by one', 'ByteLevel with its regex'],
  falcon: ['Punctuation Contiguous', 'ByteLevel with its regex', 'Digits', { split: '[0-9][0-9][0-9]' }],
  'gpt-4o': [{ split: O200K }, 'ByteLevel'],
  'deepseek-v3': [...DEEPSEEK3.map((split) => ({ split })), 'ByteLevel'],
  'deepseek-llm': [...DEEPSEEK_LLM.map((split) => ({ split })), 'Digits one by one', 'ByteLevel'],
}

/** llama.cpp's expert gating functions (llama_expert_gating_func_type), by config.json's scoring_func. */
const GATING: Readonly<Record<string, number>> = { softmax: 1, sigmoid: 2, sqrtsoftplus: 4 }

// ---- The shared transforms ----

const reversed = (shape: readonly number[]) => (shape.length === 0 ? [1] : [...shape].reverse())
const whole = (shape: readonly number[]): Rows[] => [[0, shape[0] ?? 1]]
const range = (count: number) => Array.from({ length: count }, (_, i) => i)

/** Q/K permutation (llama's `permute`): each head's rows from transformers' two halves to llama.cpp's pairs; `heads` of q_proj or of k_proj. */
const pairs =
  (heads: (config: ModelConfig) => number): Reshape =>
  (shape, config) => {
    const count = heads(config)
    if (shape[0] % (2 * count) !== 0) return `${shape[0]} rows are not ${count} heads of pairs`
    return { rows: whole(shape), unit: { rows: shape[0] / count, columns: shape[1] ?? 1, pairs: true }, dims: reversed(shape) }
  }

/** Transposes: a matrix stored [in, out] (GPT-2's Conv1D), or experts stored [experts, in, out] (GptOssExperts, Llama4TextExperts), to [out, in]. */
const transposed: Reshape = (shape) => {
  if (shape.length < 2) return { rows: whole(shape), dims: reversed(shape) }
  const [rows, columns] = shape.slice(-2)
  return { rows: whole(shape), unit: { rows, columns, transpose: true }, dims: [rows, columns, ...shape.slice(0, -2)] }
}

/**
 * A fused gate_up split: the columns of [experts, in, 2 ff] taken as `part` of 2 (Llama 4: the first or second
 * half; gpt-oss: `interleaved`, even or odd columns), and, for a weight, each expert transposed to [ff, in]; a bias
 * [experts, 2 ff] becomes [experts, ff].
 */
const gateUp =
  (part: 0 | 1, interleaved: boolean): Reshape =>
  (shape) => {
    const columns = shape.at(-1)!
    const count = columns / 2
    const take = interleaved ? { start: part, step: 2, count } : { start: part * count, step: 1, count }
    if (shape.length === 2) return { rows: whole(shape), unit: { rows: 1, columns, take }, dims: [count, shape[0]] }
    return { rows: whole(shape), unit: { rows: shape[1], columns, take, transpose: true }, dims: [shape[1], count, shape[0]] }
  }

/** Runs of `size` rows starting at each of `starts`. */
const runs = (starts: number[], size: number): Rows[] => starts.map((start) => [start, start + size])

/**
 * A fused QKV whose rows are q, k and v of each head in turn (GPT-NeoX: [heads, 3, head_dim]) regrouped as
 * llama.cpp's attn_qkv wants them: every head's q, then every k, then every v; the bias alike.
 */
const headsInterleaved: Reshape = (shape, { heads }) => {
  // attn_qkv's rows are checked against config.json's heads (tensors.ts): whole heads.
  const size = shape[0] / (3 * heads)
  const rows = [0, 1, 2].flatMap((part) =>
    runs(
      range(heads).map((head) => (head * 3 + part) * size),
      size,
    ),
  )
  return { rows, dims: reversed(shape) }
}

/**
 * Falcon's fused QKV, kvHeads groups each of its q heads then one k and one v head ([groups, q per group + 2,
 * head_dim]), regrouped as every q, then every k, then every v (the converter's "jploski" layout).
 */
const kvGroups: Reshape = (shape, { heads, kvHeads }) => {
  const perGroup = heads / kvHeads
  const size = shape[0] / (heads + 2 * kvHeads)
  const group = (g: number) => g * (perGroup + 2) * size
  const rows = [
    ...runs(range(kvHeads).map(group), perGroup * size),
    ...runs(
      range(kvHeads).map((g) => group(g) + perGroup * size),
      size,
    ),
    ...runs(
      range(kvHeads).map((g) => group(g) + (perGroup + 1) * size),
      size,
    ),
  ]
  return { rows, dims: reversed(shape) }
}

/**
 * DeepSeek's kv_b_proj ([heads, nope + v, kv_lora_rank]) split for multi-head latent attention: attn_k_b, each
 * head's nope rows transposed ([heads, rank, nope]), and attn_v_b, each head's v rows ([heads, v, rank]).
 */
const latent =
  (part: 'k' | 'v'): Reshape =>
  (shape, { read, heads }) => {
    const nope = read.integer('qk_nope_head_dim', true)!
    const v = read.integer('v_head_dim', true)!
    const rank = shape[1]
    if (shape[0] !== heads * (nope + v)) return `${shape[0]} rows are not ${heads} heads of ${nope} + ${v}`
    const starts = range(heads).map((head) => head * (nope + v) + (part === 'k' ? 0 : nope))
    if (part === 'v') return { rows: runs(starts, v), dims: [rank, v, heads] }
    return { rows: runs(starts, nope), unit: { rows: nope, columns: rank, transpose: true }, dims: [nope, rank, heads] }
  }

/** The shared transforms, by the name an entry gives them. */
const RESHAPES = {
  qPairs: pairs((c) => c.heads),
  kPairs: pairs((c) => c.kvHeads),
  transposed,
  gateUp,
  headsInterleaved,
  kvGroups,
  latent,
}

// ---- The entries ----

/**
 * Gemma's and gpt-oss's sliding-window layers, which llama.cpp places by a fixed period: every `period`-th layer
 * global; layer_types off that pattern are refused.
 */
const globalEvery = (period: number): Pick<Architecture, 'swaPeriod' | 'check'> => ({
  swaPeriod: period,
  check: ({ read, blocks }) => {
    const off = offPattern('layer_types', read.value('layer_types').optional()?.items(), blocks, 'full_attention', (layer) => layer % period === period - 1)
    return off && `${off} (llama.cpp makes every ${period}th layer global)`
  },
})

/**
 * Where a per-layer list of config.json (`key`) is off llama.cpp's fixed pattern, `isSpecial(layer)` exactly where
 * the value is `kind`, as a message says it (never quoting the file's values); undefined where it is not.
 */
function offPattern(key: string, list: JsonValue[] | undefined, blocks: number, kind: unknown, isSpecial: (layer: number) => boolean): string | undefined {
  if (!list) return undefined
  if (list.length !== blocks) return `${key} of ${list.length} layers, in a model of ${blocks}`
  const layer = list.findIndex((value, layer) => (value.value === kind) !== isSpecial(layer))
  return layer < 0 ? undefined : `${key}[${layer}] ${isSpecial(layer) ? 'other than' : 'of'} ${JSON.stringify(kind)}`
}

/**
 * SmolLM3's and Llama 4's layers without RoPE off llama.cpp's, every `step`-th: no_rope_layers (0 where a layer has
 * none), or as their config classes make it where it is absent, none every no_rope_layer_interval-th.
 */
function noRope({ read, blocks }: ModelConfig, step: number): string | undefined {
  const what = `llama.cpp leaves RoPE out of every ${step}th layer`
  const list = read.value('no_rope_layers').optional()?.items()
  const interval = read.integer('no_rope_layer_interval') ?? 4
  const off = list
    ? offPattern('no_rope_layers', list, blocks, 0, (layer) => (layer + 1) % step === 0)
    : interval !== step && `no_rope_layer_interval ${interval}`
  return off ? `${off} (${what})` : undefined
}

/** llama's keys, which LlamaModel's subclasses (SmolLM3, Granite, Llama 4) write too. */
const llamaKeys = (c: ModelConfig, add: AddKey) => {
  add('vocab_size', 'u32', c.vocabSize)
  add('rope.dimension_count', 'u32', c.headDim)
}

const LLAMA: Architecture = { name: 'llama', rope: ['linear', 'yarn', 'llama3'], sharedKeys: true, permuteQK: true, keys: llamaKeys }

/** A config class's `sliding_window`: config.json's (null for none), else the class's default. */
const slidingWindow = (read: ConfigReader, otherwise: number | undefined) =>
  read.value('sliding_window').value === undefined ? otherwise : read.integer('sliding_window')

/**
 * Qwen's window, with use_sliding_window (4096 where config.json has none): Qwen2's and Qwen3's on the layers
 * layer_types names sliding_attention (transformers 5 writes them), else on those from max_window_layers on (the
 * class's default 28); Qwen3-MoE's, which has no layer types, on every layer.
 */
const qwenWindow = (layered: boolean) => (read: ConfigReader) => {
  if (read.boolean('use_sliding_window') !== true) return undefined
  const types = read.value('layer_types').optional()?.items()
  const sliding =
    !layered ||
    (types ? types.some((t) => t.value === 'sliding_attention') : (read.integer('num_hidden_layers') ?? 0) > (read.count('max_window_layers') ?? 28))
  return sliding ? slidingWindow(read, 4096) : undefined
}
const QWEN = (name: string, window?: Architecture['window']): Architecture => ({ name, rope: ['linear', 'yarn'], sharedKeys: true, window })
/** Gemma's: norms hold w where llama.cpp multiplies by 1 + w; the norm after attention is post_attention_norm; a stored lm_head is left out (tied). */
const GEMMA = {
  sharedKeys: true,
  normShift: 1,
  tensors: { post_attention_layernorm: 'post_attention_norm' },
  skip: (name: string) => name === 'lm_head.weight',
}

/** DeepSeek-V2 and V3 (`deepseek2`), whose MoE gates by softmax (V2) or sigmoid (V3) of the router's logits. */
function deepseek(gating: 'softmax' | 'sigmoid'): Architecture {
  return {
    name: 'deepseek2',
    rope: ['yarn'],
    sharedKeys: true,
    // Its query heads: the dims without RoPE, then those with (transformers 5 writes head_dim as the latter).
    headDim: (read) => read.integer('qk_nope_head_dim', true)! + read.integer('qk_rope_head_dim', true)!,
    tensors: {
      'self_attn.kv_b_proj': [
        { to: 'attn_k_b', reshape: latent('k') },
        { to: 'attn_v_b', reshape: latent('v') },
      ],
    },
    // A tied lm_head, and the multi-token-prediction layers after the model's (DeepSeek-V3's 62nd).
    skip: (name, { values, blocks }) =>
      (values.get('tie_word_embeddings').value === true && name === 'lm_head.weight') || Number(/^model\.layers\.(\d+)\./.exec(name)?.[1] ?? -1) >= blocks,
    check: ({ read }) => {
      // Another of llama.cpp's gating functions (metadata.ts refuses the others).
      const scoring = read.string('scoring_func')
      if (scoring !== undefined && scoring !== gating && Object.hasOwn(GATING, scoring))
        return `scoring_func "${scoring}" (transformers' class gates by ${gating})`
      // llama.cpp chooses groups by the sum of their top two experts' scores, as V3 does; V2's group_limited_greedy by the top one.
      const groups = read.integer('n_group') ?? 1
      if (read.string('topk_method') === 'group_limited_greedy' && groups > 1 && (read.integer('topk_group') ?? groups) < groups)
        return `topk_method "group_limited_greedy" with ${groups} groups (llama.cpp ranks groups by their top two experts, as DeepSeek-V3)`
    },
    keys: (c, add) => {
      const { read } = c
      const rank = read.integer('kv_lora_rank') ?? 512
      const ropeDims = read.integer('qk_rope_head_dim', true)!
      // MLA as MQA: one key-value head of the latent and RoPE parts, decompressed to heads by attn_k_b and attn_v_b.
      add('attention.head_count_kv', 'u32', 1)
      add('leading_dense_block_count', 'u32', read.count('first_k_dense_replace') ?? (c.experts > 0 ? 0 : c.blocks))
      add('vocab_size', 'u32', c.vocabSize)
      // 0 where config.json has none (V2-Lite): llama.cpp needs the key unless it takes the model for V2-Lite by its
      // 26 or 27 layers, and reads its q_proj by the 0.
      add('attention.q_lora_rank', 'u32', read.count('q_lora_rank') ?? 0)
      add('attention.kv_lora_rank', 'u32', rank)
      add('attention.key_length', 'u32', rank + ropeDims)
      add('attention.value_length', 'u32', rank)
      add('attention.key_length_mla', 'u32', read.integer('qk_nope_head_dim', true)! + ropeDims)
      add('attention.value_length_mla', 'u32', read.integer('v_head_dim', true))
      add('expert_feed_forward_length', 'u32', read.integer('moe_intermediate_size intermediate_size', true))
      add('expert_shared_count', 'u32', read.count('n_shared_experts') ?? 0)
      add('expert_weights_scale', 'f32', read.number('routed_scaling_factor'))
      if (read.boolean('norm_topk_prob')) add('expert_weights_norm', 'bool', true)
      // llama.cpp takes softmax where the key is missing: V3's sigmoid is written whether config.json names it or not.
      if (gating === 'sigmoid') add('expert_gating_func', 'u32', GATING.sigmoid)
      add('rope.dimension_count', 'u32', ropeDims)
      const mscale = c.rope.read.number('mscale_all_dim')
      // The converter's factor of 0.1, which llama.cpp divides away.
      if (mscale !== undefined) add('rope.scaling.yarn_log_multiplier', 'f32', 0.1 * mscale)
    },
  }
}

/** The keys of the architectures whose converter class writes its own set, not TextModel's (GPT-NeoX, Phi-2, StableLM, Falcon). */
function ownKeys(c: ModelConfig, add: AddKey, { context, ffn, epsilon }: { context: string; ffn: number | undefined; epsilon: string }): void {
  add('context_length', 'u32', c.read.integer(context))
  add('embedding_length', 'u32', c.hidden)
  add('block_count', 'u32', c.blocks)
  add('feed_forward_length', 'u32', ffn)
  add('attention.head_count', 'u32', c.heads)
  add('attention.layer_norm_epsilon', 'f32', c.read.number(epsilon))
  // Not the converter's: it leaves llama.cpp's default of 10000, whatever config.json says.
  add('rope.freq_base', 'f32', c.rope.theta)
}

/** GPT-NeoX's keys, which StableLM's converter class writes too, its norms' epsilon from `epsilon`. */
const neoxKeys = (epsilon: string) => (c: ModelConfig, add: AddKey) => {
  ownKeys(c, add, { context: 'max_position_embeddings', ffn: c.read.integer('intermediate_size', true), epsilon })
  add('rope.dimension_count', 'u32', c.ropeDims)
  add('use_parallel_residual', 'bool', c.read.boolean('use_parallel_residual'))
}

/** GPT-OSS's and Llama 4's fused experts, stored [experts, in, out]: gate_up split (interleaved or in halves) and down transposed. */
const fusedExperts = (prefix: string, interleaved: boolean): Record<string, Target> => ({
  [`${prefix}.gate_up_proj`]: [
    { to: 'ffn_gate_exps.weight', reshape: gateUp(0, interleaved) },
    { to: 'ffn_up_exps.weight', reshape: gateUp(1, interleaved) },
  ],
  [`${prefix}.down_proj`]: [{ to: 'ffn_down_exps.weight', reshape: transposed }],
})

/** The transformers architectures converted, by config.json's `architectures[0]`. */
const ARCHITECTURES: Readonly<Record<string, Architecture>> = {
  LlamaForCausalLM: LLAMA,
  // MistralConfig's sliding_window is 4096 when config.json has none (Mistral 7B v0.1's); MixtralConfig's none.
  MistralForCausalLM: { ...LLAMA, window: (read) => slidingWindow(read, 4096) },
  MixtralForCausalLM: { ...LLAMA, window: (read) => slidingWindow(read, undefined) },
  Qwen2ForCausalLM: QWEN('qwen2', qwenWindow(true)),
  Qwen3ForCausalLM: QWEN('qwen3', qwenWindow(true)),
  Qwen3MoeForCausalLM: {
    ...QWEN('qwen3moe', qwenWindow(false)),
    check: ({ read }) => {
      // llama.cpp's qwen3moe always renormalizes the chosen experts' weights.
      if (read.boolean('norm_topk_prob') === false) return "norm_topk_prob false (llama.cpp always renormalizes the chosen experts' weights)"
    },
    keys: ({ read }, add) => add('expert_feed_forward_length', 'u32', read.integer('moe_intermediate_size')),
  },
  Qwen2MoeForCausalLM: {
    ...QWEN('qwen2moe'),
    check: (config) => {
      const { read } = config
      // llama.cpp's qwen2moe never renormalizes them, and has experts in every layer.
      if (read.boolean('norm_topk_prob')) return "norm_topk_prob true (llama.cpp's qwen2moe never renormalizes the chosen experts' weights)"
      const sparse = read.integer('decoder_sparse_step') ?? 1
      const dense = read.counts('mlp_only_layers') ?? []
      if (sparse !== 1 || dense.length > 0)
        return `layers without experts (decoder_sparse_step ${sparse}, mlp_only_layers of ${dense.length}: llama.cpp's qwen2moe has experts in every layer)`
    },
    keys: ({ read }, add) => {
      add('expert_feed_forward_length', 'u32', read.integer('moe_intermediate_size'))
      add('expert_shared_feed_forward_length', 'u32', read.integer('shared_expert_intermediate_size'))
    },
  },
  Gemma2ForCausalLM: {
    ...GEMMA,
    name: 'gemma2',
    rope: [],
    ...globalEvery(2),
    keys: ({ read }, add) => {
      add('attn_logit_softcapping', 'f32', read.number('attn_logit_softcapping'))
      add('final_logit_softcapping', 'f32', read.number('final_logit_softcapping'))
      add('attention.sliding_window', 'u32', read.integer('sliding_window'))
    },
  },
  Gemma3ForCausalLM: {
    ...GEMMA,
    name: 'gemma3',
    rope: ['linear', 'yarn'],
    // Gemma3TextConfig's defaults, which the converter repeats.
    defaults: () => ({
      max_position_embeddings: 131072,
      num_attention_heads: 8,
      num_key_value_heads: 4,
      head_dim: 256,
      rms_norm_eps: 1e-6,
      rope_theta: 1e6,
      rope_local_base_freq: 1e4,
    }),
    ...globalEvery(6),
    keys: ({ read, values }, add) => {
      const softcapping = read.number('final_logit_softcapping')
      if (softcapping) add('final_logit_softcapping', 'f32', softcapping)
      // A pattern of 1 is every layer global: no sliding window at all.
      if (values.get('sliding_window_pattern').value !== 1) add('attention.sliding_window', 'u32', read.integer('sliding_window'))
    },
  },
  Phi3ForCausalLM: {
    name: 'phi3',
    rope: ['longrope'],
    sharedKeys: true,
    keys: (c, add) => {
      add('rope.dimension_count', 'u32', c.ropeDims)
      add('rope.scaling.original_context_length', 'u32', c.rope.original ?? c.read.integer('original_max_position_embeddings', true))
      // 0 where config.json has none: llama.cpp tells Phi-4 from Phi-3 by it.
      add('attention.sliding_window', 'u32', c.read.integer('sliding_window') ?? 0)
      if (c.rope.type === 'longrope') add('rope.scaling.attn_factor', 'f32', c.rope.attentionFactor)
    },
  },
  GPT2LMHeadModel: {
    name: 'gpt2',
    rope: [],
    sharedKeys: true,
    // GPT-2 configs say n_inner: null for an FFN of 4 * n_embd (n_embd itself is checked where it is read).
    defaults: (v) => {
      const embeddings = v.get('n_embd').value
      return { n_inner: typeof embeddings === 'number' ? 4 * embeddings : undefined }
    },
    tensors: {
      'attn.c_attn': [{ to: 'attn_qkv', reshape: transposed }],
      'attn.c_proj': [{ to: 'attn_output', reshape: transposed }],
      'mlp.c_fc': [{ to: 'ffn_up', reshape: transposed }],
      'mlp.c_proj': [{ to: 'ffn_down', reshape: transposed }],
    },
  },

  SmolLM3ForCausalLM: {
    ...LLAMA,
    name: 'smollm3',
    check: (config) => {
      // llama.cpp's smollm3 rotates no layer of every 4 (its n_no_rope_layer_step), whatever config.json says.
      if (config.read.boolean('use_sliding_window') && config.read.strings('layer_types')?.includes('sliding_attention'))
        return "sliding-window layers (llama.cpp's smollm3 has none)"
      return noRope(config, 4)
    },
  },
  GraniteForCausalLM: {
    ...LLAMA,
    name: 'granite',
    // GraniteConfig's multipliers, which the converter writes when config.json has none.
    defaults: () => ({ embedding_multiplier: 1, residual_multiplier: 1, attention_multiplier: 1, logits_scaling: 1 }),
    check: ({ read, hidden, heads }) => {
      const headDim = read.integer('head_dim')
      if (headDim !== undefined && headDim !== hidden / heads) return `head_dim ${headDim} (llama.cpp's granite takes hidden_size / num_attention_heads)`
    },
    keys: (c, add) => {
      llamaKeys(c, add)
      // The converter drops head_dim.
      add('attention.key_length', 'u32', undefined)
      add('attention.value_length', 'u32', undefined)
      const { read } = c
      // Each where set and not 0, as the converter writes them.
      add('attention.scale', 'f32', read.number('attention_multiplier') || undefined)
      add('embedding_scale', 'f32', read.number('embedding_multiplier') || undefined)
      add('residual_scale', 'f32', read.number('residual_multiplier') || undefined)
      add('logit_scale', 'f32', read.number('logits_scaling') || undefined)
    },
  },
  Olmo2ForCausalLM: { name: 'olmo2', rope: ['linear', 'yarn'], sharedKeys: true, tensors: { post_attention_layernorm: 'post_attention_norm' } },
  GPTNeoXForCausalLM: {
    name: 'gptneox',
    rope: [],
    sharedKeys: false,
    // GPTNeoXConfig's, where config.json has none.
    defaults: () => ({ use_parallel_residual: true, max_position_embeddings: 2048, layer_norm_eps: 1e-5 }),
    tensors: { 'attention.query_key_value': [{ to: 'attn_qkv', reshape: headsInterleaved }] },
    keys: neoxKeys('layer_norm_eps'),
  },
  PhiForCausalLM: {
    name: 'phi2',
    rope: [],
    sharedKeys: false,
    addsBos: false,
    check: ({ read, heads, kvHeads }) => {
      if (kvHeads !== heads) return `num_key_value_heads ${kvHeads} (llama.cpp's phi2 has as many as num_attention_heads)`
      if (read.boolean('qk_layernorm')) return "qk_layernorm (llama.cpp's phi2 has no q/k norms)"
    },
    keys: (c, add) => {
      // The FFN's size, where the converter writes 4 * n_embd whatever config.json says.
      ownKeys(c, add, {
        context: 'n_positions max_position_embeddings',
        ffn: c.read.integer('intermediate_size n_inner') ?? 4 * c.hidden,
        epsilon: 'layer_norm_epsilon layer_norm_eps',
      })
      add('attention.head_count_kv', 'u32', c.heads)
      add('rope.dimension_count', 'u32', c.ropeDims)
    },
  },
  StableLmForCausalLM: {
    name: 'stablelm',
    rope: [],
    sharedKeys: false,
    // StableLmConfig's, where config.json has none.
    defaults: () => ({ use_parallel_residual: false, partial_rotary_factor: 0.25, layer_norm_eps: 1e-5 }),
    keys: (c, add) => {
      neoxKeys('layer_norm_eps norm_eps')(c, add)
      add('attention.head_count_kv', 'u32', c.kvHeads)
    },
  },
  FalconForCausalLM: {
    name: 'falcon',
    rope: [],
    sharedKeys: false,
    // FalconConfig's, where config.json has none.
    defaults: () => ({ max_position_embeddings: 2048, multi_query: true, parallel_attn: true, layer_norm_epsilon: 1e-5 }),
    // The 7B decoder's multi-query attention has one key-value head whatever num_kv_heads says, as transformers reads it.
    kvHeads: (read, heads) =>
      read.boolean('new_decoder_architecture') || read.boolean('multi_query') === false ? (read.integer('num_kv_heads n_head_kv') ?? heads) : 1,
    check: ({ read }) => {
      if (read.boolean('alibi')) return "alibi (llama.cpp's falcon has RoPE)"
      if (read.boolean('parallel_attn') === false) return "parallel_attn false (llama.cpp's falcon runs attention and MLP in parallel)"
      if (read.boolean('bias')) return "bias (llama.cpp's falcon has no linear biases)"
    },
    tensors: { 'self_attention.query_key_value': [{ to: 'attn_qkv', reshape: kvGroups }] },
    keys: (c, add) => {
      ownKeys(c, add, { context: 'max_position_embeddings', ffn: c.read.integer('ffn_hidden_size') ?? 4 * c.hidden, epsilon: 'layer_norm_epsilon' })
      add('tensor_data_layout', 'string', 'jploski')
      add('attention.head_count_kv', 'u32', c.kvHeads)
    },
  },
  CohereForCausalLM: {
    name: 'command-r',
    rope: [],
    sharedKeys: true,
    // CohereConfig's, where config.json has none.
    defaults: () => ({ logit_scale: 0.0625, use_qk_norm: false, tie_word_embeddings: true }),
    check: ({ read, blocks }) => {
      // llama.cpp reads Command R+'s q/k norms in a model of 64 layers or more, and never in a smaller one.
      if (read.boolean('use_qk_norm') !== blocks >= 64)
        return `use_qk_norm ${read.boolean('use_qk_norm')} with ${blocks} layers (llama.cpp has q/k norms in models of 64 layers or more)`
      if (read.boolean('tie_word_embeddings') === false) return "tie_word_embeddings false (llama.cpp's command-r takes its output from token_embd)"
    },
    keys: (c, add) => {
      add('context_length', 'u32', c.read.integer('model_max_length max_position_embeddings'))
      add('logit_scale', 'f32', c.read.number('logit_scale'))
      add('rope.scaling.type', 'string', 'none')
    },
  },
  DeepseekV2ForCausalLM: deepseek('softmax'),
  DeepseekV3ForCausalLM: deepseek('sigmoid'),
  GptOssForCausalLM: {
    name: 'gpt-oss',
    rope: ['yarn'],
    sharedKeys: true,
    mxfp4Experts: true,
    // GptOssConfig's RoPE, where config.json has none.
    defaults: (values) =>
      values.get('rope_parameters').present
        ? {}
        : { rope_scaling: { rope_type: 'yarn', factor: 32, beta_fast: 32, beta_slow: 1, truncate: false, original_max_position_embeddings: 4096 } },
    ...globalEvery(2),
    tensors: {
      ...fusedExperts('mlp.experts', true),
      'mlp.experts.gate_up_proj_bias': [
        { to: 'ffn_gate_exps.bias', reshape: gateUp(0, true) },
        { to: 'ffn_up_exps.bias', reshape: gateUp(1, true) },
      ],
      'mlp.experts.down_proj_bias': 'ffn_down_exps.bias',
      post_attention_layernorm: 'post_attention_norm',
    },
    keys: ({ read }, add) => {
      add('attention.sliding_window', 'u32', read.integer('sliding_window', true))
      add('expert_feed_forward_length', 'u32', read.integer('intermediate_size', true))
    },
  },
  Llama4ForCausalLM: {
    name: 'llama4',
    rope: ['llama3'],
    sharedKeys: true,
    // Llama4TextConfig's, where config.json has none.
    defaults: () => ({
      interleave_moe_layer_step: 1,
      attention_chunk_size: 8192,
      attn_temperature_tuning: true,
      floor_scale: 8192,
      attn_scale: 0.1,
      use_qk_norm: true,
    }),
    check: (config) => {
      const { read, blocks, experts } = config
      const global = read.strings('layer_types')?.every((type) => type === 'full_attention') ?? false
      // llama.cpp's llama4 chunks attention by 8192 and tunes its temperature as Llama 4 does (unless no layer is
      // chunked), leaves RoPE out of every 4th layer (of the last where none is chunked), has q/k norms unless it has
      // 128 experts, and experts in every interleave_moe_layer_step-th layer.
      if (!global && read.integer('attention_chunk_size') !== 8192)
        return `attention_chunk_size ${read.integer('attention_chunk_size')} (llama.cpp's llama4 chunks by 8192)`
      if (!global && (!read.boolean('attn_temperature_tuning') || read.integer('floor_scale') !== 8192 || read.number('attn_scale') !== 0.1))
        return "attention temperature tuning other than Llama 4's (floor_scale 8192, attn_scale 0.1, which llama.cpp's llama4 has built in)"
      const noRopeOff = noRope(config, global ? blocks : 4)
      if (noRopeOff) return noRopeOff
      if (read.boolean('use_qk_norm') !== (experts !== 128))
        return `use_qk_norm ${read.boolean('use_qk_norm')} with ${experts} experts (llama.cpp has q/k norms unless there are 128)`
      const moeStep = read.integer('interleave_moe_layer_step', true)!
      // Layer moeStep - 1, then every moeStep-th.
      const moe = read.counts('moe_layers')
      const off = moe?.findIndex((layer, i) => layer !== (i + 1) * moeStep - 1)
      if (moe && (off !== -1 || moe.length !== Math.floor(blocks / moeStep)))
        return `moe_layers with ${off === -1 ? `${moe.length} layers` : `layer ${moe[off!]} at ${off}`} (llama.cpp has experts in every ${moeStep}th layer of ${blocks})`
    },
    tensors: fusedExperts('feed_forward.experts', false),
    keys: (c, add) => {
      llamaKeys(c, add)
      const { read } = c
      add('interleave_moe_layer_step', 'u32', read.integer('interleave_moe_layer_step', true))
      add('expert_feed_forward_length', 'u32', read.integer('intermediate_size', true))
      add('feed_forward_length', 'u32', read.integer('intermediate_size_mlp', true))
      // No chunked layer: llama.cpp's llama4 then chunks none either.
      if (read.strings('layer_types')?.every((type) => type === 'full_attention')) add('attention.sliding_window', 'u32', 0)
    },
  },
}

/** What this module exports: the architectures and the shared maps and transforms they name. */
export const TABLE: ArchitectureTable = { ARCHITECTURES, TOP_LEVEL, TENSORS, GATING, RESHAPES, PRE_TOKENIZERS }
