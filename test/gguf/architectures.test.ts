// The table of GGUF architectures (src/gguf/architectures.ts), beyond what test/gguf/index.test.ts holds every test model
// to (llama.cpp's own converter's file, key by key and tensor by tensor) and test/integration/gguf-llama.test.ts runs: what each
// entry refuses because llama.cpp cannot run it as transformers does, config.json in the other forms it comes in,
// the hyperparameters the test models do not show, and gpt-oss's MXFP4 experts against ggml's own dequantization.
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { JsonValue } from '../../src/format/json-values.ts'
import { TABLE as table } from '../../src/gguf/architectures.ts'
import type { KeyValue } from '../../src/gguf/format.ts'
import { modelMetadata, readModelConfig } from '../../src/gguf/metadata.ts'
import { ggufStream, writeGguf } from '../../src/gguf-node.ts'
import { type Ggml, ggmlUnsupported, loadGgml } from '../ggml.ts'
import { GGUF_FIXTURES, ggufTensorHashes, ggufTensors, modelCopies, parseGguf, readJson } from '../gguf-fixtures.ts'
import { expectError, expectSameElements } from '../read-helpers.ts'
import { cli } from '../run-cli.ts'

const dir = mkdtempSync(join(tmpdir(), 'safetensors-gguf-architectures-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const { withConfig } = modelCopies(dir)

type Config = Record<string, unknown>
const configOf = (model: string): Config => readJson(join(GGUF_FIXTURES, model, 'config.json'))
const elementsOf = (shape: number[]) => shape.reduce((a, b) => a * b, 1)

test('every transformers class of the table has a test model (which llama.cpp judges in test/integration/gguf-llama.test.ts)', () => {
  const models = readdirSync(GGUF_FIXTURES).filter((name) => existsSync(join(GGUF_FIXTURES, name, 'config.json')))
  const tested = new Set(models.map((model) => (configOf(model).architectures as string[])[0]))
  expect(Object.keys(table.ARCHITECTURES).filter((name) => !tested.has(name))).toEqual([])
})

describe('what llama.cpp cannot run as transformers does is refused, naming it', () => {
  test.each<[string, string, (c: Config) => void, string]>([
    [
      'smollm3',
      'RoPE left out of other layers than every 4th',
      (c) => void (c.no_rope_layers = [1, 0, 1, 1]),
      'no_rope_layers[1] of 0 (llama.cpp leaves RoPE out of every 4th layer)',
    ],
    [
      'smollm3',
      'sliding-window layers',
      (c) =>
        Object.assign(c, {
          use_sliding_window: true,
          sliding_window: 8,
          layer_types: ['full_attention', 'full_attention', 'full_attention', 'sliding_attention'],
        }),
      'sliding-window layers',
    ],
    ['granite', 'a head_dim other than hidden_size / heads', (c) => void (c.head_dim = 32), 'head_dim 32'],
    ['phi2', 'grouped-query attention', (c) => void (c.num_key_value_heads = 2), 'num_key_value_heads 2'],
    ['phi2', 'q/k norms', (c) => void (c.qk_layernorm = true), 'qk_layernorm'],
    ['falcon', 'ALiBi', (c) => void (c.alibi = true), 'alibi'],
    ['falcon', 'attention and MLP in turn', (c) => void (c.parallel_attn = false), 'parallel_attn false'],
    ['falcon', 'linear biases', (c) => void (c.bias = true), 'bias'],
    ['command-r', 'q/k norms in a model of fewer than 64 layers', (c) => void (c.use_qk_norm = true), 'use_qk_norm true with 2 layers'],
    ['command-r', 'an output of its own', (c) => void (c.tie_word_embeddings = false), 'tie_word_embeddings false'],
    ['qwen2moe', "renormalized experts' weights", (c) => void (c.norm_topk_prob = true), 'norm_topk_prob true'],
    ['qwen2moe', 'layers without experts', (c) => void (c.decoder_sparse_step = 2), 'decoder_sparse_step 2'],
    [
      'deepseek-v2-lite',
      "DeepSeek-V2's routing by groups",
      (c) => Object.assign(c, { topk_method: 'group_limited_greedy', n_group: 2, topk_group: 1 }),
      'topk_method "group_limited_greedy" with 2 groups',
    ],
    ['deepseek-v2-lite', 'a scoring function its class does not use', (c) => void (c.scoring_func = 'sigmoid'), 'scoring_func "sigmoid"'],
    ['deepseek-v3', 'a scoring function llama.cpp does not have', (c) => void (c.scoring_func = 'tanh'), 'scoring_func "tanh"'],
    ['gpt-oss', "sliding-window layers out of llama.cpp's pattern", (c) => void (c.layer_types = ['full_attention', 'sliding_attention']), 'layer_types'],
    ['llama4', 'attention chunks of another size', (c) => void (c.attention_chunk_size = 4096), 'attention_chunk_size 4096'],
    ['llama4', 'no attention temperature tuning', (c) => void (c.attn_temperature_tuning = false), 'attention temperature tuning'],
    ['llama4', 'no q/k norms with 4 experts', (c) => void (c.use_qk_norm = false), 'use_qk_norm false with 4 experts'],
    ['llama4', 'experts in other layers', (c) => void (c.moe_layers = [0, 2]), 'moe_layers with layer 0 at 0 (llama.cpp has experts in every 2th layer of 4)'],
  ])('%s: %s', async (model, what, edit, message) => {
    const folder = withConfig(model, `${model}-${what.replace(/\W+/g, '-')}`, edit)
    const error = await expectError(() => ggufStream(folder), 'UnsupportedConversion')
    expect(error.message).toContain(message)
    expect(error.message).toContain(`GGUF architecture ${table.ARCHITECTURES[(configOf(model).architectures as string[])[0]].name}`)
  })
})

describe('config.json in another form gives the same GGUF', () => {
  test.each<[string, string, (c: Config) => void]>([
    [
      'gptneox',
      "the Hub's rotary_pct and rotary_emb_base (transformers 4)",
      (c) => {
        const { partial_rotary_factor, rope_theta } = c.rope_parameters as Config
        delete c.rope_parameters
        Object.assign(c, { rotary_pct: partial_rotary_factor, rotary_emb_base: rope_theta })
      },
    ],
    [
      'phi2',
      "transformers 5's rope_parameters",
      (c) => {
        c.rope_parameters = { rope_type: 'default', rope_theta: c.rope_theta, partial_rotary_factor: c.partial_rotary_factor }
        for (const key of ['rope_theta', 'rope_scaling', 'partial_rotary_factor']) delete c[key]
      },
    ],
    ['deepseek-v3', "transformers 5's head_dim and qk_head_dim", (c) => Object.assign(c, { head_dim: 8, qk_head_dim: 24 })],
    ['gpt-oss', "no RoPE dict (GptOssConfig's YaRN, which the test model states)", (c) => void (c.rope_scaling = null)],
  ])('%s: %s', async (model, what, edit) => {
    const inputs = [join(GGUF_FIXTURES, model), withConfig(model, `${model}-form-${what.replace(/\W+/g, '-')}`, edit)]
    // The same keys and values (a key config.json has elsewhere may come in another order), the same tensors.
    const [ours, other] = await Promise.all(
      inputs.map(async (input, i) => {
        const out = join(dir, `${model}-form-${i}.gguf`)
        await writeGguf(input, out)
        return { metadata: (await parseGguf(out)).typedMetadata, tensors: await ggufTensorHashes(out) }
      }),
    )
    expect(other.metadata).toEqual(ours.metadata)
    expect(other.tensors).toEqual(ours.tensors)
  })
})

/** The architecture keys of the GGUF of `config` (at F16), by key without the architecture's name. */
function keysOf(config: Config): Record<string, unknown> {
  const model = readModelConfig(new JsonValue(config, 'config.json'), table)
  const prefix = `${model.architecture.name}.`
  return Object.fromEntries(modelMetadata(model, 'F16').map(([key, , value]: KeyValue) => [key.startsWith(prefix) ? key.slice(prefix.length) : key, value]))
}

describe('hyperparameters the test models do not show', () => {
  test("Falcon's 7B decoder (multi-query): one key-value head whatever num_kv_heads says, as transformers reads it", () => {
    const config = { ...configOf('falcon'), new_decoder_architecture: false, multi_query: true, num_kv_heads: 4 }
    expect(keysOf(config)['attention.head_count_kv']).toBe(1)
    expect(keysOf({ ...config, multi_query: false })['attention.head_count_kv']).toBe(4)
  })

  test("Granite without its multipliers: GraniteConfig's, 1 each, as the converter writes them", () => {
    const config = configOf('granite')
    for (const key of ['embedding_multiplier', 'residual_multiplier', 'attention_multiplier', 'logits_scaling']) delete config[key]
    expect(keysOf(config)).toMatchObject({ 'attention.scale': 1, embedding_scale: 1, residual_scale: 1, logit_scale: 1 })
    expect(keysOf(config)['attention.key_length']).toBeUndefined()
  })

  test("DeepSeek's expert gating: V3's sigmoid whether config.json names it or not; V2's softmax where it does, llama.cpp's default where not", () => {
    const v3 = configOf('deepseek-v3')
    delete v3.scoring_func
    expect(keysOf(v3).expert_gating_func).toBe(2)
    const v2 = configOf('deepseek-v2-lite')
    expect(keysOf(v2).expert_gating_func).toBe(1)
    delete v2.scoring_func
    expect(keysOf(v2).expert_gating_func).toBeUndefined()
  })

  test("DeepSeek with YaRN: the converter's keys, and yarn_log_multiplier 0.1 * mscale_all_dim", () => {
    const config = {
      ...configOf('deepseek-v3'),
      rope_scaling: { type: 'yarn', factor: 40, original_max_position_embeddings: 4096, beta_fast: 32, beta_slow: 1, mscale: 1, mscale_all_dim: 1 },
    }
    expect(keysOf(config)).toMatchObject({
      'rope.scaling.type': 'yarn',
      'rope.scaling.factor': 40,
      'rope.scaling.original_context_length': 4096,
      'rope.scaling.yarn_beta_fast': 32,
      'rope.scaling.yarn_beta_slow': 1,
      'rope.scaling.yarn_log_multiplier': 0.1,
    })
  })

  test("Command-R's context: model_max_length before max_position_embeddings, as the converter reads them", () => {
    expect(keysOf({ ...configOf('command-r'), model_max_length: 131072 }).context_length).toBe(131072)
  })

  test('Llama 4 with every layer global (MobileLLM): sliding_window 0, RoPE left out of the last layer only', () => {
    const config = { ...configOf('llama4'), layer_types: Array(4).fill('full_attention'), no_rope_layers: [1, 1, 1, 0] }
    expect(keysOf(config)['attention.sliding_window']).toBe(0)
    expect(() => keysOf({ ...config, no_rope_layers: [1, 0, 1, 1] })).toThrow(/no_rope_layers\[1\] of 0 \(llama\.cpp leaves RoPE out of every 4th layer\)/)
  })

  test('the refusal of another architecture names the supported ones and llama.cpp’s converter', () => {
    expect(() => readModelConfig(new JsonValue({ ...configOf('llama4'), architectures: ['JambaForCausalLM'] }, 'config.json'), table)).toThrow(
      /"JambaForCausalLM"; GGUF conversion supports LlamaForCausalLM, .*Llama4ForCausalLM \(for another, llama\.cpp's own convert_hf_to_gguf\.py\)$/,
    )
  })
})

const unsupported = ggmlUnsupported()
describe.skipIf(unsupported !== undefined)('gpt-oss: its MXFP4 experts kept as ggml blocks', () => {
  let ggml: Ggml
  // node-llama-cpp's first install downloads about 85 MB from npm.
  beforeAll(() => void (ggml = loadGgml()), 10 * 60_000)

  test('in every dtype, as MXFP4, the file type MOSTLY_MXFP4_MOE', async () => {
    for (const dtype of ['F32', 'Q8_0'] as const) {
      const out = join(dir, `gpt-oss-${dtype}.gguf`)
      await writeGguf(join(GGUF_FIXTURES, 'gpt-oss'), out, { dtype })
      const types = new Map((await ggufTensors(out)).map((t) => [t.name, t.type]))
      expect(types.get('blk.0.ffn_gate_exps.weight'), dtype).toBe('MXFP4')
      expect(types.get('blk.1.ffn_down_exps.weight'), dtype).toBe('MXFP4')
      expect((await parseGguf(out)).typedMetadata['general.file_type']?.value).toBe(38)
    }
  })

  test('dequantized by ggml, they are the experts of the model this library dequantizes, split and transposed as stored in bfloat16', async () => {
    // The plain model (config.json without its quantization block, the experts dequantized to bfloat16), with the tokenizer.
    const plain = join(dir, 'gpt-oss-plain')
    const run = await cli('convert', join(GGUF_FIXTURES, 'gpt-oss'), plain, '--dtype', 'BF16')
    expect(run.code, run.stderr).toBe(0)
    for (const name of ['tokenizer.json', 'tokenizer_config.json']) cpSync(join(GGUF_FIXTURES, 'gpt-oss', name), join(plain, name))
    const [blocks, values] = await Promise.all(
      [join(GGUF_FIXTURES, 'gpt-oss'), plain].map(async (input, i) => {
        const out = join(dir, `gpt-oss-experts-${i}.gguf`)
        await writeGguf(input, out, { dtype: 'F32' })
        return new Map((await ggufTensors(out)).map((t) => [t.name, t]))
      }),
    )
    const experts = [...blocks.values()].filter((t) => t.type === 'MXFP4')
    expect(experts.map((t) => t.name).sort()).toEqual(['down', 'gate', 'up'].flatMap((p) => [0, 1].map((b) => `blk.${b}.ffn_${p}_exps.weight`)).sort())
    for (const { name, shape, bytes } of experts) {
      const expected = values.get(name)!
      expect(expected.type, name).toBe('F32')
      expect(expected.shape, name).toEqual(shape)
      // ggml's code 8 is +0 where transformers' dequantization gives -0: the values are compared as numbers.
      const dequantized = ggml.dequantize('MXFP4', bytes, elementsOf(shape))
      const plain = new Float32Array(Uint8Array.from(expected.bytes).buffer)
      expectSameElements(
        Array.from(dequantized, (v) => v + 0),
        Array.from(plain, (v) => v + 0),
        `${name}: ggml's dequantization of the blocks against the plain model's`,
      )
    }
  })
})
