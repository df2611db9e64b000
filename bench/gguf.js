// The GGUF converter:
// - a 1 GiB BF16 Llama model (9 layers of 2048, grouped-query attention, a 32,000-token vocabulary) to a GGUF
//   at F16 with the CLI, against `dd conv=fsync` of its safetensors file (the same bytes in, as many out, durable
//   as the CLI's atomic write is); each command in a child process from the same settled machine state (see
//   bench/io.js settle()), interleaved rounds, medians. Targets: at most 1.3x, peak RSS under 200 MiB.
// - that GGUF back to a Hugging Face folder at F16 with the CLI, against dd of the GGUF: at most 1.5x, peak RSS
//   under 300 MiB.
// - a 150 MB BF16 Llama (4 layers of 1024, a 16,000-token vocabulary) to Q4_K_M with the CLI, against what a user
//   of llama.cpp runs for it: the F32 GGUF (this CLI) then llama.cpp's llama_model_quantize with 2 threads
//   (libllama through koffi, test/ggml.ts), each in a child process, interleaved rounds, medians; both files' tensor
//   data compared. Targets: at most 2.0x, peak RSS under 300 MiB.
// (Each type's quantization speed is bench/ggml-quantize.js's.)
// Run after `npm run build`: `node bench/gguf.js`, or import { run }.
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { open as fsOpen, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { gguf } from '@huggingface/gguf'
import { fileSink, open, SafetensorsWriter } from '../dist/node.js'
import { dropCaches, quote, settle, timed } from './io.js'
import { bundleSource, median, table } from './util.js'
import { CLI_CHILD, child, REPORT_RSS } from './write.js'

const MiB = 2 ** 20
const ROUNDS = 5
const RSS_TARGET = 200 * MiB
const MODEL = join(tmpdir(), 'safetensors-wasm-bench-1gib-llama')
const LLAMA = { hidden: 2048, intermediate: 5632, layers: 9, heads: 16, kvHeads: 4, vocab: 32000 }
const SMALL_MODEL = join(tmpdir(), 'safetensors-wasm-bench-150mb-llama')
const SMALL_LLAMA = { hidden: 1024, intermediate: 2816, layers: 4, heads: 16, kvHeads: 4, vocab: 16000 }
const QUANTIZED_RSS_TARGET = 300 * MiB
/** llama.h's LLAMA_FTYPE_MOSTLY_Q4_K_M. */
const Q4_K_M = 15

/** The tensors and shapes of a Llama of sizes `model`, as LlamaForCausalLM names them. */
function llamaShapes(model) {
  const { hidden, intermediate, layers, heads, kvHeads, vocab } = model
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

/**
 * Writes the folder of a Llama of sizes `model` once (kept in the temporary folder for later runs): its safetensors
 * chunk by chunk, config.json, a tokenizer.
 */
async function makeModel(folder = MODEL, model = LLAMA) {
  const weights = join(folder, 'model.safetensors')
  if (existsSync(join(folder, 'tokenizer.json'))) return weights
  mkdirSync(folder, { recursive: true })
  const shapes = llamaShapes(model)
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
  const { hidden, intermediate, layers, heads, kvHeads, vocab } = model
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
  writeFileSync(join(folder, 'config.json'), JSON.stringify(config))
  // A token for every id: llama.cpp's converter pads a vocabulary by a few ids at most.
  const tokenizer = {
    model: { type: 'BPE', vocab: Object.fromEntries(Array.from({ length: vocab }, (_, id) => [`t${id}`, id])), merges: [] },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, use_regex: true },
    decoder: { type: 'ByteLevel' },
    added_tokens: [],
  }
  writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(tokenizer))
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

/**
 * Runs each command ROUNDS times in alternating order, each after `before(name)` from the same settled machine
 * state (the page cache dropped where it can be, `input` read through once otherwise): the times of each.
 */
async function interleaved(commands, input, before) {
  const canDrop = dropCaches()
  const names = Object.keys(commands)
  /** @type {Record<string, number[]>} */
  const runs = Object.fromEntries(names.map((name) => [name, []]))
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order, so that neither always follows the other.
    for (const name of round % 2 ? [...names].reverse() : names) {
      await before(name)
      await settle(canDrop, input)
      runs[name].push(await commands[name]())
    }
  }
  return { runs, canDrop }
}

