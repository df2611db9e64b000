// Helpers for the reading tests (values, http, model, slice, byte-order, large): writing SafeTensors
// files by hand, counting what a source is asked for, a seeded PRNG, hashes and exact sums.
// Nothing here uses the library: expected values must never come from the code under test.
import { createHash } from 'node:crypto'
import { expect } from 'vitest'
import { SafetensorsError } from '../src/index.ts'
import { prng } from './random.ts'

/** The TypedArray class the public contract names for each dtype's raw data. */
export const NATURAL: Record<string, { name: string; bytes: number }> = {
  F32: { name: 'Float32Array', bytes: 4 },
  C64: { name: 'Float32Array', bytes: 4 },
  F64: { name: 'Float64Array', bytes: 8 },
  I8: { name: 'Int8Array', bytes: 1 },
  U8: { name: 'Uint8Array', bytes: 1 },
  I16: { name: 'Int16Array', bytes: 2 },
  U16: { name: 'Uint16Array', bytes: 2 },
  I32: { name: 'Int32Array', bytes: 4 },
  U32: { name: 'Uint32Array', bytes: 4 },
  I64: { name: 'BigInt64Array', bytes: 8 },
  U64: { name: 'BigUint64Array', bytes: 8 },
  F16: { name: 'Uint16Array', bytes: 2 },
  BF16: { name: 'Uint16Array', bytes: 2 },
  BOOL: { name: 'Uint8Array', bytes: 1 },
  F8_E5M2: { name: 'Uint8Array', bytes: 1 },
  F8_E4M3: { name: 'Uint8Array', bytes: 1 },
  F8_E8M0: { name: 'Uint8Array', bytes: 1 },
  F8_E4M3FNUZ: { name: 'Uint8Array', bytes: 1 },
  F8_E5M2FNUZ: { name: 'Uint8Array', bytes: 1 },
  F4: { name: 'Uint8Array', bytes: 1 },
  F6_E2M3: { name: 'Uint8Array', bytes: 1 },
  F6_E3M2: { name: 'Uint8Array', bytes: 1 },
}

export interface TensorSpec {
  name: string
  dtype: string
  shape: number[]
  /** Raw bytes as they go into the file. */
  bytes: Uint8Array
}

/**
 * A SafeTensors header written by hand: 8-byte LE length | JSON header (padded with spaces to `align`), for tensors
 * of `lengths` bytes packed in the order given; with each tensor's offset in the data and the data's length.
 */
export function headerFor(
  tensors: ReadonlyArray<{ name: string; dtype: string; shape: number[] }>,
  lengths: number[],
  metadata: Record<string, string> | null | undefined,
  align: number,
): { head: Uint8Array; starts: number[]; dataLength: number } {
  const parts: string[] = []
  if (metadata !== undefined) parts.push(`"__metadata__":${JSON.stringify(metadata)}`)
  const starts: number[] = []
  let offset = 0
  tensors.forEach((t, i) => {
    parts.push(`${JSON.stringify(t.name)}:{"dtype":"${t.dtype}","shape":[${t.shape.join(',')}],"data_offsets":[${offset},${offset + lengths[i]}]}`)
    starts.push(offset)
    offset += lengths[i]
  })
  let header = `{${parts.join(',')}}`
  while (header.length % align !== 0) header += ' '
  const h = new TextEncoder().encode(header)
  const head = new Uint8Array(8 + h.length)
  new DataView(head.buffer).setBigUint64(0, BigInt(h.length), true)
  head.set(h, 8)
  return { head, starts, dataLength: offset }
}

/**
 * A SafeTensors file written by hand: 8-byte LE length | JSON header (padded with spaces to `align`)
 * | the tensors' bytes, packed in the order given.
 */
