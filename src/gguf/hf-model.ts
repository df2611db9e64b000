// A GGUF back to the Hugging Face model it was converted from: the transformers class of its architecture, its
// config.json and generation_config.json from the GGUF's keys, and each parameter's name, shape and values by
// undoing what llama.cpp's convert_hf_to_gguf.py did (the inverse of tensors.ts and metadata.ts, whose table of
// architectures and rules it runs backwards: names by tensors.ts's ggufTargets, each architecture's transforms as its
// entry of architectures.ts names them, RoPE's tensors checked by metadata.ts's ropeTensors).
import { SafetensorsError } from '../errors.ts'
import { excerpt, JsonValue } from '../format/json-values.ts'
import { type Reshape, TABLE as table } from './architectures.ts'
import type { GgufFile } from './file.ts'
import { readModelConfig, ropeTensors } from './metadata.ts'
import type { GgufTensorInfo, GgufValue } from './reader.ts'
import { ggufTargets, normShiftOf, permutedRole } from './tensors.ts'

/** The transformers names of one architecture's tensors, as ggufTargets maps them (its block parts, experts without their index). */
interface HfNames {
  /** config.json's architectures[0] and model_type. */
  className: string
  modelType: string
  /** What every name starts with: `model.` (GPT-2: `transformer.`). */
  prefix: string
  /** Tensors outside the blocks, after the prefix (lm_head has none). */
  top: readonly string[]
  /** The blocks' tensors, after `<prefix>layers.N.` (GPT-2: `h.N.`). */
  block: readonly string[]
}

const ATTENTION = ['input_layernorm', 'self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.o_proj', 'post_attention_layernorm']
const MLP = ['mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj']
const QK_NORMS = ['self_attn.q_norm', 'self_attn.k_norm']
const GEMMA_NORMS = ['pre_feedforward_layernorm', 'post_feedforward_layernorm']
const LLAMA_TOP = ['embed_tokens', 'norm']

const names = (className: string, modelType: string, block: string[]): HfNames => ({ className, modelType, prefix: 'model.', top: LLAMA_TOP, block })

/** By GGUF architecture (llama with experts is Mixtral): the class that reads it back, and its tensors' names. */
const HF_NAMES: Readonly<Record<string, HfNames>> = {
  llama: names('LlamaForCausalLM', 'llama', [...ATTENTION, ...MLP]),
  mixtral: names('MixtralForCausalLM', 'mixtral', [
    ...ATTENTION,
    'block_sparse_moe.gate',
    'block_sparse_moe.experts.w1',
    'block_sparse_moe.experts.w3',
    'block_sparse_moe.experts.w2',
  ]),
  qwen2: names('Qwen2ForCausalLM', 'qwen2', [...ATTENTION, ...MLP]),
  qwen3: names('Qwen3ForCausalLM', 'qwen3', [...ATTENTION, ...QK_NORMS, ...MLP]),
  qwen3moe: names('Qwen3MoeForCausalLM', 'qwen3_moe', [
    ...ATTENTION,
    ...QK_NORMS,
    'mlp.gate',
    'mlp.experts.gate_proj',
    'mlp.experts.up_proj',
    'mlp.experts.down_proj',
  ]),
  gemma2: names('Gemma2ForCausalLM', 'gemma2', [...ATTENTION, ...GEMMA_NORMS, ...MLP]),
  gemma3: names('Gemma3ForCausalLM', 'gemma3_text', [...ATTENTION, ...QK_NORMS, ...GEMMA_NORMS, ...MLP]),
  phi3: names('Phi3ForCausalLM', 'phi3', [
    'input_layernorm',
    'self_attn.qkv_proj',
    'self_attn.o_proj',
    'post_attention_layernorm',
    'mlp.gate_up_proj',
    'mlp.down_proj',
  ]),
  gpt2: {
    className: 'GPT2LMHeadModel',
    modelType: 'gpt2',
    prefix: 'transformer.',
    top: ['wte', 'wpe', 'ln_f'],
    block: ['ln_1', 'attn.c_attn', 'attn.c_proj', 'ln_2', 'mlp.c_fc', 'mlp.c_proj'],
  },
}

