// Real files written by real tools, against golden headers produced by an independent Python script
// (test/fixtures/golden/make_golden.py, stdlib only). Regenerate with:
//   python3 test/fixtures/golden/make_golden.py
import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import { parseHeader, SafetensorsError } from '../../src/index.ts'
import { FIXTURES_GOLDEN, FIXTURES_REAL, goldenFiles, goldenName, plainTensors, realFixtures } from '../helpers.ts'

interface Golden {
  headerSize: number
  dataStart: number
  fileSize: number
  metadata: Record<string, string> | null
  tensors: Array<{ name: string; dtype: string; shape: number[]; dataOffsets: [number, number]; byteLength: number }>
}

const { valid, invalid } = realFixtures()
const read = (f: string) => new Uint8Array(readFileSync(FIXTURES_REAL + f))
const golden = (f: string): Golden => JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(f), 'utf8'))

function plain(h: ReturnType<typeof parseHeader>) {
  return {
    headerSize: h.headerSize,
    dataStart: h.dataStart,
    fileSize: h.fileSize,
    metadata: h.metadata,
    tensors: plainTensors(h),
  }
}

test('every real fixture has a golden file, and every golden file a fixture', () => {
  expect(valid.length).toBeGreaterThanOrEqual(20)
  for (const f of valid) expect(existsSync(FIXTURES_GOLDEN + goldenName(f)), f).toBe(true)
  expect(goldenFiles('header')).toEqual(valid.map((f) => goldenName(f)).sort())
})

describe.each(valid)('%s', (f) => {
  test('parseHeader equals the golden header', () => {
    const h = parseHeader(read(f))
    expect(plain(h)).toEqual(golden(f))
    for (const t of h.tensors) expect(Array.isArray(t.shape)).toBe(true)
  })

  test('header.tensor(name) finds every tensor', () => {
    const h = parseHeader(read(f))
    for (const g of golden(f).tensors) {
      const t = h.tensor(g.name)
      expect(t.name).toBe(g.name)
      expect(t.dtype).toBe(g.dtype)
      expect([t.dataOffsets[0], t.dataOffsets[1]]).toEqual(g.dataOffsets)
    }
  })

  test('only the first 8 + N bytes plus fileSize give the same header', () => {
    const bytes = read(f)
    const g = golden(f)
    const h = parseHeader(bytes.subarray(0, g.dataStart), { fileSize: bytes.length })
    expect(plain(h)).toEqual(g)
  })
})

describe.each(invalid)('%s', (f) => {
  test('throws SafetensorsError InvalidHeaderLength', () => {
    let err: unknown
    try {
      parseHeader(read(f))
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(SafetensorsError)
    expect((err as SafetensorsError).code).toBe('InvalidHeaderLength')
  })
})
