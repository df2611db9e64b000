// `float16Array: true`: F16 results as the runtime's native Float16Array. Runs in Node (vitest.config.ts)
// and in Chromium (vitest.browser.config.ts): where the runtime has Float16Array (Chromium, Node 24) the
// values are checked against the independent F16 decoder of test/float-reference.ts; where it lacks it
// (Node 20) the option is a TypeError naming the global, before anything is read.
import { describe, expect, test } from 'vitest'
import { open, type RangeSource, serialize } from '../../src/index.ts'
import { decodeValue, encodeValue, FORMATS } from '../float-reference.ts'

type NativeFloat16Array = Float32Array & { readonly BYTES_PER_ELEMENT: 2 }
const Native = (globalThis as { Float16Array?: new (buffer: ArrayBufferLike, byteOffset?: number, length?: number) => NativeFloat16Array }).Float16Array

/** Every F16 code once, in code order. */
const CODES = Uint16Array.from({ length: 1 << 16 }, (_, i) => i)
/** F32 values that F16 rounds in every way: ties, subnormals, overflow to infinity, signed zeros. */
const WIDE = Float32Array.from([
  0,
  -0,
  1,
  -1.5,
  65504,
  65519.99,
  65520,
  1e6,
  -1e6,
  2 ** -24,
  2 ** -25,
  3 * 2 ** -26,
  1 + 2 ** -11,
  1 + 3 * 2 ** -11,
  Math.PI,
  -Math.E,
  1e-8,
  Infinity,
  -Infinity,
])

/** An in-memory file that counts the reads made after its header: an option checked first makes none. */
function countedFile(): { bytes: Uint8Array; source: RangeSource; reads: () => number } {
  const bytes = serialize({
    h: { dtype: 'F16', shape: [CODES.length], data: CODES },
    wide: { dtype: 'F32', shape: [WIDE.length], data: WIDE },
    b: { dtype: 'BF16', shape: [2, 2], data: Uint16Array.of(0x3f80, 0xbf80, 0x4000, 0x0000) },
  })
  let reads = 0
  return {
    bytes,
    source: {
      size: bytes.length,
      async read(offset, length) {
        reads++
        return bytes.slice(offset, offset + length)
      },
    },
    reads: () => reads,
  }
}

/** Two numbers are the same F16 value: NaN matches NaN, and zeros keep their sign. */
function expectSameValues(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string): void {
  expect(actual.length, what).toBe(expected.length)
  for (let i = 0; i < expected.length; i++) {
    if (Object.is(actual[i], expected[i])) continue
    expect.fail(`${what}: element ${i} is ${actual[i]}, want ${expected[i]}`)
  }
}

describe.runIf(Native !== undefined)('a runtime with Float16Array', () => {
  test("every F16 code comes as its value, over the file's own bits", async () => {
    const file = await open(countedFile().source)
    const t = await file.getTensor('h', { float16Array: true })
    expect(t.data).toBeInstanceOf(Native!)
    expect(t.dtype).toBe('F16')
    // NaN codes decode to NaN (their payloads are not compared as numbers); the bits below cover them.
    expectSameValues(
      t.data as ArrayLike<number>,
      Array.from(CODES, (code) => decodeValue(FORMATS.F16, code)),
      'values',
    )
    expect(new Uint16Array(t.data.buffer, t.data.byteOffset, t.data.length)).toEqual(CODES)

    // From bytes in memory: a zero-copy view of the file's bytes, at the tensor's offset in them.
    const { bytes } = countedFile()
    const view = await (await open(bytes)).getTensor('h', { float16Array: true })
    expect(view.data.buffer).toBe(bytes.buffer)
    expect(view.data.byteOffset).toBeGreaterThan(0)
    expect(new Uint16Array(view.data.buffer, view.data.byteOffset, view.data.length)).toEqual(CODES)
  })

  test('a conversion to F16, a slice, a read into `out`: Float16Array; without the option, bits as before', async () => {
    const file = await open(countedFile().source)
    const converted = await file.getTensor('wide', { dtype: 'F16', float16Array: true })
    expect(converted.data).toBeInstanceOf(Native!)
    expectSameValues(
      converted.data,
      Array.from(WIDE, (v) => decodeValue(FORMATS.F16, encodeValue('F16', v))),
      'F32 -> F16',
    )

    const slice = await file.getSlice('h', [[0x3c00, 0x3c08]], { float16Array: true })
    expectSameValues(
      slice.data as ArrayLike<number>,
      [1, 1 + 2 ** -10, 1 + 2 * 2 ** -10, 1 + 3 * 2 ** -10, 1 + 4 * 2 ** -10, 1 + 5 * 2 ** -10, 1 + 6 * 2 ** -10, 1 + 7 * 2 ** -10],
      'slice',
    )

    const out = new ArrayBuffer(2 * CODES.length + 16)
    const into = await file.getTensor('h', { dtype: 'F16', float16Array: true, out })
    expect(into.data).toBeInstanceOf(Native!)
    expect(into.data.buffer).toBe(out)

    const bits = await file.getTensor('h', { dtype: 'F16' })
    expect(bits.data).toBeInstanceOf(Uint16Array)
    expect(bits.data).toEqual(CODES)
  })

  test('other dtypes are unaffected, also in tensors()', async () => {
    const file = await open(countedFile().source)
    const kinds: Record<string, string> = {}
    for await (const t of file.tensors({ float16Array: true })) kinds[t.name] = t.data.constructor.name
    expect(kinds).toEqual({ h: 'Float16Array', wide: 'Float32Array', b: 'Uint16Array' })
    const b = await file.getTensor('b', { dtype: 'F32', float16Array: true })
    expect(Array.from(b.data)).toEqual([1, -1, 2, 0])
  })
})

describe.runIf(Native === undefined)('a runtime without Float16Array', () => {
  test('the option is a TypeError naming Float16Array, before any tensor byte is read', async () => {
    const { source, reads } = countedFile()
    const file = await open(source)
    const before = reads()
    await expect(file.getTensor('h', { float16Array: true })).rejects.toThrow(TypeError)
    await expect(file.getTensor('wide', { dtype: 'F16', float16Array: true })).rejects.toThrow(/Float16Array/)
    await expect(file.getSlice('h', [[0, 4]], { float16Array: true })).rejects.toThrow(/Float16Array/)
    await expect(file.tensors({ float16Array: true }).next()).rejects.toThrow(/Float16Array/)
    expect(reads()).toBe(before)
    // Without the option the same read works: raw bits.
    expect((await file.getTensor('h')).data).toEqual(CODES)
  })
})

test('float16Array must be a boolean', async () => {
  const file = await open(countedFile().source)
  await expect(file.getTensor('h', { float16Array: 1 as unknown as boolean })).rejects.toThrow(TypeError)
  await expect(file.getTensor('h', { float16Array: 'yes' as unknown as boolean })).rejects.toThrow(/boolean/)
})
