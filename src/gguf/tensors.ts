// Which tensors a GGUF holds and how: Hugging Face names to llama.cpp's (gguf-py's tensor_mapping.py, for the
// architectures of metadata.ts), dims in ggml's order, the type of each, the source tensors each is made of (one,
// or an MoE layer's experts stacked), and what is done to their values on the way (convert_hf_to_gguf.py's
// modify_tensors): llama's Q/K row order, GPT-2's Conv1D transposed, Gemma's norms plus one.
import { DTYPE_INFO } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import type { TensorInfo } from '../format/header.ts'
import { jsonFileError } from '../format/json-values.ts'
import type { SafetensorsFile } from '../read/file.ts'
import type { SafetensorsModel } from '../read/model.ts'
import type { TensorEntry } from './format.ts'
import { type ModelConfig, ropeTensors } from './metadata.ts'

/** Tensors outside the blocks, by their name without `.weight` or `.bias` (GPT-2's also without `transformer.`). */
const TOP_LEVEL: Readonly<Record<string, string>> = {
  'model.embed_tokens': 'token_embd',
  wte: 'token_embd',
  wpe: 'position_embd',
  'model.norm': 'output_norm',
  ln_f: 'output_norm',
  lm_head: 'output',
}

/** The tensors of block N, after `model.layers.N.` (GPT-2: `h.N.`), experts without their index. */
const IN_BLOCK: Readonly<Record<string, string>> = {
  input_layernorm: 'attn_norm',
  ln_1: 'attn_norm',
  'self_attn.q_proj': 'attn_q',
  'self_attn.k_proj': 'attn_k',
  'self_attn.v_proj': 'attn_v',
  'self_attn.o_proj': 'attn_output',
  'self_attn.qkv_proj': 'attn_qkv',
  'attn.c_attn': 'attn_qkv',
  'attn.c_proj': 'attn_output',
  'self_attn.q_norm': 'attn_q_norm',
  'self_attn.k_norm': 'attn_k_norm',
  post_attention_layernorm: 'ffn_norm',
  pre_feedforward_layernorm: 'ffn_norm',
  ln_2: 'ffn_norm',
  post_feedforward_layernorm: 'post_ffw_norm',
  'mlp.gate_proj': 'ffn_gate',
  'mlp.up_proj': 'ffn_up',
  'mlp.down_proj': 'ffn_down',
  'mlp.gate_up_proj': 'ffn_up',
  'mlp.c_fc': 'ffn_up',
  'mlp.c_proj': 'ffn_down',
  'mlp.gate': 'ffn_gate_inp',
  'block_sparse_moe.gate': 'ffn_gate_inp',
  'mlp.experts.gate_proj': 'ffn_gate_exps',
  'mlp.experts.up_proj': 'ffn_up_exps',
  'mlp.experts.down_proj': 'ffn_down_exps',
  'block_sparse_moe.experts.w1': 'ffn_gate_exps',
  'block_sparse_moe.experts.w3': 'ffn_up_exps',
  'block_sparse_moe.experts.w2': 'ffn_down_exps',
}

/** Buffers of some checkpoints that llama.cpp's converter skips: computed, not learned (RoPE's, GPT-2's causal masks). */
const SKIPPED = /\.(rotary_emb\.inv_freq|attn\.(masked_)?bias|attention\.(masked_)?bias)$/

/**
 * llama.cpp's name for the Hugging Face `name`, and the expert it holds in a stacked tensor; undefined for none.
 * GPT-2's checkpoints name their tensors with `transformer.` (GPT2LMHeadModel's) or without (the Hub's gpt2,
 * saved from GPT2Model): gguf-py maps both.
 */
