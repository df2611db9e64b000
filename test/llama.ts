// The one llama.cpp harness of the tests: node-llama-cpp (llama.cpp's prebuilt CPU binaries for Node), installed
// from npm into .cache/node-llama-cpp/<version>/ the first time a run needs it and reused after. It loads a GGUF
// offline and gives the next-token probabilities for a sequence of ids, and llama.cpp's own tokenization of a text.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

// Exact, so that every run judges with the same llama.cpp and the cache never goes stale silently.
export const NODE_LLAMA_CPP = '3.21.1'
// Found from this file's place rather than through test/packed.ts, which needs vitest: bench/ggml-quantize.js
// loads this module outside vitest, bundled into build/ (as deep in the repository as test/).
const CACHE = fileURLToPath(new URL('../.cache/node-llama-cpp', import.meta.url))
const INSTALLED = join(CACHE, NODE_LLAMA_CPP)
const ENTRY = join(INSTALLED, 'node_modules/node-llama-cpp/dist/index.js')

// node-llama-cpp's optional dependencies hold a prebuilt llama.cpp for every platform and GPU (about 730 MB in
// all); the tests need only the CPU build for Linux x64 (29 MB), so the others are left out.
const CPU_BINARIES = `@node-llama-cpp/linux-x64@${NODE_LLAMA_CPP}`

/** Why llama.cpp cannot run here, or undefined when it can: node-llama-cpp's CPU package is for Linux x64. */
export function llamaUnsupported(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return `the llama.cpp tests need Linux x64 (node-llama-cpp's ${CPU_BINARIES}), this is ${process.platform} ${process.arch}`
  return undefined
}

/** The folder of llama.cpp's prebuilt libraries (libggml-base.so, libllama.v0.4.0.so) once installed. */
export const LLAMA_LIBRARIES = join(INSTALLED, 'node_modules/@node-llama-cpp/linux-x64/bins/linux-x64')

