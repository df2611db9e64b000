// Runs in Chromium, Firefox and WebKit (vitest.browser.config.ts), against dist/index.js: what a web page gets.
// The shared test files cover the header scanner and slicing; this file covers what only a browser has
// (File/Blob, fetch with Range against a real server, the browser's own wasm engine) and checks the
// bundle's conversion kernels against the independent reference, as test/core/convert.test.ts does in Node.
import { describe, expect, test } from 'vitest'
import { server } from 'vitest/browser'
import { byteSwap, convert, DTYPE_INFO, type DType, open, parseHeader, type RangeSource, SafetensorsError, serialize, tensorStats } from '../../../src/index.ts' // aliased to dist/index.js by vitest.browser.config.ts
import { referenceConvert, SOURCE_BITS } from '../../float-reference.ts'
import { mulberry32 } from '../../random.ts'

const FIXTURE = '/test/fixtures/real/fluxml__safetensors.jl__model.safetensors'
const INVALID = '/test/fixtures/real/invalid/syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors'

function randomBytes(length: number, seed: number): Uint8Array {
  const next = mulberry32(seed)
  const out = new Uint8Array(length)
  for (let i = 0; i < length; i++) out[i] = next() & 0xff
  return out
}

function bytesOf(array: ArrayBufferView): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength)
}

/** The first differing element, as "index: got 0x.., want 0x..", or undefined when equal. */
function firstDifference(actual: Uint8Array, expected: Uint8Array, width: number): string | undefined {
  if (actual.length !== expected.length) return `length ${actual.length}, want ${expected.length}`
  for (let i = 0; i < actual.length; i++) {
    if (actual[i] === expected[i]) continue
    const e = Math.floor(i / width)
    const hex = (b: Uint8Array) =>
      Array.from(b.subarray(e * width, (e + 1) * width))
        .reverse()
        .map((x) => x.toString(16).padStart(2, '0'))
        .join('')
    return `element ${e}: got 0x${hex(actual)}, want 0x${hex(expected)}`
  }
  return undefined
}

/** A RangeSource over bytes that records every read, to show what a reader asked for. */
function recording(bytes: Uint8Array): RangeSource & { reads: Array<[number, number]> } {
  const reads: Array<[number, number]> = []
  return {
    reads,
    size: bytes.length,
    async read(offset, length) {
      reads.push([offset, length])
      return bytes.slice(offset, offset + length)
    },
  }
}

/** What each engine's user agent says, by the name of the browser vitest was told to drive. */
const USER_AGENTS: Record<string, RegExp> = {
  chromium: /Chrome\//,
  firefox: /Gecko\/\d+ Firefox\//,
  // WebKitGTK says Safari, as Safari does, and neither Chrome nor Firefox.
  MiniBrowser: /^(?!.*(Chrome|Firefox)).*AppleWebKit\/.*Safari\//,
}

test('this is a real browser, the engine asked for, and the package is the bundle with its wasm inlined', async () => {
  expect(USER_AGENTS[server.browser], server.browser).toBeDefined()
  expect(navigator.userAgent).toMatch(USER_AGENTS[server.browser])
  expect(typeof window).toBe('object')
  // dist/index.js compiles the inlined module on first use; a header parse forces that.
  const h = parseHeader(serialize({ a: { dtype: 'F32', shape: [1], data: new Float32Array([1]) } }))
  expect(h.tensors.map((t) => t.name)).toEqual(['a'])
})

describe('conversion kernels of the bundle, against the reference', () => {
  const sources = Object.keys(SOURCE_BITS) as DType[]
  const pairs: Array<[DType, DType]> = [...sources.map((from): [DType, DType] => [from, 'F32']), ['F32', 'F16'], ['F32', 'BF16']]

  test.each(pairs)('%s -> %s: lengths 0..70 at an odd offset, and one input of several chunks', (from, to) => {
    const bits = DTYPE_INFO[from].bits
    const step = bits === 4 ? 2 : bits === 6 ? 4 : 1
    const counts = [...Array.from({ length: 71 }, (_, i) => i).filter((n) => n % step === 0), 100_004]
    for (const count of counts) {
      const inBytes = (count * bits) / 8
      const input = randomBytes(inBytes + 1, count + bits).subarray(1)
      const out = convert(input, from, to)
      expect(out).toBeInstanceOf(DTYPE_INFO[to].array)
      const diff = firstDifference(bytesOf(out), referenceConvert(from, to, input.slice()), DTYPE_INFO[to].bits / 8)
      expect(diff, `${from} -> ${to}, ${count} elements`).toBeUndefined()
    }
  })

  test.each([2, 4, 8] as const)('byteSwap of %i-byte elements', (width) => {
    const bytes = randomBytes(width * 1001, width)
    const expected = bytes.slice()
    for (let i = 0; i < expected.length; i += width) expected.subarray(i, i + width).reverse()
    byteSwap(bytes, width)
    expect(firstDifference(bytes, expected, width)).toBeUndefined()
  })

  test('UnsupportedConversion is a SafetensorsError', () => {
    const error = (() => {
      try {
        convert(new Uint8Array(4), 'I32', 'I8')
      } catch (e) {
        return e
      }
    })()
    expect(error).toBeInstanceOf(SafetensorsError)
    expect((error as SafetensorsError).code).toBe('UnsupportedConversion')
  })
})

