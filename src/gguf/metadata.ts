// config.json to the GGUF architecture and its hyperparameters, as llama.cpp's convert_hf_to_gguf.py writes
// them for the architectures it shares with this converter (LlamaModel, Qwen2Model).
import { SafetensorsError } from '../errors.ts'
import type { KeyValue } from './format.ts'

/** What an architecture of transformers becomes in GGUF. */
export interface Architecture {
  /** general.architecture, and the prefix of its keys. */
  name: 'llama' | 'qwen2'
  /**
   * Whether q_proj and k_proj rows are reordered for llama.cpp's rotary embedding (its converter's
   * `permute`): transformers rotates the two halves of each head, llama.cpp interleaved pairs.
   */
  permuteQK: boolean
}

const LLAMA: Architecture = { name: 'llama', permuteQK: true }

/** The transformers architectures converted, by config.json's `architectures[0]`. */
export const ARCHITECTURES: Readonly<Record<string, Architecture>> = {
  LlamaForCausalLM: LLAMA,
  MistralForCausalLM: LLAMA,
  Qwen2ForCausalLM: { name: 'qwen2', permuteQK: false },
}

/** A model's config.json, read for the values the conversion needs. */
export interface ModelConfig {
  where: string
  architecture: Architecture
  values: Record<string, unknown>
  /** Attention heads, and key-value heads (num_attention_heads without grouped-query attention). */
  heads: number
  kvHeads: number
  blocks: number
  vocabSize: number
}

export function jsonError(where: string, message: string): SafetensorsError {
  return new SafetensorsError('InvalidHeaderDeserialization', `${where}: ${message}`)
}

/** A JSON object from a file's bytes; anything else is InvalidHeaderDeserialization naming `where`. */
export function parseJsonObject(bytes: Uint8Array, where: string): Record<string, unknown> {
  let value: unknown
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes))
  } catch (error) {
    throw jsonError(where, `not UTF-8 JSON: ${(error as Error).message}`)
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw jsonError(where, 'not a JSON object')
  return value as Record<string, unknown>
}

/** config.json's value of `key`: a positive integer, undefined when absent unless `required`. */
function integer(config: Record<string, unknown>, where: string, key: string, required: true): number
function integer(config: Record<string, unknown>, where: string, key: string, required?: false): number | undefined
function integer(config: Record<string, unknown>, where: string, key: string, required = false): number | undefined {
  const value = config[key]
  if (value === undefined || value === null) {
    if (required) throw jsonError(where, `${key} is missing, and a GGUF of this model needs it`)
    return undefined
  }
  if (!Number.isInteger(value) || (value as number) <= 0 || (value as number) > 0xffffffff)
    throw jsonError(where, `${key} must be a positive integer below 2^32, got ${JSON.stringify(value)}`)
  return value as number
}

function float(config: Record<string, unknown>, where: string, key: string): number | undefined {
  const value = config[key]
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number') throw jsonError(where, `${key} must be a number, got ${JSON.stringify(value)}`)
  return value
}

export function readModelConfig(bytes: Uint8Array, where: string): ModelConfig {
  const values = parseJsonObject(bytes, where)
  const names = values.architectures
  const name = Array.isArray(names) && typeof names[0] === 'string' ? names[0] : undefined
  const architecture = name === undefined ? undefined : ARCHITECTURES[name]
  if (!architecture) {
    const which = name === undefined ? 'names no architecture (no "architectures" list)' : `is a ${name}`
    throw new SafetensorsError('UnsupportedConversion', `${where} ${which}; GGUF conversion supports ${Object.keys(ARCHITECTURES).join(', ')}`)
  }
  const heads = integer(values, where, 'num_attention_heads', true)
  return {
    where,
    architecture,
    values,
    heads,
    kvHeads: integer(values, where, 'num_key_value_heads') ?? heads,
    blocks: integer(values, where, 'num_hidden_layers', true),
    vocabSize: integer(values, where, 'vocab_size', true),
  }
}

/** RoPE settings: transformers 5 keeps them in rope_parameters, earlier versions in rope_theta and rope_scaling. */
function ropeOf(config: ModelConfig): { theta: number | undefined; type: string; factor: number | undefined } {
  const { values, where } = config
  const parameters = (values.rope_parameters ?? values.rope_scaling ?? {}) as Record<string, unknown>
  if (typeof parameters !== 'object') throw jsonError(where, `rope_scaling must be an object, got ${JSON.stringify(parameters)}`)
  const type = parameters.rope_type ?? parameters.type ?? 'default'
  if (typeof type !== 'string') throw jsonError(where, `rope_type must be a string, got ${JSON.stringify(type)}`)
  return { theta: float(values, where, 'rope_theta') ?? float(parameters, where, 'rope_theta'), type, factor: float(parameters, where, 'factor') }
}

/** general.file_type (gguf-py's LlamaFileType) of each target. */
const FILE_TYPE = { F32: 0, F16: 1, Q8_0: 7, BF16: 32 } as const

/** ggml's GGML_QNT_VERSION, general.quantization_version. */
const QUANTIZATION_VERSION = 2

/** The general.* and architecture keys of a GGUF of `config` whose tensors are mostly `dtype`. */
export function modelMetadata(config: ModelConfig, dtype: keyof typeof FILE_TYPE, alignment: number): KeyValue[] {
  const { values, where, architecture } = config
  const arch = architecture.name
  const kv: KeyValue[] = [
    { key: 'general.architecture', type: 'string', value: arch },
    { key: 'general.type', type: 'string', value: 'model' },
  ]
  const u32 = (key: string, value: number | undefined) => value !== undefined && kv.push({ key: `${arch}.${key}`, type: 'u32', value })
  const f32 = (key: string, value: number | undefined) => value !== undefined && kv.push({ key: `${arch}.${key}`, type: 'f32', value })
  u32('block_count', config.blocks)
  u32('context_length', integer(values, where, 'max_position_embeddings'))
  const embedding = integer(values, where, 'hidden_size', true)
  u32('embedding_length', embedding)
  u32('feed_forward_length', integer(values, where, 'intermediate_size', true))
  u32('attention.head_count', config.heads)
  u32('attention.head_count_kv', integer(values, where, 'num_key_value_heads'))
  const rope = ropeOf(config)
  if (rope.type === 'linear' && rope.factor !== undefined) {
    kv.push({ key: `${arch}.rope.scaling.type`, type: 'string', value: 'linear' })
    f32('rope.scaling.factor', rope.factor)
  } else if (rope.type !== 'default') {
    throw new SafetensorsError('UnsupportedConversion', `${where}: RoPE type ${JSON.stringify(rope.type)} is not supported; only default and linear are`)
  }
  f32('rope.freq_base', rope.theta)
  f32('attention.layer_norm_rms_epsilon', float(values, where, 'rms_norm_eps'))
  const headDim = integer(values, where, 'head_dim')
  u32('attention.key_length', headDim)
  u32('attention.value_length', headDim)
  if (arch === 'llama') {
    u32('vocab_size', config.vocabSize)
    u32('rope.dimension_count', headDim ?? Math.floor(embedding / config.heads))
  }
  kv.push(
    { key: 'general.file_type', type: 'u32', value: FILE_TYPE[dtype] },
    { key: 'general.quantization_version', type: 'u32', value: QUANTIZATION_VERSION },
    { key: 'general.alignment', type: 'u32', value: alignment },
  )
  return kv
}
