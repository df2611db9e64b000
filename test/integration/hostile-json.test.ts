// The hostile inputs of issue 38, each made from a test model (test/fixtures/gguf, test/fixtures/quantized) by one
// change to a JSON file it reads: opening the model, reading its logical tensors and streaming its GGUF fail with a
// SafetensorsError whose code and message name the file and the key, never a TypeError, a RangeError, a
// SyntaxError, a hang, a value written silently or memory sized by one number.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { ggufStream } from '../../src/gguf-node.ts'
import { openModel, SafetensorsError, serialize } from '../../src/node.ts'
import { type FolderFiles, folderSeeds, memoryFolder } from '../folder-mutants.ts'
import { mutatedCopy } from '../quant-fixtures.ts'
import { headerOf, tensorBytes } from '../read-helpers.ts'
import { cli } from '../run-cli.ts'

const SEEDS = new Map(folderSeeds().map((seed) => [seed.name, seed.files]))

const dir = mkdtempSync(join(tmpdir(), 'hostile-json-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

// biome-ignore lint/suspicious/noExplicitAny: JSON as the tests edit it
type Json = any

/** An object no string or number conversion takes: `${value}` and String(value) throw a TypeError. */
const TRAP = { toString: 1, valueOf: 1 }

/** Where an edit puts raw JSON text that JSON.stringify cannot write (a nesting 300,000 deep). */
const RAW = '\u0000raw\u0000'

/** The files of test model `model` with its JSON file `file` changed by `edit` (RAW in it replaced by `raw`). */
function edited(model: string, file: string, edit: (json: Json) => void, raw = ''): FolderFiles {
  const files = new Map(SEEDS.get(model)!)
  const json = JSON.parse(new TextDecoder().decode(files.get(file)))
  edit(json)
  files.set(file, new TextEncoder().encode(JSON.stringify(json).replace(JSON.stringify(RAW), () => raw)))
  return files
}

/** The error of opening the model of `files` and reading each of its logical tensors. */
async function openError(files: FolderFiles): Promise<SafetensorsError> {
  try {
    const model = await openModel(memoryFolder(files, 'model'))
    for (const name of model.names()) if (model.quantized?.has(name)) await model.getTensor(name)
    await model.close()
  } catch (error) {
    expect(error, String((error as Error)?.stack)).toBeInstanceOf(SafetensorsError)
    return error as SafetensorsError
  }
  throw new Error('the model opened and read')
}

/** The error of streaming the GGUF of `files` to its end. */
async function ggufError(files: FolderFiles): Promise<SafetensorsError> {
  try {
    const reader = (await ggufStream(memoryFolder(files, 'model'))).getReader()
    while (!(await reader.read()).done);
  } catch (error) {
    expect(error, String((error as Error)?.stack)).toBeInstanceOf(SafetensorsError)
    return error as SafetensorsError
  }
  throw new Error('the GGUF was written')
}

/** A nesting 300,000 deep, as raw JSON. */
const DEEP = `${'['.repeat(300_000)}1${']'.repeat(300_000)}`

describe('a JSON object where a string or a number is read: a coded error naming the file and key, not "Cannot convert object to primitive value"', () => {
  test.each<[string, string, string, (json: Json) => void, string]>([
    [
      'architectures[0]',
      'llama3',
      'config.json',
      (c) => {
        c.architectures = [TRAP]
      },
      'config.json: "architectures"[0] must be a string, got an object',
    ],
    [
      'a RoPE type',
      'llama3',
      'config.json',
      (c) => {
        c.rope_scaling.rope_type = TRAP
      },
      'config.json: "rope_scaling"."rope_type" must be a string, got an object',
    ],
    [
      "GPT-2's n_embd",
      'gpt2',
      'config.json',
      (c) => {
        c.n_embd = TRAP
      },
      'config.json: "n_embd" must be an integer from 1 to 4294967295, got an object',
    ],
    [
      "tokenizer.json's model.type",
      'qwen2',
      'tokenizer.json',
      (t) => {
        t.model.type = TRAP
      },
      'tokenizer.json: "model"."type" must be a string, got an object',
    ],
    [
      "an added token's content",
      'qwen2',
      'tokenizer.json',
      (t) => {
        t.added_tokens[0].content = TRAP
      },
      'tokenizer.json: "added_tokens"[0]."content" must be a string, got an object',
    ],
  ])('%s (GGUF export)', async (_, model, file, edit, message) => {
    const error = await ggufError(edited(model, file, edit))
    expect([error.code, error.message]).toEqual(['InvalidHeaderDeserialization', message])
  })

  test.each<[string, (json: Json) => void, string]>([
    [
      'quantized/gptq-4bit-sym',
      (c) => {
        c.quantization_config.bits = TRAP
      },
      'config.json: "quantization_config"."bits" must be an integer, got an object',
    ],
    [
      'quantized/awq-gemm-4bit',
      (c) => {
        c.quantization_config.bits = TRAP
      },
      'config.json: "quantization_config"."bits" must be an integer, got an object',
    ],
    [
      'quantized/mlx-affine-8bit',
      (c) => {
        c.quantization.bits = TRAP
      },
      'config.json: "quantization"."bits" must be an integer, got an object',
    ],
    [
      'quantized/ct-w4a16-asym',
      (c) => {
        c.quantization_config.config_groups.group_0.format = TRAP
      },
      'config.json: "quantization_config"."config_groups"."group_0"."format" must be one of "pack-quantized", "int-quantized", "naive-quantized", "float-quantized", "nvfp4-pack-quantized", got an object',
    ],
    [
      'quantized/ct-w4a16-asym',
      (c) => {
        c.quantization_config.config_groups.group_0.weights.num_bits = TRAP
      },
      'config.json: "quantization_config"."config_groups"."group_0"."weights"."num_bits" must be an integer, got an object',
    ],
  ])('%s: a bits or format of the quantization block (openModel): UnsupportedQuantization', async (model, edit, message) => {
    const error = await openError(edited(model, 'config.json', edit))
    expect([error.code, error.message]).toEqual(['UnsupportedQuantization', message])
  })
})

test('"quantization_config": [] is UnsupportedQuantization naming it, where openModel itself broke', async () => {
  for (const model of ['qwen2', 'quantized/gptq-8bit']) {
    const error = await openError(
      edited(model, 'config.json', (c) => {
        c.quantization_config = []
      }),
    )
    expect([error.code, error.message]).toEqual(['UnsupportedQuantization', 'config.json: "quantization_config" must be an object, got an array of 0 items'])
  }
})

test('a null config group: UnsupportedQuantization naming it', async () => {
  const error = await openError(
    edited('quantized/ct-w8a8-int8', 'config.json', (c) => {
      c.quantization_config.config_groups.group_0 = null
    }),
  )
  expect([error.code, error.message]).toEqual([
    'UnsupportedQuantization',
    'config.json: "quantization_config"."config_groups"."group_0" must be an object, got null',
  ])
})

test('a quant state that is the JSON null: InvalidQuantization naming its tensor, when its module is read', async () => {
  const state = 'model.layers.0.mlp.gate_proj.weight.quant_state.bitsandbytes__fp4'
  const folder = mutatedCopy({
    name: 'a null quant state',
    folder: 'bnb-fp4',
    ops: [{ op: 'replaceTensor', tensor: state, dtype: 'U8', shape: [4], utf8: 'null' }],
    read: 'model.layers.0.mlp.gate_proj.weight',
    expect: { code: 'InvalidQuantization', mentions: [] },
  })
  const files: FolderFiles = new Map(readdirSync(folder).map((name) => [name, new Uint8Array(readFileSync(join(folder, name)))]))
  const error = await openError(files)
  expect([error.code, error.message]).toEqual(['InvalidQuantization', `${state}: the top level must be an object, got null`])
})

test('a config value nested 300,000 deep: InvalidHeaderDeserialization naming the key, where the message overflowed the stack', async () => {
  for (const files of [
    edited('qwen3', 'config.json', (c) => (c.hidden_size = RAW), DEEP),
    edited('quantized/gptq-3bit', 'config.json', (c) => (c.quantization_config.bits = RAW), DEEP),
  ]) {
    const error = await ggufError(files)
    expect([error.code, error.message]).toEqual([
      'InvalidHeaderDeserialization',
      expect.stringMatching(/^config\.json: "(hidden_size|quantization_config)" nests deeper than 64 levels$/),
    ])
  }
  const tokenizer = await ggufError(edited('llama3', 'tokenizer.json', (t) => (t.model.vocab = RAW), DEEP))
  expect(tokenizer.message).toBe('tokenizer.json: "model" nests deeper than 64 levels')
})

describe('compressed-tensors "re:" targets are never compiled: a form not read is UnsupportedQuantization naming it, at once', () => {
  /** ct-w4a16-asym with a second group, of `target` at `bits`. */
  const withTarget = (target: string, bits = 4) =>
    edited('quantized/ct-w4a16-asym', 'config.json', (c) => {
      const groups = c.quantization_config.config_groups
      groups.group_1 = { ...groups.group_0, targets: [target], weights: { ...groups.group_0.weights, num_bits: bits } }
    })
  // "(.|.)*X" ran for minutes as a RegExp over a module's name; "(" was a SyntaxError.
  test.each([
    ['re:(.|.)*X', 'a group repeated with * is not read'],
    ['re:(', 'a group is not closed'],
  ])('%s', async (target, why) => {
    const error = await openError(withTarget(target))
    expect([error.code, error.message]).toEqual([
      'UnsupportedQuantization',
      `config.json: "quantization_config"."config_groups"."group_1"."targets"[0] must be a pattern of the forms compressed-tensors writes (${why}), got the string ${JSON.stringify(target)}`,
    ])
  })

  test('a target of the forms read picks its modules: the others stay in the "Linear" group', async () => {
    // group_1 takes the q and k projections at 8 bits, which their packed rows (of 4-bit codes) do not hold.
    const model = await openModel(memoryFolder(withTarget('re:.*self_attn\\.(q|k)_proj$', 8), 'model'))
    try {
      const read = async (name: string) =>
        model.getTensor(name).then(
          () => 'ok',
          (error: SafetensorsError) => error.code,
        )
      expect(await read('model.layers.0.self_attn.v_proj.weight')).toBe('ok')
      expect(await read('model.layers.0.self_attn.q_proj.weight')).toBe('InvalidQuantization')
    } finally {
      await model.close()
    }
  })
})

describe('config.json numbers checked against the tensors, and against what a GGUF key holds', () => {
  test('vocab_size 5,000,000 on a 280 KB model: refused before anything is sized by it (it took 17 s and 646 MiB)', async () => {
    const error = await ggufError(edited('gemma3', 'config.json', (c) => (c.vocab_size = 5_000_000)))
    expect([error.code, error.message]).toEqual([
      'InvalidHeaderDeserialization',
      'config.json: tensor "model.embed_tokens.weight" is [512, 32], where vocab_size 5000000 and a hidden size of 32 make [5000000, 32]',
    ])
  })

  test('head counts and head_dim against the projections; a 0-row q_proj is named, not "NaN F16 elements"', async () => {
    const heads = await ggufError(edited('llama-gqa', 'config.json', (c) => (c.num_key_value_heads = 1)))
    expect(heads.message).toBe(
      'config.json: tensor "model.layers.0.self_attn.k_proj.weight" is [32, 64], where 1 key-value heads of 16 and a hidden size of 64 make [16, 64]',
    )
    const files = new Map(SEEDS.get('mistral')!)
    const bytes = files.get('model.safetensors')!
    const { tensors } = headerOf(bytes)
    files.set(
      'model.safetensors',
      serialize(
        Object.fromEntries(
          Object.entries(tensors).map(([name, t]) => [
            name,
            name === 'model.layers.0.self_attn.q_proj.weight'
              ? { dtype: t.dtype as 'F32', shape: [0, 64], data: new Uint8Array(0) }
              : { dtype: t.dtype as 'F32', shape: t.shape, data: tensorBytes(bytes, name) },
          ]),
        ),
      ),
    )
    const empty = await ggufError(files)
    expect([empty.code, empty.message]).toEqual([
      'InvalidHeaderDeserialization',
      'config.json: tensor "model.layers.0.self_attn.q_proj.weight" is [0, 64], where 8 attention heads of 8 and a hidden size of 64 make [64, 64]',
    ])
  })

  test('a number beyond f32 is refused naming its key, where it was written as +Inf', async () => {
    const error = await ggufError(edited('qwen2', 'config.json', (c) => (c.rms_norm_eps = 1e39)))
    expect([error.code, error.message]).toEqual([
      'InvalidHeaderDeserialization',
      'config.json: "rms_norm_eps" must be a number from -3.4028234663852886e+38 to 3.4028234663852886e+38, got the number 1e+39',
    ])
  })

  test('YaRN with no context length is refused, where it was written as factor NaN and context 0', async () => {
    const error = await ggufError(
      edited('llama-yarn', 'config.json', (c) => {
        delete c.rope_parameters.factor
        delete c.rope_parameters.original_max_position_embeddings
        delete c.max_position_embeddings
      }),
    )
    expect([error.code, error.message]).toEqual([
      'InvalidHeaderDeserialization',
      'config.json: RoPE type "yarn" scales the context it was trained with, and neither original_max_position_embeddings nor max_position_embeddings says it',
    ])
  })
})

test('the CLI: a hostile config.json is one line naming the file and key, exit 1, and nothing written', async () => {
  const folder = join(dir, 'trap')
  mkdirSync(folder)
  for (const [name, bytes] of edited('qwen2', 'config.json', (c) => (c.architectures = [TRAP]))) writeFileSync(join(folder, name), bytes)
  const run = await cli('convert', folder, join(dir, 'trap.gguf'))
  expect(run.code).toBe(1)
  expect(run.stderr).toBe(`${folder}: InvalidHeaderDeserialization: config.json: "architectures"[0] must be a string, got an object\n`)
  expect(readdirSync(dir)).toEqual(['trap'])
})
