// Which tensors a GGUF holds and how: Hugging Face names to llama.cpp's (gguf-py's tensor_mapping.py for
// the llama and qwen2 architectures), shapes in ggml's order, the type of each, and the rows of q_proj and
// k_proj that llama.cpp's rotary embedding wants reordered.
import { DTYPE_INFO, type DType } from '../dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import type { SafetensorsFile } from '../file.ts'
import type { TensorInfo } from '../header.ts'
import type { SafetensorsModel } from '../model.ts'
import { GGML_TYPES, type GgmlType, type TensorEntry } from './format.ts'
import type { ModelConfig } from './metadata.ts'

/** The dtypes a GGUF can be written in: those of llama.cpp's converter's --outtype that ggml reads without a table. */
export type GgufDtype = 'F32' | 'F16' | 'BF16' | 'Q8_0'

export const GGUF_DTYPES: readonly GgufDtype[] = ['F32', 'F16', 'BF16', 'Q8_0']

const TOP_LEVEL: Readonly<Record<string, string>> = {
  'model.embed_tokens.weight': 'token_embd.weight',
  'model.norm.weight': 'output_norm.weight',
  'lm_head.weight': 'output.weight',
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

const BLOCK_TENSOR = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/

/** Buffers transformers saves with some checkpoints, which llama.cpp's converter skips: they are computed, not learned. */
const SKIPPED = /\.rotary_emb\.inv_freq$/

function ggufName(name: string, blocks: number): string | undefined {
  if (Object.hasOwn(TOP_LEVEL, name)) return TOP_LEVEL[name]
  const match = BLOCK_TENSOR.exec(name)
  if (!match || !Object.hasOwn(IN_BLOCK, match[2]) || Number(match[1]) >= blocks || String(Number(match[1])) !== match[1]) return undefined
  return `blk.${match[1]}.${IN_BLOCK[match[2]]}.${match[3]}`
}

/** One tensor of the GGUF: where its data comes from, and how it is written. */
export interface PlannedTensor extends TensorEntry {
  file: SafetensorsFile
  info: TensorInfo
  /** The heads whose rows are reordered (q_proj: attention heads, k_proj: key-value heads), or 0 for none. */
  heads: number
}

/**
 * The type a tensor is stored in: F32 for norms and 1-D tensors (as llama.cpp's converter does), else
 * `dtype`, with Q8_0 falling back to F16 where a row is not whole blocks of 32.
 */
function typeOf(name: string, dims: readonly number[], dtype: GgufDtype): GgmlType {
  if (dims.length <= 1 || name.endsWith('_norm.weight')) return 'F32'
  if (dtype === 'Q8_0' && dims[0] % GGML_TYPES.Q8_0.block !== 0) return 'F16'
  return dtype
}

function rowsNotWhole(config: ModelConfig, name: string, rows: number, heads: number): SafetensorsError {
  return new SafetensorsError('TensorInvalidInfo', `${name} has ${rows} rows, which ${heads} heads of ${config.where} cannot share in halves`)
}

/** Every tensor of `model` as the GGUF holds it, in the model's order. */
export function planTensors(model: SafetensorsModel, config: ModelConfig, dtype: GgufDtype): PlannedTensor[] {
  const planned: PlannedTensor[] = []
  for (const name of model.names()) {
    if (SKIPPED.test(name)) continue
    const file = model.shards.get(model.shardOf(name))!
    const info = file.info(name)
    const gguf = ggufName(name, config.blocks)
    if (gguf === undefined) {
      throw new SafetensorsError(
        'UnsupportedConversion',
        `tensor ${JSON.stringify(name)} (in ${model.shardOf(name)}) maps to no GGUF tensor of ${config.architecture.name} with ${config.blocks} blocks`,
      )
    }
    if (DTYPE_INFO[info.dtype as DType].float === undefined)
      throw new SafetensorsError('UnsupportedConversion', `tensor ${JSON.stringify(name)} is ${info.dtype}; a GGUF takes floating-point weights`)
    const dims = info.shape.length === 0 ? [1] : [...info.shape].reverse()
    const role = config.architecture.permuteQK ? /attn_([qk])\./.exec(gguf)?.[1] : undefined
    const heads = role === 'q' ? config.heads : role === 'k' ? config.kvHeads : 0
    const rows = info.shape[0] ?? 1
    if (heads > 0 && rows % (2 * heads) !== 0) throw rowsNotWhole(config, name, rows, heads)
    planned.push({ name: gguf, dims, type: typeOf(gguf, dims, dtype), file, info, heads })
  }
  const names = new Set(planned.map((t) => t.name))
  if (!names.has('token_embd.weight'))
    throw new SafetensorsError('TensorNotFound', `the model has no model.embed_tokens.weight, which a ${config.architecture.name} GGUF needs`)
  return planned
}