/** The lines under a table: every round's times, and whether the page cache could be dropped. */
function logRounds(log, runs, canDrop) {
  log(
    `every round, ms: ${Object.entries(runs)
      .map(([name, v]) => `${name} ${v.map((ms) => ms.toFixed(0)).join(' ')}`)
      .join('; ')}`,
  )
  if (!canDrop) log('cannot drop the page cache here (not root?): commands ran after a sync only, so their state varies more')
}

/** The commands a conversion is timed by: dd conv=fsync of `input` to `out`, and the CLI's convert with `args` (its peak RSS kept). */
function againstDd(input, out, name, args) {
  const measured = { peak: 0 }
  const commands = {
    dd: () => timed(`dd if=${quote(input)} of=${quote(out)} bs=8M conv=fsync status=none`),
    [name]: async () => {
      const { ms, maxRss } = await child(CLI_CHILD, args)
      measured.peak = Math.max(measured.peak, maxRss)
      return ms
    },
  }
  return { commands, measured }
}

/** A table row of a conversion's median against dd's. */
const rowAgainstDd = (conversion, ms, dd, peak) => ({
  conversion,
  ms: ms.toFixed(0),
  baseline: 'dd conv=fsync',
  'baseline ms': dd.toFixed(0),
  ratio: (ms / dd).toFixed(2),
  'peak RSS MiB': (peak / MiB).toFixed(0),
})

/** The CLI's conversion of the 1 GiB model to a GGUF at F16 against dd of its bytes; prints the table and returns the figures. */
export async function runConversion({ log = console.log } = {}) {
  const weights = await makeModel()
  const size = statSync(weights).size
  const out = join(MODEL, 'out')
  const gguf = `${out}.gguf`
  const { commands, measured } = againstDd(weights, out, 'GGUF F16', [MODEL, gguf, '--dtype', 'F16'])
  try {
    const { runs, canDrop } = await interleaved(commands, weights, (name) => rm(name === 'dd' ? out : gguf, { force: true }))
    const agrees = await downProjectionAgrees(weights, gguf)
    const m = { dd: median(runs.dd), gguf: median(runs['GGUF F16']) }
    log(`
convert a ${(size / 2 ** 30).toFixed(2)} GiB BF16 Llama model to GGUF F16 with the CLI vs dd conv=fsync of its safetensors, median of ${ROUNDS} interleaved rounds`)
    table([{ ...rowAgainstDd('BF16 -> GGUF F16', m.gguf, m.dd, measured.peak), 'ffn_down agrees': agrees }])
    log(`(targets: ratio <= 1.3, peak RSS < ${RSS_TARGET / MiB} MiB; GGUF ${(statSync(gguf).size / MiB).toFixed(0)} MiB)`)
    logRounds(log, runs, canDrop)
    return { ...m, ratio: m.gguf / m.dd, peakRss: measured.peak, agrees, runs }
  } finally {
    await rm(out, { force: true })
    await rm(gguf, { force: true })
  }
}

/**
 * The CLI's conversion of the 1 GiB model's GGUF (F16, written once by the CLI) back to a Hugging Face folder at
 * F16, against `dd conv=fsync` of the GGUF (as many bytes in and out); prints the table and returns the figures.
 */
export async function runToFolder({ log = console.log } = {}) {
  await makeModel()
  const gguf = join(MODEL, 'model.gguf')
  if (!existsSync(gguf)) await child(CLI_CHILD, [MODEL, gguf, '--dtype', 'F16'])
  const size = statSync(gguf).size
  const out = join(MODEL, 'back')
  const { commands, measured } = againstDd(gguf, out, 'folder F16', [gguf, out, '--dtype', 'F16'])
  try {
    const { runs, canDrop } = await interleaved(commands, gguf, () => rm(out, { recursive: true, force: true }))
    const written = statSync(join(out, 'model.safetensors')).size
    const m = { dd: median(runs.dd), folder: median(runs['folder F16']) }
    log(`
convert a ${(size / 2 ** 30).toFixed(2)} GiB F16 GGUF (the Llama above) to a Hugging Face folder at F16 with the CLI vs dd conv=fsync of the GGUF, median of ${ROUNDS} interleaved rounds`)
    table([rowAgainstDd('GGUF F16 -> folder F16', m.folder, m.dd, measured.peak)])
    log(`(targets: ratio <= 1.5, peak RSS < 300 MiB; model.safetensors ${(written / MiB).toFixed(0)} MiB)`)
    logRounds(log, runs, canDrop)
    return { ...m, ratio: m.folder / m.dd, peakRss: measured.peak, runs }
  } finally {
    await rm(out, { recursive: true, force: true })
  }
}

