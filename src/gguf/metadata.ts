// config.json to the GGUF architecture, its hyperparameters and the tensors RoPE scaling adds, as llama.cpp's
// convert_hf_to_gguf.py writes them (TextModel.set_gguf_parameters and each model class's own, in the llama.cpp
// that node-llama-cpp 3.21.1 ships: release v0.4.0), for config.json as transformers 4 and 5 both write it.
import { SafetensorsError } from '../errors.ts'
import { excerpt, JsonValue, jsonFileError } from '../format/json-values.ts'
import { FILE_TYPES, fileTypeOf, type GgufDtype } from './file-types.ts'
import { ALIGNMENT, type KeyValue } from './format.ts'

type AddKey = (key: string, type: 'u32' | 'f32' | 'string', value: number | string | undefined) => void

/** What the conversion does for one transformers class beyond what every architecture shares. */
export interface Architecture {
  /** The GGUF architecture. */
  name: string
  /** The RoPE types llama.cpp implements for it besides the default, as config.json names them. */
  rope: readonly string[]
  /** q_proj and k_proj rows reordered (llama's `permute`: transformers rotates the halves of a head, llama.cpp pairs). */
  permuteQK?: boolean
  /** Norms hold w where llama.cpp multiplies by 1 + w (Gemma): the GGUF's norm weights are w + 1. */
  normPlusOne?: boolean
  /** post_attention_layernorm normalizes the attention's output (Gemma), not the FFN's input: post_attention_norm. */
  normAfterAttention?: boolean
  /** lm_head.weight is the embeddings (tied, Gemma): left out even when stored. */
  tiedOutput?: boolean
  /** GPT-2: Conv1D weights, stored [in, out], transposed to [out, in]. */
  conv1d?: boolean
  /** llama.cpp's fixed pattern of sliding-window layers: every `swaPeriod`-th layer global, the others local. */
  swaPeriod?: number
  /**
   * The attention window transformers applies (every token attends to the last `window` ones, its own included) and
   * llama.cpp's graph of this architecture does not; undefined for none.
   */
  window?: (values: JsonValue) => number | undefined
  /** config.json values the transformers config class assumes when they are absent. */
  defaults?: (values: JsonValue) => Record<string, unknown>
  /** The keys it writes besides those of every architecture. */
  keys?: (config: ModelConfig, add: AddKey) => void
}

/** The largest value of a GGUF u32 key. */
const U32_MAX = 2 ** 32 - 1

/** The largest finite float32: a larger number would be written as infinity. */
const F32_MAX = 3.4028234663852886e38

/** The first of config.json's `keys` (aliases) that is set, as a positive integer a GGUF u32 holds; undefined where none is. */
const u32 = (values: JsonValue, ...keys: string[]) =>
  values
    .first(...keys)
    .optional()
    ?.integer(1, U32_MAX)

/** The same, where the conversion cannot do without it. */
const requiredU32 = (values: JsonValue, ...keys: string[]) => values.first(...keys).integer(1, U32_MAX)

/** The first of config.json's `keys` that is set, as a number a GGUF f32 holds; undefined where none is. */
const f32 = (values: JsonValue, ...keys: string[]) =>
  values
    .first(...keys)
    .optional()
    ?.number(-F32_MAX, F32_MAX)

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
const slidingWindow = (values: JsonValue, otherwise: number | undefined) => {
  const window = values.get('sliding_window')
  return window.value === undefined ? otherwise : window.optional()?.integer(1, U32_MAX)
}
/**
 * Qwen's window, with use_sliding_window (4096 where config.json has none): Qwen2's and Qwen3's on the layers
 * layer_types names sliding_attention (transformers 5 writes them), else on those from max_window_layers on (the
 * class's default 28); Qwen3-MoE's, which has no layer types, on every layer.
 */
