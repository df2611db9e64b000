// Byte order: (a) legacy files whose tensor data was written big-endian, read with { byteOrder: 'big' };
// (b) a big-endian host, simulated (simulateHostByteOrder('big')): the typed arrays handed out must then
// hold big-endian bytes, which the test checks through DataView reads with littleEndian = false.
// The test files are written here with DataView, value by value; nothing comes from the library.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { simulateHostByteOrder } from '../../src/core/byte-order.ts'
import * as convertModule from '../../src/core/convert.ts'
import { open } from '../../src/node.ts'
import { DTYPE_BITS } from '../dtype-table.ts'
import { bf16ToNumber, buildFile, bytesOf, countingSource, expectSameBytes, type TensorSpec } from '../read-helpers.ts'

interface Spec {
  name: string
  dtype: 'F32' | 'F64' | 'I16' | 'U16' | 'I32' | 'U32' | 'I64' | 'U64' | 'BF16' | 'F16' | 'U8'
  shape: number[]
  /** Values as the reader returns them raw: numbers, bigints, or raw bits for BF16/F16. */
  values: ArrayLike<number | bigint>
  /** The float32 values of the F32 conversion (undefined: not converted in this test). */
  f32?: ArrayLike<number>
}

/** n BF16 bit patterns (both signs, many exponents) and their float32 values, by definition. */
function bf16Series(n: number): { bits: Uint16Array; f32: Float32Array } {
  const bits = new Uint16Array(n)
  for (let i = 0; i < n; i++) bits[i] = (0x3c00 + ((i * 7919) % 0x0800)) ^ (i % 2 ? 0x8000 : 0)
  // bfloat16 -> float32: the bits are the high half of a float32.
  const high = new Uint32Array(n)
  for (let i = 0; i < n; i++) high[i] = bits[i] << 16
  const f32 = new Float32Array(high.buffer)
  return { bits, f32 }
}
// A mid-sized result (1.2 MB), and one above the size where results get a wasm memory of their own
// (src/core/convert.ts DEDICATED_MIN_BYTES, 32 MiB when this was written), so both conversion paths run.
const DEDICATED = (convertModule as { DEDICATED_MIN_BYTES?: number }).DEDICATED_MIN_BYTES ?? 32 << 20
const mid = bf16Series(300_000)
const huge = bf16Series(Math.ceil((DEDICATED + (4 << 20)) / 4))

const SPECS: Spec[] = [
  {
    name: 'f32',
    dtype: 'F32',
    shape: [2, 3],
    values: [1.5, -2.75, 3.1415927410125732, -0, 1e-40, 65504.125].map(Math.fround),
    f32: [1.5, -2.75, 3.1415927410125732, -0, 1e-40, 65504.125].map(Math.fround),
  },
  {
    name: 'f64',
    dtype: 'F64',
    shape: [2, 2],
    values: [Math.PI, -1e300, 5e-324, 123456789.12345679],
    f32: [Math.PI, -1e300, 5e-324, 123456789.12345679].map(Math.fround),
  },
  { name: 'i16', dtype: 'I16', shape: [5], values: [1, -2, 0x1234, -32768, 32767], f32: [1, -2, 0x1234, -32768, 32767] },
  { name: 'u16', dtype: 'U16', shape: [3], values: [0x0102, 0xfffe, 0x8001], f32: [0x0102, 0xfffe, 0x8001] },
  { name: 'i32', dtype: 'I32', shape: [3], values: [0x01020304, -5, -2147483648], f32: [0x01020304, -5, -2147483648].map(Math.fround) },
  { name: 'u32', dtype: 'U32', shape: [2], values: [0xdeadbeef, 7], f32: [0xdeadbeef, 7].map(Math.fround) },
  { name: 'i64', dtype: 'I64', shape: [3], values: [1n, -2n, 0x0102030405060708n], f32: [1, -2, Math.fround(Number(0x0102030405060708n))] },
  { name: 'u64', dtype: 'U64', shape: [2], values: [0x8000000000000001n, 42n] },
  {
    name: 'bf16',
    dtype: 'BF16',
    shape: [2, 3],
    values: [0x3fc0, 0xc030, 0x0001, 0x7f80, 0x8000, 0x4049],
    f32: [0x3fc0, 0xc030, 0x0001, 0x7f80, 0x8000, 0x4049].map(bf16ToNumber),
  },
  { name: 'f16', dtype: 'F16', shape: [3], values: [0x3c00, 0xc500, 0x0001] },
  { name: 'u8', dtype: 'U8', shape: [4], values: [1, 2, 3, 250], f32: [1, 2, 3, 250] },
  { name: 'bigbf16', dtype: 'BF16', shape: [mid.bits.length], values: mid.bits, f32: mid.f32 },
  { name: 'hugebf16', dtype: 'BF16', shape: [huge.bits.length], values: huge.bits, f32: huge.f32 },
]

