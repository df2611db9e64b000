// Which tensors a GGUF holds and how: Hugging Face names to llama.cpp's (gguf-py's tensor_mapping.py, as each entry
// of architectures.ts maps them), dims in ggml's order, the type of each, and the runs of source rows each is made
// of (one tensor whole, a layer's experts stacked, a fused tensor regrouped or split) with what is done to them on
// the way (convert_hf_to_gguf.py's modify_tensors: the architecture's transforms).
import { DTYPE_INFO } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import type { TensorInfo } from '../format/header.ts'
import { jsonFileError } from '../format/json-values.ts'
import type { SafetensorsFile } from '../read/file.ts'
import type { SafetensorsModel } from '../read/model.ts'
import type { Architecture, ModelConfig, Reshape, Rows, Take, Unit } from './architectures.ts'
import type { TensorEntry } from './format.ts'
import type { GgmlType } from './ggml-types.ts'
import { keepsMxfp4, ropeTensors } from './metadata.ts'

/** Buffers of some checkpoints that llama.cpp's converter skips: computed, not learned (RoPE's, GPT-2's causal masks). */
const SKIPPED = /\.(rotary_emb\.inv_freq|attn\.(masked_)?bias|attention\.(masked_)?bias)$/

/** Where a Hugging Face tensor goes: each GGUF tensor it makes (by its full name) and how, and its index in a stack. */
interface Mapped {
  targets: Array<{ name: string; reshape?: Reshape }>
  /** The index of an expert (or a head's norm) in its stack, and what is stacked (`mlp.experts`, `self_attn.k_layernorm.norms`). */
  stack?: { index: number; of: string }
}

/**
 * llama.cpp's names for the Hugging Face `name`, undefined for none. The prefixes `model.`, `transformer.` (GPT-2's
 * and Falcon's) and `gpt_neox.` are dropped, a block is `layers.N` or `h.N`, an expert's or a stacked norm's index
 * is taken out (`mlp.experts.3.up_proj` is expert 3 of `mlp.experts.up_proj`).
 */
export function ggufTargets(
  name: string,
  { architecture, blocks, table: { TOP_LEVEL, TENSORS } }: Pick<ModelConfig, 'architecture' | 'blocks' | 'table'>,
): Mapped | undefined {
  const [, base, kind] = /^(?:model\.|transformer\.|gpt_neox\.)?(.+?)(?:\.(weight|bias))?$/.exec(name)!
  const full = (to: string, prefix: string) => `${prefix}${to}${/\.(weight|bias)$/.test(to) ? '' : `.${kind ?? 'weight'}`}`
  if (Object.hasOwn(TOP_LEVEL, base)) return { targets: [{ name: full(TOP_LEVEL[base], '') }] }
  const [, block, inBlock] = /^(?:layers|h)\.(0|[1-9]\d*)\.(.+)$/.exec(base) ?? []
  if (block === undefined || Number(block) >= blocks) return undefined
  const [, stacked, index, rest] = /^(.+\.(?:experts|norms))\.(0|[1-9]\d*)(?:\.(.+))?$/.exec(inBlock) ?? []
  const part = stacked ? [stacked, rest].filter(Boolean).join('.') : inBlock
  const target = architecture.tensors && Object.hasOwn(architecture.tensors, part) ? architecture.tensors[part] : Object.hasOwn(TENSORS, part) && TENSORS[part]
  if (!target) return undefined
  const prefix = `blk.${block}.`
  const targets = typeof target === 'string' ? [{ name: full(target, prefix) }] : target.map(({ to, reshape }) => ({ name: full(to, prefix), reshape }))
  return { targets, stack: stacked === undefined ? undefined : { index: Number(index), of: stacked } }
}

/** Which of attn_q and attn_k the GGUF tensor `gguf` is, where the architecture reorders their rows (llama's `permute`); undefined for neither. */
export const permutedRole = (gguf: string, { permuteQK }: Architecture) => (permuteQK ? /\.attn_([qk])\./.exec(gguf)?.[1] : undefined)

/** What every value of the Hugging Face tensor `name` is shifted by in the GGUF: the architecture's norm shift for a norm weight, else 0. */
export const normShiftOf = (name: string, { normShift }: Architecture) => (normShift !== undefined && name.endsWith('norm.weight') ? normShift : 0)

/** A source tensor whose values are (part of) a GGUF tensor's. */
interface TensorPart {
  /** The shard that stores it; none for a quantized module's logical tensor, whose values the model's reads compute. */
  file?: SafetensorsFile
  info: TensorInfo
}

/** A run of a source tensor's rows (its first dimension). */
export interface Piece {
  part: TensorPart
  rows: Rows
}