const qwenWindow = (layered: boolean) => (values: JsonValue) => {
  if (values.get('use_sliding_window').optional()?.boolean() !== true) return undefined
  const types = values.get('layer_types').optional()?.items()
  const sliding =
    !layered ||
    (types
      ? types.some((t) => t.value === 'sliding_attention')
      : (u32(values, 'num_hidden_layers') ?? 0) > (values.get('max_window_layers').optional()?.integer(0, U32_MAX) ?? 28))
  return sliding ? slidingWindow(values, 4096) : undefined
}
const QWEN = (name: string, layered = true): Architecture => ({ name, rope: ['linear', 'yarn'], window: qwenWindow(layered) })

/** The transformers architectures converted, by config.json's `architectures[0]`. */
export const ARCHITECTURES: Readonly<Record<string, Architecture>> = {
  LlamaForCausalLM: LLAMA,
  // MistralConfig's sliding_window is 4096 when config.json has none (Mistral 7B v0.1's); MixtralConfig's none.
  MistralForCausalLM: { ...LLAMA, window: (values) => slidingWindow(values, 4096) },
  MixtralForCausalLM: { ...LLAMA, window: (values) => slidingWindow(values, undefined) },
  Qwen2ForCausalLM: QWEN('qwen2'),
  Qwen3ForCausalLM: QWEN('qwen3'),
  Qwen3MoeForCausalLM: {
    ...QWEN('qwen3moe', false),
    keys: ({ values }, add) => {
      // llama.cpp's qwen3moe always renormalizes the chosen experts' weights.
      if (values.get('norm_topk_prob').value === false)
        throw unsupported("norm_topk_prob false (llama.cpp always renormalizes the chosen experts' weights)", 'qwen3moe')
      add('expert_feed_forward_length', 'u32', u32(values, 'moe_intermediate_size'))
    },
  },
  Gemma2ForCausalLM: {
    name: 'gemma2',
    rope: [],
    normPlusOne: true,
    normAfterAttention: true,
    tiedOutput: true,
    swaPeriod: 2,
    keys: ({ values }, add) => {
      add('attn_logit_softcapping', 'f32', f32(values, 'attn_logit_softcapping'))
      add('final_logit_softcapping', 'f32', f32(values, 'final_logit_softcapping'))
      add('attention.sliding_window', 'u32', u32(values, 'sliding_window'))
    },
  },
  Gemma3ForCausalLM: {
    name: 'gemma3',
    rope: ['linear', 'yarn'],
    normPlusOne: true,
    normAfterAttention: true,
    tiedOutput: true,
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
      const softcapping = f32(values, 'final_logit_softcapping')
      if (softcapping) add('final_logit_softcapping', 'f32', softcapping)
      // A pattern of 1 is every layer global: no sliding window at all.
      if (values.get('sliding_window_pattern').value !== 1) add('attention.sliding_window', 'u32', u32(values, 'sliding_window'))
    },
  },
  Phi3ForCausalLM: {
    name: 'phi3',
    rope: ['longrope'],
    keys: (c, add) => {
      add('rope.dimension_count', 'u32', c.ropeDims)
      add('rope.scaling.original_context_length', 'u32', c.rope.original ?? requiredU32(c.values, 'original_max_position_embeddings'))
      // 0 where config.json has none: llama.cpp tells Phi-4 from Phi-3 by it.
      add('attention.sliding_window', 'u32', u32(c.values, 'sliding_window') ?? 0)
      if (c.rope.type === 'longrope') add('rope.scaling.attn_factor', 'f32', c.rope.attentionFactor)
    },
  },
  // GPT-2 configs say n_inner: null for an FFN of 4 * n_embd.
  GPT2LMHeadModel: { name: 'gpt2', rope: [], conv1d: true, defaults: (v) => ({ n_inner: 4 * (u32(v, 'n_embd') ?? 0) || undefined }) },
}

/** RoPE's settings, from transformers 5's rope_parameters or transformers 4's rope_theta and rope_scaling. */
export interface Rope {
  /** The RoPE type in lower case: default, linear, yarn, llama3 or longrope (`su` is its old name). */
  type: string
  /**
   * A field of the rope dict: rope_parameters' (its full_attention entry's where layer types have their own), else
   * rope_scaling's; rope_theta also at the top level, where transformers 4 writes it.
   */
  field(key: string): JsonValue
  theta: number | undefined
  /** The context the model was trained with, before scaling (llama3, yarn, longrope; undefined for the others where config.json has none). */
  original: number | undefined
  /** Scaling's factor: the dict's, else as transformers computes it, the context's growth (none for linear). */
  factor: number | undefined
  /** Phi-3's longrope attention factor: the dict's, else transformers' default. */
  attentionFactor: number
}

