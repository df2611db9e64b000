// llama.cpp's file types (llama.h's enum llama_ftype, by llama-quantize's names) and the tensor type each gives every
// tensor: llama-quant.cpp's llama_tensor_get_type at the release node-llama-cpp 3.21.1 ships, without an importance
// matrix or any of llama-quantize's overrides. A file type is a mixture: a base type, with more bits where
// llama.cpp's quantizer puts them (the output and tied embeddings, attn_v and ffn_down of some layers, ...) and
// fallbacks for rows that are not whole blocks.
import { GGML_TYPES, type GgmlType } from './ggml-types.ts'

/** Each file type: its number (general.file_type) and the type of the tensors the mixture leaves as they are. */
export const FILE_TYPES = {
  Q4_0: { id: 2, base: 'Q4_0' },
  Q4_1: { id: 3, base: 'Q4_1' },
  Q8_0: { id: 7, base: 'Q8_0' },
  Q5_0: { id: 8, base: 'Q5_0' },
  Q5_1: { id: 9, base: 'Q5_1' },
  Q2_K: { id: 10, base: 'Q2_K' },
  Q3_K_S: { id: 11, base: 'Q3_K' },
  Q3_K_M: { id: 12, base: 'Q3_K' },
  Q3_K_L: { id: 13, base: 'Q3_K' },
  Q4_K_S: { id: 14, base: 'Q4_K' },
  Q4_K_M: { id: 15, base: 'Q4_K' },
  Q5_K_S: { id: 16, base: 'Q5_K' },
  Q5_K_M: { id: 17, base: 'Q5_K' },
  Q6_K: { id: 18, base: 'Q6_K' },
  IQ4_NL: { id: 25, base: 'IQ4_NL' },
  IQ4_XS: { id: 30, base: 'IQ4_XS' },
  TQ1_0: { id: 36, base: 'TQ1_0' },
  TQ2_0: { id: 37, base: 'TQ2_0' },
} as const satisfies Partial<Record<GgufDtype, { id: number; base: GgmlType }>>

/** A file type's name, as llama-quantize spells it. */
type FileType = keyof typeof FILE_TYPES

/**
 * What {@link ggufStream}'s `dtype` takes (in any case): F32, F16 or BF16 as llama.cpp's converter writes them,
 * or one of llama-quantize's file types (its aliases Q3_K, Q4_K and Q5_K included), as llama.cpp's quantizer
 * makes it.
 */
export type GgufDtype =
  | 'F32'
  | 'F16'
  | 'BF16'
  | 'Q4_0'
  | 'Q4_1'
  | 'Q5_0'
  | 'Q5_1'
  | 'Q8_0'
  | 'Q2_K'
  | 'Q3_K_S'
  | 'Q3_K_M'
  | 'Q3_K_L'
  | 'Q4_K_S'
  | 'Q4_K_M'
  | 'Q5_K_S'
  | 'Q5_K_M'
  | 'Q6_K'
  | 'TQ1_0'
  | 'TQ2_0'
  | 'IQ4_NL'
  | 'IQ4_XS'
  | 'Q3_K'
  | 'Q4_K'
  | 'Q5_K'

/** llama-quantize's other names for the _M mixtures. */
const ALIASES: Readonly<Partial<Record<GgufDtype, FileType>>> = { Q3_K: 'Q3_K_M', Q4_K: 'Q4_K_M', Q5_K: 'Q5_K_M' }

/** The float types, which llama.cpp's converter writes (F32 for the tensors it never converts). */
const FLOATS = ['F32', 'F16', 'BF16'] as const

/** Every name a GGUF's dtype takes: the float types, the file types, then the aliases. */
export const GGUF_DTYPE_NAMES: readonly string[] = [...FLOATS, ...Object.keys(FILE_TYPES), ...Object.keys(ALIASES)]

/** The dtype `name` names (in any case), the aliases resolved, or undefined for none. */
export function ggufDtypeOf(name: unknown): GgufDtype | undefined {
  if (typeof name !== 'string') return undefined
  const upper = name.toUpperCase()
  if ((FLOATS as readonly string[]).includes(upper) || Object.hasOwn(FILE_TYPES, upper)) return upper as GgufDtype
  return Object.hasOwn(ALIASES, upper) ? ALIASES[upper as GgufDtype] : undefined
}

/** The file type of a resolved dtype (ggufDtypeOf's), or undefined for a float type. */
export const fileTypeOf = (dtype: GgufDtype): FileType | undefined => (Object.hasOwn(FILE_TYPES, dtype) ? (dtype as FileType) : undefined)