/** Whether two GGUFs hold the same tensors: names, types, shapes and data, wherever each file puts them. */
async function sameTensors(a, b) {
  const read = async (path) => {
    const { tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true })
    const file = await fsOpen(path)
    const sorted = [...tensorInfos].sort((x, y) => Number(x.offset - y.offset))
    const size = statSync(path).size
    /** @type {Map<string, string>} */
    const tensors = new Map()
    for (const [i, info] of sorted.entries()) {
      // Up to the next tensor: the data and its padding, zeros in both writers.
      const end = i + 1 < sorted.length ? Number(tensorDataOffset + sorted[i + 1].offset) : size
      const start = Number(tensorDataOffset + info.offset)
      const bytes = Buffer.alloc(end - start)
      await file.read(bytes, 0, bytes.length, start)
      tensors.set(info.name, `${info.dtype} ${info.shape.join('x')} ${bytes.toString('base64')}`)
    }
    await file.close()
    return tensors
  }
  const [x, y] = [await read(a), await read(b)]
  return x.size === y.size && [...x].every(([name, value]) => y.get(name) === value)
}

/**
 * The CLI's Q4_K_M of the 150 MB model against the F32 GGUF then llama_model_quantize with 2 threads; prints the
 * table and returns the figures.
 */
export async function runQuantized({ log = console.log } = {}) {
  const weights = await makeModel(SMALL_MODEL, SMALL_LLAMA)
  const size = statSync(weights).size
  const ours = join(SMALL_MODEL, 'ours.gguf')
  const f32 = join(SMALL_MODEL, 'f32.gguf')
  const theirs = join(SMALL_MODEL, 'llama.gguf')
  const bundle = await bundleSource('llama-quantize', "export { loadLlamaQuantize } from './test/ggml.ts'")
  const quantizeChild = `
    ${REPORT_RSS}
    const { loadLlamaQuantize } = await import(${JSON.stringify(pathToFileURL(bundle).href)})
    const [input, output, ftype, threads] = process.argv.slice(1)
    loadLlamaQuantize()(input, output, Number(ftype), Number(threads))`
  const measured = { peak: 0 }
  const llama = 'F32 GGUF + llama_model_quantize'
  const commands = {
    'GGUF Q4_K_M': async () => {
      const { ms, maxRss } = await child(CLI_CHILD, [SMALL_MODEL, ours, '--dtype', 'Q4_K_M'])
      measured.peak = Math.max(measured.peak, maxRss)
      return ms
    },
    [llama]: async () =>
      (await child(CLI_CHILD, [SMALL_MODEL, f32, '--dtype', 'F32'])).ms + (await child(quantizeChild, [f32, theirs, String(Q4_K_M), '2'])).ms,
  }
  const outputs = { 'GGUF Q4_K_M': [ours], [llama]: [f32, theirs] }
  try {
    const { runs, canDrop } = await interleaved(commands, weights, (name) => Promise.all(outputs[name].map((path) => rm(path, { force: true }))))
    // The last round of each left its files.
    const same = await sameTensors(ours, theirs)
    const m = { ours: median(runs['GGUF Q4_K_M']), theirs: median(runs[llama]) }
    log(`
convert a ${(size / 1e6).toFixed(0)} MB BF16 Llama model to GGUF Q4_K_M with the CLI vs the F32 GGUF then llama.cpp's llama_model_quantize (2 threads), median of ${ROUNDS} interleaved rounds`)
    table([
      {
        conversion: 'BF16 -> GGUF Q4_K_M',
        ms: m.ours.toFixed(0),
        baseline: llama,
        'baseline ms': m.theirs.toFixed(0),
        ratio: (m.ours / m.theirs).toFixed(2),
        'peak RSS MiB': (measured.peak / MiB).toFixed(0),
        'same tensors': same,
      },
    ])
    log(`(targets: ratio <= 2.0, peak RSS < ${QUANTIZED_RSS_TARGET / MiB} MiB; GGUF ${(statSync(ours).size / MiB).toFixed(0)} MiB)`)
    logRounds(log, runs, canDrop)
    return { ...m, ratio: m.ours / m.theirs, peakRss: measured.peak, same, runs }
  } finally {
    for (const path of [ours, f32, theirs]) await rm(path, { force: true })
  }
}

/** Every measurement: the conversion, the way back to a folder, Q4_K_M against llama.cpp. */
export async function run({ log = console.log } = {}) {
  return { conversion: await runConversion({ log }), toFolder: await runToFolder({ log }), quantized: await runQuantized({ log }) }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run()
}