export function buildFile(tensors: TensorSpec[], metadata?: Record<string, string> | null, align = 8): Uint8Array {
  const { head, starts, dataLength } = headerFor(
    tensors,
    tensors.map((t) => t.bytes.length),
    metadata,
    align,
  )
  const out = new Uint8Array(head.length + dataLength)
  out.set(head)
  tensors.forEach((t, i) => out.set(t.bytes, head.length + starts[i]))
  return out
}

/** Parses a file's header with JSON.parse (for test files, which have no duplicate keys). */
export function headerOf(file: Uint8Array): {
  dataStart: number
  tensors: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>
  metadata?: Record<string, string> | null
} {
  const n = Number(new DataView(file.buffer, file.byteOffset, 8).getBigUint64(0, true))
  const json = JSON.parse(new TextDecoder().decode(file.subarray(8, 8 + n)))
  const metadata = json.__metadata__
  delete json.__metadata__
  return { dataStart: 8 + n, tensors: json, metadata }
}

/** The file bytes of a tensor (straight from the file, not through the library). */
export function tensorBytes(file: Uint8Array, name: string): Uint8Array {
  const h = headerOf(file)
  const [b, e] = h.tensors[name].data_offsets
  return file.subarray(h.dataStart + b, h.dataStart + e)
}

export interface CountingSource {
  source: {
    size: number
    requestCost?: number
    read(offset: number, length: number, signal?: AbortSignal): Promise<Uint8Array>
    readInto?(offset: number, target: Uint8Array, signal?: AbortSignal): Promise<void>
  }
  /** Every read, in order: [offset, length]. */
  reads: Array<[number, number]>
  bytesRead(): number
  reset(): void
}

/** A RangeSource over bytes that records each read. With `readInto`, it offers that method too; `requestCost` is passed on. */
export function countingSource(bytes: Uint8Array, options: { readInto?: boolean; requestCost?: number } = {}): CountingSource {
  const reads: Array<[number, number]> = []
  const check = (offset: number, length: number) => {
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > bytes.length) {
      throw new Error(`test source: bad read of ${length} bytes at ${offset} (size ${bytes.length})`)
    }
    reads.push([offset, length])
  }
  const source: CountingSource['source'] = {
    size: bytes.length,
    requestCost: options.requestCost,
    async read(offset, length) {
      check(offset, length)
      return bytes.slice(offset, offset + length)
    },
  }
  if (options.readInto) {
    source.readInto = async (offset, target) => {
      check(offset, target.length)
      target.set(bytes.subarray(offset, offset + target.length))
    }
  }
  return { source, reads, bytesRead: () => reads.reduce((s, [, n]) => s + n, 0), reset: () => void (reads.length = 0) }
}

/** Seeded random values, so failures are reproducible. */
export function rng(seed: number) {
  const next = prng(seed)
  return {
    next,
    /** Integer in [lo, hi]. */
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    bytes(n: number) {
      const b = new Uint8Array(n)
      for (let i = 0; i < n; i++) b[i] = Math.floor(next() * 256)
      return b
    },
  }
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** The bytes under a TypedArray view. */
/** Rows [0, rows) and columns [from, to) of a row-major matrix of `width` elements of `unit` bytes, by hand. */
export function columns(bytes: Uint8Array, rows: number, width: number, unit: number, from: number, to: number): Uint8Array {
  const out = new Uint8Array(rows * (to - from) * unit)
  for (let r = 0; r < rows; r++) out.set(bytes.subarray((r * width + from) * unit, (r * width + to) * unit), r * (to - from) * unit)
  return out
}

export function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength)
}

/** Neumaier-compensated float64 sum: within an ulp or so of the exactly rounded sum for these inputs. */
export function accurateSum(values: Iterable<number>): number {
  let sum = 0
  let c = 0
  for (const x of values) {
    const t = sum + x
    if (Math.abs(sum) >= Math.abs(x)) c += sum - t + x
    else c += x - t + sum
    sum = t
  }
  return sum + c
}