/** GGUF tensors that are not parameters: RoPE's, which config.json gives. */
const ROPE_TENSORS = /^(rope_freqs|rope_factors_long|rope_factors_short)\.weight$/

/** One parameter of the Hugging Face model: where its values are in the GGUF, and what undoes the converter's changes. */
export interface HfTensor {
  /** Its transformers name and shape (outermost first). */
  name: string
  shape: number[]
  /** The GGUF tensor it is read from, and its index in a stack of experts (the outermost dimension). */
  gguf: GgufTensorInfo
  expert?: number
  /** Heads whose rows the converter reordered (llama's q_proj and k_proj), 0 for none. */
  heads: number
  /** A GPT-2 Conv1D weight, stored [out, in] in the GGUF and [in, out] in transformers. */
  transpose: boolean
  /** Subtracted from every value (Gemma's norms: 1). */
  shift: number
}

/** A GGUF's Hugging Face model: its config.json, generation_config.json and parameters. */
interface HfModel {
  config: Record<string, unknown>
  generationConfig: Record<string, unknown>
  tensors: HfTensor[]
}

function unsupported(message: string): SafetensorsError {
  return new SafetensorsError('UnsupportedConversion', message)
}

/** The shortest decimal that a GGUF f32 value is the float32 of (1e-5 for 9.99999974738e-6), as config.json writes it. */
function shortest(value: number): number {
  for (let digits = 1; digits < 17; digits++) {
    const decimal = Number(value.toPrecision(digits))
    if (Math.fround(decimal) === value) return decimal
  }
  return value
}

/** The GGUF's keys of its architecture, read by their name after `<arch>.`. */
class Keys {
  constructor(
    readonly file: GgufFile,
    readonly arch: string,
  ) {}

  value(key: string): GgufValue | undefined {
    return this.file.metadata[`${this.arch}.${key}`]
  }

  number(key: string): number | undefined {
    const value = this.value(key)
    if (value === undefined) return undefined
    if (typeof value === 'bigint') return Number(value)
    if (typeof value !== 'number') throw new SafetensorsError('InvalidGguf', `GGUF: key ${JSON.stringify(`${this.arch}.${key}`)} is not a number`)
    return shortest(value)
  }

  required(key: string): number {
    const value = this.number(key)
    if (value === undefined)
      throw new SafetensorsError('InvalidGguf', `GGUF: key ${JSON.stringify(`${this.arch}.${key}`)} is missing, and config.json needs it`)
    return value
  }

  tokenId(kind: string): number | undefined {
    const value = this.file.metadata[`tokenizer.ggml.${kind}_token_id`]
    return typeof value === 'number' ? value : undefined
  }
}

/** The Llama 3 RoPE scaling whose rope_freqs (metadata.ts's ropeTensors) are the GGUF's; none found is UnsupportedConversion. */
function llama3Scaling(config: Record<string, unknown>, freqs: Float32Array): Record<string, unknown> {
  const factor = Math.max(...freqs)
  const headDim = freqs.length * 2
  const base = (config.rope_theta as number | undefined) ?? 10000
  // Every Llama 3.x release has low_freq_factor 1 and high_freq_factor 4; the original context follows from a
  // frequency scaled by neither 1 nor the factor (smooth = (original / wavelength - low) / (high - low)).
  const low = 1
  const high = 4
  const candidates = new Set<number>([8192])
  for (const [i, value] of freqs.entries()) {
    if (value === 1 || value === factor) continue
    const wavelength = (2 * Math.PI) / (1 / base ** ((2 * i) / headDim))
    const smooth = (1 / value - 1 / factor) / (1 - 1 / factor)
    candidates.add(Math.round(wavelength * (low + smooth * (high - low))))
  }
  for (const original of candidates) {
    const scaling = { factor, high_freq_factor: high, low_freq_factor: low, original_max_position_embeddings: original, rope_type: 'llama3' }
    const parsed = readModelConfig(new JsonValue({ ...config, rope_scaling: scaling }, 'config.json'), table)
    const [computed] = ropeTensors(parsed)
    if (computed?.values.every((v, i) => Object.is(v, freqs[i]))) return scaling
  }
  throw unsupported("GGUF: rope_freqs.weight is not Llama 3's RoPE scaling with low_freq_factor 1 and high_freq_factor 4; config.json cannot say it")
}

