// The memory bound of the GGUF converter: a model of 1 GiB of BF16 weights (written here, a chunk at a time,
// with the package's own writer) converted by the CLI to Q8_0 and to F16 in child processes (so that nothing
// the test runner holds counts), each with a peak RSS under 200 MiB; and a Mixtral whose stacked experts are
// 256 MiB a tensor, more than that bound, within it. The output is read back with @huggingface/gguf and its
// first bytes checked against a conversion made here.
import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GGMLQuantizationType, gguf } from '@huggingface/gguf'
import { afterAll, expect, test } from 'vitest'
import { fileSink, SafetensorsWriter } from '../../src/node.ts'
import { referenceConvert } from '../float-reference.ts'
import { referenceQ8_0 } from '../q8_0-reference.ts'
import { mulberry32 } from '../random.ts'
import { expectSameBytes } from '../read-helpers.ts'
import { CLI } from '../run-cli.ts'

const MiB = 1 << 20
const HIDDEN = 2048
const VOCAB = 131072
const INTERMEDIATE = 2048
const dir = mkdtempSync(join(tmpdir(), 'safetensors-gguf-memory-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** One 4 MiB block of finite BF16 values (bit 14 clear: the exponent is below its all-ones), written over and over. */
function pattern(): Uint8Array {
  const next = mulberry32(22)
  const halves = new Uint16Array((4 * MiB) / 2)
  for (let i = 0; i < halves.length; i++) halves[i] = next() & 0xbfff
  return new Uint8Array(halves.buffer)
}

/** Writes `shapes` as BF16 tensors of `block` repeated into the folder's model.safetensors; returns their bytes. */
async function writeWeights(folder: string, block: Uint8Array, shapes: Record<string, number[]>): Promise<number> {
  const writer = SafetensorsWriter.create(
    await fileSink(join(folder, 'model.safetensors')),
    Object.entries(shapes).map(([name, shape]) => ({ name, dtype: 'BF16' as const, shape })),
  )
  let total = 0
  for (const entry of writer.entries) {
    const bytes = shapes[entry.name].reduce((a, b) => a * b, 2)
    for (let at = 0; at < bytes; at += block.length) await writer.write(entry.name, block.subarray(0, Math.min(block.length, bytes - at)))
    total += bytes
  }
  await writer.close()
  return total
}

/** Two tokens: llama.cpp's converter fills the other ids with [PAD<id>] placeholders, and so does this one. */
const TOKENIZER = {
  model: { type: 'BPE', vocab: { a: 0, b: 1 }, merges: [] },
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, use_regex: true },
  decoder: { type: 'ByteLevel' },
  added_tokens: [],
}

/** A LlamaForCausalLM of one block whose embeddings and lm_head (512 MiB each) make it 1 GiB and more. */
async function writeModel(folder: string, block: Uint8Array): Promise<number> {
  const shapes: Record<string, number[]> = {
    'model.embed_tokens.weight': [VOCAB, HIDDEN],
    'lm_head.weight': [VOCAB, HIDDEN],
    'model.norm.weight': [HIDDEN],
    'model.layers.0.input_layernorm.weight': [HIDDEN],
    'model.layers.0.post_attention_layernorm.weight': [HIDDEN],
    'model.layers.0.self_attn.q_proj.weight': [HIDDEN, HIDDEN],
    'model.layers.0.self_attn.k_proj.weight': [HIDDEN / 4, HIDDEN],
    'model.layers.0.self_attn.v_proj.weight': [HIDDEN / 4, HIDDEN],
    'model.layers.0.self_attn.o_proj.weight': [HIDDEN, HIDDEN],
    'model.layers.0.mlp.gate_proj.weight': [INTERMEDIATE, HIDDEN],
    'model.layers.0.mlp.up_proj.weight': [INTERMEDIATE, HIDDEN],
    'model.layers.0.mlp.down_proj.weight': [HIDDEN, INTERMEDIATE],
  }
  const total = await writeWeights(folder, block, shapes)
  const config = {
    architectures: ['LlamaForCausalLM'],
    hidden_size: HIDDEN,
    intermediate_size: INTERMEDIATE,
    num_attention_heads: 16,
    num_key_value_heads: 4,
    num_hidden_layers: 1,
    max_position_embeddings: 4096,
    rms_norm_eps: 1e-5,
    rope_theta: 10000.0,
    vocab_size: VOCAB,
  }
  writeFileSync(join(folder, 'config.json'), JSON.stringify(config))
  writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(TOKENIZER))
  return total
}

const EXPERTS = 8
const EXPERT_FF = 4096
const MOE_HIDDEN = 4096

