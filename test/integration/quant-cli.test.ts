// The CLI on quantized models (src/cli.ts, src/node/convert-file.ts): inspect names the method and bits of each
// fixture (its modules counted at their own bits), convert writes the plain model (the logical tensors bit for bit
// the golden values, converted once; no quantization part; config.json without its quantization block; the other
// files copied, but the quantization's own), and an inconsistent model is one line, exit 1, nothing written.
// scripts/check-quantized-logits.py checked once, by hand, that transformers loads every such output with no
// quantization library and gives each fixture's golden logits bit for bit. A GGUF of a quantized model is that of
// its dequantized values: the same bytes as the GGUF of the plain model, in each type; and in a file type, with
// rows long enough for K blocks, from its folder as over HTTP, what llama.cpp's quantizer makes of its F32 GGUF.
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GGMLQuantizationType, gguf } from '@huggingface/gguf'
import { describe, expect, test } from 'vitest'
import { referenceConvert } from '../float-reference.ts'
import { GGML_TYPES, ggmlUnsupported, loadLlamaQuantize } from '../ggml.ts'
import { serveFiles } from '../http-server.ts'
import { byteLevelTokenizer, FOLDERS, MUTATIONS, methodOf, mutatedCopy, QUANTIZED, referenceOf, weightFiles } from '../quant-fixtures.ts'
import { prng } from '../random.ts'
import { buildFile, expectSameBytes, headerOf, type TensorSpec, tensorBytes } from '../read-helpers.ts'
import { cli } from '../run-cli.ts'

/** Every tensor of a folder's model files: dtype, shape and bytes, by name. */
function tensorsOf(folder: string): Map<string, { dtype: string; shape: number[]; bytes: Uint8Array }> {
  return new Map(
    weightFiles(folder).flatMap((file) => {
      const bytes = new Uint8Array(readFileSync(join(folder, file)))
      return Object.entries(headerOf(bytes).tensors).map(([name, t]) => [name, { dtype: t.dtype, shape: t.shape, bytes: tensorBytes(bytes, name) }] as const)
    }),
  )
}

const outDir = () => join(mkdtempSync(join(tmpdir(), 'quant-cli-')), 'out')

