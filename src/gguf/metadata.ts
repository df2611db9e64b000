// config.json to the GGUF architecture and its hyperparameters, as llama.cpp's convert_hf_to_gguf.py writes
// them for the architectures it shares with this converter (LlamaModel, Qwen2Model).
import { SafetensorsError } from '../errors.ts'
import { jsonFileError } from '../format/model-config.ts'
import { ALIGNMENT, type GgufDtype, type KeyValue } from './format.ts'

/**
 * The transformers architectures converted, by config.json's `architectures[0]`: the GGUF architecture,
 * and whether q_proj and k_proj rows are reordered for llama.cpp's rotary embedding (its converter's
 * `permute`: transformers rotates the two halves of each head, llama.cpp interleaved pairs).
 */
export const ARCHITECTURES: Readonly<Record<string, { name: string; permuteQK: boolean }>> = {
  LlamaForCausalLM: { name: 'llama', permuteQK: true },
  MistralForCausalLM: { name: 'llama', permuteQK: true },
  Qwen2ForCausalLM: { name: 'qwen2', permuteQK: false },
}

/** A model's config.json, and the values the conversion needs of it. */
export interface ModelConfig {
  values: Record<string, unknown>
  architecture: { name: string; permuteQK: boolean }
  /** Attention heads, and key-value heads (num_attention_heads without grouped-query attention). */
  heads: number
  kvHeads: number
  blocks: number
  vocabSize: number
}

/** config.json's `key` of `object`: a number (a positive integer below 2^32 when `integer`), or undefined when absent (a failure when `required`). */
function numberAt(object: Record<string, unknown>, key: string, integer: boolean, required = false): number | undefined {
  const value = object[key] ?? undefined
  if (value === undefined && !required) return undefined
  if (typeof value !== 'number' || (integer && !(Number.isInteger(value) && value > 0 && value < 2 ** 32)))
    throw jsonFileError('config.json', `${key} is ${JSON.stringify(value)}, not a ${integer ? 'positive integer' : 'number'}`)
  return value
}

export function readModelConfig(values: Record<string, unknown>): ModelConfig {
  const names = values.architectures
  const name = Array.isArray(names) ? names[0] : undefined
  const architecture = Object.hasOwn(ARCHITECTURES, name) ? ARCHITECTURES[name] : undefined
  if (!architecture) {
    throw new SafetensorsError(
      'UnsupportedConversion',
      `config.json names the architecture ${JSON.stringify(name)}; GGUF conversion supports ${Object.keys(ARCHITECTURES).join(', ')}`,
    )
  }
  const heads = numberAt(values, 'num_attention_heads', true, true)!
  return {
    values,
    architecture,
    heads,
    kvHeads: numberAt(values, 'num_key_value_heads', true) ?? heads,
    blocks: numberAt(values, 'num_hidden_layers', true, true)!,
    vocabSize: numberAt(values, 'vocab_size', true, true)!,
  }
}

/** general.file_type (gguf-py's LlamaFileType) of each dtype. */
const FILE_TYPE: Readonly<Record<GgufDtype, number>> = { F32: 0, F16: 1, Q8_0: 7, BF16: 32 }

/** The general.* and architecture keys of a GGUF of `config` whose weights are `dtype`. */
export function modelMetadata(config: ModelConfig, dtype: GgufDtype): KeyValue[] {
  const { values, architecture } = config
  const arch = architecture.name
  // transformers 5 keeps RoPE's settings in rope_parameters, earlier versions in rope_theta and rope_scaling.
  const rope = (values.rope_parameters ?? values.rope_scaling ?? {}) as Record<string, unknown>
  const ropeType = rope.rope_type ?? rope.type ?? 'default'
  if (ropeType !== 'default') throw new SafetensorsError('UnsupportedConversion', `config.json: RoPE type ${ropeType} is not supported`)
  const kv: KeyValue[] = [
    ['general.architecture', 'string', arch],
    ['general.type', 'string', 'model'],
  ]
  const add = (key: string, type: 'u32' | 'f32', value: number | undefined) => value !== undefined && kv.push([`${arch}.${key}`, type, value])
  const embedding = numberAt(values, 'hidden_size', true, true)!
  const headDim = numberAt(values, 'head_dim', true)
  add('block_count', 'u32', config.blocks)
  add('context_length', 'u32', numberAt(values, 'max_position_embeddings', true))
  add('embedding_length', 'u32', embedding)
  add('feed_forward_length', 'u32', numberAt(values, 'intermediate_size', true, true))
  add('attention.head_count', 'u32', config.heads)
  add('attention.head_count_kv', 'u32', numberAt(values, 'num_key_value_heads', true))
  add('rope.freq_base', 'f32', numberAt(values, 'rope_theta', false) ?? numberAt(rope, 'rope_theta', false))
  add('attention.layer_norm_rms_epsilon', 'f32', numberAt(values, 'rms_norm_eps', false))
  add('attention.key_length', 'u32', headDim)
  add('attention.value_length', 'u32', headDim)
  if (arch === 'llama') {
    add('vocab_size', 'u32', config.vocabSize)
    add('rope.dimension_count', 'u32', headDim ?? Math.floor(embedding / config.heads))
  }
  // general.quantization_version is ggml's GGML_QNT_VERSION.
  kv.push(['general.file_type', 'u32', FILE_TYPE[dtype]], ['general.quantization_version', 'u32', 2], ['general.alignment', 'u32', ALIGNMENT])
  return kv
}
