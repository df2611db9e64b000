// The values of every tensor of every real fixture, read through open(), against golden values that an
// independent tool computed once (numpy: test/fixtures/golden/make_values.py). Regenerate with
//   python3 test/fixtures/golden/make_values.py
// Raw reads must give the file's values in the contract's natural TypedArray; { dtype: 'F32' } must give
// numpy's float32 conversion exactly (compared as float32 bit patterns, NaN positions matching).
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { open } from '../../src/node.ts'
import { FIXTURES_GOLDEN, FIXTURES_REAL, goldenFiles, goldenName, realFixtures } from '../helpers.ts'
import { accurateSum, bytesOf, countingSource, errorOf, expectError, NATURAL, sha256 } from '../read-helpers.ts'

type Num = number | string
interface GoldenTensor {
  dtype: string
  shape: number[]
  count: number
  values?: Num[]
  head?: Num[]
  tail?: Num[]
  bits?: number[]
  bitsHead?: number[]
  bitsTail?: number[]
  f32?: Num[]
  f32Head?: Num[]
  f32Tail?: Num[]
  sum: Num
  sumSq: Num
  f32Sum: Num
  f32SumSq: Num
  rawSha256: string
  f32Sha256: string
}
interface Golden {
  file: string
  dataStart: number
  order: string[]
  tensors: Record<string, GoldenTensor>
}

const { valid } = realFixtures()
const golden = (f: string): Golden => JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(f, 'values'), 'utf8'))

/** A golden number: "NaN", "Infinity", "-Infinity" or a JSON number. */
function num(v: Num): number {
  if (v === 'NaN') return NaN
  if (v === 'Infinity') return Infinity
  if (v === '-Infinity') return -Infinity
  if (typeof v === 'string') return Number(v)
  return v
}

const RAW_BITS = new Set(['F16', 'BF16', 'F8_E4M3', 'F8_E5M2', 'F8_E8M0', 'F8_E4M3FNUZ', 'F8_E5M2FNUZ'])

/** [index, expected] pairs of what the golden file stores for a list (full, or head and tail). */
function positions<T>(g: GoldenTensor, full: T[] | undefined, head: T[] | undefined, tail: T[] | undefined): Array<[number, T]> {
  if (full) {
    expect(full.length).toBe(g.count)
    return full.map((v, i) => [i, v])
  }
  expect(head && tail, 'golden file has head and tail').toBeTruthy()
  return [...head!.map((v, i): [number, T] => [i, v]), ...tail!.map((v, i): [number, T] => [g.count - tail!.length + i, v])]
}

/** Raw element as the contract returns it, for a golden entry. */
function expectedRaw(dtype: string, v: Num): unknown {
  if (dtype === 'I64' || dtype === 'U64') return BigInt(v as string)
  if (dtype === 'F32') return Math.fround(num(v))
  return num(v)
}

function sameNumber(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number' && Number.isNaN(a) && Number.isNaN(b)) return true
  return Object.is(a, b)
}

function closeTo(actual: number, expected: Num, what: string): void {
  const e = num(expected)
  if (!Number.isFinite(e)) {
    expect(Object.is(actual, e) || (Number.isNaN(actual) && Number.isNaN(e)), `${what}: ${actual} vs ${e}`).toBe(true)
    return
  }
  const tolerance = 1e-12 * Math.max(1, Math.abs(e))
  expect(Math.abs(actual - e), `${what}: ${actual} vs ${e}`).toBeLessThanOrEqual(tolerance)
}

interface TensorLike {
  name: string
  dtype: string
  shape: number[]
  data: ArrayLike<number | bigint> & ArrayBufferView
}

function checkRaw(name: string, g: GoldenTensor, t: TensorLike): void {
  const where = `${name} (${g.dtype})`
  expect(t.name, where).toBe(name)
  expect(t.dtype, where).toBe(g.dtype)
  expect(Array.from(t.shape), where).toEqual(g.shape)
  expect(t.data.constructor.name, `${where}: array type`).toBe(NATURAL[g.dtype].name)
  expect(t.data.length, `${where}: length`).toBe(g.count)
  const list = RAW_BITS.has(g.dtype) ? positions<Num>(g, g.bits, g.bitsHead, g.bitsTail) : positions<Num>(g, g.values, g.head, g.tail)
  const bad: string[] = []
  for (const [i, v] of list) {
    const want = RAW_BITS.has(g.dtype) ? v : expectedRaw(g.dtype, v)
    if (!sameNumber(t.data[i], want) && bad.length < 5) bad.push(`[${i}] got ${String(t.data[i])}, expected ${String(want)}`)
  }
  expect(bad, `${where}: elements`).toEqual([])
  // Every element, exactly: the raw little-endian bytes hash to the file's bytes' hash.
  expect(sha256(bytesOf(t.data)), `${where}: sha256 of all the bytes`).toBe(g.rawSha256)
  if (!RAW_BITS.has(g.dtype)) {
    const xs = Array.from(t.data as ArrayLike<number | bigint>, Number)
    closeTo(accurateSum(xs), g.sum, `${where}: sum`)
    closeTo(accurateSum(xs.map((x) => x * x)), g.sumSq, `${where}: sum of squares`)
  }
}