export function ggufName(name: string, { blocks, architecture }: Pick<ModelConfig, 'blocks' | 'architecture'>): { name: string; expert?: number } | undefined {
  const [, base, kind] = /^(?:transformer\.)?(.+)\.(weight|bias)$/.exec(name) ?? []
  if (Object.hasOwn(TOP_LEVEL, base)) return { name: `${TOP_LEVEL[base]}.${kind}` }
  const [, block, inBlock] = /^(?:model\.layers|h)\.(0|[1-9]\d*)\.(.+)$/.exec(base) ?? []
  const [, experts, expert, weight] = /^(.+\.experts)\.(0|[1-9]\d*)\.(.+)$/.exec(inBlock) ?? []
  const part = experts ? `${experts}.${weight}` : inBlock
  // Gemma normalizes after attention (its post_attention_layernorm) and before the FFN (pre_feedforward_layernorm).
  const gguf = architecture.normAfterAttention && part === 'post_attention_layernorm' ? 'post_attention_norm' : Object.hasOwn(IN_BLOCK, part) && IN_BLOCK[part]
  if (gguf && Number(block) < blocks) return { name: `blk.${block}.${gguf}.${kind}`, expert: expert === undefined ? undefined : Number(expert) }
}

/** A source tensor whose values are (part of) a GGUF tensor's. */
export interface TensorPart {
  /** The shard that stores it; none for a quantized module's logical tensor, whose values the model's reads compute. */
  file?: SafetensorsFile
  info: TensorInfo
}

/** One tensor of the GGUF: where its values come from, and how they are written. */
export interface PlannedTensor extends TensorEntry {
  /** The source tensors whose values, one after the other, are this tensor's: one, or a layer's experts in order. */
  parts: TensorPart[]
  /** The values of a tensor computed from config.json (no parts). */
  computed?: Float32Array
  /** The heads whose rows are reordered (q_proj: attention heads, k_proj: key-value heads), or 0 for none. */
  heads: number
  /** GPT-2's Conv1D weight: [in, out] transposed to [out, in], the whole tensor at once. */
  transpose: boolean
  /** Added to every value (Gemma's norms: 1). */
  shift: number
}

/** A float type of the converter: what a GGUF's tensors are before a file type quantizes them. */
export type FloatDtype = 'F32' | 'F16' | 'BF16'

/**
 * The GGUF type of a tensor, as llama.cpp's converter chooses it: F32 for 1-D tensors, norms, biases, MoE routers
 * and learned positions; else `dtype`.
 */
function typeOf(name: string, dims: readonly number[], dtype: FloatDtype): FloatDtype {
  if (dims.length === 1 || !name.endsWith('.weight') || /_norm\.|ffn_gate_inp|position_embd/.test(name)) return 'F32'
  return dtype
}

const planned = (name: string, dims: number[], dtype: FloatDtype, parts: TensorPart[], more?: Partial<PlannedTensor>): PlannedTensor => ({
  name,
  dims,
  type: typeOf(name, dims, dtype),
  parts,
  heads: 0,
  transpose: false,
  shift: 0,
  ...more,
})

/**
 * The shape config.json's counts give a tensor of GGUF name `name` (its source's, outermost first) and what makes
 * it, for the tensors whose shapes the counts fix: the embeddings and output, the attention projections.
 */
function shapeFromConfig(name: string, transpose: boolean, config: ModelConfig): { shape: number[]; from: string } | undefined {
  const { vocabSize, hidden, heads, kvHeads, headDim } = config
  const [, base, kind] = /^(?:blk\.\d+\.)?(\w+)\.(weight|bias)$/.exec(name) ?? []
  const vocabulary = `vocab_size ${vocabSize}`
  const query = `${heads} attention heads of ${headDim}`
  const keys = `${kvHeads} key-value heads of ${headDim}`
  const rows: Record<string, [number, string]> = {
    token_embd: [vocabSize, vocabulary],
    output: [vocabSize, vocabulary],
    attn_q: [heads * headDim, query],
    attn_k: [kvHeads * headDim, keys],
    attn_v: [kvHeads * headDim, keys],
    attn_qkv: [(heads + 2 * kvHeads) * headDim, `${query} and twice ${keys}`],
  }
  if (!Object.hasOwn(rows, base)) return undefined
  const [count, from] = rows[base]
  if (kind === 'bias') return { shape: [count], from }
  // A Conv1D weight is stored [in, out].
  return { shape: transpose ? [hidden, count] : [count, hidden], from: `${from} and a hidden size of ${hidden}` }
}

/**
 * Every tensor of the GGUF of `model` in `dtype`: RoPE's computed ones first, then the model's in its order, an MoE
 * layer's experts stacked (expert 0 first, whatever shard each is in) where its first expert is. config.json's
 * counts are checked against the tensors' shapes before anything is sized by them.
 */
