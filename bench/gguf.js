// The GGUF converter:
// - a 1 GiB BF16 Llama model (9 layers of 2048, grouped-query attention, a 32,000-token vocabulary) to a GGUF
//   at F16 with the CLI, against `dd conv=fsync` of its safetensors file (the same bytes in, as many out, durable
//   as the CLI's atomic write is); each command in a child process from the same settled machine state (see
//   bench/io.js settle()), interleaved rounds, medians. Targets: at most 1.3x, peak RSS under 200 MiB.
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
  // A token an id, no merges: a vocabulary mostly of padding is refused as a config.json that does not fit it.
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
 * Runs each command `ROUNDS` times, alternating their order so that neither always follows the other, each after
 * its `outputs` are removed and from a settled machine state; each command's milliseconds and their medians.
 * @param {Record<string, { run: () => Promise<number>, outputs: string[] }>} commands
 * @param {string} weights
 * @param {boolean} canDrop
 */
async function interleaved(commands, weights, canDrop) {
  /** @type {Record<string, number[]>} */
  const runs = Object.fromEntries(Object.keys(commands).map((name) => [name, []]))
  for (let round = 0; round < ROUNDS; round++) {
    const names = Object.keys(commands)
    for (const name of round % 2 ? names.reverse() : names) {
      for (const path of commands[name].outputs) await rm(path, { force: true })
      await settle(canDrop, weights)
      runs[name].push(await commands[name].run())
    }
  }
  return { runs, medians: Object.fromEntries(Object.entries(runs).map(([name, v]) => [name, median(v)])) }
}

/**
 * The CLI's `convert` with `args` in a child process, as a command of interleaved(): its milliseconds, its peak RSS
 * kept in `rss.peak` when higher.
 * @param {string[]} args
 * @param {{ peak: number }} rss
 */
function cliRun(args, rss) {
  return async () => {
    const { ms, maxRss } = await child(CLI_CHILD, args)
    rss.peak = Math.max(rss.peak, maxRss)
    return ms
  }
}

/**
 * Prints a measurement: its heading; a row of the medians of `runs`' first command (this library's) and second (the
 * baseline), their ratio, the peak RSS of the first and the `checks`; its targets; every round.
 * @param {(line: string) => void} log
 * @param {string} heading
 * @param {Record<string, number[]>} runs
 * @param {number} peak
 * @param {Record<string, unknown>} checks
 * @param {string} targets
 */
function report(log, heading, runs, peak, checks, targets) {
  const [[conversion, ours], [baseline, theirs]] = Object.entries(runs).map(([name, v]) => [name, median(v)])
  log(`\n${heading}, median of ${ROUNDS} interleaved rounds`)
  const ratio = (+ours / +theirs).toFixed(2)
  table([{ conversion, ms: (+ours).toFixed(0), baseline, 'baseline ms': (+theirs).toFixed(0), ratio, 'peak RSS MiB': (peak / MiB).toFixed(0), ...checks }])
  log(targets)
  log(
    `every round, ms: ${Object.entries(runs)
      .map(([name, v]) => `${name} ${v.map((ms) => ms.toFixed(0)).join(' ')}`)
      .join('; ')}`,
  )
}

/** The CLI's conversion of the 1 GiB model to a GGUF at F16 against dd of its bytes; prints the table and returns the figures. */
export async function runConversion({ log = console.log } = {}) {
  const weights = await makeModel()
  const size = statSync(weights).size
  const out = join(MODEL, 'out')
  const gguf = `${out}.gguf`
  const canDrop = dropCaches()
  const rss = { peak: 0 }
  // This library's command first, the baseline second: report() reads them in that order.
  const commands = {
    'BF16 -> GGUF F16': { run: cliRun([MODEL, gguf, '--dtype', 'F16'], rss), outputs: [gguf] },
    'dd conv=fsync': { run: () => timed(`dd if=${quote(weights)} of=${quote(out)} bs=8M conv=fsync status=none`), outputs: [out] },
  }
  try {
    const { runs, medians } = await interleaved(commands, weights, canDrop)
    const agrees = await downProjectionAgrees(weights, gguf)
    const m = { dd: medians['dd conv=fsync'], gguf: medians['BF16 -> GGUF F16'] }
    const heading = `convert a ${(size / 2 ** 30).toFixed(2)} GiB BF16 Llama model to GGUF F16 with the CLI vs dd conv=fsync of its safetensors`
    const targets = `(targets: ratio <= 1.3, peak RSS < ${RSS_TARGET / MiB} MiB; GGUF ${(statSync(gguf).size / MiB).toFixed(0)} MiB)`
    report(log, heading, runs, rss.peak, { 'ffn_down agrees': agrees }, targets)
    if (!canDrop) log('cannot drop the page cache here (not root?): commands ran after a sync only, so their state varies more')
    return { ...m, ratio: m.gguf / m.dd, peakRss: rss.peak, agrees, runs }
  } finally {
    await rm(out, { force: true })
    await rm(gguf, { force: true })
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
  const canDrop = dropCaches()
  const rss = { peak: 0 }
  const toF32 = cliRun([SMALL_MODEL, f32, '--dtype', 'F32'], { peak: 0 })
  const quantize = async () => (await child(quantizeChild, [f32, theirs, String(Q4_K_M), '2'])).ms
  const commands = {
    'BF16 -> GGUF Q4_K_M': { run: cliRun([SMALL_MODEL, ours, '--dtype', 'Q4_K_M'], rss), outputs: [ours] },
    'F32 GGUF + llama_model_quantize': { run: async () => (await toF32()) + (await quantize()), outputs: [f32, theirs] },
  }
  try {
    const { runs, medians } = await interleaved(commands, weights, canDrop)
    // The last round of each left its files.
    const same = await sameTensors(ours, theirs)
    const m = { ours: medians['BF16 -> GGUF Q4_K_M'], theirs: medians['F32 GGUF + llama_model_quantize'] }
    const heading = `convert a ${(size / 1e6).toFixed(0)} MB BF16 Llama model to GGUF Q4_K_M with the CLI vs the F32 GGUF then llama.cpp's llama_model_quantize (2 threads)`
    const targets = `(targets: ratio <= 2.0, peak RSS < ${QUANTIZED_RSS_TARGET / MiB} MiB; GGUF ${(statSync(ours).size / MiB).toFixed(0)} MiB)`
    report(log, heading, runs, rss.peak, { 'same tensors': same }, targets)
    return { ...m, ratio: m.ours / m.theirs, peakRss: rss.peak, same, runs }
  } finally {
    for (const path of [ours, f32, theirs]) await rm(path, { force: true })
  }
}

/** The conversion's measurements. */
export async function run({ log = console.log } = {}) {
  return { conversion: await runConversion({ log }), quantized: await runQuantized({ log }) }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run()
}
