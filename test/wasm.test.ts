// The shared core's lifetime (src/wasm.ts): reused across calls, but not kept once a call made it huge.
import { readFileSync } from 'node:fs'
import { expect, test } from 'vitest'
import { parseHeader, SafetensorsError } from '../src/node.ts'
import { selectBackend, sharedCore } from '../src/wasm.ts'
import { FIXTURES_REAL, makeFile, realFixtures } from './helpers.ts'
import { mulberry32 } from './random.ts'

const small = makeFile('{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', 2)

test('small calls reuse one shared core', () => {
  parseHeader(small)
  const core = sharedCore()
  parseHeader(small)
  expect(sharedCore()).toBe(core)
})

test('after a huge header the shared core is dropped, so its memory can be collected', () => {
  parseHeader(small)
  const before = sharedCore()
  const keys = Array.from({ length: 2_000_000 }, (_, i) => `"k${i}":0`).join(',')
  const huge = makeFile(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":{${keys}}}}`, 2)
  expect(parseHeader(huge).tensors.map((t) => t.name)).toEqual(['w'])
  const after = sharedCore()
  expect(after).not.toBe(before)
  expect(after.memory.buffer.byteLength).toBeLessThan(1 << 20)
  expect(parseHeader(small).tensors).toHaveLength(1)
})

// The scanner has a SIMD string scan and a scalar one (runtimes without SIMD get the scalar build). The
// SIMD build is checked against the reference validator by the fuzz test; here the scalar build must
// give the same answer as the SIMD build on every real fixture and on mutants of them.
test('the scalar and SIMD builds of the header scanner agree on real files and their mutants', () => {
  const outcome = ([bytes, fileSize]: [Uint8Array, number]) => {
    try {
      const h = parseHeader(bytes, { fileSize })
      return JSON.stringify({ metadata: h.metadata, tensors: h.tensors })
    } catch (error) {
      if (!(error instanceof SafetensorsError)) throw error
      return `${error.code}: ${error.message}`
    }
  }
  const inputs: Array<[Uint8Array, number]> = []
  const next = mulberry32(2026)
  for (const name of realFixtures().valid) {
    const file = new Uint8Array(readFileSync(`${FIXTURES_REAL}${name}`))
    const n = Number(new DataView(file.buffer).getBigUint64(0, true))
    const head = file.subarray(0, 8 + n)
    inputs.push([head, file.length])
    for (let i = 0; i < 200; i++) {
      const mutant = head.slice()
      // Flip a byte inside the header, often near a string where the two scans differ most.
      mutant[8 + (next() % n)] = next() & 0xff
      inputs.push([mutant, file.length])
    }
  }
  const run = (backend: 'simd' | 'scalar') => {
    selectBackend(backend)
    return inputs.map(outcome)
  }
  try {
    const simd = run('simd')
    const scalar = run('scalar')
    expect(sharedCore().exports.simdBuild()).toBe(0)
    expect(scalar).toEqual(simd)
    expect(simd.filter((o) => o.startsWith('{')).length).toBeGreaterThan(realFixtures().valid.length)
  } finally {
    selectBackend('simd')
  }
})
