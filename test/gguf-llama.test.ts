// Issue 22: the GGUF files of `convert <model folder> <out.gguf> --dtype D`, judged by llama.cpp itself. Every
// model of test/fixtures/gguf/ (made by scripts/make-gguf-models.py, with transformers' float32 logits beside
// it) is converted to every dtype by the CLI (node dist/cli.js: run `npm run build` first) and loaded in
// llama.cpp (test/llama.ts); its next-token probabilities must match softmax(reference logits) within the
// dtype's tolerance, measured and explained in docs/gguf.md "How it is tested". A negative control shows that
// the comparison catches a converter that leaves out llama's Q/K permutation.
//
// GGUF_DIR=<folder> judges <folder>/<model>.<dtype>.gguf instead of the CLI's output: the files of
// scripts/gguf-reference.py (gguf-py), with which the tolerances were measured; after its --cases N, on the
// sequences of <folder>/<model>.cases.json instead of reference.json's.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { GGMLQuantizationType, gguf } from '@huggingface/gguf'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type LlamaModel, llamaUnsupported, loadLlamaModel, startLlamaCpp } from './llama.ts'
import { CLI, cli } from './run-cli.ts'
import { tempDir } from './writer-reference.ts'

const FIXTURES = fileURLToPath(new URL('./fixtures/gguf/', import.meta.url))
// Every folder with a reference.json is a model (q8_0/ holds the Q8_0 kernel's vectors).
const MODELS = readdirSync(FIXTURES)
  .filter((name) => existsSync(join(FIXTURES, name, 'reference.json')))
  .sort()
const DTYPES = ['F32', 'F16', 'BF16', 'Q8_0'] as const
type Dtype = (typeof DTYPES)[number]

/**
 * How far llama.cpp may be from the transformers reference, per dtype: `probability`, the largest
 * |p_llama - p_reference| over the vocabulary; `logit`, the largest move of one logit relative to another (the
 * range over the vocabulary of log p_llama - log p_reference, which no common shift of the logits changes).
 * About twice the largest measured over 180 sequences of these models (F32: the 1e-4); docs/gguf.md
 * "How it is tested" has the figures and why.
 */
const TOLERANCE: Record<Dtype, { probability: number; logit: number }> = {
  F32: { probability: 1e-4, logit: 1e-4 },
  F16: { probability: 3e-3, logit: 5e-2 },
  BF16: { probability: 2e-2, logit: 0.5 },
  Q8_0: { probability: 6e-2, logit: 0.75 },
}
/** The negative control's model is wrong by at least this much somewhere: far outside every tolerance above. */
const CLEARLY_WRONG = 0.1
/** node-llama-cpp's first install downloads about 85 MB from npm (8 s here). */
const INSTALL_TIMEOUT = 10 * 60_000

interface Reference {
  cases: Array<{ ids: number[]; logits: number[] }>
  sentence: string
  sentence_ids: number[]
  sentence_ids_without_special: number[]
}
const reference = (model: string): Reference => JSON.parse(readFileSync(join(FIXTURES, model, 'reference.json'), 'utf8'))

/** softmax in double precision. */
function softmax(logits: readonly number[]): Float64Array {
  const max = Math.max(...logits)
  const out = Float64Array.from(logits, (l) => Math.exp(l - max))
  const sum = out.reduce((a, b) => a + b, 0)
  return out.map((e) => e / sum)
}

const argmax = (values: ArrayLike<number>): number => {
  let best = 0
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i
  return best
}

/** How far llama.cpp's distribution is from the reference's, in the two measures of TOLERANCE. */
function distance(probabilities: Float64Array, logits: readonly number[]): { probability: number; logit: number } {
  const expected = softmax(logits)
  let probability = 0
  let low = Infinity
  let high = -Infinity
  for (let i = 0; i < expected.length; i++) {
    probability = Math.max(probability, Math.abs(probabilities[i] - expected[i]))
    const moved = Math.log(probabilities[i]) - Math.log(expected[i])
    low = Math.min(low, moved)
    high = Math.max(high, moved)
  }
  return { probability, logit: high - low }
}

