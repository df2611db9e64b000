// config.json to the GGUF architecture, its hyperparameters and the tensors RoPE scaling adds, as llama.cpp's
// convert_hf_to_gguf.py writes them (TextModel.set_gguf_parameters and each model class's own, in the llama.cpp
// that node-llama-cpp 3.21.1 ships: release v0.4.0), for config.json as transformers 4 and 5 both write it. What
// differs by architecture is its entry of architectures.ts.
import { SafetensorsError } from '../errors.ts'
import { excerpt, JsonValue, jsonFileError } from '../format/json-values.ts'
import type { AddKey, Architecture, ArchitectureTable, ConfigReader, ModelConfig, Rope } from './architectures.ts'
import { FILE_TYPES, fileTypeOf, type GgufDtype } from './file-types.ts'
import { ALIGNMENT, type KeyValue } from './format.ts'

/** The largest value of a GGUF u32 key. */
const U32_MAX = 2 ** 32 - 1

/** The largest finite float32: a larger number would be written as infinity. */
const F32_MAX = 3.4028234663852886e38

/**
 * A reader of config.json's values (or of its rope dict's), each checked for the GGUF key it becomes: `field(key)`
 * is a value, located in config.json for its errors; the reader's `keys` are space-separated aliases, of which the
 * first that is set is read.
 */
function readerOf(field: (key: string) => JsonValue): ConfigReader {
  const first = (keys: string) => {
    const values = keys.split(' ').map(field)
    return values.find((value) => value.present) ?? values[0]
  }
  return {
    value: first,
    integer: (keys, required) => (required ? first(keys) : first(keys).optional())?.integer(1, U32_MAX),
    count: (keys) => first(keys).optional()?.integer(0, U32_MAX),
    number: (keys) => first(keys).optional()?.number(-F32_MAX, F32_MAX),
    boolean: (key) => field(key).optional()?.boolean(),
    string: (key) => field(key).optional()?.string(),
    strings: (key) =>
      field(key)
        .optional()
        ?.items()
        .map((item) => item.string()),
    counts: (key) =>
      field(key)
        .optional()
        ?.items()
        .map((item) => item.integer(0, U32_MAX)),
  }
}

/** The error for what llama.cpp cannot run as transformers does (`what`, of config.json) in GGUF architecture `arch`. */
function unsupported(what: string, arch: string): SafetensorsError {
  return new SafetensorsError('UnsupportedConversion', `config.json: ${what} is not supported for GGUF architecture ${arch}`)
}

/** The RoPE types whose scaling is computed from the context the model was trained with. */
const SCALED_FROM_ORIGINAL = ['yarn', 'llama3', 'longrope']

function ropeOf(values: JsonValue, read: ConfigReader, { name, rope }: Architecture, maxPositions: number | undefined): Rope {
  const parameters = values.get('rope_parameters')
  // Gemma 3 keeps one dict per layer type: scaling applies to the global layers, the full_attention ones.
  const full = parameters.get('full_attention')
  const dicts = [full.present ? full : parameters, values.get('rope_scaling')]
  const field = (key: string) => {
    const found = dicts.map((dict) => dict.get(key)).find((value) => value.present)
    // rope_theta also at the top level, where transformers 4 writes it (GPT-NeoX's rotary_emb_base).
    return found ?? (key === 'rope_theta' ? values.first(key, 'rotary_emb_base') : dicts[0].get(key))
  }
  const inDict = readerOf(field)
  const named = (field('rope_type').optional() ?? field('type').optional())?.string().toLowerCase() ?? 'default'
  const type = named === 'su' ? 'longrope' : named
  const supported = ['default', ...rope]
  if (!supported.includes(type)) throw unsupported(`RoPE type ${excerpt(type)}`, `${name}, which takes ${supported.join(', ')}`)
  // transformers gives a top-level original_max_position_embeddings priority (Phi-3 keeps it there), then the dict's, then the context.
  const original = read.integer('original_max_position_embeddings') ?? inDict.integer('original_max_position_embeddings') ?? maxPositions
  if (original === undefined && SCALED_FROM_ORIGINAL.includes(type))
    throw jsonFileError(
      'config.json',
      `RoPE type ${JSON.stringify(type)} scales the context it was trained with, and neither original_max_position_embeddings nor max_position_embeddings says it`,
    )
  const factor = inDict.number('factor') ?? (type === 'linear' || maxPositions === undefined || original === undefined ? undefined : maxPositions / original)
  if (factor === undefined && type === 'yarn')
    throw jsonFileError('config.json', 'RoPE type "yarn" has no factor, nor max_position_embeddings to compute it from')
  // longrope's, the only type that reads it, computed as transformers does where the dict has none.
  const attentionFactor =
    type !== 'longrope' ? 1 : (inDict.number('attention_factor') ?? (factor! > 1 ? Math.sqrt(1 + Math.log(factor!) / Math.log(original!)) : 1))
  if (!(Math.abs(attentionFactor) <= F32_MAX))
    throw jsonFileError('config.json', `RoPE's attention factor, computed from a factor of ${factor} over ${original} positions, is not a finite number`)
  return {
    type,
    read: inDict,
    field,
    theta: inDict.number('rope_theta'),
    original,
    factor,
    attentionFactor,
    // GPT-NeoX's config.json on the Hub names it rotary_pct.
    partial: (field('partial_rotary_factor').optional() ?? read.value('partial_rotary_factor rotary_pct').optional())?.number(0, 1) ?? 1,
  }
}

