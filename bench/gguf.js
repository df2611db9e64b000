// The GGUF converter:
// - a 1 GiB BF16 Llama model (9 layers of 2048, grouped-query attention, a 32,000-token vocabulary) to a GGUF
//   at F16 with the CLI, against `dd conv=fsync` of its safetensors file (the same bytes in, as many out, durable
//   as the CLI's atomic write is); each command in a child process from the same settled machine state (see
//   bench/io.js settle()), interleaved rounds, medians. Targets: at most 1.3x, peak RSS under 200 MiB.
// (Quantization's speed is bench/ggml-quantize.js's.)
// Run after `npm run build`: `node bench/gguf.js`, or import { run }.
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { open as fsOpen, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { gguf } from '@huggingface/gguf'
import { fileSink, open, SafetensorsWriter } from '../dist/node.js'
import { dropCaches, quote, settle, timed } from './io.js'
import { median, table } from './util.js'
import { CLI_CHILD, child } from './write.js'

const MiB = 2 ** 20
const ROUNDS = 5
const RSS_TARGET = 200 * MiB
const MODEL = join(tmpdir(), 'safetensors-wasm-bench-1gib-llama')
const LLAMA = { hidden: 2048, intermediate: 5632, layers: 9, heads: 16, kvHeads: 4, vocab: 32000 }

/** The model's tensors and shapes, as LlamaForCausalLM names them. */
function llamaShapes() {
  const { hidden, intermediate, layers, heads, kvHeads, vocab } = LLAMA
  const kv = (hidden / heads) * kvHeads
  /** @type {Record<string, number[]>} */
  const shapes = { 'model.embed_tokens.weight': [vocab, hidden], 'lm_head.weight': [vocab, hidden], 'model.norm.weight': [hidden] }
  for (let i = 0; i < layers; i++) {
    const at = `model.layers.${i}.`
    Object.assign(shapes, {
      [`${at}input_layernorm.weight`]: [hidden],
      [`${at}post_attention_layernorm.weight`]: [hidden],
      [`${at}self_attn.q_proj.weight`]: [hidden, hidden],
      [`${at}self_attn.k_proj.weight`]: [kv, hidden],
      [`${at}self_attn.v_proj.weight`]: [kv, hidden],
      [`${at}self_attn.o_proj.weight`]: [hidden, hidden],
      [`${at}mlp.gate_proj.weight`]: [intermediate, hidden],
      [`${at}mlp.up_proj.weight`]: [intermediate, hidden],
      [`${at}mlp.down_proj.weight`]: [hidden, intermediate],
    })
  }
  return shapes
}

/** Writes the model folder once (kept in the temporary folder for later runs): its safetensors chunk by chunk, config.json, a tokenizer. */
async function makeModel() {
  const weights = join(MODEL, 'model.safetensors')
  if (existsSync(join(MODEL, 'tokenizer.json'))) return weights
  mkdirSync(MODEL, { recursive: true })
  const shapes = llamaShapes()
  const writer = SafetensorsWriter.create(
    await fileSink(weights),
    Object.entries(shapes).map(([name, shape]) => ({ name, dtype: 'BF16', shape })),
  )
  const chunk = new Uint16Array(1 << 20)
  for (const [t, entry] of writer.entries.entries()) {
    const elements = shapes[entry.name].reduce((a, b) => a * b, 1)
    for (let done = 0; done < elements; done += chunk.length) {
      // Finite BF16 values of about 2^-8 to 2^-1, as weights are (the same generator as bench/write.js's).
      for (let i = 0; i < chunk.length; i++) {
        const h = Math.imul(i + done + t * 7919, 2654435761) >>> 0
        chunk[i] = (h & 0x8000) | ((0x77 + ((h >>> 20) & 0x7)) << 7) | (h & 0x7f)
      }
      await writer.write(entry.name, chunk.subarray(0, Math.min(chunk.length, elements - done)))
    }
  }
  await writer.close()
  const { hidden, intermediate, layers, heads, kvHeads, vocab } = LLAMA
  const config = {
    architectures: ['LlamaForCausalLM'],
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    num_hidden_layers: layers,
    max_position_embeddings: 4096,
    rms_norm_eps: 1e-5,
    rope_theta: 10000.0,
    vocab_size: vocab,
  }
  writeFileSync(join(MODEL, 'config.json'), JSON.stringify(config))
  // Two tokens: the other ids become [PAD<id>], as with llama.cpp's converter.
  const tokenizer = {
    model: { type: 'BPE', vocab: { a: 0, b: 1 }, merges: [] },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, use_regex: true },
    decoder: { type: 'ByteLevel' },
    added_tokens: [],
  }
  writeFileSync(join(MODEL, 'tokenizer.json'), JSON.stringify(tokenizer))
  return weights
}