/** A 1-D F32 tensor's values, read whole (RoPE's factors). */
async function vector(file: GgufFile, name: string): Promise<Float32Array | undefined> {
  if (!file.names().includes(name)) return undefined
  return (await file.getTensor(name, { dtype: 'F32' })).data as Float32Array
}

/** config.json's RoPE: rope_theta and rope_scaling (transformers 4's form, which transformers 5 reads too). */
async function ropeConfig(file: GgufFile, keys: Keys, config: Record<string, unknown>): Promise<void> {
  config.rope_theta = keys.number('rope.freq_base') ?? 10000
  const type = keys.value('rope.scaling.type')
  const original = keys.number('rope.scaling.original_context_length')
  const freqs = await vector(file, 'rope_freqs.weight')
  const long = await vector(file, 'rope_factors_long.weight')
  const short = await vector(file, 'rope_factors_short.weight')
  if (freqs) config.rope_scaling = llama3Scaling(config, freqs)
  else if (long && short) {
    config.rope_scaling = { type: 'longrope', long_factor: Array.from(long, shortest), short_factor: Array.from(short, shortest) }
    config.original_max_position_embeddings = original
  } else if (type === 'linear') config.rope_scaling = { rope_type: 'linear', factor: keys.number('rope.scaling.factor') }
  else if (type === 'yarn') {
    const yarn: Record<string, unknown> = { rope_type: 'yarn', factor: keys.number('rope.scaling.factor'), original_max_position_embeddings: original }
    for (const [key, name] of [
      ['yarn_ext_factor', 'extrapolation_factor'],
      ['yarn_attn_factor', 'attention_factor'],
      ['yarn_beta_fast', 'beta_fast'],
      ['yarn_beta_slow', 'beta_slow'],
    ])
      if (keys.number(`rope.scaling.${key}`) !== undefined) yarn[name] = keys.number(`rope.scaling.${key}`)
    config.rope_scaling = yarn
  } else if (type !== undefined && type !== 'none') throw unsupported(`GGUF: RoPE scaling type ${excerpt(String(type))} has no transformers config.json here`)
}

