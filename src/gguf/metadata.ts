// config.json to the GGUF architecture, its hyperparameters and the tensors RoPE scaling adds, as llama.cpp's
// convert_hf_to_gguf.py writes them (TextModel.set_gguf_parameters and each model class's own, in the llama.cpp
// that node-llama-cpp 3.21.1 ships: release v0.4.0), for config.json as transformers 4 and 5 both write it. What
// differs by architecture is its entry of architectures.ts.
import { SafetensorsError } from '../errors.ts'
import { jsonFileError } from '../format/model-config.ts'
import type { AddKey, ArchitectureTable, ConfigReader, ModelConfig, Rope, Values } from './architectures.ts'
import { ALIGNMENT, type GgufDtype, type KeyValue } from './format.ts'

/** The first of config.json's `keys` (space-separated aliases) that is set, with the key it was found under. */
function firstOf(values: Values, keys: string): { key: string; value: unknown } {
  const aliases = keys.split(' ')
  const key = aliases.find((k) => values[k] != null) ?? aliases[0]
  return { key, value: values[key] ?? undefined }
}

/** A reader of `values` (config.json, or its rope dict) whose every value is checked: a wrong type names the key. */
function readerOf(values: Values): ConfigReader {
  const wrong = (key: string, value: unknown, what: string) => jsonFileError('config.json', `${key} is ${JSON.stringify(value)}, not ${what}`)
  const integerAt = (keys: string, min: number, required = false) => {
    const { key, value } = firstOf(values, keys)
    if (value === undefined && !required) return undefined
    if (!(typeof value === 'number' && Number.isInteger(value) && value >= min && value < 2 ** 32))
      throw wrong(key, value, min > 0 ? 'a positive integer' : 'an integer from 0')
    return value
  }
  const typed = <T>(key: string, is: (value: unknown) => value is T, what: string): T | undefined => {
    const value = values[key] ?? undefined
    if (value === undefined) return undefined
    if (!is(value)) throw wrong(key, value, what)
    return value
  }
  const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 2 ** 32
  return {
    integer: (keys, required) => integerAt(keys, 1, required),
    count: (keys) => integerAt(keys, 0),
    number: (keys) => {
      const { key, value } = firstOf(values, keys)
      if (value !== undefined && typeof value !== 'number') throw wrong(key, value, 'a number')
      return value
    },
    boolean: (key) => typed(key, (v): v is boolean => typeof v === 'boolean', 'true or false'),
    string: (key) => typed(key, (v): v is string => typeof v === 'string', 'a string'),
    strings: (key) => typed(key, (v): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string'), 'a list of strings'),
    counts: (key) => typed(key, (v): v is number[] => Array.isArray(v) && v.every(isCount), 'a list of integers from 0'),
  }
}

function ropeOf(
  values: Values,
  read: ConfigReader,
  { name, rope }: ModelConfig['architecture'],
  { unsupported }: ArchitectureTable,
  maxPositions: number | undefined,
): Rope {
  const parameters = (values.rope_parameters ?? {}) as Values
  // Gemma 3 keeps one dict per layer type: scaling applies to the global layers, the full_attention ones.
  const dict: Values = {
    rope_theta: values.rope_theta ?? values.rotary_emb_base,
    ...(values.rope_scaling as Values),
    ...((parameters.full_attention ?? parameters) as Values),
  }
  const inDict = readerOf(dict)
  const named = String(dict.rope_type ?? dict.type ?? 'default').toLowerCase()
  const type = named === 'su' ? 'longrope' : named
  const supported = ['default', ...rope]
  if (!supported.includes(type)) throw unsupported(`RoPE type ${JSON.stringify(type)}`, `${name}, which takes ${supported.join(', ')}`)
  // transformers gives a top-level original_max_position_embeddings priority (Phi-3 keeps it there), then the dict's, then the context.
  const original = read.integer('original_max_position_embeddings') ?? inDict.integer('original_max_position_embeddings') ?? maxPositions ?? 0
  const factor = inDict.number('factor') ?? (type === 'linear' ? undefined : (maxPositions ?? 0) / original)
  return {
    type,
    read: inDict,
    values: dict,
    theta: inDict.number('rope_theta'),
    original,
    factor,
    attentionFactor: inDict.number('attention_factor') ?? ((factor ?? 0) > 1 ? Math.sqrt(1 + Math.log(factor!) / Math.log(original)) : 1),
    // GPT-NeoX's config.json on the Hub names it rotary_pct.
    partial: inDict.number('partial_rotary_factor') ?? read.number('partial_rotary_factor rotary_pct') ?? 1,
  }
}

/** config.json read for the GGUF of one of `table`'s architectures: its values and the entry's checks. */
export function readModelConfig(config: Values, table: ArchitectureTable): ModelConfig {
  const { ARCHITECTURES } = table
  const names = config.architectures
  const name = Array.isArray(names) ? names[0] : undefined
  const architecture = Object.hasOwn(ARCHITECTURES, name) ? ARCHITECTURES[name] : undefined
  if (!architecture) {
    throw new SafetensorsError(
      'UnsupportedConversion',
      `config.json names the architecture ${JSON.stringify(name)}; GGUF conversion supports ${Object.keys(ARCHITECTURES).join(', ')} (for another, llama.cpp's own convert_hf_to_gguf.py)`,
    )
  }
  const values = { ...config }
  for (const [key, value] of Object.entries(architecture.defaults?.(values) ?? {})) values[key] ??= value
  const read = readerOf(values)
  const heads = read.integer('num_attention_heads n_head', true)!
  const hidden = read.integer('hidden_size n_embd', true)!
  const rope = ropeOf(values, read, architecture, table, read.integer('max_position_embeddings n_positions'))
  const headDim = read.integer('head_dim') ?? Math.floor(hidden / heads)
  const model: ModelConfig = {
    values,
    read,
    architecture,
    table,
    hidden,
    heads,
    kvHeads: architecture.kvHeads?.(read, heads) ?? read.integer('num_key_value_heads') ?? heads,
    blocks: read.integer('num_hidden_layers n_layer', true)!,
    vocabSize: read.integer('vocab_size', true)!,
    experts: read.integer('num_local_experts num_experts n_routed_experts') ?? 0,
    headDim,
    // As transformers computes the rotated dimensions: a head's times the fraction, rounded down.
    ropeDims: Math.floor(headDim * rope.partial),
    rope,
  }
  architecture.check?.(model)
  return model
}

/** general.file_type (gguf-py's LlamaFileType) of each dtype, and of a model whose experts stay MXFP4 (MOSTLY_MXFP4_MOE). */
const FILE_TYPE: Readonly<Record<GgufDtype | 'MXFP4', number>> = { F32: 0, F16: 1, Q8_0: 7, BF16: 32, MXFP4: 38 }

/** Whether the model's experts are MXFP4 blocks that its GGUF keeps (gpt-oss as OpenAI ships it). */
export function keepsMxfp4({ architecture, values }: ModelConfig): boolean {
  return architecture.mxfp4Experts === true && (values.quantization_config as Values | undefined)?.quant_method === 'mxfp4'
}

/** The general.* and architecture keys of a GGUF of `config` whose weights are `dtype`. */
export function modelMetadata(config: ModelConfig, dtype: GgufDtype): KeyValue[] {
  const { read, architecture, rope } = config
  const { GATING, unsupported } = config.table
  const arch = architecture.name
  const keys = new Map<string, KeyValue>()
  const set = (kv: KeyValue) => keys.set(kv[0], kv)
  const add: AddKey = (key, type, value) => {
    if (value === undefined) keys.delete(`${arch}.${key}`)
    else set([`${arch}.${key}`, type, value])
  }
  set(['general.architecture', 'string', arch])
  set(['general.type', 'string', 'model'])
  // What TextModel.set_gguf_parameters writes, each from the first of config.json's names for it that is set.
  if (architecture.sharedKeys) {
    add('block_count', 'u32', config.blocks)
    add('context_length', 'u32', read.integer('max_position_embeddings n_ctx n_positions max_length max_sequence_length model_max_length'))
    add('embedding_length', 'u32', read.integer('hidden_size n_embd dim'))
    add('feed_forward_length', 'u32', read.integer('prefix_dense_intermediate_size dense_intermediate_size intermediate_size n_inner hidden_dim'))
    add('attention.head_count', 'u32', config.heads)
    add('attention.head_count_kv', 'u32', read.integer('num_key_value_heads n_kv_heads'))
    if (rope.type === 'linear' || rope.type === 'yarn') {
      add('rope.scaling.type', 'string', rope.type)
      add('rope.scaling.factor', 'f32', rope.factor)
    }
    if (rope.type === 'yarn') {
      add('rope.scaling.original_context_length', 'u32', rope.original)
      add('rope.scaling.yarn_ext_factor', 'f32', rope.read.number('extrapolation_factor'))
      add('rope.scaling.yarn_attn_factor', 'f32', rope.read.number('attention_factor attn_factor'))
      add('rope.scaling.yarn_beta_fast', 'f32', rope.read.number('beta_fast'))
      add('rope.scaling.yarn_beta_slow', 'f32', rope.read.number('beta_slow'))
    }
    add('rope.freq_base', 'f32', rope.theta)
    const sliding = (config.values.rope_parameters as Values | undefined)?.sliding_attention as Values | undefined
    add('rope.freq_base_swa', 'f32', readerOf(sliding ?? {}).number('rope_theta') ?? read.number('rope_local_base_freq'))
    add('attention.layer_norm_rms_epsilon', 'f32', read.number('rms_norm_eps norm_eps'))
    add('attention.layer_norm_epsilon', 'f32', read.number('layer_norm_eps layer_norm_epsilon norm_epsilon'))
    add('expert_count', 'u32', config.experts || undefined)
    add('expert_used_count', 'u32', read.integer('num_experts_per_tok num_experts_per_token top_k_experts'))
    add('expert_group_count', 'u32', read.integer('n_group'))
    add('expert_group_used_count', 'u32', read.integer('topk_group'))
    const scoring = read.string('scoring_func')
    if (scoring !== undefined && !Object.hasOwn(GATING, scoring))
      throw unsupported(`scoring_func ${JSON.stringify(scoring)}`, `${arch}, which takes ${Object.keys(GATING).join(', ')}`)
    add('expert_gating_func', 'u32', scoring && GATING[scoring])
    const headDim = read.integer('head_dim')
    add('attention.key_length', 'u32', headDim)
    add('attention.value_length', 'u32', headDim)
  }
  architecture.keys?.(config, add)
  if (architecture.addsBos !== undefined) set(['tokenizer.ggml.add_bos_token', 'bool', architecture.addsBos])
  // general.quantization_version is ggml's GGML_QNT_VERSION.
  set(['general.file_type', 'u32', FILE_TYPE[keepsMxfp4(config) ? 'MXFP4' : dtype]])
  set(['general.quantization_version', 'u32', 2])
  set(['general.alignment', 'u32', ALIGNMENT])
  return [...keys.values()]
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
    const factor = rope.read.number('factor') ?? 8
    const low = rope.read.number('low_freq_factor') ?? 1
    const high = rope.read.number('high_freq_factor') ?? 4
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