/** The reference's top logit minus its second. */
function topGap(logits: readonly number[]): number {
  const sorted = [...logits].sort((a, b) => b - a)
  return sorted[0] - sorted[1]
}

const OUT = tempDir('st-gguf-llama-')
afterAll(() => rmSync(OUT, { recursive: true, force: true }))

const converted = new Map<string, Promise<string>>()
/** The GGUF of `model` in `dtype`: converted once by the CLI, or GGUF_DIR's file. */
function ggufOf(model: string, dtype: Dtype): Promise<string> {
  const key = `${model}.${dtype}`
  let path = converted.get(key)
  if (!path) {
    path = (async () => {
      if (process.env.GGUF_DIR) return join(process.env.GGUF_DIR, `${key}.gguf`)
      const out = join(OUT, `${key}.gguf`)
      const run = await cli('convert', join(FIXTURES, model), out, '--dtype', dtype)
      if (run.code !== 0) throw new Error(`convert ${model} --dtype ${dtype} exited ${run.code}: ${run.stderr}`)
      return out
    })()
    converted.set(key, path)
  }
  return path
}

/** Loads `path` in llama.cpp, runs `use`, and unloads it whatever happens. */
async function withLlama<T>(path: string, use: (model: LlamaModel) => Promise<T>): Promise<T> {
  const model = await loadLlamaModel(path)
  try {
    return await use(model)
  } finally {
    await model.dispose()
  }
}

/** The largest distance over a model's cases and, for each case, the reference's top-two gap and both argmaxes. */
async function judge(path: string, model: string) {
  return withLlama(path, async (llama) => {
    const worst = { probability: 0, logit: 0 }
    const argmaxes: Array<{ ids: number[]; gap: number; expected: number; got: number }> = []
    const more = process.env.GGUF_DIR && join(process.env.GGUF_DIR, `${model}.cases.json`)
    const { cases } = more && existsSync(more) ? (JSON.parse(readFileSync(more, 'utf8')) as Pick<Reference, 'cases'>) : reference(model)
    for (const { ids, logits } of cases) {
      const probabilities = await llama.nextTokenProbabilities(ids)
      expect(probabilities.length, `${model}: llama.cpp's vocabulary`).toBe(logits.length)
      const d = distance(probabilities, logits)
      worst.probability = Math.max(worst.probability, d.probability)
      worst.logit = Math.max(worst.logit, d.logit)
      argmaxes.push({ ids, gap: topGap(logits), expected: argmax(logits), got: argmax(probabilities) })
    }
    return { worst, argmaxes }
  })
}

const measured: string[] = []
afterAll(() => {
  if (measured.length > 0) console.log(`llama.cpp against transformers (largest over each model's cases):\n${measured.join('\n')}`)
})

const unsupported = llamaUnsupported()
if (unsupported) console.log(`${unsupported}: skipping the llama.cpp tests`)