describe.each(FOLDERS)('%s', (folder) => {
  const input = join(QUANTIZED, folder)
  const reference = referenceOf(folder)

  test('inspect names the method and bits, and counts the modules at their own bits', async () => {
    const run = await cli('inspect', input)
    expect(run.code, run.stderr).toBe(0)
    const line = run.stdout.split('\n').find((l) => l.startsWith('quantization: '))!
    expect(line).toMatch(new RegExp(`^quantization: ${methodOf(folder)}, \\d+-bit`))
    const modules = Object.values(reference.tensors).filter((t) => t.stored !== null).length
    expect(line).toContain(`: ${modules} module${modules === 1 ? '' : 's'} (`)
    const json = JSON.parse((await cli('inspect', input, '--json')).stdout)
    expect(json.quantization.method).toBe(methodOf(folder))
    expect(json.tensors.filter((t: { quantized?: unknown }) => t.quantized).length).toBe(modules)
  })

  test.each(['F32', 'BF16'] as const)(
    'convert --dtype %s writes the plain model: golden values converted once, config.json without its quantization',
    async (dtype) => {
      const out = outDir()
      const run = await cli('convert', input, out, '--dtype', dtype)
      expect(run.code, run.stderr).toBe(0)
      const goldenBytes = new Uint8Array(readFileSync(join(input, 'golden.safetensors')))
      const golden = headerOf(goldenBytes).tensors
      const written = tensorsOf(out)
      expect(new Set(written.keys())).toEqual(new Set(Object.keys(golden)))
      for (const [name, { dtype: from, shape }] of Object.entries(golden)) {
        const tensor = written.get(name)!
        const bytes = tensorBytes(goldenBytes, name)
        expect({ dtype: tensor.dtype, shape: tensor.shape }, name).toEqual({ dtype, shape })
        expectSameBytes(tensor.bytes, from === dtype ? bytes : referenceConvert(from, dtype, bytes), name)
      }
      const config = JSON.parse(readFileSync(join(input, 'config.json'), 'utf8'))
      delete config.quantization_config
      delete config.quantization
      config[config.torch_dtype === undefined ? 'dtype' : 'torch_dtype'] = dtype === 'F32' ? 'float32' : 'bfloat16'
      expect(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'))).toEqual(config)
      const others = readdirSync(input).filter((f) => !f.endsWith('.safetensors') && !f.endsWith('.index.json') && f !== 'config.json')
      for (const file of others) expect(existsSync(join(out, file)), file).toBe(file !== 'quantize_config.json' && file !== 'hf_quant_config.json')
    },
  )
})

describe('an inconsistent quantized model: one line naming the input, exit 1, nothing written', () => {
  test.each(MUTATIONS.map((m) => [m.name, m] as const))('%s', async (_, mutation) => {
    const input = mutatedCopy(mutation)
    const out = outDir()
    const run = await cli('convert', input, out, '--dtype', 'F32')
    expect(run.code).toBe(1)
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(run.stderr).toMatch(new RegExp(`^${literal(input)}: ${mutation.expect.code}: `))
    expect(existsSync(out)).toBe(false)
  })
})

describe('a quantization this library does not read: the SafeTensors files judged and listed as stored, with a note', () => {
  const unread = MUTATIONS.filter((m) => m.expect.code === 'UnsupportedQuantization')

  /** The stored tensors of a folder's weight files, by the test's own reading of their headers: name -> dtype. */
  const storedIn = (folder: string) =>
    new Map(
      weightFiles(folder).flatMap((file) => Object.entries(headerOf(readFileSync(join(folder, file))).tensors).map(([name, t]) => [name, t.dtype] as const)),
    )

  test.each(unread.map((m) => [m.name, m] as const))('%s: validate exits 0, inspect lists every stored tensor', async (_, mutation) => {
    const input = mutatedCopy(mutation)
    const stored = storedIn(input)
    const validate = await cli('validate', input)
    expect(validate.code, validate.stdout).toBe(0)
    const [first, ...rest] = validate.stdout.trimEnd().split('\n')
    expect(first).toMatch(new RegExp(`^${literal(input)}: valid, ${stored.size} tensors in \\d shards?$`))
    const note = rest.find((l) => l.startsWith('  note: quantization not read'))
    for (const word of mutation.expect.mentions) expect(note).toContain(word)
    const json = JSON.parse((await cli('validate', input, '--json')).stdout)
    expect(json).toMatchObject({ file: input, valid: true, tensors: stored.size, note: note!.slice('  note: '.length) })

    const inspect = await cli('inspect', input)
    expect(inspect.code, inspect.stderr).toBe(0)
    expect(inspect.stdout.split('\n')).toContain(`note: ${json.note}`)
    for (const [name, dtype] of stored) expect(inspect.stdout).toMatch(new RegExp(`^${literal(name)}\\s+${dtype}\\s`, 'm'))
    const listed = JSON.parse((await cli('inspect', input, '--json')).stdout)
    expect(new Map(listed.tensors.map((t: { name: string; dtype: string }) => [t.name, t.dtype]))).toEqual(stored)
    expect(listed).toMatchObject({ note: json.note })
    expect(listed.quantization).toBeUndefined()
  })

  test('a shard that is not valid is still found: INVALID, exit 1', async () => {
    const input = mutatedCopy(unread[0])
    const [shard] = weightFiles(input)
    writeFileSync(join(input, shard), readFileSync(join(input, shard)).subarray(0, 100))
    const run = await cli('validate', input)
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(new RegExp(`^${literal(input)}: INVALID InvalidHeaderLength: .*${literal(shard)}: `))
  })
})

/** `text` as a regular expression matching it literally. */
const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** A GGUF's metadata and tensors (name -> type, dims and data bytes), as @huggingface/gguf reads them. */
async function ggufContents(path: string) {
  const { typedMetadata, tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true, typedMetadata: true })
  const file = readFileSync(path)
  const sorted = [...tensorInfos].sort((a, b) => Number(a.offset - b.offset))
  const tensors = new Map(
    sorted.map((t, i) => {
      const start = Number(tensorDataOffset + t.offset)
      const end = i + 1 < sorted.length ? Number(tensorDataOffset + sorted[i + 1].offset) : file.length
      return [t.name, { type: t.dtype, dims: t.shape.map(Number), bytes: file.subarray(start, end) }] as const
    }),
  )
  return { metadata: typedMetadata, tensors }
}

