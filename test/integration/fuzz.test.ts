// Property tests. Headers: mutate valid files at random and check that parseHeader and the independent
// reference validator agree on every mutant (same verdict, same error code, same tensors). Model folders: mutate
// the JSON files of the test models (config.json and its quantization block, tokenizer.json,
// tokenizer_config.json, the index) and check that opening the model, reading its logical tensors and streaming
// its GGUF either work or fail with a SafetensorsError, each mutant within 30 s, the process under 1 GiB. GGUF:
// openGguf gives every GGUF mutant a coded error or a valid read, soon and in bounded memory.
//
//   FUZZ_MUTANTS=100000 npx vitest run test/integration/fuzz.test.ts     # more header mutants (default 3000)
//   FUZZ_FOLDERS=100000 npx vitest run test/integration/fuzz.test.ts     # more folder mutants (default 300, 3000 under TEST_ALL)
//   FUZZ_FOLDERS_FROM=50000                                   # folder mutants from this index on (to split a run)
//   FUZZ_SEED=123 | FUZZ_SEED=random                          # another seed (default fixed, for CI)
//   FUZZ_SEED=123 FUZZ_ONLY=4567                              # replay one mutant from a failure report
//   FUZZ_GGUF_MUTANTS=1000000 npx vitest run test/integration/fuzz.test.ts -t GGUF   # GGUF mutants (3000 quick, else 50,000)
//   FUZZ_SEED=123 FUZZ_GGUF_ONLY=4567                         # replay one GGUF mutant
import { readFileSync } from 'node:fs'
import { expect, test } from 'vitest'
import { ggufStream, openGguf } from '../../src/gguf-node.ts'
import { type ModelFolder, openModel, parseHeader, SafetensorsError } from '../../src/node.ts'
import { escapeBytes, plainTensors } from '../helpers.ts'
import {
  build,
  EVERY_OUTCOME,
  folderMutant,
  folderSeeds,
  GGUF_OUTCOMES,
  ggufMutant,
  ggufSeeds,
  latin1ToBytes,
  memoryFolder,
  mutant,
  seeds,
} from '../mutants.ts'
import { type RefResult, type RefTensor, referenceValidate } from '../reference-validator.ts'

const COUNT = Number(process.env.FUZZ_MUTANTS ?? 3000)
const SEED = process.env.FUZZ_SEED === 'random' ? (Math.random() * 2 ** 32) >>> 0 : Number(process.env.FUZZ_SEED ?? 20250101) >>> 0
const ONLY = process.env.FUZZ_ONLY === undefined ? undefined : Number(process.env.FUZZ_ONLY)

// ---- comparison ---------------------------------------------------------------------------------

type Outcome = { ok: true; tensors: RefTensor[]; metadata: unknown } | { ok: false; code: string; message: string }

function runLibrary(bytes: Uint8Array): Outcome {
  try {
    const h = parseHeader(bytes)
    return {
      ok: true,
      metadata: h.metadata,
      tensors: plainTensors(h),
    }
  } catch (e) {
    if (e instanceof SafetensorsError) return { ok: false, code: e.code, message: e.message }
    throw e // anything else (RangeError, wasm trap, TypeError...) is a bug
  }
}

