// config.json to the GGUF architecture, its hyperparameters and the tensors RoPE scaling adds, as llama.cpp's
// convert_hf_to_gguf.py writes them (TextModel.set_gguf_parameters and each model class's own, in the llama.cpp
// that node-llama-cpp 3.21.1 ships: release v0.4.0), for config.json as transformers 4 and 5 both write it.
import { SafetensorsError } from '../errors.ts'
import { jsonFileError } from '../format/model-config.ts'
import { ALIGNMENT, type GgufDtype, type KeyValue } from './format.ts'

type Values = Record<string, unknown>
type AddKey = (key: string, type: 'u32' | 'f32' | 'string', value: number | string | undefined) => void

/** What the conversion does for one transformers class beyond what every architecture shares. */
export interface Architecture {
  /** The GGUF architecture. */
  name: string
  /** The RoPE types llama.cpp implements for it besides the default, as config.json names them. */
  rope: readonly string[]
  /** q_proj and k_proj rows reordered (llama's `permute`: transformers rotates the halves of a head, llama.cpp pairs). */
  permuteQK?: boolean
  /** Gemma: norms hold w where llama.cpp multiplies by 1 + w; norms after attention and after the FFN; lm_head (tied) left out. */
  gemma?: boolean
  /** GPT-2: Conv1D weights, stored [in, out], transposed to [out, in]. */
  conv1d?: boolean
  /** llama.cpp's fixed pattern of sliding-window layers: every `swaPeriod`-th layer global, the others local. */
  swaPeriod?: number
  /**
   * The attention window transformers applies (every token attends to the last `window` ones, its own included) and
   * llama.cpp's graph of this architecture does not; undefined for none.
   */
  window?: (values: Values) => number | undefined
  /** config.json values the transformers config class assumes when they are absent. */
  defaults?: (values: Values) => Values
  /** The keys it writes besides those of every architecture. */
  keys?: (config: ModelConfig, add: AddKey) => void
}

const LLAMA: Architecture = {
  name: 'llama',
  rope: ['linear', 'yarn', 'llama3'],
  permuteQK: true,
  keys: (c, add) => {
    add('vocab_size', 'u32', c.vocabSize)
    add('rope.dimension_count', 'u32', c.headDim)
  },
}
/** A config class's `sliding_window`: config.json's (null for none), else the class's default. */
const slidingWindow = (values: Values, otherwise: number | undefined) =>
  Object.hasOwn(values, 'sliding_window') ? integer(values, 'sliding_window') : otherwise
/**
 * Qwen2's and Qwen3's window: with use_sliding_window, on the layers layer_types names sliding_attention (transformers
 * 5 writes them), else those from max_window_layers on (the class's default 28).
 */
const qwenWindow = (values: Values) => {
  if (values.use_sliding_window !== true) return undefined
  const types = values.layer_types
  const sliding = Array.isArray(types)
    ? types.includes('sliding_attention')
    : (integer(values, 'num_hidden_layers') ?? 0) > (integer(values, 'max_window_layers') ?? 28)
  return sliding ? slidingWindow(values, 4096) : undefined
}
const QWEN = (name: string): Architecture => ({ name, rope: ['linear', 'yarn'], window: qwenWindow })