/** The architectures the GGUF converter takes (docs/gguf.md); a fixture of another is refused alike both ways. */
const CONVERTED = ['LlamaForCausalLM', 'Qwen2ForCausalLM', 'GptOssForCausalLM']
/** gpt-oss's file type where its MXFP4 experts stay MXFP4 (llama.cpp's LLAMA_FTYPE_MOSTLY_MXFP4_MOE). */
const MOSTLY_MXFP4_MOE = 38

// Five conversions a fixture: the quick loop (TEST_QUICK) takes the first fixture of each method, test:all every one.
const GGUF_FOLDERS = process.env.TEST_QUICK === '1' ? FOLDERS.filter((folder, i) => FOLDERS.findIndex((f) => methodOf(f) === methodOf(folder)) === i) : FOLDERS

describe('convert <quantized model> out.gguf: the GGUF of the dequantized model', () => {
  test.each(GGUF_FOLDERS)('%s', async (folder) => {
    const input = join(mkdtempSync(join(tmpdir(), 'quant-gguf-')), folder)
    cpSync(join(QUANTIZED, folder), input, { recursive: true })
    writeFileSync(join(input, 'tokenizer.json'), byteLevelTokenizer())
    // As transformers saves a model: config.json names its class.
    const config = JSON.parse(readFileSync(join(input, 'config.json'), 'utf8'))
    const { architecture } = referenceOf(folder)
    writeFileSync(join(input, 'config.json'), JSON.stringify({ ...config, architectures: [architecture] }))
    const plain = outDir()
    expect((await cli('convert', input, plain, '--dtype', 'F32')).code).toBe(0)
    // Q4_K_M here writes the fallbacks of rows of 64 to 210 values (Q5_0, Q8_0, ...); its K blocks are below.
    for (const dtype of ['F16', 'Q8_0', 'Q4_K_M']) {
      const [fromQuantized, fromPlain] = [join(plain, `../quantized-${dtype}.gguf`), join(plain, `../plain-${dtype}.gguf`)]
      const quantizedRun = await cli('convert', input, fromQuantized, '--dtype', dtype)
      const plainRun = await cli('convert', plain, fromPlain, '--dtype', dtype)
      // gpt-oss's MXFP4 experts stay MXFP4 blocks in every GGUF of the quantized model, as llama.cpp's converter writes
      // them (test/gguf/architectures.test.ts judges their values by ggml's dequantization); the rest is the plain's.
      const keptMxfp4 = architecture === 'GptOssForCausalLM'
      if (keptMxfp4 && plainRun.code !== 0) {
        // The plain experts hold values Q8_0 cannot (Infinity, from this fixture's largest scales); the blocks need not.
        expect(plainRun.stderr).toMatch(/mlp\.experts\..* is Infinity, which \w+ cannot hold/)
        expect(quantizedRun.code, quantizedRun.stderr).toBe(0)
        continue
      }
      // An architecture the GGUF converter does not take is the same refusal for both.
      expect([quantizedRun.code, quantizedRun.stderr.replace(input, 'IN')]).toEqual([plainRun.code, plainRun.stderr.replace(plain, 'IN')])
      if (plainRun.code !== 0 && !CONVERTED.includes(architecture)) continue
      expect(plainRun.code, plainRun.stderr).toBe(0)
      const [a, b] = [await ggufContents(fromQuantized), await ggufContents(fromPlain)]
      const kept = (name: string) => keptMxfp4 && /_exps\.weight$/.test(name)
      const fileType = b.metadata['general.file_type']!
      // The converter's file type where it writes the experts as stored; llama-quantize's file types keep theirs.
      const converterFileType = keptMxfp4 && (dtype === 'F16' || dtype === 'Q8_0')
      expect(a.metadata).toEqual({ ...b.metadata, 'general.file_type': converterFileType ? { ...fileType, value: MOSTLY_MXFP4_MOE } : fileType })
      expect(new Set(a.tensors.keys())).toEqual(new Set(b.tensors.keys()))
      expect([...a.tensors.keys()].some(kept)).toBe(keptMxfp4)
      for (const [name, tensor] of b.tensors) {
        const got = a.tensors.get(name)!
        expect({ type: got.type, dims: got.dims }, name).toEqual({ type: kept(name) ? GGML_TYPES.MXFP4 : tensor.type, dims: tensor.dims })
        if (!kept(name)) expectSameBytes(got.bytes, tensor.bytes, `${folder} ${dtype} ${name}`)
      }
    }
  })
})

