// llama.cpp's file types (src/gguf/file-types.ts, --dtype Q4_K_M and the rest) and the type each gives every tensor
// (src/gguf/mixtures.ts), judged by llama.cpp's own quantizer:
// for each model, this library's F32 GGUF of it is quantized by llama_model_quantize (libllama.v0.4.0.so through
// koffi: no importance matrix, llama-quantize's defaults), and this library's GGUF of the same model in the same
// file type must hold the same tensors (names, types, shapes, bytes) and the same metadata but general.file_type and
// general.quantization_version. Both files are read by @huggingface/gguf, not by this library. llama.cpp then loads
// this library's file and computes the next token's probabilities with it.
//
// The models: the fixtures the issue names (test/fixtures/gguf: Llama 3, a SentencePiece Llama, Qwen3, Qwen3-MoE, Gemma
// 3, Phi-3, whose rows of 32 to 128 values take every fallback to the 32-value types), and models made here with rows
// of 256 and 768 values, where the K types themselves are written: a Llama of 8 layers with 4 query heads per key-value
// head (every rule by layer: the first and last eighths, every third, the first sixteenth), a tied Qwen3 (the
// embeddings as the output), a tied Granite of 8 layers (an architecture of issue 43), a Phi-3 (fused attn_qkv) and a
// Qwen3-MoE of 8 experts (llama.cpp's rules for 8-expert models); and the fixtures of the architectures of issue 43 in
// the file types whose rules they steer.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { GGMLQuantizationType, gguf } from '@huggingface/gguf'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FILE_TYPES } from '../../src/gguf/file-types.ts'
import { writeGguf } from '../../src/gguf-node.ts'
import { open } from '../../src/index.ts'
import { ggmlUnsupported, type LlamaQuantize, loadGgml, loadLlamaQuantize } from '../ggml.ts'
import { loadLlamaModel } from '../llama.ts'
import { prng } from '../random.ts'
import { referenceFile, tempDir } from '../writer-reference.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/gguf/', import.meta.url))
const OUT = tempDir('st-gguf-file-types-')
afterAll(() => rmSync(OUT, { recursive: true, force: true }))

/** Every name --dtype takes for a file type, with the llama_ftype llama_model_quantize is given for it. */
const NAMES: Array<[name: string, ftype: number]> = [
  ...Object.entries(FILE_TYPES).map(([name, { id }]): [string, number] => [name, id]),
  ['Q3_K', FILE_TYPES.Q3_K_M.id],
  ['Q4_K', FILE_TYPES.Q4_K_M.id],
  ['Q5_K', FILE_TYPES.Q5_K_M.id],
]

/** A GGUF as @huggingface/gguf reads it: metadata by key, and each tensor's type, shape and bytes. */
interface ReadGguf {
  metadata: Map<string, unknown>
  tensors: Map<string, { type: string; shape: number[]; bytes: Uint8Array }>
}

async function readGguf(path: string): Promise<ReadGguf> {
  const { metadata, tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true })
  const file = readFileSync(path)
  const infos = tensorInfos.map((info) => ({ ...info, start: Number(tensorDataOffset + info.offset) }))
  const starts = [...infos.map((info) => info.start)].sort((a, b) => a - b)
  const tensors = new Map<string, { type: string; shape: number[]; bytes: Uint8Array }>()
  const { blockSize, typeSize } = loadGgml()
  for (const info of infos) {
    const type = GGMLQuantizationType[info.dtype] as Parameters<typeof blockSize>[0]
    const shape = info.shape.map(Number)
    const length = (shape.reduce((a, b) => a * b, 1) / blockSize(type)) * typeSize(type)
    // Each tensor's bytes, which end at most where the next begins.
    const next = starts.find((start) => start > info.start) ?? file.length
    expect(info.start + length, `${path}: ${info.name}'s bytes`).toBeLessThanOrEqual(next)
    tensors.set(info.name, { type, shape, bytes: file.subarray(info.start, info.start + length) })
  }
  const { version, tensor_count, kv_count, ...entries } = metadata
  return { metadata: new Map(Object.entries(entries)), tensors }
}

/** The F32 values of a made model's tensor: the spread of trained weights, a few outliers; norms about 1. */
function weights(name: string, count: number, random: () => number): Float32Array {
  const values = new Float32Array(count)
  const norm = name.endsWith('norm.weight')
  for (let i = 0; i < count; i++) {
    const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())
    values[i] = norm ? 1 + 0.1 * normal : random() < 0.001 ? normal : 0.02 * normal
  }
  return values
}

