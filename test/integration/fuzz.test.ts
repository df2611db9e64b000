// Property test of headers: mutate valid files at random and check that parseHeader and the independent
// reference validator agree on every mutant (same verdict, same error code, same tensors). It runs in Node and in
// every browser of the browser run.
//
//   FUZZ_MUTANTS=100000 npx vitest run test/integration/fuzz.test.ts     # more mutants (default 3000)
//   FUZZ_SEED=123 | FUZZ_SEED=random                          # another seed (default fixed, for CI)
//   FUZZ_SEED=123 FUZZ_ONLY=4567                              # replay one mutant from a failure report
import { expect, test } from 'vitest'
import { parseHeader, SafetensorsError } from '../../src/index.ts'
import { escapeBytes, plainTensors } from '../helpers.ts'
import { build, EVERY_OUTCOME, latin1ToBytes, mutant, SEED, seeds } from '../mutants.ts'
import { type RefResult, type RefTensor, referenceValidate } from '../reference-validator.ts'

const COUNT = Number(process.env.FUZZ_MUTANTS ?? 3000)
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
