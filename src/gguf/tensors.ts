// Which tensors a GGUF holds and how: Hugging Face names to llama.cpp's (gguf-py's tensor_mapping.py for
// the llama and qwen2 architectures), dims in ggml's order, the type of each, and the heads whose q_proj
// and k_proj rows llama.cpp's rotary embedding wants reordered.
import { DTYPE_INFO } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import type { TensorInfo } from '../format/header.ts'
import type { SafetensorsFile } from '../read/file.ts'
import type { SafetensorsModel } from '../read/model.ts'
import type { GgufDtype, TensorEntry } from './format.ts'
import type { ModelConfig } from './metadata.ts'
import { Q8_0_BLOCK } from './q8_0.ts'

const TOP_LEVEL: Readonly<Record<string, string>> = {
  'model.embed_tokens.weight': 'token_embd',
  'model.norm.weight': 'output_norm',
  'lm_head.weight': 'output',
}

/** The tensors of block N, after `model.layers.N.`. */
const IN_BLOCK: Readonly<Record<string, string>> = {
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

function ggufName(name: string, blocks: number): string | undefined {
  if (Object.hasOwn(TOP_LEVEL, name)) return `${TOP_LEVEL[name]}.weight`
  const [, block, part, kind] = /^model\.layers\.(0|[1-9]\d*)\.(.+)\.(weight|bias)$/.exec(name) ?? []
  if (Object.hasOwn(IN_BLOCK, part) && Number(block) < blocks) return `blk.${block}.${IN_BLOCK[part]}.${kind}`
}

/** One tensor of the GGUF: where its data comes from, and how it is written. */
export interface PlannedTensor extends TensorEntry {
  file: SafetensorsFile
  info: TensorInfo
  /** A quantized module's logical tensor: its values come from the model's reads (dequantized), not the file's bytes. */
  logical: boolean
  /** The heads whose rows are reordered (q_proj: attention heads, k_proj: key-value heads), or 0 for none. */
  heads: number
}

/**
 * Every tensor of `model` as the GGUF holds it, in the model's order: F32 for norms and 1-D tensors (as
 * llama.cpp's converter does), else `dtype`, with Q8_0 falling back to F16 where a row is not whole blocks.
 * Buffers some checkpoints hold (rotary_emb.inv_freq) are skipped, as llama.cpp's converter skips them: they
 * are computed, not learned.
 */
export function planTensors(model: SafetensorsModel, config: ModelConfig, dtype: GgufDtype): PlannedTensor[] {
  const planned: PlannedTensor[] = []
  for (const name of model.names()) {
    if (name.endsWith('.rotary_emb.inv_freq')) continue
    const file = model.shards.get(model.shardOf(name))!
    const info = model.info(name)
    const gguf = ggufName(name, config.blocks)
    if (gguf === undefined || DTYPE_INFO[info.dtype].float === undefined) {
      const why = gguf === undefined ? `maps to no ${config.architecture.name} GGUF tensor` : `is ${info.dtype}, not floating-point`
      throw new SafetensorsError('UnsupportedConversion', `tensor ${JSON.stringify(name)} ${why}`)
    }
    const dims = info.shape.length === 0 ? [1] : [...info.shape].reverse()
    const role = config.architecture.permuteQK && /attn_([qk])\./.exec(gguf)?.[1]
    const heads = role === 'q' ? config.heads : role === 'k' ? config.kvHeads : 0
    if (heads > 0 && info.shape[0] % (2 * heads) !== 0)
      throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(name)}: ${info.shape[0]} rows are not ${heads} heads of pairs`)
    const type = dims.length === 1 || gguf.endsWith('_norm.weight') ? 'F32' : dtype === 'Q8_0' && dims[0] % Q8_0_BLOCK !== 0 ? 'F16' : dtype
    planned.push({ name: gguf, dims, type, file, info, heads, logical: 'quantized' in info })
  }
  return planned
}