/** Tensors with equal (begin, end) may come in either order (the spec leaves ties open). */
function canonical(ts: RefTensor[]): RefTensor[] {
  return ts
    .slice()
    .sort((a, b) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1] || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

function inDataOrder(ts: RefTensor[]): boolean {
  for (let i = 1; i < ts.length; i++) {
    const [a, b] = [ts[i - 1].dataOffsets, ts[i].dataOffsets]
    if (a[0] > b[0] || (a[0] === b[0] && a[1] > b[1])) return false
  }
  return true
}

const sortedEntries = (m: unknown) => (m === null ? null : Object.entries(m as object).sort())

/** Why the two disagree, or null if they agree. */
function disagreement(lib: Outcome, ref: RefResult): string | null {
  if (lib.ok !== ref.ok) return `library ${lib.ok ? 'accepts' : 'rejects'}, reference ${ref.ok ? 'accepts' : 'rejects'}`
  if (!lib.ok && !ref.ok) {
    if (lib.code === ref.code || ref.altCodes?.includes(lib.code)) return null
    return `codes differ`
  }
  if (lib.ok && ref.ok) {
    if (!inDataOrder(lib.tensors)) return 'library tensors are not in data order'
    if (JSON.stringify(canonical(lib.tensors)) !== JSON.stringify(canonical(ref.tensors))) return 'tensors differ'
    if (JSON.stringify(sortedEntries(lib.metadata)) !== JSON.stringify(sortedEntries(ref.metadata))) return 'metadata differs'
  }
  return null
}

// ---- the test -----------------------------------------------------------------------------------

test(
  `fuzz: ${COUNT} mutants agree with the reference validator`,
  () => {
    console.log(`fuzz: seed=${SEED} mutants=${COUNT} (replay one: FUZZ_SEED=${SEED} FUZZ_ONLY=<index>)`)
    const corpus = seeds()
    for (const s of corpus) {
      // The starting points must be valid, or the mutants say little.
      const r = referenceValidate(build({ header: s.header, dataLength: s.dataLength, log: [] }))
      expect(r.ok ? 'ok' : r.code, `seed file ${s.name}`).toBe('ok')
    }

    const failures: string[] = []
    const outcomes = new Map<string, number>()
    const indices = ONLY === undefined ? Array.from({ length: COUNT }, (_, i) => i) : [ONLY]
    for (const i of indices) {
      const { from: s, m, bytes } = mutant(SEED, i, corpus)

      const ref = referenceValidate(bytes)
      let lib: Outcome
      let problem: string | null
      try {
        lib = runLibrary(bytes)
        problem = disagreement(lib, ref)
      } catch (e) {
        lib = { ok: false, code: `(threw ${String(e)})`, message: (e as Error)?.stack ?? '' }
        problem = 'parseHeader threw something other than SafetensorsError'
      }
      const key = ref.ok ? 'ok' : ref.code
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1)

      if (problem) {
        failures.push(
          [
            `--- mutant ${i} (seed ${SEED}; replay: FUZZ_SEED=${SEED} FUZZ_ONLY=${i}): ${problem}`,
            `from: ${s.name}; mutations: ${m.log.join('; ')}`,
            `library:   ${lib.ok ? `ok, ${lib.tensors.length} tensors` : `${lib.code}: ${lib.message}`}`,
            `reference: ${ref.ok ? `ok, ${ref.tensors.length} tensors` : `${ref.code}${ref.altCodes ? ` (or ${ref.altCodes.join(', ')})` : ''}: ${ref.reason}`}`,
            `file: ${bytes.length} bytes; header length field: ${m.n ?? 'correct'}`,
            `header: ${escapeBytes(latin1ToBytes(m.header), 65536)}`,
          ].join('\n'),
        )
        if (failures.length >= 10) break
      }
    }

    console.log('fuzz: reference outcomes', Object.fromEntries([...outcomes].sort()))
    expect(failures.length, `seed ${SEED}: ${failures.length} disagreement(s) (first 10 shown)\n${failures.join('\n')}`).toBe(0)
    if (ONLY === undefined && COUNT >= 2000) {
      // The mutator must reach every rule, or this test proves little.
      for (const code of EVERY_OUTCOME) {
        expect(outcomes.get(code) ?? 0, `mutants with outcome ${code}`).toBeGreaterThan(0)
      }
    }
  },
  60_000 + COUNT * 10,
)

// ---- model folders ------------------------------------------------------------------------------

const FOLDERS = Number(process.env.FUZZ_FOLDERS ?? (process.env.TEST_QUICK === '1' ? 300 : 3000))
const FOLDERS_FROM = Number(process.env.FUZZ_FOLDERS_FROM ?? 0)
/** The longest a mutant may take, and the most memory the process may hold (the issue's bounds). */
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

// ---- GGUF ---------------------------------------------------------------------------------------

const GGUF_COUNT = Number(process.env.FUZZ_GGUF_MUTANTS ?? (process.env.TEST_QUICK ? 3000 : 50_000))
const GGUF_ONLY = process.env.FUZZ_GGUF_ONLY === undefined ? undefined : Number(process.env.FUZZ_GGUF_ONLY)

