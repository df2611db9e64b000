// Reads with { dtype: 'F16' } and { dtype: 'BF16' } from BF16, F8 and F64 tensors, bit-exact against the
// independent reference, on both paths of src/read/file.ts: small results through the
// shared core in chunks, large widening (and same-width) results converted in a memory of their own.
import { describe, expect, test } from 'vitest'
import { DEDICATED_MIN_BYTES } from '../../src/core/convert.ts'
import { open } from '../../src/index.ts'
import { referenceConvert } from '../float-reference.ts'
import { buildFile, bytesOf, expectSameBytes, rng } from '../read-helpers.ts'

/** Every 16-bit pattern, or every byte, as little-endian bytes. */
function everyCode(bytes: 1 | 2): Uint8Array {
  const codes = bytes === 1 ? new Uint8Array(256) : new Uint16Array(65536)
  codes.forEach((_, i) => (codes[i] = i))
  return bytesOf(codes)
}

/** Doubles: random bit patterns, then values near F16 and BF16 ties, subnormals and overflow. */
function doubles(): Uint8Array {
  const random = new Float64Array(rng(17).bytes(4096 * 8).buffer)
  const near = [1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -8 + 2 ** -40, 65520, 65519, 2 ** -25, 2 ** -25 + 2 ** -60, 2 ** -134 * 1.5, 1e300, -5e-324, NaN, -Infinity]
  return bytesOf(Float64Array.from([...random, ...near]))
}

/** `tile` repeated until it holds at least `bytes` bytes. */
function tiled(tile: Uint8Array, bytes: number): Uint8Array {
  const out = new Uint8Array(Math.ceil(bytes / tile.length) * tile.length)
  for (let at = 0; at < out.length; at += tile.length) out.set(tile, at)
  return out
}

const SMALL = [
  { name: 'bf16', dtype: 'BF16', bytes: everyCode(2), width: 2 },
  { name: 'f8', dtype: 'F8_E5M2', bytes: everyCode(1), width: 1 },
  { name: 'f8fnuz', dtype: 'F8_E4M3FNUZ', bytes: everyCode(1), width: 1 },
  { name: 'f64', dtype: 'F64', bytes: doubles(), width: 8 },
] as const

describe('reads converted to F16 and BF16', () => {
  const file = buildFile(SMALL.map((t) => ({ name: t.name, dtype: t.dtype, shape: [t.bytes.length / t.width], bytes: t.bytes })))
  const cases = SMALL.flatMap((t) => (['F16', 'BF16'] as const).filter((to) => to !== t.dtype).map((to) => [t.name, t.dtype, to] as const))

  test.each(cases)('getTensor(%s, { dtype: %s -> %s }) is the reference, in a plain array of its size', async (name, from, to) => {
    const f = await open(file)
    const t = await f.getTensor(name, { dtype: to })
    expect(t.dtype).toBe(to)
    expect(t.data).toBeInstanceOf(Uint16Array)
    expect(t.data.buffer.byteLength).toBe(t.data.byteLength)
    const source = SMALL.find((s) => s.name === name)!.bytes
    expectSameBytes(bytesOf(t.data), referenceConvert(from, to, source), `${name} as ${to}`)
  })

  test('tensors({ dtype }) converts every tensor the same way', async () => {
    const f = await open(file)
    for await (const t of f.tensors({ dtype: 'BF16' })) {
      const source = SMALL.find((s) => s.name === t.name)!
      const expected = source.dtype === 'BF16' ? source.bytes : referenceConvert(source.dtype, 'BF16', source.bytes)
      expectSameBytes(bytesOf(t.data), expected, t.name)
    }
  })

  // On the calling thread (workers: 0; the pool's results are test/pool/read.test.ts's), results of
  // DEDICATED_MIN_BYTES or more: widening and same-width ones land in a memory of their own (a view into it,
  // past its static data); narrowing ones stay plain arrays.
  test.each([
    ['F8_E4M3', 'F16', everyCode(1), DEDICATED_MIN_BYTES / 2, true],
    ['BF16', 'F16', everyCode(2), DEDICATED_MIN_BYTES, true],
    ['F64', 'BF16', doubles(), DEDICATED_MIN_BYTES * 4, false],
  ] as const)('a large %s tensor read as %s', async (from, to, tile, inBytes, dedicated) => {
    const bytes = tiled(tile, inBytes)
    const width = from === 'F64' ? 8 : from === 'BF16' ? 2 : 1
    const f = await open(buildFile([{ name: 'w', dtype: from, shape: [bytes.length / width], bytes }]), { workers: 0 })
    const t = await f.getTensor('w', { dtype: to })
    expect(t.data.byteLength).toBe((bytes.length / width) * 2)
    expect(t.data.buffer.byteLength > t.data.byteLength).toBe(dedicated)
    const expected = referenceConvert(from, to, tile)
    const out = bytesOf(t.data)
    for (let at = 0; at < out.length; at += expected.length) expectSameBytes(out.subarray(at, at + expected.length), expected, `${from} -> ${to} at byte ${at}`)
  })
})
