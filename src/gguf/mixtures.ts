// The tensor type a file type of llama.cpp (file-types.ts) gives every tensor: llama-quant.cpp's
// llama_tensor_get_type at the release node-llama-cpp 3.21.1 ships, without an importance matrix or any of
// llama-quantize's overrides: the base type, with more bits where llama.cpp's quantizer puts them (the output and
// tied embeddings, attn_v and ffn_down of some layers, ...) and fallbacks for rows that are not whole blocks.
//
// The GGUF export loads this module for a file type only (src/gguf/index.ts), so at run time it imports nothing:
// ggml's block sizes are lent, as the quantizers have the library's functions lent (src/gguf/ggml-kernels.ts says why).
import type { FileType } from './file-types.ts'
import type { GGML_TYPES, GgmlType } from './ggml-types.ts'

/** ggml's types, lent: their block sizes. */
type GgmlTypes = Readonly<Record<GgmlType, (typeof GGML_TYPES)[GgmlType]>>

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
function fallback(type: GgmlType, row: number, types: GgmlTypes): GgmlType {
  if (row % types[type].block === 0) return type
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
  return row % types[next].block === 0 ? next : 'F16'
}

/**
 * The type of each of `tensors` (given as the F32 GGUF of the model has them) in a GGUF of file type `fileType`,
 * whose base type is `base`, as llama_model_quantize chooses it from that F32 GGUF: tensors it does not quantize
 * stay F32. `types`: ggml's types (GGML_TYPES), lent.
 */
export function mixtureTypes(fileType: FileType, base: GgmlType, tensors: readonly MixtureTensor[], model: MixtureModel, types: GgmlTypes): GgmlType[] {
  const gqa = model.kvHeads > 0 ? Math.trunc(model.heads / model.kvHeads) : 0
  const seventyB = model.blocks === 80 && ((model.architecture === 'llama' && model.heads !== model.kvHeads) || model.architecture === 'qwen2')
  const tied = !tensors.some((t) => t.name === 'output.weight')
  const attnVCount = tensors.filter((t) => ['attn_v', 'attn_qkv'].includes(categoryOf(t.name))).length
  const layers = model.blocks
  // Falcon has rules of its own: its output always Q8_0, fewer bits in ffn_down and attn_output.
  const falcon = model.architecture === 'falcon'
  // llama.cpp walks the tensors in its weights_map's order, counting attn_v and ffn_* as it goes.
  const order = tensors
    .map((t, index) => ({ t, index, block: blockOf(t.name) }))
    .sort((a, b) => a.block - b.block || (a.t.name < b.t.name ? -1 : a.t.name > b.t.name ? 1 : 0))
  const counters = { attnV: 0, ffnDown: 0, ffnGate: 0, ffnUp: 0 }
  /** layer_info: with experts, the layer in the name; else the count of the category so far. */
  const layerOf = (name: string, counted: number) => (model.experts > 1 ? blockOf(name) : counted)

  const chosen: GgmlType[] = new Array(tensors.length)
  for (const { t, index } of order) {
    if (!quantizable(t.name, t.dims)) {
      chosen[index] = 'F32'
      continue
    }
    const category = categoryOf(t.name)
    let type: GgmlType = base
    if (category === 'output' || (tied && category === 'token_embd')) {
      if (falcon || t.dims[0] % types[type].block !== 0) type = 'Q8_0'
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
      type = ffnDownType(fileType, type, layerOf(t.name, counters.ffnDown), layers, falcon)
      counters.ffnDown++
    } else if (category === 'attn_output') {
      type = falcon ? (fileType === 'Q3_K_L' ? 'Q4_K' : type) : attnOutputType(fileType, type, model.experts)
    } else if (category === 'ffn_gate') {
      counters.ffnGate++
    } else if (category === 'ffn_up') {
      counters.ffnUp++
    }
    chosen[index] = fallback(type, t.dims[0], types)
  }
  return chosen
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

/** ffn_down of layer `layer` of `layers`, of Falcon or another architecture. */
function ffnDownType(fileType: FileType, type: GgmlType, layer: number, layers: number, falcon: boolean): GgmlType {
  const first16th = layer < Math.trunc(layers / 16)
  if (fileType === 'Q2_K') return 'Q3_K'
  if (fileType === 'Q3_K_M') return first16th ? 'Q5_K' : !falcon || moreBits(layer, layers) ? 'Q4_K' : 'Q3_K'
  if (fileType === 'Q3_K_L') return falcon ? 'Q4_K' : 'Q5_K'
  if (fileType === 'Q4_K_M' && falcon) return first16th ? 'Q6_K' : moreBits(layer, layers) ? 'Q5_K' : 'Q4_K'
  if (fileType === 'Q4_K_M') return moreBits(layer, layers) ? 'Q6_K' : type
  if (layer < Math.trunc(layers / 8) && (fileType === 'IQ4_NL' || fileType === 'IQ4_XS')) return 'Q5_K'
  if (fileType === 'Q5_K_M' && moreBits(layer, layers)) return 'Q6_K'
  if (fileType === 'Q4_K_S' && !falcon && layer < Math.trunc(layers / 8)) return 'Q5_K'
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