/** A model's config.json, and the values the conversion needs of it. */
export interface ModelConfig {
  /** config.json, with the values its config class assumes where it has none. */
  values: JsonValue
  architecture: Architecture
  /** Attention heads, and key-value heads (num_attention_heads without grouped-query attention). */
  heads: number
  kvHeads: number
  /** The width of the hidden state: the embeddings' columns. */
  hidden: number
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

/** The RoPE types whose scaling is computed from the context the model was trained with. */
const SCALED_FROM_ORIGINAL = ['yarn', 'llama3', 'longrope']

function ropeOf(values: JsonValue, architecture: Architecture, maxPositions: number | undefined): Rope {
  const parameters = values.get('rope_parameters')
  // Gemma 3 keeps one dict per layer type: scaling applies to the global layers, the full_attention ones.
  const full = parameters.get('full_attention')
  const dicts = [full.present ? full : parameters, values.get('rope_scaling')]
  const field = (key: string) => {
    const found = dicts.map((dict) => dict.get(key)).find((value) => value.present)
    return found ?? (key === 'rope_theta' ? values.get(key) : dicts[0].get(key))
  }
  const named = (field('rope_type').optional() ?? field('type').optional())?.string().toLowerCase() ?? 'default'
  const type = named === 'su' ? 'longrope' : named
  const supported = ['default', ...architecture.rope]
  if (!supported.includes(type)) throw unsupported(`RoPE type ${excerpt(type)}`, `${architecture.name}, which takes ${supported.join(', ')}`)
  // transformers gives a top-level original_max_position_embeddings priority (Phi-3 keeps it there), then the dict's, then the context.
  const original = u32(values, 'original_max_position_embeddings') ?? field('original_max_position_embeddings').optional()?.integer(1, U32_MAX) ?? maxPositions
  if (original === undefined && SCALED_FROM_ORIGINAL.includes(type))
    throw jsonFileError(
      'config.json',
      `RoPE type ${JSON.stringify(type)} scales the context it was trained with, and neither original_max_position_embeddings nor max_position_embeddings says it`,
    )
  const factor =
    field('factor').optional()?.number(-F32_MAX, F32_MAX) ??
    (type === 'linear' || maxPositions === undefined || original === undefined ? undefined : maxPositions / original)
  if (factor === undefined && type === 'yarn')
    throw jsonFileError('config.json', 'RoPE type "yarn" has no factor, nor max_position_embeddings to compute it from')
  // longrope's, the only type that reads it, computed as transformers does where the dict has none.
  const attentionFactor =
    type !== 'longrope'
      ? 1
      : (field('attention_factor').optional()?.number(-F32_MAX, F32_MAX) ?? (factor! > 1 ? Math.sqrt(1 + Math.log(factor!) / Math.log(original!)) : 1))
  if (!(Math.abs(attentionFactor) <= F32_MAX))
    throw jsonFileError('config.json', `RoPE's attention factor, computed from a factor of ${factor} over ${original} positions, is not a finite number`)
  return { type, field, theta: field('rope_theta').optional()?.number(-F32_MAX, F32_MAX), original, factor, attentionFactor }
}

export function readModelConfig(config: JsonValue): ModelConfig {
  const name = config.get('architectures').optional()?.items()[0]?.string()
  const architecture = name !== undefined && Object.hasOwn(ARCHITECTURES, name) ? ARCHITECTURES[name] : undefined
  if (!architecture) {
    throw new SafetensorsError(
      'UnsupportedConversion',
      `config.json names the architecture ${name === undefined ? 'none' : excerpt(name)}; GGUF conversion supports ${Object.keys(ARCHITECTURES).join(', ')}`,
    )
  }
  const merged: Record<string, unknown> = { ...(config.value as Record<string, unknown>) }
  for (const [key, value] of Object.entries(architecture.defaults?.(config) ?? {})) merged[key] ??= value
  const values = new JsonValue(merged, config.file)
  const heads = requiredU32(values, 'num_attention_heads', 'n_head')
  const kvHeads = u32(values, 'num_key_value_heads') ?? heads
  if (heads % kvHeads !== 0) throw jsonFileError('config.json', `num_key_value_heads ${kvHeads} does not divide num_attention_heads ${heads}`)
  const hidden = requiredU32(values, 'hidden_size', 'n_embd')
  const rope = ropeOf(values, architecture, u32(values, 'max_position_embeddings', 'n_positions'))
  const headDim = u32(values, 'head_dim') ?? Math.floor(hidden / heads)
  if (headDim === 0) throw jsonFileError('config.json', `hidden_size ${hidden} is less than num_attention_heads ${heads}, and no head_dim is given`)
  const layerTypes = values.get('layer_types').optional()?.items()
  // llama.cpp places Gemma's sliding-window layers by a fixed period; a config.json that places them otherwise cannot be converted.
  if (architecture.swaPeriod && layerTypes) {
    const period = architecture.swaPeriod
    const layer = layerTypes.findIndex((t, i) => (t.value === 'full_attention') !== (i % period === period - 1))
    if (layer >= 0)
      throw unsupported(
        `layer_types with layer ${layer} of type ${excerpt(layerTypes[layer].string())} (llama.cpp makes every ${period}th layer global)`,
        architecture.name,
      )
  }
  const context = u32(values, 'max_position_embeddings', 'n_ctx', 'n_positions')
  const window = architecture.window?.(values)
  const partial = (rope.field('partial_rotary_factor').optional() ?? values.get('partial_rotary_factor').optional())?.number(0, 1) ?? 1
  return {
    values,
    architecture,
    window: window !== undefined && (context === undefined || window < context) ? window : undefined,
    heads,
    kvHeads,
    hidden,
    blocks: requiredU32(values, 'num_hidden_layers', 'n_layer'),
    vocabSize: requiredU32(values, 'vocab_size'),
    experts: u32(values, 'num_local_experts', 'num_experts') ?? 0,
    headDim,
    ropeDims: Math.floor(Math.floor(partial * hidden) / heads),
    rope,
  }
}

/**
 * What the GGUF of `config` says otherwise than config.json, one sentence each: its context cut to the attention
 * window llama.cpp would not apply, so that llama.cpp never attends farther back than transformers does.
 */
export function conversionNotes({ architecture, window, values }: ModelConfig): string[] {
  if (window === undefined) return []
  const context = u32(values, 'max_position_embeddings')
  return [
    `context_length is ${window}, config.json's sliding_window${context === undefined ? '' : `, not its max_position_embeddings ${context}`}: llama.cpp's ${architecture.name} attends to every earlier token, transformers to the last ${window} only`,
  ]
}

/** general.file_type (llama.h's llama_ftype) of the float dtypes; the file types have theirs in FILE_TYPES. */
const FLOAT_FILE_TYPE: Readonly<Record<string, number>> = { F32: 0, F16: 1, BF16: 32 }

/** The general.* and architecture keys of a GGUF of `config` whose weights are `dtype` (resolved). */
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
  add('context_length', 'u32', config.window ?? u32(values, 'max_position_embeddings', 'n_ctx', 'n_positions'))
  add('embedding_length', 'u32', config.hidden)
  add('feed_forward_length', 'u32', u32(values, 'intermediate_size', 'n_inner'))
  add('attention.head_count', 'u32', config.heads)
  add('attention.head_count_kv', 'u32', u32(values, 'num_key_value_heads'))
  if (rope.type === 'linear' || rope.type === 'yarn') {
    add('rope.scaling.type', 'string', rope.type)
    add('rope.scaling.factor', 'f32', rope.factor)
  }
  if (rope.type === 'yarn') {
    add('rope.scaling.original_context_length', 'u32', rope.original)
    const yarn = (...keys: string[]) =>
      keys
        .map(rope.field)
        .find((value) => value.present)
        ?.number(-F32_MAX, F32_MAX)
    add('rope.scaling.yarn_ext_factor', 'f32', yarn('extrapolation_factor'))
    add('rope.scaling.yarn_attn_factor', 'f32', yarn('attention_factor', 'attn_factor'))
    add('rope.scaling.yarn_beta_fast', 'f32', yarn('beta_fast'))
    add('rope.scaling.yarn_beta_slow', 'f32', yarn('beta_slow'))
  }
  add('rope.freq_base', 'f32', rope.theta)
  const sliding = values.get('rope_parameters').get('sliding_attention')
  add('rope.freq_base_swa', 'f32', f32(sliding, 'rope_theta') ?? f32(values, 'rope_local_base_freq'))
  add('attention.layer_norm_rms_epsilon', 'f32', f32(values, 'rms_norm_eps'))
  add('attention.layer_norm_epsilon', 'f32', f32(values, 'layer_norm_eps', 'layer_norm_epsilon'))
  add('expert_count', 'u32', config.experts || undefined)
  add('expert_used_count', 'u32', u32(values, 'num_experts_per_tok'))
  const headDim = u32(values, 'head_dim')
  add('attention.key_length', 'u32', headDim)
  add('attention.value_length', 'u32', headDim)
  architecture.keys?.(config, add)
  // general.quantization_version is ggml's GGML_QNT_VERSION.
  const fileType = fileTypeOf(dtype)
  kv.push(
    ['general.file_type', 'u32', fileType ? FILE_TYPES[fileType].id : FLOAT_FILE_TYPE[dtype]],
    ['general.quantization_version', 'u32', 2],
    ['general.alignment', 'u32', ALIGNMENT],
  )
  return kv
}