/** What the mixtures read of the model: its hyperparameters as llama.cpp loads them. */
interface MixtureModel {
  /** general.architecture. */
  architecture: string
  blocks: number
  heads: number
  kvHeads: number
  /** 0 for a dense model. */
  experts: number
}

/** A tensor as the mixtures see it: its name and dims in ggml's order. */
interface MixtureTensor {
  name: string
  dims: readonly number[]
}

/** llama-quant.cpp's tensor_category, by the parts of the name it looks for, in its order. */
type Category = 'token_embd' | 'output' | 'attn_v' | 'attn_k' | 'attn_q' | 'attn_qkv' | 'attn_output' | 'ffn_up' | 'ffn_gate' | 'ffn_down' | 'other'

function categoryOf(name: string): Category {
  if (name === 'output.weight') return 'output'
  if (name === 'token_embd.weight' || name === 'per_layer_token_embd.weight') return 'token_embd'
  if (name.includes('attn_qkv.weight')) return 'attn_qkv'
  // attn_kv_b (DeepSeek's) is attn_v-like there; no architecture here has it.
  if (name.includes('attn_v.weight')) return 'attn_v'
  if (name.includes('attn_k.weight')) return 'attn_k'
  if (name.includes('attn_q.weight')) return 'attn_q'
  if (name.includes('attn_output.weight')) return 'attn_output'
  if (name.includes('ffn_up')) return 'ffn_up'
  if (name.includes('ffn_gate')) return 'ffn_gate'
  if (name.includes('ffn_down')) return 'ffn_down'
  return 'other'
}

/** ggml_n_dims: the dims up to the last one above 1. */
function dimensionsOf(dims: readonly number[]): number {
  let n = 1
  for (let i = 0; i < dims.length; i++) if (dims[i] > 1) n = i + 1
  return n
}

/**
 * tensor_allows_quantization for the tensors of the architectures here: 2-D and 3-D weights but norms, the output
 * unless asked, MoE routers and learned positions (the names of its other rules are in none of these models).
 */
function quantizable(name: string, dims: readonly number[]): boolean {
  return (
    dimensionsOf(dims) >= 2 &&
    name.endsWith('weight') &&
    !name.includes('_norm.weight') &&
    !name.includes('ffn_gate_inp.weight') &&
    name !== 'position_embd.weight' &&
    name !== 'token_types.weight'
  )
}

/** The block of a tensor's name (blk.N.), or -1 for none: the order of llama.cpp's weights_map is by it, then by name. */
function blockOf(name: string): number {
  const match = /^blk\.(\d+)\./.exec(name)
  return match ? Number(match[1]) : -1
}

/** llama-quant.cpp's use_more_bits: the first and last eighth of the layers, and every third between. */
const moreBits = (layer: number, layers: number) =>
  layer < Math.trunc(layers / 8) || layer >= Math.trunc((7 * layers) / 8) || (layer - Math.trunc(layers / 8)) % 3 === 2

/**
 * tensor_type_fallback: for a row that is not whole blocks of `type`, the type llama.cpp writes instead (the
 * 32-value type it names, else F16).
 */
function fallback(type: GgmlType, row: number): GgmlType {
  if (row % GGML_TYPES[type].block === 0) return type
  const smaller: Partial<Record<GgmlType, GgmlType>> = {
    Q2_K: 'Q4_0',
    Q3_K: 'Q4_0',
    TQ1_0: 'Q4_0',
    TQ2_0: 'Q4_0',
    Q4_K: 'Q5_0',
    Q5_K: 'Q5_1',
    Q6_K: 'Q8_0',
    IQ4_XS: 'IQ4_NL',
  }
  const next = smaller[type] ?? type
  return row % GGML_TYPES[next].block === 0 ? next : 'F16'
}

/**
 * The type of each of `tensors` (given as the F32 GGUF of the model has them) in a GGUF of file type `fileType`, as
 * llama_model_quantize chooses it from that F32 GGUF: tensors it does not quantize stay F32.
 */
