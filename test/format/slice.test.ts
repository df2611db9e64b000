// getSlice against an independent reference: random tensors written into a file by hand, sliced with
// random ranges, indices and nulls, and compared with a row-major reference slicer over the flat array.
// A counting RangeSource checks that a slice reads exactly the byte runs it covers, adjacent runs merged.
import { describe, expect, test } from 'vitest'
import { open } from '../../src/index.ts'
import { bf16ToNumber, buildFile, bytesOf, countingSource, expectError, expectSameElements, headerOf, rng, type TensorSpec } from '../read-helpers.ts'

type Range = [number, number] | number | null

interface Made {
  spec: TensorSpec
  /** The flat values as the reader returns them raw (bigint for I64, bits for BF16, nibbles for F4). */
  flat: Array<number | bigint>
  /** The float32 value of each element (undefined where the test does not convert). */
  f32?: number[]
}

const R = rng(20240611)

function makeTensor(name: string, dtype: string, shape: number[]): Made {
  const count = shape.reduce((a, b) => a * b, 1)
  const flat: Array<number | bigint> = []
  let bytes: Uint8Array
  let f32: number[] | undefined
  switch (dtype) {
    case 'F32': {
      const a = new Float32Array(count)
      for (let i = 0; i < count; i++) a[i] = (R.next() - 0.5) * 1000
      flat.push(...a)
      f32 = [...a]
      bytes = bytesOf(a)
      break
    }
    case 'F64': {
      const a = new Float64Array(count)
      for (let i = 0; i < count; i++) a[i] = (R.next() - 0.5) * 1e6 + R.next() * 1e-9
      flat.push(...a)
      f32 = [...a].map(Math.fround)
      bytes = bytesOf(a)
      break
    }
    case 'I64': {
      const a = new BigInt64Array(count)
      // Up to 2^53 in magnitude: Number(v) is exact, so Math.fround(Number(v)) is the one rounding.
      for (let i = 0; i < count; i++) a[i] = BigInt(Math.floor((R.next() - 0.5) * 2 ** 53))
      flat.push(...a)
      f32 = [...a].map((v) => Math.fround(Number(v)))
      bytes = bytesOf(a)
      break
    }
    case 'I16': {
      const a = new Int16Array(count)
      for (let i = 0; i < count; i++) a[i] = R.int(-32768, 32767)
      flat.push(...a)
      f32 = [...a]
      bytes = bytesOf(a)
      break
    }
    case 'I32': {
      const a = new Int32Array(count)
      for (let i = 0; i < count; i++) a[i] = R.int(-(2 ** 31), 2 ** 31 - 1)
      flat.push(...a)
      f32 = [...a].map(Math.fround)
      bytes = bytesOf(a)
      break
    }
    case 'BF16': {
      const a = new Uint16Array(count)
      for (let i = 0; i < count; i++) a[i] = R.int(0, 0xffff)
      flat.push(...a)
      f32 = [...a].map(bf16ToNumber)
      bytes = bytesOf(a)
      break
    }
    case 'U8': {
      const a = R.bytes(count)
      flat.push(...a)
      f32 = [...a]
      bytes = a
      break
    }
    case 'F4': {
      // Two elements a byte; the reference works on bytes, so element values are not needed here.
      if (count % 2) throw new Error('F4 test tensors need an even count')
      bytes = R.bytes(count / 2)
      for (let i = 0; i < count; i++) flat.push(i) // element index, used to find runs
      break
    }
    default:
      throw new Error(dtype)
  }
  return { spec: { name, dtype, shape, bytes }, flat, f32 }
}

