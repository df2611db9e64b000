// planHfModel and configText on llama.cpp's converter's GGUFs of the test models (test/fixtures/gguf-to-hf/):
// the class, config.json's RoPE recovered from rope_freqs as the original config.json has it, the parameters'
// names and what is undone for each; the whole round trip is test/node/gguf-model.test.ts.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'
import { configText, planHfModel } from '../../src/gguf/hf-model.ts'
import { openGguf } from '../../src/gguf-node.ts'
import { SafetensorsError } from '../../src/index.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/gguf-to-hf/', import.meta.url))
const ORIGINALS = fileURLToPath(new URL('../fixtures/gguf/', import.meta.url))
const original = (model: string) => JSON.parse(readFileSync(join(ORIGINALS, model, 'config.json'), 'utf8'))

test("Llama 3: rope_freqs back to the original's rope_scaling; q_proj and k_proj reordered by their heads", async () => {
  const file = await openGguf(join(FIXTURES, 'llama3', 'llama3-f32.gguf'))
  try {
    const { config, tensors } = await planHfModel(file)
    expect(config.architectures).toEqual(['LlamaForCausalLM'])
    expect(config.rope_scaling).toEqual(original('llama3').rope_scaling)
    const byName = new Map(tensors.map((t) => [t.name, t]))
    expect(byName.get('model.layers.0.self_attn.q_proj.weight')).toMatchObject({ heads: 4, transpose: false, shift: 0 })
    expect(byName.get('model.layers.0.self_attn.k_proj.weight')).toMatchObject({ heads: 2 })
    expect(byName.get('model.layers.0.self_attn.v_proj.weight')).toMatchObject({ heads: 0 })
    expect(byName.has('rope_freqs.weight')).toBe(false)
  } finally {
    await file.close()
  }
})

test('Mixtral: each stack split into one parameter per expert; GPT-2: Conv1D weights transposed; Gemma: norms shifted', async () => {
  const plans = Object.fromEntries(
    await Promise.all(
      ['mixtral', 'gpt2', 'gemma2'].map(async (model) => {
        const file = await openGguf(join(FIXTURES, model, `${model}-f32.gguf`))
        const plan = await planHfModel(file)
        await file.close()
        return [model, new Map(plan.tensors.map((t) => [t.name, t]))]
      }),
    ),
  )
  for (let e = 0; e < 4; e++) expect(plans.mixtral.get(`model.layers.1.block_sparse_moe.experts.${e}.w2.weight`)).toMatchObject({ expert: e, shape: [64, 64] })
  expect(plans.gpt2.get('transformer.h.0.attn.c_attn.weight')).toMatchObject({ transpose: true, shape: [64, 192] })
  expect(plans.gpt2.get('transformer.h.0.attn.c_attn.bias')).toMatchObject({ transpose: false, shape: [192] })
  expect(plans.gemma2.get('model.layers.0.post_attention_layernorm.weight')).toMatchObject({ shift: 1 })
  expect(plans.gemma2.get('model.layers.0.mlp.up_proj.weight')).toMatchObject({ shift: 0 })
})

test('a GGUF of another architecture is UnsupportedConversion naming it', async () => {
  const file = await openGguf(join(ORIGINALS, 'reader', 'alignment-8.gguf'))
  try {
    const error = await planHfModel(file).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SafetensorsError)
    expect((error as SafetensorsError).code).toBe('UnsupportedConversion')
    expect((error as SafetensorsError).message).toMatch(/GGUF architecture "test".*llama, mixtral/)
  } finally {
    await file.close()
  }
})

test('configText: the float fields transformers types as floats with a decimal point, as Python writes them', () => {
  const text = configText({ final_logit_softcapping: 10, rms_norm_eps: 1e-6, n_layer: 2, rope_scaling: { factor: 8, original_max_position_embeddings: 16 } })
  const parsed = JSON.parse(text)
  expect(parsed).toEqual({ final_logit_softcapping: 10, rms_norm_eps: 1e-6, n_layer: 2, rope_scaling: { factor: 8, original_max_position_embeddings: 16 } })
  expect(text).toContain('"final_logit_softcapping": 10.0,')
  expect(text).toContain('"factor": 8.0,')
  expect(text).toContain('"n_layer": 2,')
  expect(text).toContain('"original_max_position_embeddings": 16\n')
})