function checkF32(name: string, g: GoldenTensor, t: TensorLike): void {
  const where = `${name} (${g.dtype} -> F32)`
  expect(t.name, where).toBe(name)
  expect(t.dtype, where).toBe('F32')
  expect(Array.from(t.shape), where).toEqual(g.shape)
  expect(t.data).toBeInstanceOf(Float32Array)
  expect(t.data.length, `${where}: length`).toBe(g.count)
  const list = g.dtype === 'F32' ? positions<Num>(g, g.values, g.head, g.tail) : positions<Num>(g, g.f32, g.f32Head, g.f32Tail)
  const bad: string[] = []
  for (const [i, v] of list) {
    const want = Math.fround(num(v))
    if (!sameNumber(t.data[i], want) && bad.length < 5) bad.push(`[${i}] got ${String(t.data[i])}, expected ${want}`)
  }
  expect(bad, `${where}: elements`).toEqual([])
  // Every element exactly: float32 bytes with NaNs made canonical, as make_values.py hashes them.
  const bits = new Uint32Array(t.data.length)
  const f = t.data as Float32Array
  const view = new Uint32Array(f.buffer, f.byteOffset, f.length)
  for (let i = 0; i < f.length; i++) bits[i] = Number.isNaN(f[i]) ? 0x7fc00000 : view[i]
  expect(sha256(bytesOf(bits)), `${where}: sha256 of all the float32 values`).toBe(g.f32Sha256)
  const xs = Array.from(f)
  closeTo(accurateSum(xs), g.f32Sum, `${where}: sum`)
  closeTo(accurateSum(xs.map((x) => x * x)), g.f32SumSq, `${where}: sum of squares`)
}

/** The file's bytes in a buffer where they start at an odd offset: no zero-copy view can be aligned. */
function unaligned(bytes: Uint8Array): Uint8Array {
  const buffer = new Uint8Array(bytes.length + 1)
  buffer.set(bytes, 1)
  return buffer.subarray(1)
}

test('every real fixture has a values golden file, and every values golden file a fixture', () => {
  expect(valid.length).toBeGreaterThanOrEqual(20)
  for (const f of valid) expect(existsSync(FIXTURES_GOLDEN + goldenName(f, 'values')), f).toBe(true)
  expect(goldenFiles('values')).toEqual(valid.map((f) => goldenName(f, 'values')).sort())
})

test('the golden files cover the dtypes the fixtures have', () => {
  const dtypes = new Set<string>()
  for (const f of valid) for (const t of Object.values(golden(f).tensors)) dtypes.add(t.dtype)
  for (const d of ['BOOL', 'U8', 'I8', 'U16', 'I16', 'U32', 'I32', 'I64', 'F16', 'BF16', 'F32', 'F64', 'F8_E4M3', 'F8_E5M2']) {
    expect(dtypes.has(d), d).toBe(true)
  }
})