export function mixtureTypes(fileType: FileType, tensors: readonly MixtureTensor[], model: MixtureModel): GgmlType[] {
  const { base } = FILE_TYPES[fileType]
  const gqa = model.kvHeads > 0 ? Math.trunc(model.heads / model.kvHeads) : 0
  const seventyB = model.blocks === 80 && ((model.architecture === 'llama' && model.heads !== model.kvHeads) || model.architecture === 'qwen2')
  const tied = !tensors.some((t) => t.name === 'output.weight')
  const attnVCount = tensors.filter((t) => ['attn_v', 'attn_qkv'].includes(categoryOf(t.name))).length
  const layers = model.blocks
  // llama.cpp walks the tensors in its weights_map's order, counting attn_v and ffn_* as it goes.
  const order = tensors
    .map((t, index) => ({ t, index, block: blockOf(t.name) }))
    .sort((a, b) => a.block - b.block || (a.t.name < b.t.name ? -1 : a.t.name > b.t.name ? 1 : 0))
  const counters = { attnV: 0, ffnDown: 0, ffnGate: 0, ffnUp: 0 }
  /** layer_info: with experts, the layer in the name; else the count of the category so far. */
  const layerOf = (name: string, counted: number) => (model.experts > 1 ? blockOf(name) : counted)

  const types: GgmlType[] = new Array(tensors.length)
  for (const { t, index } of order) {
    if (!quantizable(t.name, t.dims)) {
      types[index] = 'F32'
      continue
    }
    const category = categoryOf(t.name)
    let type: GgmlType = base
    if (category === 'output' || (tied && category === 'token_embd')) {
      if (t.dims[0] % GGML_TYPES[type].block !== 0) type = 'Q8_0'
      else if (type !== 'Q8_0') type = 'Q6_K'
    } else if (category === 'token_embd') {
      if (fileType === 'TQ1_0' || fileType === 'TQ2_0') type = 'Q4_K'
    } else if (category === 'attn_v' || category === 'attn_qkv') {
      // attn_qkv takes attn_v's rules (llama.cpp has rules of its own for it that its order of tests never reaches).
      type = attnVType(fileType, type, counters.attnV, attnVCount, gqa)
      if (seventyB && (type === 'Q3_K' || type === 'Q4_K')) type = 'Q5_K'
      if (model.experts === 8) type = 'Q8_0'
      counters.attnV++
    } else if (category === 'attn_k') {
      if (model.experts === 8) type = 'Q8_0'
    } else if (category === 'ffn_down') {
      type = ffnDownType(fileType, type, layerOf(t.name, counters.ffnDown), layers)
      counters.ffnDown++
    } else if (category === 'attn_output') {
      type = attnOutputType(fileType, type, model.experts)
    } else if (category === 'ffn_gate') {
      counters.ffnGate++
    } else if (category === 'ffn_up') {
      counters.ffnUp++
    }
    types[index] = fallback(type, t.dims[0])
  }
  return types
}

/** attn_v: the `index`th of `count`, of a model with `gqa` query heads per key-value head. */
function attnVType(fileType: FileType, type: GgmlType, index: number, count: number, gqa: number): GgmlType {
  if (fileType === 'Q2_K') return gqa >= 4 ? 'Q4_K' : 'Q3_K'
  if (fileType === 'Q3_K_M') return index < 2 ? 'Q5_K' : 'Q4_K'
  if (fileType === 'Q3_K_L') return 'Q5_K'
  if ((fileType === 'IQ4_NL' || fileType === 'IQ4_XS') && gqa >= 4) return 'Q5_K'
  if ((fileType === 'Q4_K_M' || fileType === 'Q5_K_M') && moreBits(index, count)) return 'Q6_K'
  if (fileType === 'Q4_K_S' && index < 4) return 'Q5_K'
  return type
}

/** ffn_down of layer `layer` of `layers`. */
function ffnDownType(fileType: FileType, type: GgmlType, layer: number, layers: number): GgmlType {
  if (fileType === 'Q2_K') return 'Q3_K'
  if (fileType === 'Q3_K_M') return layer < Math.trunc(layers / 16) ? 'Q5_K' : 'Q4_K'
  if (fileType === 'Q3_K_L') return 'Q5_K'
  if (fileType === 'Q4_K_M') return moreBits(layer, layers) ? 'Q6_K' : type
  if (layer < Math.trunc(layers / 8) && (fileType === 'IQ4_NL' || fileType === 'IQ4_XS')) return 'Q5_K'
  if (fileType === 'Q5_K_M' && moreBits(layer, layers)) return 'Q6_K'
  if (fileType === 'Q4_K_S' && layer < Math.trunc(layers / 8)) return 'Q5_K'
  return type
}

/** attn_output of a model with `experts` experts (0: dense). */
function attnOutputType(fileType: FileType, type: GgmlType, experts: number): GgmlType {
  if (experts === 8) {
    const more: readonly FileType[] = ['Q2_K', 'Q3_K_S', 'Q3_K_M', 'IQ4_NL', 'Q4_K_S', 'Q4_K_M', 'IQ4_XS']
    return more.includes(fileType) ? 'Q5_K' : type
  }
  if (fileType === 'Q2_K') return 'Q3_K'
  if (fileType === 'Q3_K_M') return 'Q4_K'
  if (fileType === 'Q3_K_L') return 'Q5_K'
  return type
}