/** The transformers architectures converted, by config.json's `architectures[0]`. */
export const ARCHITECTURES: Readonly<Record<string, Architecture>> = {
  LlamaForCausalLM: LLAMA,
  // MistralConfig's sliding_window is 4096 when config.json has none (Mistral 7B v0.1's); MixtralConfig's none.
  MistralForCausalLM: { ...LLAMA, window: (values) => slidingWindow(values, 4096) },
  MixtralForCausalLM: { ...LLAMA, window: (values) => slidingWindow(values, undefined) },
  Qwen2ForCausalLM: QWEN('qwen2'),
  Qwen3ForCausalLM: QWEN('qwen3'),
  Qwen3MoeForCausalLM: {
    ...QWEN('qwen3moe'),
    keys: ({ values }, add) => {
      // llama.cpp's qwen3moe always renormalizes the chosen experts' weights.
      if (values.norm_topk_prob === false) throw unsupported("norm_topk_prob false (llama.cpp always renormalizes the chosen experts' weights)", 'qwen3moe')
      add('expert_feed_forward_length', 'u32', integer(values, 'moe_intermediate_size'))
    },
  },
  Gemma2ForCausalLM: {
    name: 'gemma2',
    rope: [],
    gemma: true,
    swaPeriod: 2,
    keys: ({ values }, add) => {
      add('attn_logit_softcapping', 'f32', number(values, 'attn_logit_softcapping'))
      add('final_logit_softcapping', 'f32', number(values, 'final_logit_softcapping'))
      add('attention.sliding_window', 'u32', integer(values, 'sliding_window'))
    },
  },
  Gemma3ForCausalLM: {
    name: 'gemma3',
    rope: ['linear', 'yarn'],
    gemma: true,
    swaPeriod: 6,
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
    keys: ({ values }, add) => {
      if (values.final_logit_softcapping) add('final_logit_softcapping', 'f32', number(values, 'final_logit_softcapping'))
      // A pattern of 1 is every layer global: no sliding window at all.
      if (values.sliding_window_pattern !== 1) add('attention.sliding_window', 'u32', integer(values, 'sliding_window'))
    },
  },
  Phi3ForCausalLM: {
    name: 'phi3',
    rope: ['longrope'],
    keys: (c, add) => {
      add('rope.dimension_count', 'u32', c.ropeDims)
      add('rope.scaling.original_context_length', 'u32', c.rope.original)
      // 0 where config.json has none: llama.cpp tells Phi-4 from Phi-3 by it.
      add('attention.sliding_window', 'u32', integer(c.values, 'sliding_window') ?? 0)
      if (c.rope.type === 'longrope') add('rope.scaling.attn_factor', 'f32', c.rope.attentionFactor)
    },
  },
  // GPT-2 configs say n_inner: null for an FFN of 4 * n_embd.
  GPT2LMHeadModel: { name: 'gpt2', rope: [], conv1d: true, defaults: (v) => ({ n_inner: 4 * (v.n_embd as number) }) },
}

/** RoPE's settings, from transformers 5's rope_parameters or transformers 4's rope_theta and rope_scaling. */
export interface Rope {
  /** The RoPE type in lower case: default, linear, yarn, llama3 or longrope (`su` is its old name). */
  type: string
  /** Every field of the rope dict (of its full_attention entry where layer types have their own). */
  values: Values
  theta: number | undefined
  /** The context the model was trained with, before scaling (llama3, yarn, longrope). */
  original: number
  /** Scaling's factor: the dict's, else as transformers computes it, the context's growth (none for linear). */
  factor: number | undefined
  /** Phi-3's longrope attention factor: the dict's, else transformers' default. */
  attentionFactor: number
}

/** A model's config.json, and the values the conversion needs of it. */
export interface ModelConfig {
  /** config.json, with the values its config class assumes where it has none. */
  values: Values
  architecture: Architecture
  /** Attention heads, and key-value heads (num_attention_heads without grouped-query attention). */
  heads: number
  kvHeads: number
  blocks: number
  vocabSize: number
  /** Experts per MoE layer, 0 for a dense model. */
  experts: number
  /** A head's dimension, and how many of them RoPE rotates. */
  headDim: number
  ropeDims: number
  rope: Rope
  /** The attention window llama.cpp would not apply, where it is shorter than the context: the GGUF's context_length. */
  window: number | undefined
}

function unsupported(what: string, arch: string): SafetensorsError {
  return new SafetensorsError('UnsupportedConversion', `config.json: ${what} is not supported for GGUF architecture ${arch}`)
}

/** The first of config.json's `keys` (space-separated aliases) that is set: a number (a positive integer below 2^32 when `isInteger`), or undefined (a failure when `required`). */
function numberAt(values: Values, keys: string, isInteger: boolean, required = false): number | undefined {
  const aliases = keys.split(' ')
  const key = aliases.find((k) => values[k] != null) ?? aliases[0]
  const value = values[key] ?? undefined
  if (value === undefined && !required) return undefined
  if (typeof value !== 'number' || (isInteger && !(Number.isInteger(value) && value > 0 && value < 2 ** 32)))
    throw jsonFileError('config.json', `${key} is ${JSON.stringify(value)}, not a ${isInteger ? 'positive integer' : 'number'}`)
  return value
}
const integer = (values: Values, keys: string, required?: boolean) => numberAt(values, keys, true, required)
const number = (values: Values, keys: string) => numberAt(values, keys, false)