/** config.json read for the GGUF of one of `table`'s architectures: its values and the entry's checks. */
export function readModelConfig(config: JsonValue, table: ArchitectureTable): ModelConfig {
  const { ARCHITECTURES } = table
  const name = config.get('architectures').optional()?.items()[0]?.string()
  const architecture = name !== undefined && Object.hasOwn(ARCHITECTURES, name) ? ARCHITECTURES[name] : undefined
  if (!architecture) {
    throw new SafetensorsError(
      'UnsupportedConversion',
      `config.json names the architecture ${name === undefined ? 'none' : excerpt(name)}; GGUF conversion supports ${Object.keys(ARCHITECTURES).join(', ')} (for another, llama.cpp's own convert_hf_to_gguf.py)`,
    )
  }
  const merged: Record<string, unknown> = { ...(config.value as Record<string, unknown>) }
  for (const [key, value] of Object.entries(architecture.defaults?.(config) ?? {})) merged[key] ??= value
  const values = new JsonValue(merged, config.file)
  const read = readerOf((key) => values.get(key))
  const heads = read.integer('num_attention_heads n_head', true)!
  const kvHeads = architecture.kvHeads?.(read, heads) ?? read.integer('num_key_value_heads') ?? heads
  if (heads % kvHeads !== 0) throw jsonFileError('config.json', `num_key_value_heads ${kvHeads} does not divide num_attention_heads ${heads}`)
  const hidden = read.integer('hidden_size n_embd', true)!
  const rope = ropeOf(values, read, architecture, read.integer('max_position_embeddings n_positions'))
  const headDim = architecture.headDim?.(read) ?? read.integer('head_dim') ?? Math.floor(hidden / heads)
  if (headDim === 0) throw jsonFileError('config.json', `hidden_size ${hidden} is less than num_attention_heads ${heads}, and no head_dim is given`)
  const context = read.integer('max_position_embeddings n_ctx n_positions')
  const window = architecture.window?.(read)
  const model: ModelConfig = {
    values,
    read,
    architecture,
    table,
    hidden,
    heads,
    kvHeads,
    blocks: read.integer('num_hidden_layers n_layer', true)!,
    vocabSize: read.integer('vocab_size', true)!,
    experts: read.integer('num_local_experts num_experts n_routed_experts') ?? 0,
    headDim,
    // As transformers computes the rotated dimensions: a head's times the fraction, rounded down.
    ropeDims: Math.floor(headDim * rope.partial),
    rope,
    window: window !== undefined && (context === undefined || window < context) ? window : undefined,
  }
  const refused = architecture.check?.(model)
  if (refused !== undefined) throw unsupported(refused, architecture.name)
  return model
}

/**
 * What the GGUF of `config` says otherwise than config.json, one sentence each: its context cut to the attention
 * window llama.cpp would not apply, so that llama.cpp never attends farther back than transformers does.
 */