/** The outcome of one GGUF mutant: an InvalidGguf error's rule, or 'ok' once a read of it checks out; else a problem. */
async function ggufOutcome(bytes: Uint8Array): Promise<{ outcome: string } | { problem: string }> {
  let file: Awaited<ReturnType<typeof openGguf>>
  try {
    file = await openGguf(bytes)
  } catch (error) {
    if (!(error instanceof SafetensorsError) || error.code !== 'InvalidGguf') return { problem: `openGguf threw ${String(error)}` }
    const rule = GGUF_OUTCOMES.find(([, pattern]) => pattern.test(error.message))
    return rule ? { outcome: rule[0] } : { problem: `an error no rule names: ${error.message}` }
  }
  const { header } = file
  const names = new Set(file.names())
  if (names.size !== header.tensors.length) return { problem: 'duplicate tensor names' }
  const inFile = header.tensors.filter((t) => t.byteLength > 0).sort((a, b) => a.offset - b.offset)
  for (const [i, t] of inFile.entries()) {
    if (!(t.offset >= header.dataStart && t.offset + t.byteLength <= bytes.length)) return { problem: `tensor ${t.name} outside the data` }
    if (i > 0 && t.offset < inFile[i - 1].offset + inFile[i - 1].byteLength) return { problem: `tensor ${t.name} overlaps another` }
  }
  // The first and the last tensor read: values, or a coded refusal of a type not read.
  for (const t of new Set([header.tensors[0], header.tensors.at(-1)])) {
    if (!t) continue
    try {
      const tensor = await file.getTensor(t.name)
      const elements = t.shape.reduce((a, b) => a * b, 1)
      if (tensor.data.length !== elements) return { problem: `tensor ${t.name}: ${tensor.data.length} values for ${elements} elements` }
    } catch (error) {
      if (!(error instanceof SafetensorsError) || error.code !== 'UnsupportedQuantization') return { problem: `getTensor(${t.name}) threw ${String(error)}` }
    }
  }
  return { outcome: 'ok' }
}

test(
  `fuzz: ${GGUF_COUNT} GGUF mutants, each a coded error or a valid read, soon and in bounded memory`,
  async () => {
    console.log(`fuzz GGUF: seed=${SEED} mutants=${GGUF_COUNT} (replay one: FUZZ_SEED=${SEED} FUZZ_GGUF_ONLY=<index>)`)
    const corpus = ggufSeeds()
    for (const s of corpus) expect(await ggufOutcome(s.bytes), `seed file ${s.name}`).toEqual({ outcome: 'ok' })
    const failures: string[] = []
    const outcomes = new Map<string, number>()
    let slowest = { ms: 0, index: -1 }
    const started = performance.now()
    const indices = GGUF_ONLY === undefined ? Array.from({ length: GGUF_COUNT }, (_, i) => i) : [GGUF_ONLY]
    for (const i of indices) {
      const { from, log, bytes } = ggufMutant(SEED, i, corpus)
      const t0 = performance.now()
      const result = await ggufOutcome(bytes)
      const ms = performance.now() - t0
      if (ms > slowest.ms) slowest = { ms, index: i }
      if ('problem' in result) {
        failures.push(`--- mutant ${i} (replay: FUZZ_SEED=${SEED} FUZZ_GGUF_ONLY=${i}) of ${from.name}: ${log.join('; ')}\n${result.problem}`)
        if (failures.length >= 10) break
      } else outcomes.set(result.outcome, (outcomes.get(result.outcome) ?? 0) + 1)
    }
    const seconds = (performance.now() - started) / 1000
    const maxRss = process.resourceUsage().maxRSS / 1024
    console.log(
      `fuzz GGUF: ${indices.length} mutants in ${seconds.toFixed(1)} s, slowest ${slowest.ms.toFixed(1)} ms (mutant ${slowest.index}), peak RSS ${maxRss.toFixed(0)} MiB; outcomes`,
      Object.fromEntries([...outcomes].sort()),
    )
    expect(failures, `seed ${SEED}: failures (first 10)`).toEqual([])
    // No hang: the largest seed is 156 KB.
    expect(slowest.ms).toBeLessThan(5000)
    if (GGUF_ONLY === undefined && GGUF_COUNT >= 2000) {
      // The mutator must reach every rule, or this test proves little.
      for (const [rule] of [['ok'], ...GGUF_OUTCOMES]) expect(outcomes.get(rule) ?? 0, `mutants with outcome ${rule}`).toBeGreaterThan(0)
    }
  },
  120_000 + GGUF_COUNT * 5,
)