/** `count` BF16 values (raw bits) about `centre`, spread by `spread`, as weights and norms are. */
function bf16Values(count: number, next: () => number, centre: number, spread: number): Uint8Array {
  const f32 = new Float32Array(1)
  const bits = new Uint32Array(f32.buffer)
  return new Uint8Array(
    Uint16Array.from({ length: count }, () => {
      f32[0] = centre + spread * Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next())
      return bits[0] >>> 16
    }).buffer,
  )
}

/**
 * A Qwen3 of two layers in block FP8 (quant_method fp8, weight_block_size [128, 128]: Qwen3-FP8's and DeepSeek-V3's
 * layout; the fp8-block fixture's config.json) whose rows are 256 and 512 values, so that its Q4_K_M holds Q4_K and
 * Q6_K blocks, not the fallbacks the fixtures' short rows take. Layer 0's o_proj stays BF16 (modules_to_not_convert).
 */
function writeBlockFp8(folder: string): void {
  const [hidden, kv, intermediate, headDim] = [256, 128, 512, 64]
  const next = prng(42)
  const tensors: TensorSpec[] = []
  const bf16 = (name: string, shape: number[], centre = 0, spread = 0.02) =>
    tensors.push({
      name,
      dtype: 'BF16',
      shape,
      bytes: bf16Values(
        shape.reduce((a, b) => a * b, 1),
        next,
        centre,
        spread,
      ),
    })
  const fp8 = (name: string, shape: [number, number]) => {
    // E4M3 codes but its NaNs (S.1111.111), and a scale for each block of 128 x 128.
    const codes = Uint8Array.from({ length: shape[0] * shape[1] }, () => Math.floor(next() * 256)).map((b) => ((b & 0x7f) === 0x7f ? b ^ 1 : b))
    const grid = [Math.ceil(shape[0] / 128), Math.ceil(shape[1] / 128)]
    const scales = Float32Array.from({ length: grid[0] * grid[1] }, () => 0.0005 + 0.002 * next())
    tensors.push(
      { name, dtype: 'F8_E4M3', shape, bytes: codes },
      { name: `${name}_scale_inv`, dtype: 'F32', shape: grid, bytes: new Uint8Array(scales.buffer) },
    )
  }
  bf16('model.embed_tokens.weight', [256, hidden])
  bf16('model.norm.weight', [hidden], 1, 0.1)
  for (const layer of [0, 1]) {
    const at = `model.layers.${layer}.`
    for (const norm of ['input_layernorm', 'post_attention_layernorm']) bf16(`${at}${norm}.weight`, [hidden], 1, 0.1)
    for (const norm of ['q_norm', 'k_norm']) bf16(`${at}self_attn.${norm}.weight`, [headDim], 1, 0.1)
    fp8(`${at}self_attn.q_proj.weight`, [hidden, hidden])
    fp8(`${at}self_attn.k_proj.weight`, [kv, hidden])
    fp8(`${at}self_attn.v_proj.weight`, [kv, hidden])
    if (layer === 0) bf16(`${at}self_attn.o_proj.weight`, [hidden, hidden])
    else fp8(`${at}self_attn.o_proj.weight`, [hidden, hidden])
    fp8(`${at}mlp.gate_proj.weight`, [intermediate, hidden])
    fp8(`${at}mlp.up_proj.weight`, [intermediate, hidden])
    fp8(`${at}mlp.down_proj.weight`, [hidden, intermediate])
  }
  mkdirSync(folder, { recursive: true })
  writeFileSync(join(folder, 'model.safetensors'), buildFile(tensors))
  const config = JSON.parse(readFileSync(join(QUANTIZED, 'fp8-block', 'config.json'), 'utf8'))
  Object.assign(config, {
    architectures: ['Qwen3ForCausalLM'],
    hidden_size: hidden,
    intermediate_size: intermediate,
    head_dim: headDim,
    num_hidden_layers: 2,
    layer_types: ['full_attention', 'full_attention'],
  })
  writeFileSync(join(folder, 'config.json'), JSON.stringify(config))
  writeFileSync(join(folder, 'tokenizer.json'), byteLevelTokenizer())
}