export function conversionNotes({ architecture, window, read }: ModelConfig): string[] {
  if (window === undefined) return []
  const context = read.integer('max_position_embeddings')
  return [
    `context_length is ${window}, config.json's sliding_window${context === undefined ? '' : `, not its max_position_embeddings ${context}`}: llama.cpp's ${architecture.name} attends to every earlier token, transformers to the last ${window} only`,
  ]
}

/**
 * general.file_type (llama.h's llama_ftype) of the float dtypes, and of a model whose experts stay MXFP4 in the types
 * llama.cpp's converter writes (MOSTLY_MXFP4_MOE, as it writes it); the file types have theirs in FILE_TYPES.
 */
const CONVERTER_FILE_TYPE: Readonly<Record<string, number>> = { F32: 0, F16: 1, BF16: 32, MXFP4: 38 }

/** Whether the model's experts are MXFP4 blocks that its GGUF keeps (gpt-oss as OpenAI ships it). */
export function keepsMxfp4({ architecture, values }: ModelConfig): boolean {
  return architecture.mxfp4Experts === true && values.get('quantization_config').get('quant_method').value === 'mxfp4'
}

/** The general.* and architecture keys of a GGUF of `config` whose weights are `dtype` (resolved). */
export function modelMetadata(config: ModelConfig, dtype: GgufDtype): KeyValue[] {
  const { read, architecture, rope } = config
  const { GATING } = config.table
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
    add('context_length', 'u32', config.window ?? read.integer('max_position_embeddings n_ctx n_positions max_length max_sequence_length model_max_length'))
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
    const sliding = config.values.get('rope_parameters').get('sliding_attention')
    add('rope.freq_base_swa', 'f32', readerOf((key) => sliding.get(key)).number('rope_theta') ?? read.number('rope_local_base_freq'))
    add('attention.layer_norm_rms_epsilon', 'f32', read.number('rms_norm_eps norm_eps'))
    add('attention.layer_norm_epsilon', 'f32', read.number('layer_norm_eps layer_norm_epsilon norm_epsilon'))
    add('expert_count', 'u32', config.experts || undefined)
    add('expert_used_count', 'u32', read.integer('num_experts_per_tok num_experts_per_token top_k_experts'))
    add('expert_group_count', 'u32', read.integer('n_group'))
    add('expert_group_used_count', 'u32', read.integer('topk_group'))
    const scoring = read.string('scoring_func')
    if (scoring !== undefined && !Object.hasOwn(GATING, scoring))
      throw unsupported(`scoring_func ${excerpt(scoring)}`, `${arch}, which takes ${Object.keys(GATING).join(', ')}`)
    add('expert_gating_func', 'u32', scoring && GATING[scoring])
    const headDim = read.integer('head_dim')
    add('attention.key_length', 'u32', headDim)
    add('attention.value_length', 'u32', headDim)
  }
  architecture.keys?.(config, add)
  if (architecture.addsBos !== undefined) set(['tokenizer.ggml.add_bos_token', 'bool', architecture.addsBos])
  // general.quantization_version is ggml's GGML_QNT_VERSION.
  // Kept MXFP4 experts give the converter's types (Q8_0 among them) the converter's file type; llama-quantize's other
  // file types keep their own.
  const fileType = fileTypeOf(dtype)
  const converterType = fileType === undefined || fileType === 'Q8_0'
  const id = converterType && keepsMxfp4(config) ? CONVERTER_FILE_TYPE.MXFP4 : fileType ? FILE_TYPES[fileType].id : CONVERTER_FILE_TYPE[dtype]
  set(['general.file_type', 'u32', id])
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
const fround = Math.fround

/**
 * The tensors RoPE scaling adds: Llama 3's `rope_freqs` (LlamaModel.generate_extra_tensors, in float32 as
 * torch computes it), Phi-3's `rope_factors_long` and `rope_factors_short` (the dict's, checked).
 */
export function ropeTensors({ rope, headDim, ropeDims, architecture }: ModelConfig): ComputedTensor[] {
  if (rope.type === 'llama3') {
    const factor = rope.read.number('factor') ?? 8
    const low = rope.read.number('low_freq_factor') ?? 1
    const high = rope.read.number('high_freq_factor') ?? 4
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