/** The DataView accessor of each dtype here (16-bit floats as their bits); sizes from the one dtype table. */
const ACCESSOR = {
  F32: 'Float32',
  F64: 'Float64',
  I16: 'Int16',
  U16: 'Uint16',
  BF16: 'Uint16',
  F16: 'Uint16',
  I32: 'Int32',
  U32: 'Uint32',
  I64: 'BigInt64',
  U64: 'BigUint64',
  U8: 'Uint8',
} as const satisfies Record<Spec['dtype'], string>
const bytesPer = (dtype: Spec['dtype']) => DTYPE_BITS.get(dtype)! / 8

type Accessors = Record<string, (at: number, v?: number | bigint | boolean, little?: boolean) => number | bigint>

/** Writes one value into a DataView in the given byte order. */
function put(view: DataView, at: number, dtype: Spec['dtype'], v: number | bigint, little: boolean): void {
  ;(view as unknown as Accessors)[`set${ACCESSOR[dtype]}`].call(view, at, v, little)
}

/** Reads one value back from a DataView in the given byte order. */
function get(view: DataView, at: number, dtype: Spec['dtype'], little: boolean): number | bigint {
  return (view as unknown as Accessors)[`get${ACCESSOR[dtype]}`].call(view, at, little)
}

function encode(spec: Spec, little: boolean): TensorSpec {
  const bytes = new Uint8Array(spec.values.length * bytesPer(spec.dtype))
  const view = new DataView(bytes.buffer)
  if (spec.values instanceof Uint16Array) {
    // The big series: the same as put() below, two bytes at a time, only faster.
    const v = spec.values
    for (let i = 0; i < v.length; i++) {
      bytes[2 * i + (little ? 0 : 1)] = v[i] & 0xff
      bytes[2 * i + (little ? 1 : 0)] = v[i] >>> 8
    }
    return { name: spec.name, dtype: spec.dtype, shape: spec.shape, bytes }
  }
  for (let i = 0; i < spec.values.length; i++) put(view, i * bytesPer(spec.dtype), spec.dtype, spec.values[i], little)
  return { name: spec.name, dtype: spec.dtype, shape: spec.shape, bytes }
}

const BIG_ENDIAN_FILE = buildFile(SPECS.map((s) => encode(s, false)))
const LITTLE_ENDIAN_FILE = buildFile(SPECS.map((s) => encode(s, true)))

const NATIVE: Record<Spec['dtype'], string> = {
  F32: 'Float32Array',
  F64: 'Float64Array',
  I16: 'Int16Array',
  U16: 'Uint16Array',
  I32: 'Int32Array',
  U32: 'Uint32Array',
  I64: 'BigInt64Array',
  U64: 'BigUint64Array',
  BF16: 'Uint16Array',
  F16: 'Uint16Array',
  U8: 'Uint8Array',
}

function same(a: unknown, b: unknown): boolean {
  return Object.is(a, b) || (typeof a === 'number' && typeof b === 'number' && Number.isNaN(a) && Number.isNaN(b))
}