describe.skipIf(unsupported !== undefined)('llama.cpp runs the converted GGUF as transformers runs the model', () => {
  beforeAll(async () => {
    if (!process.env.GGUF_DIR && !existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`)
    await startLlamaCpp()
  }, INSTALL_TIMEOUT)

  describe.each(MODELS)('%s', (model) => {
    test.each(DTYPES)('%s: next-token probabilities within the tolerance, argmax kept where the top two logits are clearly apart', async (dtype) => {
      const { worst, argmaxes } = await judge(await ggufOf(model, dtype), model)
      const kept = argmaxes.filter((a) => a.gap > TOLERANCE[dtype].logit)
      measured.push(
        `${model} ${dtype}: |p - p_ref| ${worst.probability.toExponential(2)}, logit moves ${worst.logit.toExponential(2)}, argmax judged on ${kept.length} of ${argmaxes.length}`,
      )
      expect(worst.probability, `${model} ${dtype}: largest |p_llama - p_reference|`).toBeLessThanOrEqual(TOLERANCE[dtype].probability)
      expect(worst.logit, `${model} ${dtype}: largest relative move of a logit`).toBeLessThanOrEqual(TOLERANCE[dtype].logit)
      // The logits move relative to one another by at most TOLERANCE.logit (asserted above), so a top two
      // further apart than that cannot swap: llama.cpp's most likely token must be the reference's.
      for (const a of kept) expect(a.got, `${model} ${dtype}: argmax after [${a.ids}] (top two ${a.gap.toFixed(3)} apart)`).toBe(a.expected)
    })

    test('llama.cpp tokenizes a plain sentence as the Hugging Face tokenizer does', async () => {
      const { sentence, sentence_ids, sentence_ids_without_special } = reference(model)
      await withLlama(await ggufOf(model, 'F32'), async (llama) => {
        expect(llama.tokenize(sentence)).toEqual(sentence_ids_without_special)
        // The special tokens the Hugging Face tokenizer adds: a BOS or nothing, as llama.cpp's add_bos_token says.
        const withBos = llama.addsBos && llama.bos !== null ? [llama.bos, ...sentence_ids_without_special] : sentence_ids_without_special
        expect(withBos).toEqual(sentence_ids)
      })
    })
  })

  describe.each(MODELS.filter((model) => PERMUTED.has(JSON.parse(readFileSync(join(FIXTURES, model, 'config.json'), 'utf8')).architectures[0])))(
    '%s: the negative control',
    (model) => {
      test('the same GGUF with the Q/K permutation undone fails the comparison clearly', async () => {
        const permuted = await ggufOf(model, 'F32')
        const unpermuted = join(OUT, `${model}.unpermuted.gguf`)
        const { rewritten, blocks } = await undoPermutation(permuted, unpermuted)
        expect(rewritten, 'attn_q and attn_k of every block').toBe(2 * blocks)
        const { worst } = await judge(unpermuted, model)
        expect(worst.probability).toBeGreaterThan(CLEARLY_WRONG)
        measured.push(`${model} F32 without the Q/K permutation: |p - p_ref| ${worst.probability.toExponential(2)}`)
      })
    },
  )
})

/** The architectures whose queries and keys llama.cpp's converter permutes (GGUF architecture `llama`). */
const PERMUTED = new Set(['LlamaForCausalLM', 'MistralForCausalLM'])

/**
 * Writes a copy of the F32 GGUF at `from` whose attn_q and attn_k rows are back in transformers' order: llama.cpp's
 * permutation interleaves each head's two halves (row h*d + 2i + s holds the source's row h*d + s*d/2 + i), so
 * this puts row h*d + 2i + s back at h*d + s*d/2 + i. Returns how many tensors it rewrote, and the block count.
 */
async function undoPermutation(from: string, to: string): Promise<{ rewritten: number; blocks: number }> {
  const { metadata, tensorInfos, tensorDataOffset } = await gguf(from, { allowLocalFile: true })
  const number = (key: string) => Number((metadata as Record<string, unknown>)[key])
  const heads = number('llama.attention.head_count')
  const kvHeads = number('llama.attention.head_count_kv')
  const bytes = readFileSync(from)
  let rewritten = 0
  for (const info of tensorInfos) {
    const match = /^blk\.\d+\.attn_([qk])\.weight$/.exec(info.name)
    if (!match) continue
    if (info.dtype !== GGMLQuantizationType.F32) throw new Error(`${info.name} is ${GGMLQuantizationType[info.dtype]}, the negative control rewrites F32`)
    // ggml order: shape[0] is the row length (the embedding), shape[1] the number of rows.
    const [columns, rows] = info.shape.map(Number)
    const head = match[1] === 'q' ? heads : kvHeads
    const headDim = rows / head
    const start = Number(tensorDataOffset + info.offset)
    const source = new Float32Array(bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + start + rows * columns * 4))
    const target = new Float32Array(source.length)
    for (let h = 0; h < head; h++)
      for (let i = 0; i < headDim / 2; i++)
        for (let s = 0; s < 2; s++) {
          const permutedRow = h * headDim + 2 * i + s
          const originalRow = h * headDim + s * (headDim / 2) + i
          target.set(source.subarray(permutedRow * columns, (permutedRow + 1) * columns), originalRow * columns)
        }
    bytes.set(new Uint8Array(target.buffer), start)
    rewritten++
  }
  writeFileSync(to, bytes)
  return { rewritten, blocks: number('llama.block_count') }
}