/** config.json of the GGUF's model, by the names its transformers class reads. */
async function modelConfig(file: GgufFile, arch: string, hf: HfNames, experts: number): Promise<Record<string, unknown>> {
  const keys = new Keys(file, arch)
  const embeddings = file.info('token_embd.weight')
  const heads = keys.required('attention.head_count')
  const common = {
    architectures: [hf.className],
    model_type: hf.modelType,
    vocab_size: embeddings.shape[0],
    bos_token_id: keys.tokenId('bos'),
    eos_token_id: keys.tokenId('eos'),
    pad_token_id: keys.tokenId('padding'),
    tie_word_embeddings: !file.names().includes('output.weight'),
    dtype: 'float32',
  }
  if (arch === 'gpt2') {
    const context = keys.required('context_length')
    return {
      ...common,
      activation_function: 'gelu_new',
      layer_norm_epsilon: keys.number('attention.layer_norm_epsilon'),
      n_ctx: context,
      n_positions: context,
      n_embd: keys.required('embedding_length'),
      n_head: heads,
      n_inner: keys.number('feed_forward_length'),
      n_layer: keys.required('block_count'),
    }
  }
  const hidden = keys.required('embedding_length')
  const headDim = keys.number('attention.key_length') ?? hidden / heads
  const gemma = arch.startsWith('gemma')
  const config: Record<string, unknown> = {
    ...common,
    hidden_size: hidden,
    intermediate_size: keys.required('feed_forward_length'),
    num_hidden_layers: keys.required('block_count'),
    num_attention_heads: heads,
    num_key_value_heads: keys.number('attention.head_count_kv') ?? heads,
    head_dim: headDim,
    max_position_embeddings: keys.required('context_length'),
    rms_norm_eps: keys.number('attention.layer_norm_rms_epsilon'),
    [gemma ? 'hidden_activation' : 'hidden_act']: gemma ? 'gelu_pytorch_tanh' : 'silu',
  }
  if (arch === 'llama' || arch === 'qwen2') config.attention_bias = file.names().includes('blk.0.attn_q.bias')
  // llama.cpp's Qwen graphs attend over the whole context in every layer.
  if (arch.startsWith('qwen')) config.layer_types = Array<string>(config.num_hidden_layers as number).fill('full_attention')
  if (experts > 0) {
    config.num_local_experts = experts
    config.num_experts_per_tok = keys.required('expert_used_count')
  }
  if (arch === 'qwen3moe') {
    config.moe_intermediate_size = keys.required('expert_feed_forward_length')
    config.norm_topk_prob = true
  }
  if (arch === 'phi3') {
    const dims = keys.number('rope.dimension_count')
    if (dims !== undefined && dims !== headDim) config.partial_rotary_factor = (dims * heads) / hidden
    config.sliding_window = keys.number('attention.sliding_window') || null
  }
  if (gemma) {
    // llama.cpp scales queries by 1 / sqrt(head_dim), as the released models' query_pre_attn_scalar does.
    config.query_pre_attn_scalar = headDim
    config.sliding_window = keys.number('attention.sliding_window')
    config.final_logit_softcapping = keys.number('final_logit_softcapping') ?? null
    config.attn_logit_softcapping = keys.number('attn_logit_softcapping') ?? null
    const period = table.ARCHITECTURES[hf.className].swaPeriod!
    config.layer_types = Array.from({ length: config.num_hidden_layers as number }, (_, i) =>
      i % period === period - 1 ? 'full_attention' : 'sliding_attention',
    )
    if (arch === 'gemma3') config.rope_local_base_freq = keys.number('rope.freq_base_swa') ?? 10000
  }
  await ropeConfig(file, keys, config)
  return config
}