/** llama.h's LLAMA_FTYPE_MOSTLY_Q4_K_M. */
const LLAMA_FTYPE_Q4_K_M = 15

describe.skipIf(ggmlUnsupported())('a quantized model to a file type with K blocks: its dequantized values as llama.cpp quantizes them', () => {
  test("block FP8 to Q4_K_M, from its folder and over HTTP: llama_model_quantize's tensors of its F32 GGUF, byte for byte", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quant-k-'))
    const input = join(dir, 'fp8-256')
    writeBlockFp8(input)
    const f32 = join(dir, 'f32.gguf')
    const toF32 = await cli('convert', input, f32, '--dtype', 'F32')
    expect(toF32.code, toF32.stderr).toBe(0)
    const reference = join(dir, 'llama.gguf')
    loadLlamaQuantize()(f32, reference, LLAMA_FTYPE_Q4_K_M, 1)
    const expected = await ggufContents(reference)
    // The K types are written, and from the FP8 weights: not only the BF16 ones.
    const types = (name: string) => GGMLQuantizationType[expected.tensors.get(name)!.type]
    expect([types('blk.1.attn_q.weight'), types('blk.1.ffn_down.weight'), types('token_embd.weight')]).toEqual(['Q4_K', 'Q6_K', 'Q6_K'])
    const without = (metadata: Record<string, unknown>) => {
      const { 'general.file_type': _, 'general.quantization_version': __, ...rest } = metadata
      return rest
    }
    const server = await serveFiles(Object.fromEntries(readdirSync(input).map((file) => [`fp8-256/${file}`, join(input, file)])))
    try {
      for (const [from, source] of [
        ['its folder', input],
        ['HTTP', `${server.url}fp8-256/model.safetensors`],
      ]) {
        const out = join(dir, `ours-${from}.gguf`)
        const run = await cli('convert', source, out, '--dtype', 'Q4_K_M')
        expect(run.code, `${from}: ${run.stderr}`).toBe(0)
        const got = await ggufContents(out)
        expect(without(got.metadata), from).toEqual(without(expected.metadata))
        expect(got.metadata['general.file_type'], from).toMatchObject({ value: LLAMA_FTYPE_Q4_K_M })
        expect(new Set(got.tensors.keys()), from).toEqual(new Set(expected.tensors.keys()))
        for (const [name, tensor] of expected.tensors) {
          const ours = got.tensors.get(name)!
          expect({ type: ours.type, dims: ours.dims }, `${from}: ${name}`).toEqual({ type: tensor.type, dims: tensor.dims })
          expectSameBytes(ours.bytes, tensor.bytes, `${from}: ${name}`)
        }
      }
    } finally {
      await server.close()
    }
  })
})