/** Compares `values` with what the array's bytes say when read in `order`; reports the first few misses. */
function expectBytesSay(data: ArrayBufferView, dtype: Spec['dtype'], values: ArrayLike<number | bigint>, order: 'little' | 'big', what: string): void {
  const size = dtype === 'F32' || NATIVE[dtype] === 'Float32Array' ? 4 : bytesPer(dtype)
  expect(data.byteLength, `${what}: byte length`).toBe(values.length * size)
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  if (values.length > 100_000 && (values instanceof Float32Array || values instanceof Uint16Array)) {
    // Long series: compare all bytes at once with the values written in `order` (no NaNs in them).
    const want = new Uint8Array(values.length * size)
    const w = new DataView(want.buffer)
    for (let i = 0; i < values.length; i++) put(w, i * size, dtype, values[i], order === 'little')
    if (Buffer.compare(bytesOf(data), want) === 0) return
  }
  const bad: string[] = []
  for (let i = 0; i < values.length && bad.length < 4; i++) {
    const got = get(view, i * size, dtype, order === 'little')
    if (!same(got, values[i])) bad.push(`[${i}] ${String(got)} != ${String(values[i])}`)
  }
  expect(bad, what).toEqual([])
}

/** Element-wise equality (NaN equals NaN, -0 differs from 0); names the first few differences. */
function expectElements(got: ArrayLike<unknown>, want: ArrayLike<unknown>, what: string): void {
  expect(got.length, `${what}: length`).toBe(want.length)
  if (ArrayBuffer.isView(got) && ArrayBuffer.isView(want) && got.constructor === want.constructor && Buffer.compare(bytesOf(got), bytesOf(want)) === 0) return
  const bad: string[] = []
  for (let i = 0; i < want.length && bad.length < 4; i++) if (!same(got[i], want[i])) bad.push(`[${i}] ${String(got[i])} != ${String(want[i])}`)
  expect(bad, what).toEqual([])
}

/** The element values of a typed array, plainly indexed (what JS code on that host would see). */
const elements = (data: ArrayLike<unknown>) => Array.from(data)

let dir: string
let bigPath: string
let littlePath: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'safetensors-byte-order-'))
  bigPath = join(dir, 'big-endian.safetensors')
  littlePath = join(dir, 'little-endian.safetensors')
  writeFileSync(bigPath, BIG_ENDIAN_FILE)
  writeFileSync(littlePath, LITTLE_ENDIAN_FILE)
})

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
})

afterEach(() => simulateHostByteOrder())

const unaligned = (b: Uint8Array) => {
  const buf = new Uint8Array(b.length + 1)
  buf.set(b, 1)
  return buf.subarray(1)
}