const made: Made[] = [
  makeTensor('f32', 'F32', [5, 6, 7]),
  makeTensor('i64', 'I64', [4, 9]),
  makeTensor('bf16', 'BF16', [6, 5, 3]),
  makeTensor('u8', 'U8', [3, 4, 5, 2]),
  makeTensor('i16', 'I16', [7, 3]),
  makeTensor('f64', 'F64', [2, 3, 4]),
  makeTensor('i32vec', 'I32', [10]),
  makeTensor('f4', 'F4', [4, 6]),
  makeTensor('f4b', 'F4', [3, 4, 8]),
  makeTensor('f4odd', 'F4', [4, 5]),
  makeTensor('scalar', 'F32', []),
  makeTensor('empty', 'F32', [3, 0, 2]),
  makeTensor('i64scalar', 'I64', []),
]
const byName = new Map(made.map((m) => [m.spec.name, m]))
// Data order differs from the list order: put the bytes in a shuffled order so offsets are not trivial.
const FILE = buildFile(
  [...made].reverse().map((m) => m.spec),
  { made: 'by hand' },
)
const FILE_UNALIGNED = (() => {
  const f = buildFile(
    made.map((m) => m.spec),
    null,
    1,
  )
  const buf = new Uint8Array(f.length + 3)
  buf.set(f, 3)
  return buf.subarray(3)
})()

type Expected = { error: 'TooManySlices' | 'SliceOutOfRange' | 'MisalignedSlice' } | { shape: number[]; indices: number[]; runs: Array<[number, number]> }

/** The reference slicer: which flat element indices a slice selects, in row-major order. */
function reference(shape: number[], ranges: Range[], dtype: string): Expected {
  if (ranges.length > shape.length) return { error: 'TooManySlices' }
  const picks: number[][] = []
  const outShape: number[] = []
  for (let d = 0; d < shape.length; d++) {
    const r = d < ranges.length ? ranges[d] : null
    const dim = shape[d]
    if (r === null) {
      picks.push([...Array(dim).keys()])
      outShape.push(dim)
    } else if (typeof r === 'number') {
      if (!Number.isInteger(r) || r < 0 || r >= dim) return { error: 'SliceOutOfRange' }
      picks.push([r])
    } else {
      const [a, b] = r
      if (!Number.isInteger(a) || !Number.isInteger(b) || a < 0 || b < a || b > dim) return { error: 'SliceOutOfRange' }
      picks.push([...Array(b - a).keys()].map((k) => a + k))
      outShape.push(b - a)
    }
  }
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((x, y) => x * y, 1))
  let indices = [0]
  for (let d = 0; d < shape.length; d++) indices = indices.flatMap((base) => picks[d].map((p) => base + p * strides[d]))
  if (shape.length > 0 && picks.some((p) => p.length === 0)) indices = []
  // Maximal runs of consecutive elements, as [first element, element count].
  const runs: Array<[number, number]> = []
  for (const i of indices) {
    const last = runs[runs.length - 1]
    if (last && last[0] + last[1] === i) last[1]++
    else runs.push([i, 1])
  }
  if (dtype === 'F4' && runs.some(([first, n]) => first % 2 !== 0 || n % 2 !== 0)) return { error: 'MisalignedSlice' }
  return { shape: outShape, indices, runs }
}

const ELEMENT_BYTES: Record<string, number> = { F32: 4, F64: 8, I64: 8, I32: 4, I16: 2, BF16: 2, U8: 1 }

/** The raw data the reader must return for a reference selection. */
function expectedRaw(m: Made, indices: number[]): unknown[] {
  if (m.spec.dtype === 'F4') {
    const out: number[] = []
    for (let k = 0; k < indices.length; k += 2) out.push(m.spec.bytes[indices[k] >> 1])
    return out
  }
  return indices.map((i) => m.flat[i])
}

/**
 * Byte ranges of the file the slice must read: [file offset, length], one per maximal run; with a
 * requestCost, runs whose gap is shorter than it are one read (these tensors are too small to be split).
 */
function expectedReads(m: Made, runs: Array<[number, number]>, file: Uint8Array, requestCost = 0): Array<[number, number]> {
  const h = headerOf(file)
  const base = h.dataStart + h.tensors[m.spec.name].data_offsets[0]
  const eb = m.spec.dtype === 'F4' ? 0.5 : ELEMENT_BYTES[m.spec.dtype]
  const reads: Array<[number, number]> = []
  for (const [first, n] of runs) {
    const [offset, length] = [base + first * eb, n * eb]
    const last = reads[reads.length - 1]
    if (last && offset - (last[0] + last[1]) < requestCost) last[1] = offset + length - last[0]
    else reads.push([offset, length])
  }
  return reads
}