/** The transformers parameters of the GGUF's tensors: names by ggufTargets run backwards, what the converter did undone. */
function parameters(file: GgufFile, hf: HfNames, config: Record<string, unknown>, experts: number): HfTensor[] {
  const { className } = hf
  const architecture = table.ARCHITECTURES[className]
  const blocks = (config.num_hidden_layers ?? config.n_layer) as number
  const named = { blocks, architecture, table }
  // GGUF name -> transformers name (a template with {e} for the expert) of every tensor the class has, and the
  // transform the converter made it by.
  const inverse = new Map<string, { name: string; reshape?: Reshape }>()
  const add = (hfName: string) => {
    const [target] = ggufTargets(hfName.replace('{e}', '0'), named)?.targets ?? []
    if (target) inverse.set(target.name, { name: hfName, reshape: target.reshape })
  }
  for (const kind of ['weight', 'bias']) {
    for (const top of hf.top) add(`${hf.prefix}${top}.${kind}`)
    add(`lm_head.${kind}`)
    for (let block = 0; block < blocks; block++) {
      const inBlock = `${hf.prefix}${className === 'GPT2LMHeadModel' ? 'h' : 'layers'}.${block}.`
      for (const part of hf.block) add(`${inBlock}${part.replace(/\.experts\./, '.experts.{e}.')}.${kind}`)
    }
  }
  const heads = config.num_attention_heads as number
  const kvHeads = config.num_key_value_heads as number
  const tensors: HfTensor[] = []
  for (const gguf of file.header.tensors) {
    if (ROPE_TENSORS.test(gguf.name)) continue
    const parameter = inverse.get(gguf.name)
    if (parameter === undefined) throw unsupported(`GGUF tensor ${JSON.stringify(gguf.name)} has no ${className} parameter`)
    const { name, reshape } = parameter
    // GPT-2's Conv1D weights were transposed (not their biases, which the transform leaves as they are).
    const transpose = reshape === table.RESHAPES.transposed && gguf.shape.length > 1
    const role = permutedRole(gguf.name, architecture)
    const reordered = role === 'q' ? heads : role === 'k' ? kvHeads : 0
    const shift = normShiftOf(name, architecture)
    const shape = transpose ? [...gguf.shape].reverse() : [...gguf.shape]
    const one = { gguf, heads: reordered, transpose, shift }
    if (!name.includes('{e}')) tensors.push({ name, shape, ...one })
    else {
      if (gguf.shape[0] !== experts)
        throw new SafetensorsError('InvalidGguf', `GGUF: tensor ${JSON.stringify(gguf.name)} stacks ${gguf.shape[0]} experts, not ${experts}`)
      for (let expert = 0; expert < experts; expert++) tensors.push({ name: name.replace('{e}', String(expert)), shape: shape.slice(1), expert, ...one })
    }
  }
  return tensors
}

/**
 * The Hugging Face model of a GGUF that llama.cpp's converter (or this library's) wrote from one: its class by
 * general.architecture, config.json and generation_config.json from its keys, its parameters' names and shapes.
 * @throws SafetensorsError `UnsupportedConversion` for an architecture or tensor it cannot map; `InvalidGguf` for a missing key.
 */
export async function planHfModel(file: GgufFile): Promise<HfModel> {
  const arch = file.metadata['general.architecture']
  if (typeof arch !== 'string') throw new SafetensorsError('InvalidGguf', 'GGUF: general.architecture is missing')
  const experts = Number(file.metadata[`${arch}.expert_count`] ?? 0)
  const key = arch === 'llama' && experts > 0 ? 'mixtral' : arch
  if (!Object.hasOwn(HF_NAMES, key))
    throw unsupported(
      `GGUF architecture ${excerpt(arch)} has no Hugging Face mapping here; this converts ${Object.keys(HF_NAMES).join(', ')}; raw: true (the CLI's --raw) writes its tensors under their GGUF names`,
    )
  const hf = HF_NAMES[key]
  const config = await modelConfig(file, arch, hf, experts)
  const generationConfig = Object.fromEntries(
    Object.entries({ bos_token_id: config.bos_token_id, eos_token_id: config.eos_token_id, pad_token_id: config.pad_token_id }).filter(
      ([, v]) => v !== undefined,
    ),
  )
  return { config, generationConfig, tensors: parameters(file, hf, config, experts) }
}

/** config.json's keys that transformers' config classes type as floats, which it refuses as integers (10 for 10.0). */
const FLOAT_KEYS = new Set([
  'rms_norm_eps',
  'layer_norm_epsilon',
  'rope_theta',
  'rope_local_base_freq',
  'final_logit_softcapping',
  'attn_logit_softcapping',
  'factor',
  'attention_factor',
  'beta_fast',
  'beta_slow',
  'extrapolation_factor',
  'low_freq_factor',
  'high_freq_factor',
  'partial_rotary_factor',
])

/** A config.json's text as Python's json writes it: floats with a decimal point (10.0), indented by 2. */
export function configText(config: Record<string, unknown>): string {
  const text = JSON.stringify(config, (key, value) => (FLOAT_KEYS.has(key) && Number.isInteger(value) ? `\u0000${value}.0` : value), 2)
  return `${text.replace(/"\\u0000(-?\d+\.0)"/g, '$1')}\n`
}