describe("(a) a big-endian file read with { byteOrder: 'big' }", () => {
  test('the file really is big-endian: read as little-endian, the values come out wrong', async () => {
    const f = await open(BIG_ENDIAN_FILE.slice())
    const t = await f.getTensor('f32')
    expect(elements(t.data)).not.toEqual(SPECS[0].values)
  })

  test.each([
    ['a Uint8Array', () => BIG_ENDIAN_FILE.slice()],
    ['a Uint8Array at an odd offset', () => unaligned(BIG_ENDIAN_FILE)],
    ['a file path', () => bigPath],
    ['a RangeSource', () => countingSource(BIG_ENDIAN_FILE).source],
  ] as const)('from %s: raw values right, and the input bytes untouched', async (_, input) => {
    const source = input()
    const before = source instanceof Uint8Array ? source.slice() : undefined
    const f = await open(source, { byteOrder: 'big' })
    for (const s of SPECS) {
      const t = await f.getTensor(s.name)
      expect(t.dtype, s.name).toBe(s.dtype)
      expect(t.shape, s.name).toEqual(s.shape)
      expect(t.data.constructor.name, s.name).toBe(NATIVE[s.dtype])
      expectElements(t.data as unknown as ArrayLike<unknown>, s.values, `${s.name} raw`)
    }
    if (before) expectSameBytes(source as Uint8Array, before, 'the caller’s bytes must not be changed')
    await f.close()
  })

  test.each([
    ['a Uint8Array', () => BIG_ENDIAN_FILE.slice()],
    ['a Uint8Array at an odd offset', () => unaligned(BIG_ENDIAN_FILE)],
    ['a file path', () => bigPath],
  ] as const)("from %s with { dtype: 'F32' }: converted values right", async (_, input) => {
    const f = await open(input(), { byteOrder: 'big' })
    for (const s of SPECS) {
      if (!s.f32) continue
      const t = await f.getTensor(s.name, { dtype: 'F32' })
      expect(t.dtype).toBe('F32')
      expect(t.data).toBeInstanceOf(Float32Array)
      expectElements(t.data as unknown as ArrayLike<unknown>, s.f32, `${s.name} as F32`)
    }
    await f.close()
  })

  test('slices and tensors() of a big-endian file', async () => {
    const f = await open(BIG_ENDIAN_FILE.slice(), { byteOrder: 'big' })
    const row = await f.getSlice('f32', [1])
    expect(elements(row.data)).toEqual(Array.from(SPECS[0].values).slice(3))
    const col = await f.getSlice('bf16', [null, [1, 3]], { dtype: 'F32' })
    expect(elements(col.data)).toEqual([1, 2, 4, 5].map((i) => SPECS.find((s) => s.name === 'bf16')!.f32![i]))
    const tail = await f.getSlice('hugebf16', [[huge.bits.length - 5, huge.bits.length]], { dtype: 'F32' })
    expect(elements(tail.data)).toEqual(Array.from(huge.f32.subarray(huge.f32.length - 5)))
    const mid = await f.getSlice('i64', [[1, 3]])
    expect(elements(mid.data)).toEqual([-2n, 0x0102030405060708n])
    for await (const t of f.tensors()) {
      const s = SPECS.find((x) => x.name === t.name)!
      expect(elements((t.data as Uint8Array).subarray(0, 8)), t.name).toEqual(Array.from({ length: Math.min(8, s.values.length) }, (_, i) => s.values[i]))
      expect(t.data.length, t.name).toBe(s.values.length)
    }
  })
})

describe('(b) a simulated big-endian host reading little-endian files', () => {
  test.each([
    ['a Uint8Array', () => LITTLE_ENDIAN_FILE.slice()],
    ['a Uint8Array at an odd offset', () => unaligned(LITTLE_ENDIAN_FILE)],
    ['a file path', () => littlePath],
    ['a RangeSource', () => countingSource(LITTLE_ENDIAN_FILE).source],
  ] as const)('from %s: every raw array holds big-endian bytes, and the input stays little-endian', async (_, input) => {
    const source = input()
    const before = source instanceof Uint8Array ? source.slice() : undefined
    simulateHostByteOrder('big')
    const f = await open(source)
    for (const s of SPECS) {
      const t = await f.getTensor(s.name)
      expect(t.data.constructor.name, s.name).toBe(NATIVE[s.dtype])
      expectBytesSay(t.data, s.dtype, s.values, 'big', `${s.name} raw`)
    }
    simulateHostByteOrder()
    if (before) expectSameBytes(source as Uint8Array, before, 'the caller’s bytes must not be swapped in place')
    await f.close()
  })

  test.each([
    ['a Uint8Array', () => LITTLE_ENDIAN_FILE.slice()],
    ['a file path', () => littlePath],
  ] as const)("from %s with { dtype: 'F32' }: big-endian float32 bytes (small and large results)", async (_, input) => {
    simulateHostByteOrder('big')
    const f = await open(input())
    for (const s of SPECS) {
      if (!s.f32) continue
      const t = await f.getTensor(s.name, { dtype: 'F32' })
      expect(t.data).toBeInstanceOf(Float32Array)
      expectBytesSay(t.data, 'F32', s.f32, 'big', `${s.name} as F32`)
    }
    await f.close()
  })

  test('slices and tensors() on a big-endian host', async () => {
    simulateHostByteOrder('big')
    const f = await open(LITTLE_ENDIAN_FILE.slice())
    expectBytesSay((await f.getSlice('f32', [1])).data, 'F32', Array.from(SPECS[0].values).slice(3), 'big', 'f32 row')
    expectBytesSay((await f.getSlice('i16', [[1, 4]])).data, 'I16', Array.from(SPECS[2].values).slice(1, 4), 'big', 'i16 slice')
    expectBytesSay((await f.getSlice('bf16', [0], { dtype: 'F32' })).data, 'F32', Array.from(SPECS[8].f32!).slice(0, 3), 'big', 'bf16 row as F32')
    for await (const t of f.tensors()) {
      const s = SPECS.find((x) => x.name === t.name)!
      expectBytesSay(t.data, s.dtype, s.values, 'big', `${t.name} from tensors()`)
    }
  })

  test("a big-endian file on a big-endian host: the file's bytes as they are", async () => {
    simulateHostByteOrder('big')
    const f = await open(BIG_ENDIAN_FILE.slice(), { byteOrder: 'big' })
    for (const s of SPECS) {
      const t = await f.getTensor(s.name)
      expectBytesSay(t.data, s.dtype, s.values, 'big', `${s.name} raw`)
      if (s.f32) expectBytesSay((await f.getTensor(s.name, { dtype: 'F32' })).data, 'F32', s.f32, 'big', `${s.name} as F32`)
    }
  })

  test('resetting the simulation gives little-endian arrays again', async () => {
    simulateHostByteOrder('big')
    simulateHostByteOrder()
    const f = await open(LITTLE_ENDIAN_FILE.slice())
    const t = await f.getTensor('f32')
    expect(elements(t.data)).toEqual(SPECS[0].values)
    expectBytesSay(t.data, 'F32', SPECS[0].values, 'little', 'f32')
    for (const name of ['bigbf16', 'hugebf16']) {
      const s = SPECS.find((x) => x.name === name)!
      const c = await f.getTensor(name, { dtype: 'F32' })
      expectElements(c.data as unknown as ArrayLike<unknown>, s.f32!, `${name} as F32`)
      expectBytesSay(c.data, 'F32', s.f32!, 'little', `${name} as F32`)
    }
  })
})