/** A tensor computed from config.json rather than read: RoPE's per-frequency factors. */
export interface ComputedTensor {
  name: string
  values: Float32Array
}

/** float32 arithmetic, as torch computes the converter's rope_freqs. */
const fround = Math.fround

/**
 * The tensors RoPE scaling adds: Llama 3's `rope_freqs` (LlamaModel.generate_extra_tensors, in float32 as
 * torch computes it), Phi-3's `rope_factors_long` and `rope_factors_short` (the dict's, checked).
 */
export function ropeTensors({ rope, headDim, ropeDims, architecture }: ModelConfig): ComputedTensor[] {
  const number = (key: string) => rope.field(key).optional()?.number(-F32_MAX, F32_MAX)
  if (rope.type === 'llama3') {
    const factor = number('factor') ?? 8
    const low = number('low_freq_factor') ?? 1
    const high = number('high_freq_factor') ?? 4
    if (!(high > low)) throw rope.field('high_freq_factor').error(`is ${high}, where Llama 3's RoPE needs more than low_freq_factor ${low}`)
    const base = rope.theta ?? 10000
    const old = rope.original!
    const values = new Float32Array(headDim / 2)
    // torch computes `scalar / tensor` as tensor.reciprocal() * scalar, each step rounded to float32.
    for (let i = 0; i < values.length; i++) {
      const frequency = fround(1 / fround(base ** fround((2 * i) / headDim)))
      const wavelength = fround(fround(1 / frequency) * fround(2 * Math.PI))
      const smooth = fround(fround(fround(fround(1 / wavelength) * old) - low) / (high - low))
      values[i] =
        wavelength < fround(old / high) ? 1 : wavelength > fround(old / low) ? factor : fround(1 / fround(fround(fround(1 - smooth) / factor) + smooth))
    }
    return [{ name: 'rope_freqs.weight', values }]
  }
  if (rope.type !== 'longrope' || !rope.field('long_factor').optional()?.items().length) return []
  return ['long', 'short'].map((kind) => {
    const key = `${kind}_factor`
    const factors = rope.field(key).optional()?.items()
    if (factors?.length !== ropeDims / 2)
      throw jsonFileError('config.json', `${key} must be ${ropeDims / 2} numbers for ${architecture.name}'s ${ropeDims} rotated dimensions`)
    return { name: `rope_factors_${kind}.weight`, values: Float32Array.from(factors, (factor) => factor.number(-F32_MAX, F32_MAX)) }
  })
}