/** One tensor of the GGUF: where its values come from, and how they are written. */
export interface PlannedTensor extends TensorEntry {
  /** The runs of source rows whose values, one after the other, are this tensor's. */
  pieces: Piece[]
  /** The values of a tensor computed from config.json (no pieces). */
  computed?: Float32Array
  /** What is done to each unit of the pieces' values (a head's rows reordered, an expert's matrix transposed...). */
  unit?: Unit
  /** Added to every value (Gemma's norms: 1). */
  shift: number
  /**
   * MXFP4 blocks made of gpt-oss's stored ones: the pieces are each expert's blocks then its scales, of which the rows
   * `take` are kept, and repacked as ggml's block_mxfp4 (no value changes).
   */
  mxfp4?: Take
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

const planned = (name: string, dims: number[], type: GgmlType, pieces: Piece[], more?: Partial<PlannedTensor>): PlannedTensor => ({
  name,
  dims,
  type,
  pieces,
  shift: 0,
  ...more,
})

/** A tensor as it is: all its rows, its dims reversed. */
const asItIs: Reshape = (shape) => ({ rows: [[0, shape[0] ?? 1]], dims: shape.length === 0 ? [1] : [...shape].reverse() })

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
 * Every tensor of the GGUF of `model`: RoPE's computed ones first, then the model's in its order, an MoE layer's
 * experts (or a layer's per-head norms) stacked (the first one first, whatever shard each is in) where its first is.
 * config.json's counts are checked against the tensors' shapes before anything is sized by them.
 */
export function planTensors(model: SafetensorsModel, config: ModelConfig, dtype: FloatDtype): PlannedTensor[] {
  const { architecture } = config
  const { qPairs, kPairs, transposed } = config.table.RESHAPES
  const tensors: PlannedTensor[] = []
  const stacks = new Map<string, { tensor: PlannedTensor; parts: TensorPart[]; size: number }>()
  const stored = (name: string): TensorPart => ({ file: model.shards.get(model.shardOf(name))!, info: model.info(name, { stored: true }) as TensorInfo })
  for (const name of model.names()) {
    if (SKIPPED.test(name) || architecture.skip?.(name, config)) continue
    const info = model.info(name)
    const target = ggufTargets(name, config)
    const { quantized } = info
    if (target === undefined || DTYPE_INFO[info.dtype].float === undefined) {
      const why = target === undefined ? `maps to no ${architecture.name} GGUF tensor` : `is ${info.dtype}, not floating-point`
      throw new SafetensorsError('UnsupportedConversion', `tensor ${JSON.stringify(name)} ${why}`)
    }
    const part: TensorPart = quantized !== undefined ? { info } : { file: model.shards.get(model.shardOf(name))!, info }
    if (target.stack) {
      const { index, of } = target.stack
      // Experts number config.json's; StableLM's q and k norms, its heads and key-value heads.
      const size = /\.experts$/.test(of) ? config.experts : /k_layernorm\.norms$/.test(of) ? config.kvHeads : config.heads
      if (index >= size)
        throw new SafetensorsError(
          'UnsupportedConversion',
          `tensor ${JSON.stringify(name)}: config.json has ${size} ${/experts$/.test(of) ? 'experts' : 'heads'}`,
        )
      const stackName = target.targets[0].name
      let stack = stacks.get(stackName)
      if (!stack) {
        const dims = [...info.shape].reverse().concat(size)
        stack = { tensor: planned(stackName, dims, typeOf(stackName, dims, dtype), []), parts: [], size }
        stacks.set(stackName, stack)
        tensors.push(stack.tensor)
      }
      stack.parts[index] = part
      continue
    }
    const [first] = target.targets
    const expected = shapeFromConfig(first.name, first.reshape === transposed, config)
    if (expected && info.shape.join() !== expected.shape.join())
      throw jsonFileError(
        'config.json',
        `tensor ${JSON.stringify(name)} is [${info.shape.join(', ')}], where ${expected.from} make [${expected.shape.join(', ')}]`,
      )
    for (const { name: gguf, reshape } of target.targets) {
      const role = permutedRole(gguf, architecture)
      const how = (role === 'q' ? qPairs : role === 'k' ? kPairs : (reshape ?? asItIs))(info.shape, config)
      if (typeof how === 'string') throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(name)}: ${how}`)
      if (quantized !== undefined && keepsMxfp4(config) && model.quantization?.method === 'mxfp4') {
        // gpt-oss's stored blocks, kept: the logical tensor [experts, in, out]'s transform names the rows of out to take.
        const [blocks, scales] = quantized.parts.map(stored)
        const take = how.unit?.take ?? { start: 0, step: 1, count: info.shape.at(-1)! }
        const pieces = Array.from({ length: info.shape[0] }, (_, e): Piece[] => [
          { part: blocks, rows: [e, e + 1] },
          { part: scales, rows: [e, e + 1] },
        ]).flat()
        tensors.push(planned(gguf, how.dims, 'MXFP4', pieces, { mxfp4: take }))
        continue
      }
      const shift = normShiftOf(name, architecture)
      tensors.push(
        planned(
          gguf,
          how.dims,
          typeOf(gguf, how.dims, dtype),
          how.rows.map((rows) => ({ part, rows })),
          { unit: how.unit, shift },
        ),
      )
    }
  }
  // Every part of every stack, each of the first one's shape.
  for (const { tensor, parts, size } of stacks.values()) {
    const [first] = parts
    for (let index = 0; index < size; index++) {
      const part = parts[index]
      if (!part) throw new SafetensorsError('TensorNotFound', `${tensor.name}: the model has no tensor for expert ${index} of the ${size} config.json names`)
      if (part.info.shape.join() !== first.info.shape.join())
        throw new SafetensorsError('TensorInvalidInfo', `tensor ${JSON.stringify(part.info.name)} is [${part.info.shape}], expert 0's is [${first.info.shape}]`)
      tensor.pieces.push({ part, rows: [0, part.info.shape[0] ?? 1] })
    }
  }
  // What llama.cpp needs of every architecture here, and what bounds config.json's counts.
  for (const needed of ['token_embd.weight', /^blk\.\d+\.attn_(q|qkv|q_b)\.weight$/]) {
    if (!tensors.some((t) => (typeof needed === 'string' ? t.name === needed : needed.test(t.name))))
      throw new SafetensorsError(
        'TensorNotFound',
        `the model has no ${typeof needed === 'string' ? 'token embedding' : 'attention query projection'}, which llama.cpp needs`,
      )
  }
  const rope = ropeTensors(config).map(({ name, values }) => planned(name, [values.length], 'F32', [], { computed: values }))
  return [...rope, ...tensors]
}
