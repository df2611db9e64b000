// tensorStats against a plain float64 reference written here.
import { describe, expect, test } from 'vitest'
import { tensorStats } from '../../src/index.ts'

function reference(data: Float32Array, bins: number) {
  const finite = [...data].filter(Number.isFinite)
  const min = finite.reduce((a, b) => Math.min(a, b), Infinity)
  const max = finite.reduce((a, b) => Math.max(a, b), -Infinity)
  const mean = finite.reduce((a, b) => a + b, 0) / finite.length
  const std = Math.sqrt(finite.reduce((a, b) => a + (b - mean) ** 2, 0) / finite.length)
  const counts = new Array(bins).fill(0)
  for (const x of finite) counts[max > min ? Math.min(bins - 1, Math.floor((x - min) * (bins / (max - min)))) : 0]++
  return {
    min,
    max,
    mean,
    std,
    counts,
    nan: data.filter(Number.isNaN).length,
    posInf: data.filter((x) => x === Infinity).length,
    negInf: data.filter((x) => x === -Infinity).length,
  }
}

describe('tensorStats', () => {
  test('random data across several chunks, with NaN and infinities mixed in', () => {
    let seed = 7
    const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 200 - 50
    const data = Float32Array.from({ length: 150_001 }, (_, i) => (i % 997 === 0 ? NaN : i % 1499 === 0 ? Infinity : i % 2003 === 0 ? -Infinity : random()))
    const got = tensorStats(data, { bins: 17 })
    const want = reference(data, 17)
    expect(got.count).toBe(data.length)
    expect(got.finite).toBe(data.length - want.nan - want.posInf - want.negInf)
    expect([got.nan, got.posInf, got.negInf]).toEqual([want.nan, want.posInf, want.negInf])
    expect(got.min).toBe(want.min)
    expect(got.max).toBe(want.max)
    expect(got.mean).toBeCloseTo(want.mean, 9)
    expect(got.std).toBeCloseTo(want.std, 9)
    expect(got.histogram.counts).toEqual(want.counts)
    expect(got.histogram.counts.reduce((a, b) => a + b, 0)).toBe(got.finite)
  })

  test('constant data lands in the first bin; std is 0', () => {
    const got = tensorStats(new Float32Array(10).fill(3), { bins: 4 })
    expect(got).toMatchObject({ min: 3, max: 3, mean: 3, std: 0 })
    expect(got.histogram.counts).toEqual([10, 0, 0, 0])
  })

  test('no finite values: NaN summary, empty histogram', () => {
    const got = tensorStats(new Float32Array([NaN, Infinity]), { bins: 2 })
    expect(got.finite).toBe(0)
    expect(got.mean).toBeNaN()
    expect(got.histogram.counts).toEqual([0, 0])
    expect(tensorStats(new Float32Array(0)).count).toBe(0)
  })

  test('bins out of range is a RangeError', () => {
    expect(() => tensorStats(new Float32Array(1), { bins: 0 })).toThrow(RangeError)
  })
})