test('the test data is what it says: the two files differ exactly by byte order', () => {
  // A guard on the test itself: encode() wrote each value in the order asked for.
  for (const s of SPECS.slice(0, 3)) {
    const le = encode(s, true).bytes
    const be = encode(s, false).bytes
    const size = bytesPer(s.dtype)
    for (let i = 0; i < le.length; i += size) expect(Array.from(be.subarray(i, i + size))).toEqual(Array.from(le.subarray(i, i + size)).reverse())
  }
  expect(bytesOf(new Uint16Array([1]))[0]).toBe(1) // the machine running this is little-endian
})

describe('convertFile from a big-endian file', () => {
  test('writes a little-endian file: converted and copied tensors both come out in the format order', async () => {
    const { convertFile } = await import('../../src/node.ts')
    const dir = mkdtempSync(join(tmpdir(), 'st-byteorder-convert-'))
    try {
      // BF16 (converted to F32) and I32 (copied), written big-endian value by value.
      const bf16 = new Uint8Array(8)
      const i32 = new Uint8Array(8)
      const bits = [0x3f80, 0xc040, 0x0001, 0x7f80] // 1, -3, the smallest subnormal, +Inf
      bits.forEach((b, i) => new DataView(bf16.buffer).setUint16(i * 2, b, false))
      ;[7, -2].forEach((v, i) => new DataView(i32.buffer).setInt32(i * 4, v, false))
      const input = join(dir, 'be.safetensors')
      writeFileSync(
        input,
        buildFile([
          { name: 'w', dtype: 'BF16', shape: [4], bytes: bf16 },
          { name: 'n', dtype: 'I32', shape: [2], bytes: i32 },
        ]),
      )
      const output = join(dir, 'le.safetensors')
      await convertFile(input, output, { dtype: 'F32', byteOrder: 'big' })
      const file = await open(output)
      const w = new DataView(bytesOf((await file.getTensor('w')).data).slice().buffer)
      expect([0, 1, 2, 3].map((i) => w.getUint32(i * 4, true))).toEqual(bits.map((b) => (b << 16) >>> 0))
      const n = new DataView(bytesOf((await file.getTensor('n')).data).slice().buffer)
      expect([n.getInt32(0, true), n.getInt32(4, true)]).toEqual([7, -2])
      await file.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
