// Property test of GGUF headers: openGguf gives every mutant of the reader fixtures a coded error or a valid read,
// soon and in bounded memory.
//
//   FUZZ_GGUF_MUTANTS=1000000 npx vitest run test/integration/fuzz-gguf.test.ts   # more mutants (3000 quick, else 50,000)
//   FUZZ_SEED=123 FUZZ_GGUF_ONLY=4567                         # replay one mutant
import { expect, test } from 'vitest'
import { openGguf } from '../../src/gguf-node.ts'
import { SafetensorsError } from '../../src/node.ts'
import { GGUF_OUTCOMES, ggufMutant, ggufSeeds } from '../gguf-mutants.ts'
import { SEED } from '../mutants.ts'

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