/** bfloat16 bits -> the float32 value (as a JS number), by definition: the high half of a float32. */
export function bf16ToNumber(bits: number): number {
  const u = new Uint32Array([bits << 16])
  return new Float32Array(u.buffer)[0]
}

/** float32 bit pattern of a number (after rounding to float32). */
export function f32Bits(x: number): number {
  return new Uint32Array(new Float32Array([x]).buffer)[0]
}

/** Runs `fn` and returns the SafetensorsError it throws or rejects with; fails if it succeeds. */
export async function errorOf(fn: () => unknown): Promise<SafetensorsError> {
  let result: unknown
  try {
    result = await fn()
  } catch (error) {
    if (!(error instanceof SafetensorsError)) {
      throw new Error(`expected a SafetensorsError, got ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`, { cause: error })
    }
    return error
  }
  throw new Error(`expected a SafetensorsError, but the call succeeded with ${describe(result)}`)
}

/** errorOf, plus: the error's code is `code`. Returns the error for more checks. */
export async function expectError(fn: () => unknown, code: string): Promise<SafetensorsError> {
  const error = await errorOf(fn)
  expect(error.code, `error code (message: ${error.message})`).toBe(code)
  return error
}

function describe(value: unknown): string {
  if (value && typeof value === 'object' && 'data' in (value as object)) {
    const t = value as { name?: string; dtype?: string; shape?: number[]; data?: ArrayLike<unknown> }
    return `tensor ${t.name} ${t.dtype} [${t.shape}] with ${t.data?.length} elements`
  }
  return String(value)
}

/** Element-by-element comparison that reports the first few differing indices (fast on big arrays). */
export function expectSameElements(actual: ArrayLike<unknown>, expected: ArrayLike<unknown>, what: string): void {
  expect(actual.length, `${what}: length`).toBe(expected.length)
  const bad: string[] = []
  for (let i = 0; i < expected.length && bad.length < 5; i++) {
    if (!Object.is(actual[i], expected[i])) bad.push(`[${i}] got ${String(actual[i])}, expected ${String(expected[i])}`)
  }
  expect(bad, `${what}: differing elements`).toEqual([])
}

/** Byte-for-byte equality, fast on big arrays (toEqual walks typed arrays slowly); names the first difference. */
export function expectSameBytes(actual: ArrayBufferView, expected: ArrayBufferView, what = 'bytes'): void {
  const a = bytesOf(actual)
  const b = bytesOf(expected)
  if (a.length === b.length && Buffer.compare(a, b) === 0) return
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  expect.fail(`${what}: ${a.length} bytes vs ${b.length} expected; first difference at byte ${i} (got ${a[i]}, expected ${b[i]})`)
}

/** All the chunks of a stream, joined, and how many there were. */
export async function collect(stream: ReadableStream<Uint8Array>): Promise<{ bytes: Uint8Array; chunks: number }> {
  const parts: Uint8Array[] = []
  for await (const part of stream as unknown as AsyncIterable<Uint8Array>) parts.push(part)
  return { bytes: new Uint8Array(Buffer.concat(parts)), chunks: parts.length }
}

/** The file of the stream tests (file.stream, convertStream): a large BF16 tensor among small ones of other dtypes. */
export function streamsFile(): Uint8Array<ArrayBuffer> {
  const r = rng(14)
  // 300,000 elements: more than one chunk (256 Ki elements), and a last chunk that is not full.
  const big = r.bytes(600_000)
  return buildFile([
    { name: 'ints', dtype: 'I64', shape: [3], bytes: r.bytes(24) },
    { name: 'big', dtype: 'BF16', shape: [600, 500], bytes: big },
    { name: 'f8', dtype: 'F8_E4M3', shape: [7, 3], bytes: r.bytes(21) },
    { name: 'f4', dtype: 'F4', shape: [4, 6], bytes: r.bytes(12) },
    { name: 'empty', dtype: 'F32', shape: [0, 4], bytes: new Uint8Array(0) },
  ]) as Uint8Array<ArrayBuffer>
}