export function planTensors(model: SafetensorsModel, config: ModelConfig, dtype: FloatDtype): PlannedTensor[] {
  const { architecture, heads, kvHeads, experts } = config
  const tensors: PlannedTensor[] = []
  const stacks = new Map<string, PlannedTensor>()
  for (const name of model.names()) {
    // Gemma ties its output to the embeddings: llama.cpp uses token_embd, and its converter skips a stored lm_head.
    if (SKIPPED.test(name) || (architecture.tiedOutput && name === 'lm_head.weight')) continue
    const info = model.info(name)
    const gguf = ggufName(name, config)
    if (gguf === undefined || DTYPE_INFO[info.dtype].float === undefined) {
      const why = gguf === undefined ? `maps to no ${architecture.name} GGUF tensor` : `is ${info.dtype}, not floating-point`
      throw new SafetensorsError('UnsupportedConversion', `tensor ${JSON.stringify(name)} ${why}`)
    }
    const part: TensorPart = 'quantized' in info ? { info } : { file: model.shards.get(model.shardOf(name))!, info }
    if (gguf.expert !== undefined) {
      if (gguf.expert >= experts) throw new SafetensorsError('UnsupportedConversion', `tensor ${JSON.stringify(name)}: config.json has ${experts} experts`)
      let stack = stacks.get(gguf.name)
      if (!stack) {
        stack = planned(gguf.name, [...info.shape].reverse().concat(experts), dtype, [])
        stacks.set(gguf.name, stack)
        tensors.push(stack)
      }
      stack.parts[gguf.expert] = part
      continue
    }
    const transpose = architecture.conv1d === true && /\.c_(attn|proj|fc)\.weight$/.test(name)
    const expected = shapeFromConfig(gguf.name, transpose, config)
    if (expected && info.shape.join() !== expected.shape.join())
      throw jsonFileError(
        'config.json',
        `tensor ${JSON.stringify(name)} is [${info.shape.join(', ')}], where ${expected.from} make [${expected.shape.join(', ')}]`,
      )
    const role = architecture.permuteQK && /attn_([qk])\./.exec(gguf.name)?.[1]
    const reordered = role === 'q' ? heads : role === 'k' ? kvHeads : 0
    if (reordered > 0 && info.shape[0] % (2 * reordered) !== 0)
      throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(name)}: ${info.shape[0]} rows are not ${reordered} heads of pairs`)
    // A transposed tensor's GGUF dims (ggml's order, reversed) are its source shape as it is.
    const dims = info.shape.length === 0 ? [1] : transpose ? [...info.shape] : [...info.shape].reverse()
    const shift = architecture.normPlusOne && name.endsWith('norm.weight') ? 1 : 0
    tensors.push(planned(gguf.name, dims, dtype, [part], { heads: reordered, transpose, shift }))
  }
  // Every expert of every stack, each of the first one's shape.
  for (const stack of stacks.values()) {
    const [first] = stack.parts
    for (let expert = 0; expert < experts; expert++) {
      const part = stack.parts[expert]
      if (!part) throw new SafetensorsError('TensorNotFound', `${stack.name}: the model has no tensor for expert ${expert} of the ${experts} config.json names`)
      if (part.info.shape.join() !== first.info.shape.join())
        throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(part.info.name)} is [${part.info.shape}], expert 0's is [${first.info.shape}]`)
    }
  }
  // What llama.cpp needs of every architecture here, and what bounds config.json's counts.
  for (const needed of ['token_embd.weight', /^blk\.\d+\.attn_(q|qkv)\.weight$/]) {
    if (!tensors.some((t) => (typeof needed === 'string' ? t.name === needed : needed.test(t.name))))
      throw new SafetensorsError(
        'TensorNotFound',
        `the model has no ${typeof needed === 'string' ? 'token embedding' : 'attention query projection'}, which llama.cpp needs`,
      )
  }
  const rope = ropeTensors(config).map(({ name, values }) => planned(name, [values.length], dtype, [], { computed: values }))
  return [...rope, ...tensors]
}
