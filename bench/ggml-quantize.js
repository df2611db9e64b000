// Quantization to ggml's types: each type's kernel (assembly/ggml-quant.ts) on 16M F32 values (rows of 4096, the
// spread of a model's weights) against ggml's own ggml_quantize_chunk (node-llama-cpp's libggml-base.so through
// koffi, test/ggml.ts: llama.cpp's quantizer, one thread), in the same run, interleaved, medians. Both write the
// same bytes (checked here on every run). The kernel reads F32 already in wasm memory; `quantize` copies the values
// in and the blocks out, as the GGUF export does.
// Run after `npm run build`: `node bench/ggml-quantize.js [values] [types]`, or import { run }.
import { pathToFileURL } from 'node:url'
import { bundledSource, compare } from './util.js'

const ROUNDS = 3

/** Values with the spread of a model's weights: normal, standard deviation 0.02, from a fixed seed. */
function weights(count) {
  const values = new Float32Array(count)
  let seed = 42
  const next = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    return (seed + 1) / 4294967297
  }
  for (let i = 0; i < count; i++) values[i] = Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next()) * 0.02
  return values
}

/**
 * Each type's quantization of `count` values (rows of 4096); prints the table and returns the rows.
 * @param {{ count?: number, types?: string[], log?: (line: string) => void }} [options]
 */
export async function run({ count = 16 << 20, types, log = console.log } = {}) {
  // test/ggml.ts and src/gguf/ggml-quantizers.ts: neither is a package export.
  const { loadGgml, ggmlQuantizers, GGML_RUNTIME } = await bundledSource(
    'ggml-quantize',
    "export { loadGgml } from './test/ggml.ts'\nexport { ggmlQuantizers } from './src/gguf/ggml-quantizers.ts'\nexport { GGML_RUNTIME } from './src/gguf/kernels.ts'",
  )
  const { types: QUANTIZED_TYPES, ggmlQuantModule, quantize, quantizedByteLength, quantizeInWasm } = ggmlQuantizers(GGML_RUNTIME)
  const { reserveMemory } = GGML_RUNTIME
  const ggml = loadGgml()
  const perRow = 4096
  const rows = count / perRow
  const values = weights(count)
  const core = ggmlQuantModule.instantiate(count * 4 * 2)
  const src = core.heapBase
  const dst = src + count * 4
  reserveMemory(core, dst + count * 4)
  new Float32Array(core.memory.buffer, src, count).set(values)
  const origin = { name: 'bench', first: 0 }
  log(`ggml-quantize bench: ${count} F32 values in rows of ${perRow}, medians of ${ROUNDS} interleaved runs (Node ${process.version})`)
  log('| type | ggml_quantize_chunk ms | kernel ms | quantize() ms | kernel / ggml | quantize() / ggml | same bytes |')
  log('|---|---:|---:|---:|---:|---:|---|')
  const results = []
  for (const type of types ?? QUANTIZED_TYPES) {
    const bytes = quantizedByteLength(type, rows, perRow)
    const out = new Uint8Array(bytes)
    let expected = new Uint8Array(0)
    const times = compare(
      {
        ggml: () => {
          expected = ggml.quantize(type, values, rows, perRow)
        },
        kernel: () => quantizeInWasm(core, type, src, dst, rows, perRow, origin),
        api: () => quantize(type, values, perRow, out),
      },
      ROUNDS,
    )
    const kernelBytes = new Uint8Array(core.memory.buffer, dst, bytes)
    const same = expected.every((byte, i) => byte === out[i] && byte === kernelBytes[i])
    const row = { type, ...times, kernelRatio: times.kernel / times.ggml, apiRatio: times.api / times.ggml, same }
    log(
      `| ${type} | ${times.ggml.toFixed(0)} | ${times.kernel.toFixed(0)} | ${times.api.toFixed(0)} | ${row.kernelRatio.toFixed(2)}x | ${row.apiRatio.toFixed(2)}x | ${same} |`,
    )
    results.push(row)
  }
  return results
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run({ count: process.argv[2] ? Number(process.argv[2]) : undefined, types: process.argv[3]?.split(',') })
}