/** Installs node-llama-cpp with its CPU binaries into .cache/, once; throws saying why it cannot. */
export function installLlamaCpp(): void {
  if (existsSync(ENTRY)) return
  mkdirSync(CACHE, { recursive: true })
  const scratch = mkdtempSync(join(CACHE, `.${NODE_LLAMA_CPP}-`))
  try {
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'llama-harness', private: true, type: 'module' }))
    // --ignore-scripts: node-llama-cpp's postinstall would offer to download or build llama.cpp when no binary
    // fits; here the binary is the one named, and nothing else may be fetched.
    const run = spawnSync(
      'npm',
      ['install', '--omit=optional', '--ignore-scripts', '--no-audit', '--no-fund', '-E', `node-llama-cpp@${NODE_LLAMA_CPP}`, CPU_BINARIES],
      { cwd: scratch, encoding: 'utf8' },
    )
    if (run.status !== 0) throw new Error(`npm install node-llama-cpp@${NODE_LLAMA_CPP} ${CPU_BINARIES} failed (exit ${run.status}): ${run.stderr.trim()}`)
    // Renamed into place only when whole, so an interrupted install is never taken for one; a rename that
    // fails because another process got there first leaves that copy, as good as this one.
    try {
      renameSync(scratch, INSTALLED)
    } catch (error) {
      if (!existsSync(ENTRY)) throw error
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

// The part of node-llama-cpp's API the harness uses. Its own types are not imported: the package is only in
// .cache/ once a test has installed it, and `npm run typecheck` runs on a clean clone.
interface NodeLlamaCpp {
  getLlama(options: {
    gpu: false
    build: 'never'
    logLevel: 'error'
    logger: (level: string, message: string) => void
    maxThreads: number
  }): Promise<LlamaInstance>
}
interface LlamaInstance {
  loadModel(options: { modelPath: string; gpuLayers: 0 }): Promise<LlamaModelInstance>
}
interface LlamaModelInstance {
  tokenize(text: string, specialTokens?: boolean): number[]
  detokenize(tokens: readonly number[]): string
  readonly trainContextSize: number
  readonly tokens: { readonly bos: number | null; readonly shouldPrependBosToken: boolean }
  createContext(options: Record<string, unknown>): Promise<LlamaContextInstance>
  dispose(): Promise<void>
}
interface LlamaContextInstance {
  getSequence(): LlamaSequenceInstance
  dispose(): Promise<void>
}
type EvaluateItem = number | [number, { generateNext: { probabilities: true; options: Record<string, number> } }]
interface LlamaSequenceInstance {
  clearHistory(): Promise<void>
  controlledEvaluate(input: EvaluateItem[]): Promise<Array<undefined | { next: { probabilities?: Map<number, number> } }>>
}

let instance: Promise<LlamaInstance> | undefined
// What llama.cpp logged as errors since the last load began: node-llama-cpp's own error says only "Failed to
// load model", llama.cpp's log says why (an unknown pre-tokenizer, a tensor of the wrong shape).
let errors: string[] = []

/**
 * llama.cpp on the CPU, offline: installs node-llama-cpp the first time (call it from a beforeAll with a timeout
 * that allows for the download: about 85 MB), never downloads or builds a binary itself.
 */
export function startLlamaCpp(): Promise<LlamaInstance> {
  instance ??= (async () => {
    installLlamaCpp()
    const { getLlama } = (await import(pathToFileURL(ENTRY).href)) as NodeLlamaCpp
    // Two threads: the machines that run the tests have two cores.
    return getLlama({ gpu: false, build: 'never', logLevel: 'error', logger: (_, message) => errors.push(message.trim()), maxThreads: 2 })
  })()
  return instance
}

/** A GGUF loaded in llama.cpp. */
export interface LlamaModel {
  /** The probability of every token of the vocabulary (index = id) to follow `ids`, from a fresh KV cache. */
  nextTokenProbabilities(ids: readonly number[]): Promise<Float64Array>
  /** llama.cpp's ids for `text`, as parsed text (no special tokens recognised) and without a BOS. */
  tokenize(text: string): number[]
  /** llama.cpp's text for `ids`, special tokens left out (as a chat's output is shown). */
  detokenize(ids: readonly number[]): string
  /** The positions the context takes: the GGUF's context_length, at most 256 (no test sequence is longer). */
  readonly contextSize: number
  /** The BOS id and whether llama.cpp puts it before a text (the GGUF's add_bos_token). */
  readonly bos: number | null
  readonly addsBos: boolean
  dispose(): Promise<void>
}

/**
 * Loads `path` in llama.cpp with a context whose KV cache is F32 and flash attention off: llama.cpp's default F16
 * cache (and flash attention, even with an F32 cache) alone moves F32 probabilities by up to 1e-3 on the test
 * models, ten times the F32 tolerance, which would hide what the GGUF itself does. The context is the model's own
 * (its context_length, as llama.cpp and node-llama-cpp take by default), at most 256 positions.
 */
export async function loadLlamaModel(path: string): Promise<LlamaModel> {
  const llama = await startLlamaCpp()
  errors = []
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 }).catch((error: unknown) => {
    throw new Error(`llama.cpp cannot load ${path}: ${errors.join('; ') || String(error)}`)
  })
  const contextSize = Math.min(256, model.trainContextSize)
  // node-llama-cpp keeps a context's last cell free for the token it would generate: a context of n cells takes
  // n - 1 ids, then shifts (erases the first ones). A model whose own context is shorter than 256 gets one cell more,
  // to take the positions llama.cpp takes; the others keep 256 cells (no case is longer than 64 ids), since a
  // longrope model (Phi-3) picks its factors by the context's size.
  const cells = contextSize < 256 ? contextSize + 1 : contextSize
  const context = await model.createContext({
    contextSize: cells,
    batchSize: cells,
    sequences: 1,
    flashAttention: false,
    experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32',
  })
  const sequence = context.getSequence()
  return {
    async nextTokenProbabilities(ids) {
      await sequence.clearHistory()
      // The sampler at temperature 1 with top-k (0: the whole vocabulary), top-p and min-p off hands back
      // softmax(logits) whole.
      const options = { temperature: 1, topK: 0, topP: 1, minP: 0 }
      const last = ids.length - 1
      const results = await sequence.controlledEvaluate([...ids.slice(0, last), [ids[last], { generateNext: { probabilities: true, options } }]])
      const probabilities = results[last]?.next.probabilities
      if (!probabilities) throw new Error(`llama.cpp gave no probabilities after ${ids.length} ids`)
      const out = new Float64Array(probabilities.size)
      for (const [id, p] of probabilities) {
        if (!(id >= 0 && id < out.length)) throw new Error(`llama.cpp gave a probability for id ${id}, outside its ${out.length} ids`)
        out[id] = p
      }
      return out
    },
    tokenize: (text) => model.tokenize(text, false),
    detokenize: (ids) => model.detokenize(ids),
    contextSize,
    bos: model.tokens.bos,
    addsBos: model.tokens.shouldPrependBosToken,
    async dispose() {
      await context.dispose()
      await model.dispose()
    },
  }
}