/** What a made model changes in its fixture's config.json. */
interface Made {
  from: string
  name: string
  hidden: number
  intermediate: number
  layers: number
  heads: number
  kvHeads: number
  headDim: number
  experts?: number
  moeIntermediate?: number
}

/** The shape of a tensor of a made model, by its name (layer 0's, expert 0's). */
function shapeOf(name: string, m: Made, vocab: number): number[] {
  const { hidden: h, intermediate: i, heads, kvHeads, headDim: d } = m
  const rules: Array<[RegExp, number[]]> = [
    [/embed_tokens|lm_head/, [vocab, h]],
    [/[qk]_norm\.weight$/, [d]],
    [/norm\.weight$/, [h]],
    [/qkv_proj/, [(heads + 2 * kvHeads) * d, h]],
    [/q_proj/, [heads * d, h]],
    [/[kv]_proj/, [kvHeads * d, h]],
    [/o_proj/, [h, heads * d]],
    [/experts\.0\.(gate|up)_proj/, [m.moeIntermediate ?? 0, h]],
    [/experts\.0\.down_proj/, [h, m.moeIntermediate ?? 0]],
    [/mlp\.gate\.weight$/, [m.experts ?? 0, h]],
    [/gate_up_proj/, [2 * i, h]],
    [/(gate|up)_proj/, [i, h]],
    [/down_proj/, [h, i]],
  ]
  const rule = rules.find(([pattern]) => pattern.test(name))
  if (!rule) throw new Error(`no shape for ${name}`)
  return rule[1]
}

/** A model folder made from the fixture `m.from`: its tokenizer, its config with m's sizes, random F32 weights. */
async function makeModel(m: Made): Promise<string> {
  const folder = join(OUT, m.name)
  mkdirSync(folder, { recursive: true })
  const source = join(FIXTURES, m.from)
  for (const file of readdirSync(source)) if (!/\.safetensors|reference\.json|llama-cpp/.test(file)) copyFileSync(join(source, file), join(folder, file))
  const config = JSON.parse(readFileSync(join(source, 'config.json'), 'utf8'))
  Object.assign(config, {
    hidden_size: m.hidden,
    intermediate_size: m.intermediate,
    num_hidden_layers: m.layers,
    num_attention_heads: m.heads,
    num_key_value_heads: m.kvHeads,
    head_dim: m.headDim,
  })
  if (m.experts) Object.assign(config, { num_experts: m.experts, num_local_experts: m.experts, moe_intermediate_size: m.moeIntermediate })
  writeFileSync(join(folder, 'config.json'), JSON.stringify(config, null, 2))
  const file = await open(join(source, 'model.safetensors'))
  const names = file.header.tensors.map((t) => t.name)
  await file.close()
  const random = prng(m.layers * 1000 + m.hidden)
  const tensors = []
  for (const name of names.filter((n) => !/layers\.[1-9]|experts\.[1-9]/.test(n))) {
    const shape = shapeOf(name, m, config.vocab_size)
    for (let layer = 0; layer < (name.includes('layers.0.') ? m.layers : 1); layer++) {
      for (let expert = 0; expert < (name.includes('experts.0.') ? (m.experts ?? 0) : 1); expert++) {
        const named = name.replace('layers.0.', `layers.${layer}.`).replace('experts.0.', `experts.${expert}.`)
        const values = weights(
          named,
          shape.reduce((a, b) => a * b, 1),
          random,
        )
        tensors.push({ name: named, dtype: 'F32', shape, bytes: new Uint8Array(values.buffer) })
      }
    }
  }
  writeFileSync(join(folder, 'model.safetensors'), referenceFile(tensors))
  return folder
}

const MADE: Made[] = [
  { from: 'llama3', name: 'llama3-256', hidden: 256, intermediate: 768, layers: 8, heads: 4, kvHeads: 1, headDim: 64 },
  { from: 'qwen3', name: 'qwen3-256', hidden: 256, intermediate: 768, layers: 4, heads: 4, kvHeads: 2, headDim: 64 },
  { from: 'granite', name: 'granite-256', hidden: 256, intermediate: 768, layers: 8, heads: 4, kvHeads: 1, headDim: 64 },
  { from: 'phi3', name: 'phi3-256', hidden: 256, intermediate: 768, layers: 3, heads: 16, kvHeads: 16, headDim: 16 },
  {
    from: 'qwen3moe',
    name: 'qwen3moe-256',
    hidden: 256,
    intermediate: 768,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    experts: 8,
    moeIntermediate: 256,
  },
]
const FIXTURE_MODELS = ['llama3', 'llama2-spm', 'qwen3', 'qwen3moe', 'gemma3', 'phi3']
/**
 * The architectures of issue 43 (but gpt-oss, whose MXFP4 experts this library keeps where llama.cpp's quantizer
 * would requantize them), in the file types whose rules differ by tensor and, for Falcon, by architecture.
 */
