// The GGUF converter:
// - a 1 GiB BF16 Llama model (9 layers of 2048, grouped-query attention, a 32,000-token vocabulary) to a GGUF
//   at F16 with the CLI, against `dd conv=fsync` of its safetensors file (the same bytes in, as many out, durable
//   as the CLI's atomic write is); each command in a child process from the same settled machine state (see
//   bench/io.js settle()), interleaved rounds, medians. Targets: at most 1.3x, peak RSS under 200 MiB.
// - that GGUF back to a Hugging Face folder at F16 with the CLI, against dd of the GGUF: at most 1.5x, peak RSS
//   under 300 MiB.
// - Q8_0 quantization speed: quantizeQ8_0 (src/gguf/q8_0.ts, bundled here with esbuild, as it is not a package
//   export) and the raw kernel in wasm memory, against the fastest plain JavaScript a user would write.
// Run after `npm run build`: `node bench/gguf.js [values]`, or import { run }.
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { open as fsOpen, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { gguf } from '@huggingface/gguf'
import { fileSink, open, SafetensorsWriter } from '../dist/node.js'
import { f32BitsToF16, kernelInstance } from './convert.js'
import { dropCaches, quote, settle, timed } from './io.js'
import { bundledSource, compare, median, table } from './util.js'
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
  // A token for every id: llama.cpp's converter pads a vocabulary by a few ids at most.
  const tokenizer = {
    model: { type: 'BPE', vocab: Object.fromEntries(Array.from({ length: vocab }, (_, id) => [`t${id}`, id])), merges: [] },
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

/** Q8_0 quantization of `count` values (a multiple of 32), every way; prints the table and returns the rows. */
export async function runQ8_0({ count = 16 << 20, log = console.log } = {}) {
  const { quantizeQ8_0 } = await bundledSource("export { quantizeQ8_0 } from './src/gguf/q8_0.ts'")
  const blocks = count / 32
  // Weights of a typical spread: normal-ish, about 0.02.
  const values = Float32Array.from({ length: count }, () => (Math.random() + Math.random() + Math.random() - 1.5) * 0.04)
  const out = new Uint8Array(blocks * 34)
  const outInt8 = new Int8Array(out.buffer)
  const scale = new Float32Array(1)
  const scaleBits = new Uint32Array(scale.buffer)

  // The plain JS loop, inline in the closure that owns its arrays (see bench/convert.js why): the F32 steps
  // with Math.fround, round half away from zero (exact in doubles for |v| <= 128), the scale's F16 by bits.
  const jsLoop = (o, o8) => {
    for (let b = 0; b < blocks; b++) {
      const base = b * 32
      const at = b * 34
      let amax = 0
      for (let j = 0; j < 32; j++) {
        const a = Math.abs(values[base + j])
        if (a > amax) amax = a
      }
      const d = Math.fround(amax / 127)
      const id = d === 0 ? 0 : Math.fround(1 / d)
      scale[0] = d
      const h = f32BitsToF16(scaleBits[0])
      o[at] = h & 0xff
      o[at + 1] = h >> 8
      for (let j = 0; j < 32; j++) {
        const v = Math.fround(values[base + j] * id)
        o8[at + 2 + j] = v < 0 ? -Math.floor(0.5 - v) : Math.floor(v + 0.5)
      }
    }
  }
  jsLoop(out, outInt8)
  const same = quantizeQ8_0(values).every((byte, i) => byte === out[i])

  const copy = new Float32Array(count)
  const { exports: kernelExports, memory, src, dst } = kernelInstance(count * 4, blocks * 34, 'q8_0')
  const exports = /** @type {import('../src/gguf/q8_0.ts').Q8_0Exports} */ (/** @type {unknown} */ (kernelExports))
  new Float32Array(memory.buffer, src, count).set(values)
  const times = compare({
    jsNew: () => {
      const o = new Uint8Array(blocks * 34)
      jsLoop(o, new Int8Array(o.buffer))
    },
    jsInto: () => jsLoop(out, outInt8),
    apiNew: () => quantizeQ8_0(values),
    apiInto: () => quantizeQ8_0(values, out),
    kernel: () => exports.quantizeQ8_0(src, dst, blocks),
    memcpy: () => copy.set(values),
  })
  const gbPerSecond = (ms) => (count * 4) / ms / 1e6
  const rows = [
    ['JS loop, new array', times.jsNew, ''],
    ['quantizeQ8_0, new array', times.apiNew, times.jsNew / times.apiNew],
    ['JS loop, into out', times.jsInto, ''],
    ['quantizeQ8_0, into out', times.apiInto, times.jsInto / times.apiInto],
    ['kernel F32 in wasm memory', times.kernel, times.jsInto / times.kernel],
    ['memcpy (set) of the input', times.memcpy, ''],
  ]
  log(`gguf bench: Q8_0 of ${count} F32 values, medians of 15 interleaved runs (Node ${process.version}); JS loop agrees: ${same}`)
  log('| case | ms | input GB/s | vs JS loop |')
  log('|---|---:|---:|---:|')
  for (const [name, ms, ratio] of rows) log(`| ${name} | ${ms.toFixed(2)} | ${gbPerSecond(ms).toFixed(2)} | ${ratio === '' ? '' : `${ratio.toFixed(2)}x`} |`)
  return rows
}

/** Every measurement: the conversion, then Q8_0 of `count` values. */
export async function run({ count = 16 << 20, log = console.log } = {}) {
  return { conversion: await runConversion({ log }), toFolder: await runToFolder({ log }), q8_0: await runQ8_0({ count, log }) }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run({ count: process.argv[2] ? Number(process.argv[2]) : undefined })
}