function ropeOf(values: Values, architecture: Architecture, maxPositions: number | undefined): Rope {
  const parameters = (values.rope_parameters ?? {}) as Values
  // Gemma 3 keeps one dict per layer type: scaling applies to the global layers, the full_attention ones.
  const dict: Values = { rope_theta: values.rope_theta, ...(values.rope_scaling as Values), ...((parameters.full_attention ?? parameters) as Values) }
  const named = String(dict.rope_type ?? dict.type ?? 'default').toLowerCase()
  const type = named === 'su' ? 'longrope' : named
  const supported = ['default', ...architecture.rope]
  if (!supported.includes(type)) throw unsupported(`RoPE type ${JSON.stringify(type)}`, `${architecture.name}, which takes ${supported.join(', ')}`)
  // transformers gives a top-level original_max_position_embeddings priority (Phi-3 keeps it there), then the dict's, then the context.
  const original = integer(values, 'original_max_position_embeddings') ?? integer(dict, 'original_max_position_embeddings') ?? maxPositions ?? 0
  const factor = number(dict, 'factor') ?? (type === 'linear' ? undefined : (maxPositions ?? 0) / original)
  return {
    type,
    values: dict,
    theta: number(dict, 'rope_theta'),
    original,
    factor,
    attentionFactor: number(dict, 'attention_factor') ?? ((factor ?? 0) > 1 ? Math.sqrt(1 + Math.log(factor!) / Math.log(original)) : 1),
  }
}

export function readModelConfig(config: Values): ModelConfig {
  const names = config.architectures
  const name = Array.isArray(names) ? names[0] : undefined
  const architecture = Object.hasOwn(ARCHITECTURES, name) ? ARCHITECTURES[name] : undefined
  if (!architecture) {
    throw new SafetensorsError(
      'UnsupportedConversion',
      `config.json names the architecture ${JSON.stringify(name)}; GGUF conversion supports ${Object.keys(ARCHITECTURES).join(', ')}`,
    )
  }
  const values = { ...config }
  for (const [key, value] of Object.entries(architecture.defaults?.(values) ?? {})) values[key] ??= value
  const heads = integer(values, 'num_attention_heads n_head', true)!
  const hidden = integer(values, 'hidden_size n_embd', true)!
  const rope = ropeOf(values, architecture, integer(values, 'max_position_embeddings n_positions'))
  const headDim = integer(values, 'head_dim') ?? Math.floor(hidden / heads)
  const layerTypes = values.layer_types
  // llama.cpp places Gemma's sliding-window layers by a fixed period; a config.json that places them otherwise cannot be converted.
  if (architecture.swaPeriod && Array.isArray(layerTypes)) {
    const period = architecture.swaPeriod
    if (layerTypes.some((t, i) => (t === 'full_attention') !== (i % period === period - 1)))
      throw unsupported(`layer_types ${JSON.stringify(layerTypes)} (llama.cpp makes every ${period}th layer global)`, architecture.name)
  }
  const context = integer(values, 'max_position_embeddings n_ctx n_positions')
  const window = architecture.window?.(values)
  return {
    values,
    architecture,
    window: window !== undefined && (context === undefined || window < context) ? window : undefined,
    heads,
    kvHeads: integer(values, 'num_key_value_heads') ?? heads,
    blocks: integer(values, 'num_hidden_layers n_layer', true)!,
    vocabSize: integer(values, 'vocab_size', true)!,
    experts: integer(values, 'num_local_experts num_experts') ?? 0,
    headDim,
    ropeDims: Math.floor(Math.floor((number(rope.values, 'partial_rotary_factor') ?? number(values, 'partial_rotary_factor') ?? 1) * hidden) / heads),
    rope,
  }
}

/**
 * What the GGUF of `config` says otherwise than config.json, one sentence each: its context cut to the attention
 * window llama.cpp would not apply, so that llama.cpp never attends farther back than transformers does.
 */
export function conversionNotes({ architecture, window, values }: ModelConfig): string[] {
  if (window === undefined) return []
  const context = integer(values, 'max_position_embeddings')
  return [
    `context_length is ${window}, config.json's sliding_window, not ${context === undefined ? 'unset' : `its max_position_embeddings ${context}`}: llama.cpp's ${architecture.name} attends to every earlier token, transformers to the last ${window} only`,
  ]
}

/** general.file_type (gguf-py's LlamaFileType) of each dtype. */
const FILE_TYPE: Readonly<Record<GgufDtype, number>> = { F32: 0, F16: 1, Q8_0: 7, BF16: 32 }