/** Whether the GGUF's ffn_down of the last layer starts with the F16 of its source's first rows (what llama.cpp's converter writes). */
async function downProjectionAgrees(weights, path) {
  const name = `model.layers.${LLAMA.layers - 1}.mlp.down_proj.weight`
  const source = await open(weights)
  const rows = await source.getSlice(name, [[0, 64]], { dtype: 'F16' })
  await source.close()
  const expected = new Uint8Array(rows.data.buffer, rows.data.byteOffset, rows.data.byteLength)
  const { tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true })
  const info = /** @type {import('@huggingface/gguf').GGUFTensorInfo} */ (tensorInfos.find((t) => t.name === `blk.${LLAMA.layers - 1}.ffn_down.weight`))
  const got = Buffer.alloc(expected.length)
  const file = await fsOpen(path)
  await file.read(got, 0, got.length, Number(tensorDataOffset + info.offset))
  await file.close()
  return got.equals(expected)
}

/** The CLI's conversion of the 1 GiB model to a GGUF at F16 against dd of its bytes; prints the table and returns the figures. */
export async function runConversion({ log = console.log } = {}) {
  const weights = await makeModel()
  const size = statSync(weights).size
  const out = join(MODEL, 'out')
  const gguf = `${out}.gguf`
  const canDrop = dropCaches()
  /** @type {Record<string, number[]>} */
  const runs = { dd: [], 'GGUF F16': [] }
  let peak = 0
  const commands = {
    dd: () => timed(`dd if=${quote(weights)} of=${quote(out)} bs=8M conv=fsync status=none`),
    'GGUF F16': async () => {
      const { ms, maxRss } = await child(CLI_CHILD, [MODEL, gguf, '--dtype', 'F16'])
      peak = Math.max(peak, maxRss)
      return ms
    },
  }
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate the order, so that neither always follows the other.
      for (const name of round % 2 ? ['GGUF F16', 'dd'] : ['dd', 'GGUF F16']) {
        await rm(name === 'dd' ? out : gguf, { force: true })
        await settle(canDrop, weights)
        runs[name].push(await commands[name]())
      }
    }
    const agrees = await downProjectionAgrees(weights, gguf)
    const m = { dd: median(runs.dd), gguf: median(runs['GGUF F16']) }
    log(`
convert a ${(size / 2 ** 30).toFixed(2)} GiB BF16 Llama model to GGUF F16 with the CLI vs dd conv=fsync of its safetensors, median of ${ROUNDS} interleaved rounds`)
    table([
      {
        conversion: 'BF16 -> GGUF F16',
        ms: m.gguf.toFixed(0),
        baseline: 'dd conv=fsync',
        'baseline ms': m.dd.toFixed(0),
        ratio: (m.gguf / m.dd).toFixed(2),
        'peak RSS MiB': (peak / MiB).toFixed(0),
        'ffn_down agrees': agrees,
      },
    ])
    log(`(targets: ratio <= 1.3, peak RSS < ${RSS_TARGET / MiB} MiB; GGUF ${(statSync(gguf).size / MiB).toFixed(0)} MiB)`)
    log(
      `every round, ms: ${Object.entries(runs)
        .map(([name, v]) => `${name} ${v.map((ms) => ms.toFixed(0)).join(' ')}`)
        .join('; ')}`,
    )
    if (!canDrop) log('cannot drop the page cache here (not root?): commands ran after a sync only, so their state varies more')
    return { ...m, ratio: m.gguf / m.dd, peakRss: peak, agrees, runs }
  } finally {
    await rm(out, { force: true })
    await rm(gguf, { force: true })
  }
}

/** The conversion's measurement. */
export async function run({ log = console.log } = {}) {
  return { conversion: await runConversion({ log }) }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run()
}