function randomRanges(shape: number[], invalid = false): Range[] {
  const n = R.next() < 0.2 ? R.int(0, shape.length) : shape.length
  const ranges: Range[] = []
  for (let d = 0; d < n; d++) {
    const dim = shape[d]
    const kind = R.next()
    if (kind < 0.25) ranges.push(null)
    else if (kind < 0.5 && dim > 0) ranges.push(R.int(0, dim - 1))
    else {
      const a = R.int(0, dim)
      ranges.push([a, R.int(a, dim)])
    }
  }
  if (invalid && shape.length > 0) {
    const d = R.int(0, n > 0 ? n - 1 : 0)
    while (ranges.length <= d) ranges.push(null)
    const dim = shape[d]
    const bad: Range[] = [dim, dim + R.int(1, 5), -1, 0.5, [R.int(1, dim + 1), 0], [0, dim + 1], [-1, 1], [0, 1.5], [NaN, 1]]
    ranges[d] = bad[R.int(0, bad.length - 1)]
  }
  return ranges
}

function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number' && Number.isNaN(a) && Number.isNaN(b)) return true
  return Object.is(a, b)
}

describe('random slices against the reference slicer', () => {
  const sources = [
    ['a RangeSource (read)', () => countingSource(FILE), FILE, 0],
    ['a RangeSource (readInto)', () => countingSource(FILE, { readInto: true }), FILE, 0],
    ['a RangeSource over an unaligned header', () => countingSource(FILE_UNALIGNED.slice()), FILE_UNALIGNED, 0],
    // Gaps under 256 bytes are read with the runs around them; these tensors are at most 840 bytes.
    ['a RangeSource with requestCost 256', () => countingSource(FILE, { requestCost: 256 }), FILE, 256],
    ['a RangeSource with requestCost 256 (readInto)', () => countingSource(FILE, { readInto: true, requestCost: 256 }), FILE, 256],
  ] as Array<[string, () => ReturnType<typeof countingSource>, Uint8Array, number]>

  test.each(sources)('from %s: values, shapes and exactly the bytes read', async (_, makeSource, file, requestCost) => {
    const counting = makeSource()
    const f = await open(counting.source)
    let checked = 0
    let misaligned = 0
    let merged = 0
    for (let round = 0; round < 400; round++) {
      const m = made[R.int(0, made.length - 1)]
      const ranges = randomRanges(m.spec.shape)
      const want = reference(m.spec.shape, ranges, m.spec.dtype)
      const what = `${m.spec.name} [${m.spec.shape}] ranges ${JSON.stringify(ranges)}`
      counting.reset()
      if ('error' in want) {
        expect(want.error, what).toBe('MisalignedSlice')
        misaligned++
        await expectError(() => f.getSlice(m.spec.name, ranges), 'MisalignedSlice')
        expect(counting.reads, `${what}: nothing read for a refused slice`).toEqual([])
        continue
      }
      const t = await f.getSlice(m.spec.name, ranges)
      expect(t.name, what).toBe(m.spec.name)
      expect(t.dtype, what).toBe(m.spec.dtype)
      expect(Array.from(t.shape), what).toEqual(want.shape)
      expectSameElements(Array.from(t.data as ArrayLike<number | bigint>), expectedRaw(m, want.indices), what)
      const reads = [...counting.reads].sort((a, b) => a[0] - b[0])
      expect(reads, `${what}: reads`).toEqual(expectedReads(m, want.runs, file, requestCost))
      if (reads.length < want.runs.length) merged++
      if (m.f32) {
        counting.reset()
        const c = await f.getSlice(m.spec.name, ranges, { dtype: 'F32' })
        expect(c.dtype, what).toBe('F32')
        expect(c.data, what).toBeInstanceOf(Float32Array)
        expect(Array.from(c.shape), what).toEqual(want.shape)
        const wantF32 = want.indices.map((i) => m.f32![i])
        const bad = wantF32.map((v, k) => [k, v, (c.data as Float32Array)[k]] as const).filter(([, v, got]) => !sameValue(got, v))
        expect(c.data.length, what).toBe(wantF32.length)
        expect(bad.slice(0, 3), `${what} as F32`).toEqual([])
        // Converting does not read more: the same source bytes.
        expect(
          [...counting.reads].sort((a, b) => a[0] - b[0]),
          `${what}: reads for F32`,
        ).toEqual(expectedReads(m, want.runs, file, requestCost))
      }
      checked++
    }
    expect(checked).toBeGreaterThan(300)
    expect(misaligned).toBeGreaterThan(5)
    // With a requestCost, many slices join runs; without, none may.
    if (requestCost > 0) expect(merged).toBeGreaterThan(20)
    else expect(merged).toBe(0)
  })

  test('from a Uint8Array: the same values', async () => {
    const f = await open(FILE_UNALIGNED)
    for (let round = 0; round < 200; round++) {
      const m = made[R.int(0, made.length - 1)]
      const ranges = randomRanges(m.spec.shape)
      const want = reference(m.spec.shape, ranges, m.spec.dtype)
      if ('error' in want) continue
      const t = await f.getSlice(m.spec.name, ranges)
      const what = `${m.spec.name} ${JSON.stringify(ranges)}`
      expect(Array.from(t.shape), what).toEqual(want.shape)
      expectSameElements(Array.from(t.data as ArrayLike<number | bigint>), expectedRaw(m, want.indices), what)
    }
  })

  test('random invalid ranges: SliceOutOfRange or TooManySlices, as the reference says, and nothing read', async () => {
    const counting = countingSource(FILE)
    const f = await open(counting.source)
    let n = 0
    for (let round = 0; round < 300; round++) {
      const m = made[R.int(0, made.length - 1)]
      let ranges = randomRanges(m.spec.shape, true)
      if (R.next() < 0.15) ranges = [...ranges, ...Array(R.int(1, 3)).fill(null)]
      if (ranges.length <= m.spec.shape.length && m.spec.shape.length === 0) continue
      const want = reference(m.spec.shape, ranges, m.spec.dtype)
      if (!('error' in want) || want.error === 'MisalignedSlice') continue
      counting.reset()
      const what = `${m.spec.name} [${m.spec.shape}] ranges ${JSON.stringify(ranges)}`
      const e = await expectError(() => f.getSlice(m.spec.name, ranges), want.error).catch((error) => {
        throw new Error(`${what}: ${(error as Error).message}`)
      })
      expect(e.message, what).toContain(m.spec.name)
      expect(counting.reads, what).toEqual([])
      n++
    }
    expect(n).toBeGreaterThan(100)
  })
})