describe.each(valid)('%s', (f) => {
  const path = FIXTURES_REAL + f
  const g = golden(f)
  const bytes = () => new Uint8Array(readFileSync(path))

  test('names() and info() list every golden tensor', async () => {
    const file = await open(path)
    try {
      expect([...file.names()].sort()).toEqual([...g.order].sort())
      for (const name of g.order) {
        const info = file.info(name)
        expect(info.dtype).toBe(g.tensors[name].dtype)
        expect(Array.from(info.shape)).toEqual(g.tensors[name].shape)
      }
    } finally {
      await file.close()
    }
  })

  // Every kind of input open() takes from memory or disk; each test reads all tensors through each.
  const sources = [
    ['a file path', () => path],
    ['a Uint8Array', () => bytes()],
    ['a Uint8Array at an odd offset', () => unaligned(bytes())],
    ['an ArrayBuffer', () => bytes().buffer],
    ['a Blob', () => new Blob([bytes()])],
  ] as const

  async function eachTensor(input: Parameters<typeof open>[0], check: (file: Awaited<ReturnType<typeof open>>, name: string) => Promise<void>) {
    const file = await open(input)
    try {
      for (const name of g.order) await check(file, name)
    } finally {
      await file.close()
    }
  }

  test.each(sources)('getTensor from %s gives the golden raw values', (_, input) =>
    eachTensor(input(), async (file, name) => checkRaw(name, g.tensors[name], (await file.getTensor(name)) as unknown as TensorLike)),
  )

  test.each(sources)("getTensor(name, { dtype: 'F32' }) from %s gives the golden float32 values", (_, input) =>
    eachTensor(input(), async (file, name) => checkF32(name, g.tensors[name], (await file.getTensor(name, { dtype: 'F32' })) as unknown as TensorLike)),
  )

  test('results stay valid while others are read (all F32 reads at once, checked afterwards)', async () => {
    const file = await open(bytes())
    try {
      const all = await Promise.all(g.order.map((name) => file.getTensor(name, { dtype: 'F32' })))
      const raw = await Promise.all(g.order.map((name) => file.getTensor(name)))
      g.order.forEach((name, i) => {
        checkF32(name, g.tensors[name], all[i] as unknown as TensorLike)
        checkRaw(name, g.tensors[name], raw[i] as unknown as TensorLike)
      })
    } finally {
      await file.close()
    }
  })

  test("a result's shape is its own: changing it leaves the header and later reads as they were", async () => {
    const file = await open(bytes())
    try {
      const name = g.order[0]
      const want = g.tensors[name].shape
      const results = [await file.getTensor(name), await file.getSlice(name, []), (await file.tensors()[Symbol.asyncIterator]().next()).value!]
      for (const t of results) {
        t.shape.push(99)
        expect(Array.from(file.info(name).shape)).toEqual(want)
      }
      expect((await file.getTensor(name)).shape).toEqual(want)
    } finally {
      await file.close()
    }
  })

  test('tensors() yields every tensor in file (data) order with the golden values', async () => {
    const file = await open(path)
    try {
      const seen: TensorLike[] = []
      for await (const t of file.tensors()) seen.push(t as unknown as TensorLike)
      expect(seen.map((t) => t.name)).toEqual(g.order)
      // Checked only after the iteration: earlier results must not be overwritten by later reads.
      for (const t of seen) checkRaw(t.name, g.tensors[t.name], t)
      const converted: TensorLike[] = []
      for await (const t of file.tensors({ dtype: 'F32' })) converted.push(t as unknown as TensorLike)
      expect(converted.map((t) => t.name)).toEqual(g.order)
      for (const t of converted) checkF32(t.name, g.tensors[t.name], t)
    } finally {
      await file.close()
    }
  })
})

describe('reading errors', () => {
  const FLUX = `${FIXTURES_REAL}fluxml__safetensors.jl__model.safetensors`
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'safetensors-values-'))
  })
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  test('a path that does not exist: Io', async () => {
    await expectError(() => open(join(dir, 'missing.safetensors')), 'Io')
  })

  test('a directory instead of a file: Io', async () => {
    await expectError(() => open(dir), 'Io')
  })

  test('a file that shrinks after open(): Io when a tensor past the new end is read', async () => {
    const path = join(dir, 'shrinks.safetensors')
    copyFileSync(FLUX, path)
    const file = await open(path)
    try {
      const last = golden('fluxml__safetensors.jl__model.safetensors').order.at(-1)!
      truncateSync(path, 3000)
      await expectError(() => file.getTensor(last), 'Io')
    } finally {
      await file.close()
    }
  })

  test('reading after close(): a SafetensorsError, not a raw Node error', async () => {
    const file = await open(FLUX)
    await file.close()
    await errorOf(() => file.getTensor('int8_3'))
  })

  test.each([
    ['float32_35', 'I8'],
    ['int64_35', 'BF16'],
    ['int32_35', 'F16'],
    ['bfloat16_35', 'F64'],
    ['float32_35', 'NOT_A_DTYPE'],
  ])('%s as %s: UnsupportedConversion, and no tensor data read', async (name, dtype) => {
    const counting = countingSource(new Uint8Array(readFileSync(FLUX)))
    const file = await open(counting.source)
    counting.reset()
    const error = await expectError(() => file.getTensor(name, { dtype: dtype as 'F32' }), 'UnsupportedConversion')
    expect(error.message).toContain(dtype)
    expect(counting.reads).toEqual([])
  })
})