const ARCHITECTURE_MODELS = ['smollm3', 'granite', 'olmo2', 'gptneox', 'phi2', 'stablelm', 'falcon', 'command-r', 'qwen2moe', 'deepseek-v2-lite', 'llama4']
const ARCHITECTURE_NAMES = NAMES.filter(([name]) => ['Q2_K', 'Q3_K_M', 'Q3_K_L', 'Q4_K_S', 'Q4_K_M', 'Q8_0', 'IQ4_XS'].includes(name))

const unsupported = ggmlUnsupported()
describe.skipIf(unsupported)('GGUF file types against llama_model_quantize', () => {
  let llamaQuantize: LlamaQuantize
  const folders = new Map<string, string>()
  beforeAll(async () => {
    llamaQuantize = loadLlamaQuantize()
    for (const model of [...FIXTURE_MODELS, ...ARCHITECTURE_MODELS]) folders.set(model, join(FIXTURES, model))
    for (const made of MADE) folders.set(made.name, await makeModel(made))
  }, 600_000)

  const f32 = new Map<string, Promise<string>>()
  /** The library's F32 GGUF of `model`, written once. */
  function f32Of(model: string): Promise<string> {
    if (!f32.has(model)) {
      const out = join(OUT, `${model}.F32.gguf`)
      f32.set(
        model,
        writeGguf(folders.get(model)!, out, { dtype: 'F32' }).then(() => out),
      )
    }
    return f32.get(model)!
  }

  const cases: Array<[string, Array<[string, number]>]> = [
    ...[...FIXTURE_MODELS, ...MADE.map((m) => m.name)].map((model): [string, Array<[string, number]>] => [model, NAMES]),
    ...ARCHITECTURE_MODELS.map((model): [string, Array<[string, number]>] => [model, ARCHITECTURE_NAMES]),
  ]
  for (const [model, names] of cases) {
    test.each(names)(
      `${model} %s: the tensors and metadata of llama.cpp's quantizer; llama.cpp runs it`,
      async (name, ftype) => {
        const reference = join(OUT, `${model}.${name}.llama.gguf`)
        llamaQuantize(await f32Of(model), reference, ftype, 1)
        const ours = join(OUT, `${model}.${name}.gguf`)
        await writeGguf(folders.get(model)!, ours, { dtype: name.toLowerCase() as 'q4_k_m' })
        const [expected, got] = [await readGguf(reference), await readGguf(ours)]
        expect([...got.tensors.keys()].sort()).toEqual([...expected.tensors.keys()].sort())
        for (const [tensor, want] of expected.tensors) {
          const have = got.tensors.get(tensor)!
          expect({ tensor, type: have.type, shape: have.shape }).toEqual({ tensor, type: want.type, shape: want.shape })
          const differs = have.bytes.findIndex((byte, i) => byte !== want.bytes[i])
          expect(differs, `${tensor} (${want.type}): the first byte that differs`).toBe(-1)
        }
        const without = (m: Map<string, unknown>) => [...m].filter(([key]) => key !== 'general.file_type' && key !== 'general.quantization_version')
        expect(new Map(without(got.metadata))).toEqual(new Map(without(expected.metadata)))
        expect([got.metadata.get('general.file_type'), got.metadata.get('general.quantization_version')]).toEqual([ftype, 2])
        const llama = await loadLlamaModel(ours)
        try {
          const probabilities = await llama.nextTokenProbabilities([1, 2, 3])
          const sum = probabilities.reduce((a, b) => a + b, 0)
          expect(probabilities.every(Number.isFinite) && Math.abs(sum - 1) < 1e-3, `${model} ${name}: probabilities summing to ${sum}`).toBe(true)
        } finally {
          await llama.dispose()
        }
        rmSync(reference)
        rmSync(ours)
      },
      120_000,
    )
  }
})