/** A MixtralForCausalLM of one block whose 8 experts of 4096 x 4096 stack into three tensors of 256 MiB each. */
async function writeMixtral(folder: string, block: Uint8Array): Promise<number> {
  const shapes: Record<string, number[]> = {
    'model.embed_tokens.weight': [256, MOE_HIDDEN],
    'lm_head.weight': [256, MOE_HIDDEN],
    'model.norm.weight': [MOE_HIDDEN],
    'model.layers.0.input_layernorm.weight': [MOE_HIDDEN],
    'model.layers.0.post_attention_layernorm.weight': [MOE_HIDDEN],
    'model.layers.0.self_attn.q_proj.weight': [MOE_HIDDEN, MOE_HIDDEN],
    'model.layers.0.self_attn.k_proj.weight': [MOE_HIDDEN / 4, MOE_HIDDEN],
    'model.layers.0.self_attn.v_proj.weight': [MOE_HIDDEN / 4, MOE_HIDDEN],
    'model.layers.0.self_attn.o_proj.weight': [MOE_HIDDEN, MOE_HIDDEN],
    'model.layers.0.block_sparse_moe.gate.weight': [EXPERTS, MOE_HIDDEN],
  }
  for (let e = 0; e < EXPERTS; e++)
    for (const [w, shape] of Object.entries({ w1: [EXPERT_FF, MOE_HIDDEN], w2: [MOE_HIDDEN, EXPERT_FF], w3: [EXPERT_FF, MOE_HIDDEN] }))
      shapes[`model.layers.0.block_sparse_moe.experts.${e}.${w}.weight`] = shape
  const total = await writeWeights(folder, block, shapes)
  const config = {
    architectures: ['MixtralForCausalLM'],
    hidden_size: MOE_HIDDEN,
    intermediate_size: EXPERT_FF,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    num_hidden_layers: 1,
    num_local_experts: EXPERTS,
    num_experts_per_tok: 2,
    max_position_embeddings: 4096,
    rms_norm_eps: 1e-5,
    rope_theta: 1e6,
    vocab_size: 256,
  }
  writeFileSync(join(folder, 'config.json'), JSON.stringify(config))
  writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(TOKENIZER))
  return total
}

/** Runs the CLI in a child process; resolves to its peak RSS in bytes. */
function convertMeasured(...args: string[]): number {
  const run = `
    process.argv = [process.argv[0], ${JSON.stringify(CLI)}, ...${JSON.stringify(args)}]
    process.on('exit', () => console.log(JSON.stringify({ maxRSS: process.resourceUsage().maxRSS * 1024, code: process.exitCode ?? 0 })))
    await import(${JSON.stringify(CLI)})
  `
  const output = execFileSync(process.execPath, ['--input-type=module', '-e', run], { encoding: 'utf8', timeout: 300_000 })
  const result = JSON.parse(output.trim().split('\n').at(-1)!)
  expect(result.code, output).toBe(0)
  return result.maxRSS
}

test('a 1 GiB model to Q8_0 and to F16 through the CLI: peak RSS under 200 MiB each', async () => {
  const folder = join(dir, 'big')
  mkdirSync(folder)
  const block = pattern()
  const bytes = await writeModel(folder, block)
  expect(bytes).toBeGreaterThan(1 << 30)
  for (const dtype of ['Q8_0', 'F16'] as const) {
    const out = join(dir, `big-${dtype}.gguf`)
    const peak = convertMeasured('convert', folder, out, '--dtype', dtype)
    console.log(
      `gguf memory: ${(bytes / MiB).toFixed(0)} MiB of BF16 -> ${dtype}, ${(statSync(out).size / MiB).toFixed(0)} MiB, child peak RSS ${(peak / MiB).toFixed(1)} MiB`,
    )
    expect(peak).toBeLessThan(200 * MiB)

    const { tensorInfos, tensorDataOffset } = await gguf(out, { allowLocalFile: true })
    const embeddings = tensorInfos.find((t) => t.name === 'token_embd.weight')!
    expect(embeddings.dtype).toBe(dtype === 'Q8_0' ? GGMLQuantizationType.Q8_0 : GGMLQuantizationType.F16)
    // The first 64 Ki values of the embeddings are the pattern's first 128 KiB.
    const source = block.subarray(0, 128 * 1024)
    const expected =
      dtype === 'Q8_0' ? referenceQ8_0(new Float32Array(referenceConvert('BF16', 'F32', source).buffer)) : referenceConvert('BF16', 'F16', source)
    const actual = new Uint8Array(expected.length)
    const fd = openSync(out, 'r')
    readSync(fd, actual, 0, actual.length, Number(tensorDataOffset + embeddings.offset))
    closeSync(fd)
    expectSameBytes(actual, expected, `the first bytes of token_embd.weight as ${dtype}`)
    rmSync(out)
  }
}, 600_000)

test('a Mixtral whose stacked experts are 256 MiB a tensor to F16 through the CLI: peak RSS under 200 MiB', async () => {
  const folder = join(dir, 'moe')
  mkdirSync(folder)
  const block = pattern()
  const bytes = await writeMixtral(folder, block)
  const out = join(dir, 'moe-F16.gguf')
  const peak = convertMeasured('convert', folder, out, '--dtype', 'F16')
  console.log(
    `gguf memory: a Mixtral of ${(bytes / MiB).toFixed(0)} MiB of BF16 -> F16, ${(statSync(out).size / MiB).toFixed(0)} MiB, child peak RSS ${(peak / MiB).toFixed(1)} MiB`,
  )
  expect(peak).toBeLessThan(200 * MiB)

  const { tensorInfos, tensorDataOffset } = await gguf(out, { allowLocalFile: true })
  const stacked = tensorInfos.find((t) => t.name === 'blk.0.ffn_up_exps.weight')!
  expect(stacked.shape.map(Number)).toEqual([MOE_HIDDEN, EXPERT_FF, EXPERTS])
  // Every expert's w3 is the pattern from its start, so each expert's slice of the stack starts with its F16 (their
  // order is test/gguf/index.test.ts's, against llama.cpp's converter).
  const expected = referenceConvert('BF16', 'F16', block.subarray(0, 64 * 1024))
  const fd = openSync(out, 'r')
  for (const e of [0, EXPERTS - 1]) {
    const actual = new Uint8Array(expected.length)
    readSync(fd, actual, 0, actual.length, Number(tensorDataOffset + stacked.offset) + e * EXPERT_FF * MOE_HIDDEN * 2)
    expectSameBytes(actual, expected, `expert ${e} of ffn_up_exps`)
  }
  closeSync(fd)
}, 600_000)