describe('slice rules', () => {
  const openFile = async () => {
    const counting = countingSource(FILE)
    return { f: await open(counting.source), counting }
  }

  test('TooManySlices: more ranges than dimensions', async () => {
    const { f } = await openFile()
    await expectError(() => f.getSlice('f32', [null, null, null, null]), 'TooManySlices')
    await expectError(() => f.getSlice('f32', [0, 0, 0, 0]), 'TooManySlices')
    await expectError(
      () =>
        f.getSlice('i32vec', [
          [0, 1],
          [0, 1],
        ]),
      'TooManySlices',
    )
    await expectError(() => f.getSlice('scalar', [0]), 'TooManySlices')
    await expectError(() => f.getSlice('scalar', [null]), 'TooManySlices')
  })

  test.each([
    ['start > stop', [[3, 2]]],
    ['stop > dim', [[0, 6]]],
    ['start > dim', [[6, 6]]],
    ['index = dim', [5]],
    ['index > dim', [7]],
    ['negative index', [-1]],
    ['negative start', [[-1, 2]]],
    ['negative stop', [[0, -1]]],
    ['non-integer index', [1.5]],
    ['non-integer start', [[0.5, 2]]],
    ['non-integer stop', [[0, 2.5]]],
    ['NaN index', [NaN]],
    ['NaN stop', [[0, NaN]]],
    ['infinite stop', [[0, Infinity]]],
    ['out of range in the last dimension', [null, null, [0, 8]]],
    ['index out of range in the middle dimension', [0, 6, 0]],
  ] as Array<[string, Range[]]>)('SliceOutOfRange: %s', async (_, ranges) => {
    const { f, counting } = await openFile()
    counting.reset()
    const e = await expectError(() => f.getSlice('f32', ranges), 'SliceOutOfRange')
    expect(e.message).toContain('f32')
    expect(counting.reads).toEqual([])
  })

  test('an index into a zero-sized dimension is out of range', async () => {
    const { f } = await openFile()
    await expectError(() => f.getSlice('empty', [null, 0]), 'SliceOutOfRange')
  })

  test.each([
    ['f4', [null, [1, 3]]],
    ['f4', [null, [0, 3]]],
    ['f4', [null, 2]],
    ['f4', [1, [1, 2]]],
    ['f4odd', [[1, 2]]],
    ['f4odd', [1]],
    ['f4odd', [[1, 4]]],
    ['f4odd', [null, [0, 2]]],
    ['f4b', [null, null, [1, 5]]],
    ['f4b', [null, null, 3]],
  ] as Array<[string, Range[]]>)('MisalignedSlice: %s %j splits a byte', async (name, ranges) => {
    expect(reference(byName.get(name)!.spec.shape, ranges, 'F4')).toEqual({ error: 'MisalignedSlice' })
    const { f, counting } = await openFile()
    counting.reset()
    await expectError(() => f.getSlice(name, ranges), 'MisalignedSlice')
    expect(counting.reads).toEqual([])
  })

  test.each([
    ['f4', [null, [2, 4]], [4, 2]],
    ['f4', [[1, 3]], [2, 6]],
    ['f4', [2], [6]],
    ['f4odd', [[0, 2]], [2, 5]],
    ['f4odd', [[2, 4], null], [2, 5]],
    ['f4b', [1, [1, 3], [4, 8]], [2, 4]],
    ['f4b', [null, 2, [0, 2]], [3, 2]],
  ] as Array<[string, Range[], number[]]>)('F4 runs of whole bytes are fine: %s %j', async (name, ranges, shape) => {
    const m = byName.get(name)!
    const want = reference(m.spec.shape, ranges, 'F4')
    if ('error' in want) throw new Error('the reference refuses this slice')
    const { f } = await openFile()
    const t = await f.getSlice(name, ranges)
    expect(t.shape).toEqual(shape)
    expect(t.data).toBeInstanceOf(Uint8Array)
    expect(Array.from(t.data as Uint8Array)).toEqual(expectedRaw(m, want.indices))
  })

  test('indexed dimensions are dropped from the shape', async () => {
    const { f } = await openFile()
    const f32 = byName.get('f32')!
    const a = await f.getSlice('f32', [1, null, 2])
    expect(a.shape).toEqual([6])
    expect(Array.from(a.data as Float32Array)).toEqual([0, 1, 2, 3, 4, 5].map((j) => f32.flat[1 * 42 + j * 7 + 2]))
    const b = await f.getSlice('f32', [4, 5, 6])
    expect(b.shape).toEqual([])
    expect(Array.from(b.data as Float32Array)).toEqual([f32.flat[4 * 42 + 5 * 7 + 6]])
    const c = await f.getSlice('f32', [[1, 2], 0])
    expect(c.shape).toEqual([1, 7])
    const d = await f.getSlice('i64', [null, 8])
    expect(d.shape).toEqual([4])
    expect(Array.from(d.data as BigInt64Array)).toEqual([0, 1, 2, 3].map((i) => byName.get('i64')!.flat[i * 9 + 8]))
  })

  test('fewer ranges than dimensions: the rest are taken whole', async () => {
    const { f } = await openFile()
    const t = await f.getSlice('f32', [[2, 4]])
    expect(t.shape).toEqual([2, 6, 7])
    expect(Array.from(t.data as Float32Array)).toEqual(byName.get('f32')!.flat.slice(2 * 42, 4 * 42))
    const all = await f.getSlice('u8', [])
    expect(all.shape).toEqual([3, 4, 5, 2])
    expect(Array.from(all.data as Uint8Array)).toEqual(byName.get('u8')!.flat)
  })

  test('a scalar tensor with [] ranges', async () => {
    const { f } = await openFile()
    const s = await f.getSlice('scalar', [])
    expect(s.shape).toEqual([])
    expect(Array.from(s.data as Float32Array)).toEqual(byName.get('scalar')!.flat)
    const i = await f.getSlice('i64scalar', [])
    expect(i.shape).toEqual([])
    expect(i.data).toBeInstanceOf(BigInt64Array)
    expect(Array.from(i.data as BigInt64Array)).toEqual(byName.get('i64scalar')!.flat)
    const c = await f.getSlice('i64scalar', [], { dtype: 'F32' })
    expect(Array.from(c.data as Float32Array)).toEqual(byName.get('i64scalar')!.f32)
  })

  test('empty selections: zero-length data and no bytes read', async () => {
    const { f, counting } = await openFile()
    counting.reset()
    const a = await f.getSlice('f32', [[2, 2]])
    expect(a.shape).toEqual([0, 6, 7])
    expect(a.data.length).toBe(0)
    const b = await f.getSlice('empty', [[1, 3]])
    expect(b.shape).toEqual([2, 0, 2])
    expect(b.data.length).toBe(0)
    const c = await f.getSlice('bf16', [null, [3, 3]], { dtype: 'F32' })
    expect(c.shape).toEqual([6, 0, 3])
    expect(c.data).toBeInstanceOf(Float32Array)
    expect(c.data.length).toBe(0)
    expect(counting.bytesRead()).toBe(0)
  })

  test('a row slice reads exactly the rows, in one read', async () => {
    const { f, counting } = await openFile()
    const h = headerOf(FILE)
    const base = h.dataStart + h.tensors.f32.data_offsets[0]
    const row = 6 * 7 * 4
    counting.reset()
    await f.getSlice('f32', [[1, 4]])
    expect(counting.reads).toEqual([[base + row, 3 * row]])
    counting.reset()
    await f.getSlice('f32', [3])
    expect(counting.reads).toEqual([[base + 3 * row, row]])
    // Rows of the middle dimension inside one outer index: one run.
    counting.reset()
    await f.getSlice('f32', [2, [1, 5]])
    expect(counting.reads).toEqual([[base + 2 * row + 1 * 28, 4 * 28]])
    // BF16 converted to F32 still reads 2 bytes an element.
    const hb = h.dataStart + h.tensors.bf16.data_offsets[0]
    counting.reset()
    await f.getSlice('bf16', [[2, 3]], { dtype: 'F32' })
    expect(counting.reads).toEqual([[hb + 2 * 15 * 2, 15 * 2]])
  })

  test('an unknown tensor name: TensorNotFound', async () => {
    const { f } = await openFile()
    await expectError(() => f.getSlice('nope', []), 'TensorNotFound')
    await expectError(() => f.getTensor('nope'), 'TensorNotFound')
  })

  test('errors come as rejected promises, not synchronous throws', async () => {
    const { f } = await openFile()
    const calls: Array<[string, () => unknown]> = [
      ['getSlice TooManySlices', () => f.getSlice('scalar', [0])],
      ['getSlice SliceOutOfRange', () => f.getSlice('f32', [9])],
      ['getSlice MisalignedSlice', () => f.getSlice('f4', [null, 1])],
      ['getSlice TensorNotFound', () => f.getSlice('nope', [])],
      ['getTensor TensorNotFound', () => f.getTensor('nope')],
    ]
    for (const [what, call] of calls) {
      let result: unknown
      try {
        result = call()
      } catch (error) {
        throw new Error(`${what} threw synchronously (${(error as Error).message}); a Promise-returning method should reject`)
      }
      expect(result, what).toBeInstanceOf(Promise)
      await expect(result, what).rejects.toHaveProperty('code')
    }
  })
})