describe('browser sources', () => {
  test('a File (what a file picker or a drop gives) is read one tensor at a time', async () => {
    const bf16 = new Uint16Array([0x3f80, 0xc040, 0x7f80, 0x0000, 0x4049])
    const bytes = serialize(
      {
        big: { dtype: 'U8', shape: [100_000], data: new Uint8Array(100_000).fill(7) },
        w: { dtype: 'BF16', shape: [5], data: bf16 },
      },
      { metadata: { format: 'pt' } },
    )
    const file = new File([bytes.slice()], 'model.safetensors')
    const st = await open(file)
    expect(st.metadata).toEqual({ format: 'pt' })
    const w = await st.getTensor('w', { dtype: 'F32' })
    expect(Array.from(w.data as Float32Array)).toEqual([1, -3, Infinity, 0, 3.140625])
    // The same through a recording source: the header read, then exactly w's bytes, never the 100 kB tensor.
    const source = recording(bytes)
    const again = await open(source)
    const reads = source.reads.length
    await again.getTensor('w')
    const info = again.info('w')
    expect(source.reads.slice(reads)).toEqual([[again.header.dataStart + info.dataOffsets[0], 10]])
  })

  test('open(url) fetches with Range requests from the dev server, and matches the whole file parsed in memory', async () => {
    const whole = new Uint8Array(await (await fetch(FIXTURE)).arrayBuffer())
    const requests: string[] = []
    const countingFetch: typeof fetch = (input, init) => {
      requests.push(new Headers(init?.headers).get('Range') ?? 'none')
      return fetch(input, init)
    }
    const st = await open(new URL(FIXTURE, location.href), { fetch: countingFetch })
    const expected = parseHeader(whole)
    expect(st.names()).toEqual(expected.tensors.map((t) => t.name))
    expect(st.header.fileSize).toBe(whole.length)
    for (const name of st.names().filter((n) => n.startsWith('bfloat16'))) {
      const got = await st.getTensor(name, { dtype: 'F32' })
      const info = expected.tensor(name)
      const raw = whole.subarray(expected.dataStart + info.dataOffsets[0], expected.dataStart + info.dataOffsets[1])
      expect(firstDifference(bytesOf(got.data), referenceConvert('BF16', 'F32', raw.slice()), 4), name).toBeUndefined()
    }
    expect(requests.length).toBeGreaterThan(1)
    expect(
      requests.every((r) => /^bytes=\d+-\d+$/.test(r)),
      requests.join(', '),
    ).toBe(true)
  })

  test('in a page, a string is a URL relative to the page', async () => {
    const whole = new Uint8Array(await (await fetch(FIXTURE)).arrayBuffer())
    const st = await open(FIXTURE)
    expect(st.names()).toEqual(parseHeader(whole).tensors.map((t) => t.name))
    const error = await open('ftp://example.invalid/x.safetensors').then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(TypeError)
  })

  test('an invalid file fetched by URL is rejected with its code', async () => {
    // Its prefix claims a header longer than the whole file (read here independently of the library).
    const whole = new Uint8Array(await (await fetch(INVALID)).arrayBuffer())
    expect(Number(new DataView(whole.buffer).getBigUint64(0, true))).toBeGreaterThan(whole.length - 8)
    const error = await open(new URL(INVALID, location.href)).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(SafetensorsError)
    expect((error as SafetensorsError).code).toBe('InvalidHeaderLength')
  })

  test('tensorStats runs in the browser on data read from a File', async () => {
    const data = Float32Array.from({ length: 1000 }, (_, i) => (i === 7 ? NaN : i - 500))
    const st = await open(new Blob([serialize({ x: { dtype: 'F32', shape: [1000], data } }).slice()]))
    const x = await st.getTensor('x')
    const stats = tensorStats(x.data as Float32Array, { bins: 10 })
    expect([stats.count, stats.finite, stats.nan, stats.min, stats.max]).toEqual([1000, 999, 1, -500, 499])
    expect(stats.histogram.counts.reduce((a, b) => a + b, 0)).toBe(999)
  })
})