/** The general.* and architecture keys of a GGUF of `config` whose weights are `dtype`. */
export function modelMetadata(config: ModelConfig, dtype: GgufDtype): KeyValue[] {
  const { values, architecture, rope } = config
  const arch = architecture.name
  const kv: KeyValue[] = [
    ['general.architecture', 'string', arch],
    ['general.type', 'string', 'model'],
  ]
  const add: AddKey = (key, type, value) => value !== undefined && kv.push([`${arch}.${key}`, type, value])
  // What TextModel.set_gguf_parameters writes, each from the first of config.json's names for it that is set (those
  // of the classes in ARCHITECTURES: GPT-2 has its own).
  add('block_count', 'u32', config.blocks)
  add('context_length', 'u32', config.window ?? integer(values, 'max_position_embeddings n_ctx n_positions'))
  add('embedding_length', 'u32', integer(values, 'hidden_size n_embd'))
  add('feed_forward_length', 'u32', integer(values, 'intermediate_size n_inner'))
  add('attention.head_count', 'u32', config.heads)
  add('attention.head_count_kv', 'u32', integer(values, 'num_key_value_heads'))
  if (rope.type === 'linear' || rope.type === 'yarn') {
    add('rope.scaling.type', 'string', rope.type)
    add('rope.scaling.factor', 'f32', rope.factor)
  }
  if (rope.type === 'yarn') {
    add('rope.scaling.original_context_length', 'u32', rope.original)
    add('rope.scaling.yarn_ext_factor', 'f32', number(rope.values, 'extrapolation_factor'))
    add('rope.scaling.yarn_attn_factor', 'f32', number(rope.values, 'attention_factor attn_factor'))
    add('rope.scaling.yarn_beta_fast', 'f32', number(rope.values, 'beta_fast'))
    add('rope.scaling.yarn_beta_slow', 'f32', number(rope.values, 'beta_slow'))
  }
  add('rope.freq_base', 'f32', rope.theta)
  const sliding = (values.rope_parameters as Values | undefined)?.sliding_attention as Values | undefined
  add('rope.freq_base_swa', 'f32', number(sliding ?? {}, 'rope_theta') ?? number(values, 'rope_local_base_freq'))
  add('attention.layer_norm_rms_epsilon', 'f32', number(values, 'rms_norm_eps'))
  add('attention.layer_norm_epsilon', 'f32', number(values, 'layer_norm_eps layer_norm_epsilon'))
  add('expert_count', 'u32', config.experts || undefined)
  add('expert_used_count', 'u32', integer(values, 'num_experts_per_tok'))
  const headDim = integer(values, 'head_dim')
  add('attention.key_length', 'u32', headDim)
  add('attention.value_length', 'u32', headDim)
  architecture.keys?.(config, add)
  // general.quantization_version is ggml's GGML_QNT_VERSION.
  kv.push(['general.file_type', 'u32', FILE_TYPE[dtype]], ['general.quantization_version', 'u32', 2], ['general.alignment', 'u32', ALIGNMENT])
  return kv
}

/** A tensor computed from config.json rather than read: RoPE's per-frequency factors. */
export interface ComputedTensor {
  name: string
  values: Float32Array
}

/** float32 arithmetic, as torch computes the converter's rope_freqs. */
const f32 = Math.fround

/**
 * The tensors RoPE scaling adds: Llama 3's `rope_freqs` (LlamaModel.generate_extra_tensors, in float32 as
 * torch computes it), Phi-3's `rope_factors_long` and `rope_factors_short` (the dict's, checked).
 */
export function ropeTensors({ rope, headDim, ropeDims, architecture }: ModelConfig): ComputedTensor[] {
  if (rope.type === 'llama3') {
    const factor = number(rope.values, 'factor') ?? 8
    const low = number(rope.values, 'low_freq_factor') ?? 1
    const high = number(rope.values, 'high_freq_factor') ?? 4
    const base = rope.theta ?? 10000
    const old = rope.original
    const values = new Float32Array(headDim / 2)
    // torch computes `scalar / tensor` as tensor.reciprocal() * scalar, each step rounded to float32.
    for (let i = 0; i < values.length; i++) {
      const frequency = f32(1 / f32(base ** f32((2 * i) / headDim)))
      const wavelength = f32(f32(1 / frequency) * f32(2 * Math.PI))
      const smooth = f32(f32(f32(f32(1 / wavelength) * old) - low) / (high - low))
      values[i] = wavelength < f32(old / high) ? 1 : wavelength > f32(old / low) ? factor : f32(1 / f32(f32(f32(1 - smooth) / factor) + smooth))
    }
    return [{ name: 'rope_freqs.weight', values }]
  }
  if (rope.type !== 'longrope' || !(rope.values.long_factor as unknown[] | undefined)?.length) return []
  return ['long', 'short'].map((kind) => {
    const key = `${kind}_factor`
    const factors = rope.values[key]
    if (!Array.isArray(factors) || factors.length !== ropeDims / 2 || factors.some((f) => typeof f !== 'number'))
      throw jsonFileError('config.json', `${key} must be ${ropeDims / 2} numbers for ${architecture.name}'s ${ropeDims} rotated dimensions`)
    return { name: `rope_factors_${kind}.weight`, values: Float32Array.from(factors) }
  })
}
