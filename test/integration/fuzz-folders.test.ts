// Property test of model folders: mutate the JSON files of the test models (config.json and its quantization
// block, tokenizer.json, tokenizer_config.json, the index) and check that opening the model, reading its logical
// tensors and streaming its GGUF either work or fail with a SafetensorsError, each mutant within 30 s, the process
// under 1 GiB.
//
//   FUZZ_FOLDERS=100000 npx vitest run test/integration/fuzz-folders.test.ts   # more mutants (300 quick, 3000 under TEST_ALL)
//   FUZZ_FOLDERS_FROM=50000                                   # mutants from this index on (to split a run)
//   FUZZ_SEED=123 FUZZ_ONLY=4567                              # replay one mutant from a failure report
import { readFileSync } from 'node:fs'
import { expect, test } from 'vitest'
import { ggufStream } from '../../src/gguf-node.ts'
import { type ModelFolder, openModel, SafetensorsError } from '../../src/node.ts'
import { folderMutant, folderSeeds, memoryFolder } from '../folder-mutants.ts'
import { SEED } from '../mutants.ts'

const ONLY = process.env.FUZZ_ONLY === undefined ? undefined : Number(process.env.FUZZ_ONLY)

const FOLDERS = Number(process.env.FUZZ_FOLDERS ?? (process.env.TEST_QUICK === '1' ? 300 : 3000))
const FOLDERS_FROM = Number(process.env.FUZZ_FOLDERS_FROM ?? 0)
/** The longest a mutant may take, and the most memory the process may hold (the bounds). */
const MUTANT_MS = 30_000
const MAX_RSS = 1 << 30

/**
 * What the library makes of a folder: each step's outcome, 'ok' or a SafetensorsError's code. The model opened,
 * each logical tensor read, the GGUF streamed to its end into nothing; anything but a SafetensorsError is thrown.
 */
async function outcomesOf(folder: ModelFolder, dtype: 'F16' | 'Q8_0'): Promise<string[]> {
  const outcomes: string[] = []
  const step = async (work: () => Promise<unknown>) => {
    try {
      await work()
      outcomes.push('ok')
    } catch (error) {
      if (!(error instanceof SafetensorsError)) throw error
      outcomes.push(error.code)
    }
  }
  await step(async () => {
    const model = await openModel(folder)
    try {
      for (const name of model.names()) if (model.quantized?.has(name)) await step(() => model.getTensor(name))
    } finally {
      await model.close()
    }
  })
  await step(async () => {
    const reader = (await ggufStream(folder, { dtype })).getReader()
    while (!(await reader.read()).done);
  })
  return outcomes
}

/** The peak resident memory of this process so far: Linux's VmHWM, else the current RSS. */
function peakRss(): number {
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))
  return hwm ? Number(hwm[1]) * 1024 : process.memoryUsage().rss
}

test(
  `fuzz: ${FOLDERS} mutated model folders open, read and stream as GGUF, or fail with a SafetensorsError`,
  async () => {
    console.log(`fuzz: seed=${SEED} folders=${FOLDERS} from ${FOLDERS_FROM} (replay one: FUZZ_SEED=${SEED} FUZZ_ONLY=<index>)`)
    const corpus = folderSeeds()
    // The starting points must open and convert, or the mutants say little (those the GGUF converter does not take, their model).
    for (const seed of corpus) expect((await outcomesOf(memoryFolder(seed.files, seed.name), 'F16'))[0], seed.name).toBe('ok')
    const failures: string[] = []
    const outcomes = new Map<string, number>()
    let slowest = { ms: 0, index: -1 }
    const indices = ONLY === undefined ? Array.from({ length: FOLDERS }, (_, i) => FOLDERS_FROM + i) : [ONLY]
    for (const i of indices) {
      const { from, log, files } = folderMutant(SEED, i, corpus)
      const started = performance.now()
      try {
        for (const outcome of await outcomesOf(memoryFolder(files, from.name), i % 4 === 0 ? 'Q8_0' : 'F16'))
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
      } catch (error) {
        failures.push(
          `--- folder mutant ${i} (replay: FUZZ_SEED=${SEED} FUZZ_ONLY=${i}) from ${from.name}: ${log.join('; ')}\n${(error as Error)?.stack ?? error}`,
        )
        if (failures.length >= 10) break
      }
      const ms = performance.now() - started
      if (ms > slowest.ms) slowest = { ms, index: i }
      if ((i - FOLDERS_FROM + 1) % 5000 === 0)
        console.log(`fuzz: ${i - FOLDERS_FROM + 1} folder mutants, slowest ${Math.round(slowest.ms)} ms, peak RSS ${Math.round(peakRss() / 2 ** 20)} MiB`)
      if (ms > MUTANT_MS) failures.push(`--- folder mutant ${i} from ${from.name} took ${Math.round(ms)} ms: ${log.join('; ')}`)
    }
    const peak = peakRss()
    console.log(
      `fuzz: folder outcomes ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}; slowest mutant ${slowest.index} in ${Math.round(slowest.ms)} ms; peak RSS ${Math.round(peak / 2 ** 20)} MiB`,
    )
    expect(failures.length, `seed ${SEED}: ${failures.length} failure(s) (first 10 shown)\n${failures.join('\n')}`).toBe(0)
    expect(peak, 'peak RSS').toBeLessThan(MAX_RSS)
    if (ONLY === undefined && FOLDERS >= 300) {
      // The mutants must reach the readers' refusals, or this test proves little.
      for (const code of ['InvalidHeaderDeserialization', 'UnsupportedQuantization', 'UnsupportedConversion', 'ok'])
        expect(outcomes.get(code) ?? 0, `outcome ${code}`).toBeGreaterThan(0)
    }
  },
  120_000 + FOLDERS * 1000,
)
