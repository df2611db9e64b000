// Issue 5, CLI `convert <in> <out> --dtype F32|F16|BF16` (node dist/cli.js in a child process; run
// `npm run build` first). Expected values come from the independent float references in writer-reference.ts
// (round to nearest even written with double arithmetic), never from the library's kernels.
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { convertFile, convertModel, openModel, type Progress, type SafetensorsError, saveModel, writeFile } from '../../src/node.ts'
import { type FullDisk, fullDiskUnavailable, mountTmpfs } from '../full-disk.ts'
import { parseRange, rangeHandler, serveFiles, startServer, type TestServer } from '../http-server.ts'
import { prng } from '../random.ts'
import { expectError } from '../read-helpers.ts'
import { CLI, cli, cliWith, type Run } from '../run-cli.ts'
import {
  byteSize,
  decodeBF16,
  decodeF8E4M3,
  decodeF8E5M2,
  decodeF16,
  encodeIeee,
  f32ToBF16,
  f32ToF16,
  firstDifference,
  ls,
  orderedEntries,
  pythonJsonDumps,
  type RefTensor,
  randomBytes,
  referenceFile,
  referenceHeaderText,
  splitFile,
  tempDir,
} from '../writer-reference.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const REAL = join(ROOT, 'test', 'fixtures', 'real')
const FLUX = join(REAL, 'sharded', 'fluxml__safetensors.jl')

const temps: string[] = []
function scratch(): string {
  const dir = tempDir('st-convert-')
  temps.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`)
})

const u16 = (b: Uint8Array) => new Uint16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
const u32 = (b: Uint8Array) => new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
const f32 = (b: Uint8Array) => new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
const f64 = (b: Uint8Array) => new Float64Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
const isNaN16 = (bits: number, expBits: number) => {
  const manBits = 15 - expBits
  return ((bits >> manBits) & ((1 << expBits) - 1)) === (1 << expBits) - 1 && (bits & ((1 << manBits) - 1)) !== 0
}
const isNaN32 = (bits: number) => (bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0

/** Tensors (name -> { dtype, shape, bytes }) and metadata of a file, with the test's own parser. */
function parse(bytes: Uint8Array): { tensors: Map<string, RefTensor>; metadata: unknown; text: string } {
  const { text, dataStart } = splitFile(bytes)
  const tensors = new Map<string, RefTensor>()
  let metadata: unknown
  for (const [key, value] of orderedEntries(text)) {
    if (key === '__metadata__') {
      metadata = value
      continue
    }
    const v = value as { dtype: string; shape: number[]; data_offsets: [number, number] }
    tensors.set(key, { name: key, dtype: v.dtype, shape: v.shape, bytes: bytes.subarray(dataStart + v.data_offsets[0], dataStart + v.data_offsets[1]) })
  }
  return { tensors, metadata, text }
}

/**
 * Compares float elements: bit-exact, except that where the expected value is a NaN any NaN is accepted
 * (NaN payloads are not part of the contract).
 */
function expectFloatBits(actual: ArrayLike<number>, expected: ArrayLike<number>, isNotANumber: (bits: number) => boolean, what: string): void {
  expect(actual.length, `${what}: element count`).toBe(expected.length)
  const bad: string[] = []
  for (let i = 0; i < expected.length && bad.length < 8; i++) {
    const ok = isNotANumber(expected[i]) ? isNotANumber(actual[i]) : actual[i] === expected[i]
    if (!ok) bad.push(`[${i}] got 0x${actual[i].toString(16)}, expected 0x${expected[i].toString(16)}`)
  }
  expect(bad, what).toEqual([])
}

/** The header of a converted file must be exactly the reference writer's for the expected tensors. */
function expectHeader(out: Uint8Array, expected: readonly RefTensor[], metadata?: Array<[string, string]>): void {
  const { n, text } = splitFile(out)
  const json = referenceHeaderText(expected, metadata)
  expect(text).toBe(json + ' '.repeat(n - new TextEncoder().encode(json).length))
  expect(n % 8).toBe(0)
  expect(out.length).toBe(8 + n + expected.reduce((s, t) => s + byteSize(t.dtype, t.shape), 0))
}

const bf16Bytes = (bits: number[]) => bytesOf(Uint16Array.from(bits))

// Input: every BF16 bit pattern plus integers and BOOL.
function bf16Input(): { tensors: RefTensor[]; file: Uint8Array } {
  const next = prng(5)
  const all = Array.from({ length: 65536 }, (_, i) => i)
  const tensors: RefTensor[] = [
    { name: 'all_bf16_patterns', dtype: 'BF16', shape: [256, 256], bytes: bf16Bytes(all) },
    { name: 'w', dtype: 'BF16', shape: [3, 5], bytes: randomBytes(30, next) },
    { name: 'scalar', dtype: 'BF16', shape: [], bytes: bf16Bytes([0x3fc0]) },
    { name: 'empty', dtype: 'BF16', shape: [0, 7], bytes: new Uint8Array(0) },
    { name: 'ids', dtype: 'I64', shape: [7], bytes: randomBytes(56, next) },
    { name: 'mask', dtype: 'BOOL', shape: [9], bytes: Uint8Array.from([1, 0, 1, 1, 0, 0, 1, 0, 1]) },
    { name: 'count', dtype: 'I32', shape: [], bytes: randomBytes(4, next) },
    { name: 'none', dtype: 'U8', shape: [0], bytes: new Uint8Array(0) },
    { name: 'q', dtype: 'I8', shape: [4], bytes: randomBytes(4, next) },
    { name: 'u', dtype: 'U16', shape: [3], bytes: randomBytes(6, next) },
  ]
  return { tensors, file: referenceFile(tensors, [['format', 'pt']]) }
}

describe('convert: BF16 -> F32 -> BF16', () => {
  test('BF16 -> F32 is exact, ints and BOOL are copied, metadata kept; F32 -> BF16 gives the original back', async () => {
    const dir = scratch()
    const { tensors, file } = bf16Input()
    writeFileSync(join(dir, 'in.safetensors'), file)

    const toF32 = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'f32.safetensors'), '--dtype', 'F32')
    expect(toF32, toF32.stderr).toMatchObject({ code: 0, stderr: '' })
    const outF32 = new Uint8Array(readFileSync(join(dir, 'f32.safetensors')))
    const expectedF32 = tensors.map(
      (t): RefTensor => (t.dtype === 'BF16' ? { ...t, dtype: 'F32', bytes: bytesOf(Uint32Array.from(u16(t.bytes), (b) => b * 65536)) } : t),
    )
    expectHeader(outF32, expectedF32, [['format', 'pt']])
    const gotF32 = parse(outF32)
    expect(gotF32.metadata).toEqual({ format: 'pt' })
    for (const t of expectedF32) {
      const got = gotF32.tensors.get(t.name)!
      if (t.dtype === 'F32') expectFloatBits(u32(got.bytes), u32(t.bytes), isNaN32, t.name)
      else expect(got.bytes, `${t.name} copied`).toEqual(t.bytes)
    }
    // the values, independently: every finite/infinite BF16 value decodes to the same number in F32
    const decoded = f32(gotF32.tensors.get('all_bf16_patterns')!.bytes)
    for (let b = 0; b < 65536; b++) if (!Number.isNaN(decodeBF16(b))) expect(decoded[b]).toBe(decodeBF16(b))

    const back = await cli('convert', join(dir, 'f32.safetensors'), join(dir, 'back.safetensors'), '--dtype', 'BF16')
    expect(back, back.stderr).toMatchObject({ code: 0, stderr: '' })
    const outBack = new Uint8Array(readFileSync(join(dir, 'back.safetensors')))
    expectHeader(outBack, tensors, [['format', 'pt']])
    const gotBack = parse(outBack)
    for (const t of tensors) {
      const got = gotBack.tensors.get(t.name)!
      if (t.dtype === 'BF16') expectFloatBits(u16(got.bytes), u16(t.bytes), (b) => isNaN16(b, 8), t.name)
      else expect(got.bytes).toEqual(t.bytes)
    }
    // non-NaN data: the round trip is byte-identical to the input file
    const nanFree = (bytes: Uint8Array) => {
      const copy = bytes.slice()
      const t = parse(copy).tensors.get('all_bf16_patterns')!
      const view = new DataView(copy.buffer, t.bytes.byteOffset, t.bytes.byteLength)
      for (let i = 0; i < view.byteLength; i += 2) if (isNaN16(view.getUint16(i, true), 8)) view.setUint16(i, 0x7fc0, true)
      return copy
    }
    expect(firstDifference(nanFree(outBack), nanFree(file))).toBe(-1)
    expect(ls(dir)).toEqual(['back.safetensors', 'f32.safetensors', 'in.safetensors'])
  })
})

describe('convert: other dtypes, rounding to nearest even', () => {
  /** F32 values that probe F16 rounding: ties, overflow, subnormals, specials, and random bit patterns. */
  function f16Probes(): Float32Array {
    const next = prng(9)
    const values: number[] = [
      0,
      -0,
      1,
      -1,
      65504,
      -65504,
      65519.99609375,
      65520,
      65536,
      1e10,
      -1e10,
      Infinity,
      -Infinity,
      NaN,
      2 ** -14,
      2 ** -24,
      2 ** -25,
      2 ** -25 * 1.0000001,
      3 * 2 ** -26,
      2 ** -26,
      2 ** -149,
      1 + 2 ** -11,
      1 + 3 * 2 ** -11,
      1 + 2 ** -11 + 2 ** -20,
      2048 + 1,
      2048 + 3,
      0.1,
      0.2,
      0.3,
      1 / 3,
      Math.PI,
      -Math.E,
      6.1e-5,
      6.0e-8,
      5.96e-8,
      2.98e-8,
      2.99e-8,
    ]
    // exact midpoints between neighbouring F16 values (ties go to the even one), and just off them
    for (let k = 0; k < 3000; k++) {
      const h = Math.floor(next() * 0x7bff)
      const mid = (decodeF16(h) + decodeF16(h + 1)) / 2
      values.push(mid, -mid, Math.fround(mid * (1 + 2 ** -20)), Math.fround(mid * (1 - 2 ** -20)))
    }
    const out = new Float32Array(values.length + 20000)
    out.set(values.map(Math.fround))
    const bits = new Uint32Array(out.buffer, values.length * 4)
    for (let i = 0; i < bits.length; i++) bits[i] = (next() * 2 ** 32) >>> 0 // any pattern, NaNs included
    return out
  }

  test('F32 -> F16 rounds to nearest even (independent reference), ints copied', async () => {
    const dir = scratch()
    const probes = f16Probes()
    const next = prng(10)
    const input: RefTensor[] = [
      { name: 'probe', dtype: 'F32', shape: [probes.length], bytes: bytesOf(probes) },
      {
        name: 'normal',
        dtype: 'F32',
        shape: [100, 10],
        bytes: bytesOf(Float32Array.from({ length: 1000 }, () => (next() - 0.5) * 2 ** Math.floor(next() * 40 - 26))),
      },
      { name: 'steps', dtype: 'I64', shape: [], bytes: randomBytes(8, next) },
      { name: 'flags', dtype: 'BOOL', shape: [3], bytes: Uint8Array.from([0, 1, 1]) },
    ]
    writeFileSync(join(dir, 'in.safetensors'), referenceFile(input))
    const run = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'out.safetensors'), '--dtype', 'F16')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const out = new Uint8Array(readFileSync(join(dir, 'out.safetensors')))
    const expected = input.map((t): RefTensor => (t.dtype === 'F32' ? { ...t, dtype: 'F16', bytes: bytesOf(Uint16Array.from(f32(t.bytes), f32ToF16)) } : t))
    expectHeader(out, expected)
    const got = parse(out)
    for (const t of expected) {
      if (t.dtype === 'F16') expectFloatBits(u16(got.tensors.get(t.name)!.bytes), u16(t.bytes), (b) => isNaN16(b, 5), t.name)
      else expect(got.tensors.get(t.name)!.bytes).toEqual(t.bytes)
    }
    // spot checks of the reference itself, by hand
    expect(f32ToF16(65519.99609375)).toBe(0x7bff)
    expect(f32ToF16(65520)).toBe(0x7c00)
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00) // tie, to even
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02) // tie, to even (up)
    expect(f32ToF16(2 ** -25)).toBe(0) // half the smallest subnormal: tie to 0
    expect(f32ToF16(3 * 2 ** -26)).toBe(1)
    expect(f32ToBF16(1 + 2 ** -8)).toBe(0x3f80)
    expect(f32ToBF16(1 + 3 * 2 ** -8)).toBe(0x3f82)
  })

  test('F16, F64, F8_E4M3, F8_E5M2 -> F32 (exact, or F64 rounded to nearest even); F16 -> BF16 rounds to nearest even', async () => {
    const dir = scratch()
    const next = prng(11)
    const allF16 = Array.from({ length: 65536 }, (_, i) => i)
    const doubles = Float64Array.from({ length: 3000 }, (_, i) =>
      i < 4 ? [1e300, -1e-300, 2 ** -149 * 1.5, 3.4028235677973366e38][i] : (next() - 0.5) * 2 ** Math.floor(next() * 200 - 100),
    )
    const input: RefTensor[] = [
      { name: 'h', dtype: 'F16', shape: [65536], bytes: bf16Bytes(allF16) },
      { name: 'd', dtype: 'F64', shape: [3000], bytes: bytesOf(doubles) },
      { name: 'e4m3', dtype: 'F8_E4M3', shape: [256], bytes: Uint8Array.from({ length: 256 }, (_, i) => i) },
      { name: 'e5m2', dtype: 'F8_E5M2', shape: [16, 16], bytes: Uint8Array.from({ length: 256 }, (_, i) => i) },
      { name: 'k', dtype: 'U8', shape: [5], bytes: randomBytes(5, next) },
    ]
    writeFileSync(join(dir, 'in.safetensors'), referenceFile(input, [['source', 'test "quoted"']]))
    const run = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'out.safetensors'), '--dtype', 'F32')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const decode: Record<string, (b: Uint8Array) => number[]> = {
      F16: (b) => Array.from(u16(b), decodeF16),
      F64: (b) => Array.from(f64(b)),
      F8_E4M3: (b) => Array.from(b, decodeF8E4M3),
      F8_E5M2: (b) => Array.from(b, decodeF8E5M2),
    }
    const toF32Bits = (values: number[]) => bytesOf(new Float32Array(values)) // Math.fround: nearest even
    const expected = input.map((t): RefTensor => (decode[t.dtype] ? { ...t, dtype: 'F32', bytes: toF32Bits(decode[t.dtype](t.bytes)) } : t))
    const out = new Uint8Array(readFileSync(join(dir, 'out.safetensors')))
    expectHeader(out, expected, [['source', 'test "quoted"']])
    const got = parse(out)
    for (const t of expected) {
      if (t.dtype === 'F32') expectFloatBits(u32(got.tensors.get(t.name)!.bytes), u32(t.bytes), isNaN32, t.name)
      else expect(got.tensors.get(t.name)!.bytes).toEqual(t.bytes)
    }

    const toBF16 = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'bf16.safetensors'), '--dtype', 'BF16')
    expect(toBF16, toBF16.stderr).toMatchObject({ code: 0 })
    const h = parse(new Uint8Array(readFileSync(join(dir, 'bf16.safetensors')))).tensors.get('h')!
    expect(h.dtype).toBe('BF16')
    expectFloatBits(
      u16(h.bytes),
      allF16.map((b) => encodeIeee(decodeF16(b), 8, 7)),
      (b) => isNaN16(b, 8),
      'F16 -> BF16',
    )
  })
})

describe('convert: sharded models', () => {
  test('convert index.json outdir --dtype BF16 writes a sharded model that openModel reads', async () => {
    const out = join(scratch(), 'bf16-model')
    const run = await cli('convert', join(FLUX, 'model.safetensors.index.json'), out, '--dtype', 'BF16')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const shardNames = [1, 2, 3, 4, 5, 6].map((i) => `model-0000${i}-of-00006.safetensors`)
    expect(ls(out)).toEqual([...shardNames, 'model.safetensors.index.json'])

    const inputIndex = JSON.parse(readFileSync(join(FLUX, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> }
    const decoders: Record<string, (b: Uint8Array) => number[]> = {
      F16: (b) => Array.from(u16(b), decodeF16),
      BF16: (b) => Array.from(u16(b), decodeBF16),
      F32: (b) => Array.from(f32(b)),
      F64: (b) => Array.from(f64(b)),
      F8_E4M3: (b) => Array.from(b, decodeF8E4M3),
      F8_E5M2: (b) => Array.from(b, decodeF8E5M2),
    }
    const model = await openModel(out)
    let totalSize = 0
    const seen = new Set<string>()
    for (const shard of shardNames) {
      const original = parse(new Uint8Array(readFileSync(join(FLUX, shard))))
      const converted = parse(new Uint8Array(readFileSync(join(out, shard))))
      expect(converted.metadata, `${shard} keeps its metadata`).toEqual(original.metadata)
      for (const t of original.tensors.values()) {
        seen.add(t.name)
        const info = model.info(t.name)
        const got = await model.getTensor(t.name)
        expect(got.shape).toEqual(t.shape)
        if (decoders[t.dtype]) {
          expect(info.dtype, t.name).toBe('BF16')
          // Every float rounds once, to nearest even, straight to BF16 (F64 too: no detour through F32).
          const expected = decoders[t.dtype](t.bytes).map((v) => encodeIeee(v, 8, 7))
          expectFloatBits(got.data as Uint16Array, expected, (b) => isNaN16(b, 8), t.name)
        } else {
          expect(info.dtype).toBe(t.dtype)
          expect(bytesOf(got.data)).toEqual(t.bytes)
        }
        totalSize += bytesOf(got.data).length
      }
    }
    await model.close()
    expect([...seen].sort()).toEqual(Object.keys(inputIndex.weight_map).sort())
    const text = readFileSync(join(out, 'model.safetensors.index.json'), 'utf8')
    const index = JSON.parse(text)
    expect(index.weight_map).toEqual(inputIndex.weight_map)
    expect(index.metadata).toEqual({ total_size: totalSize })
    expect(text).toBe(`${pythonJsonDumps(index)}\n`)
  })

  test('a model folder as input works like its index', async () => {
    const out = join(scratch(), 'f32-model')
    const run = await cli('convert', FLUX, out, '--dtype', 'F32')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const model = await openModel(join(out, 'model.safetensors.index.json'))
    expect(model.info('bfloat16_357').dtype).toBe('F32')
    expect(model.info('int64_357').dtype).toBe('I64')
    await model.close()
  })
})

describe('convert --max-shard-size: resharding', () => {
  const inputIndex = JSON.parse(readFileSync(join(FLUX, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> }
  /** Every tensor of the FluxML model as the shard files hold them, read with JSON.parse (not the library). */
  const originals = new Map<string, RefTensor>()
  for (const shard of new Set(Object.values(inputIndex.weight_map))) {
    for (const t of parse(new Uint8Array(readFileSync(join(FLUX, shard)))).tensors.values()) originals.set(t.name, t)
  }

  /** Reads a written model folder by hand: the index (if any) and every shard; checks the layout rules on the way. */
  function readModel(dir: string, maxShardSize: number): { shards: string[]; tensors: Map<string, RefTensor> } {
    const files = ls(dir)
    const shards = files.filter((f) => f.endsWith('.safetensors'))
    const tensors = new Map<string, RefTensor>()
    const weightMap: Record<string, string> = {}
    for (const shard of shards) {
      const { tensors: held } = parse(new Uint8Array(readFileSync(join(dir, shard))))
      const bytes = [...held.values()].reduce((sum, t) => sum + t.bytes.length, 0)
      // Over the limit only when one tensor alone is larger.
      if (held.size > 1) expect(bytes, `${shard} data`).toBeLessThanOrEqual(maxShardSize)
      for (const t of held.values()) {
        tensors.set(t.name, t)
        weightMap[t.name] = shard
      }
    }
    if (shards.length === 1) {
      expect(files).toEqual(['model.safetensors'])
    } else {
      const n = String(shards.length).padStart(5, '0')
      expect(shards).toEqual(shards.map((_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${n}.safetensors`))
      expect(files).toEqual([...shards, 'model.safetensors.index.json'])
      const text = readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')
      const index = JSON.parse(text)
      expect(index.weight_map).toEqual(weightMap)
      expect(index.metadata.total_size).toBe([...tensors.values()].reduce((sum, t) => sum + t.bytes.length, 0))
      expect(text).toBe(`${pythonJsonDumps(index)}\n`)
    }
    return { shards, tensors }
  }

  function expectSameTensors(got: Map<string, RefTensor>): void {
    expect([...got.keys()].sort()).toEqual([...originals.keys()].sort())
    for (const [name, t] of originals) {
      const g = got.get(name)!
      expect({ dtype: g.dtype, shape: g.shape }, name).toEqual({ dtype: t.dtype, shape: t.shape })
      expect(Buffer.compare(g.bytes, t.bytes), `${name} bytes`).toBe(0)
    }
  }

  test('a 6-shard model into more shards (300 bytes each), then back into one file: tensors byte-equal', async () => {
    const more = join(scratch(), 'more')
    const run = await cli('convert', join(FLUX, 'model.safetensors.index.json'), more, '--max-shard-size', '300')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const split = readModel(more, 300)
    expect(split.shards.length).toBeGreaterThan(6)
    expectSameTensors(split.tensors)
    const model = await openModel(more)
    expect(model.names().length).toBe(originals.size)
    await model.close()

    const fewer = join(scratch(), 'fewer')
    const back = await cli('convert', more, fewer, '--max-shard-size', '5GB')
    expect(back, back.stderr).toMatchObject({ code: 0 })
    const one = readModel(fewer, 5e9)
    expect(one.shards).toEqual(['model.safetensors'])
    expectSameTensors(one.tensors)
  })

  test('into fewer shards (2KB): 3 shards of at most 2,000 bytes, tensors byte-equal', async () => {
    const out = join(scratch(), 'two-kb')
    const run = await cli('convert', FLUX, out, '--max-shard-size', '2KB')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const { shards, tensors } = readModel(out, 2000)
    expect(shards.length).toBeGreaterThan(1)
    expect(shards.length).toBeLessThan(6)
    expectSameTensors(tensors)
  })

  test('a single file with --dtype F32 and --max-shard-size: shards of converted tensors', async () => {
    const dir = scratch()
    const { tensors, file } = bf16Input()
    writeFileSync(join(dir, 'in.safetensors'), file)
    const run = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'out'), '--dtype', 'F32', '--max-shard-size', '1KiB')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const got = readModel(join(dir, 'out'), 1024)
    expect([...got.tensors.keys()].sort()).toEqual(tensors.map((t) => t.name).sort())
    for (const t of tensors) {
      const g = got.tensors.get(t.name)!
      if (t.dtype === 'BF16') {
        expect(g.dtype).toBe('F32')
        expectFloatBits(
          u32(g.bytes),
          Array.from(u16(t.bytes), (b) => (b << 16) >>> 0),
          isNaN32,
          t.name,
        )
      } else expect(Buffer.compare(g.bytes, t.bytes), t.name).toBe(0)
    }
  })

  test.each(['0', '-5', 'lots', '2XB', '1.5'])('--max-shard-size %s is bad usage (exit 2), nothing written', async (size) => {
    const dir = scratch()
    const run = await cli('convert', FLUX, join(dir, 'out'), '--max-shard-size', size)
    expect(run.code, run.stderr).toBe(2)
    expect(ls(dir)).toEqual([])
  })
})

describe('convert: sharded models, atomically', () => {
  test('a shard failing mid-conversion leaves the output folder as it was: no shard, no index, no temporary file', async () => {
    // Serve the model over loopback, refusing the first data read of the fifth shard (403), after four
    // shards are already converted.
    const failing = 'model-00005-of-00006.safetensors'
    const server = await startServer(
      rangeHandler((path) => (existsSync(join(FLUX, path)) ? new Uint8Array(readFileSync(join(FLUX, path))) : undefined), {
        fault: (_, log) => (log.path === `/${failing}` && !(log.range ?? '').startsWith('bytes=0-') ? { kind: 'status', status: 403 } : undefined),
      }),
    )
    try {
      const out = scratch()
      writeFileSync(join(out, 'keep.txt'), 'already here')
      const run = await cli('convert', `${server.origin}/model.safetensors.index.json`, out, '--dtype', 'F32')
      expect(run.code).toBe(1)
      expect(run.stderr).toContain('Io')
      expect(server.log.some((e) => e.path === `/${failing}`)).toBe(true)
      expect(ls(out)).toEqual(['keep.txt'])
    } finally {
      await server.close()
    }
  })
})

describe('convert: progress bar', () => {
  test('on a terminal, stderr shows a progress bar up to 100%; not on a pipe', async () => {
    const dir = scratch()
    const { file } = bf16Input()
    writeFileSync(join(dir, 'in.safetensors'), file)
    // `script` gives the child a pseudo-terminal
    const run = await new Promise<Run>((resolve) => {
      const command = [process.execPath, CLI, 'convert', join(dir, 'in.safetensors'), join(dir, 'out.safetensors'), '--dtype', 'F32']
        .map((a) => `'${a}'`)
        .join(' ')
      execFile('script', ['-qec', command, '/dev/null'], { encoding: 'utf8' }, (error, stdout, stderr) => resolve({ code: error ? 1 : 0, stdout, stderr }))
    })
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/\[#{40}\]\s+100%/)
    const piped = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'out2.safetensors'), '--dtype', 'F32')
    // stdout has the one-line summary alone (cli-contract.test.ts)
    expect(piped).toMatchObject({ code: 0, stderr: '' })
  })
})

describe('convert: errors', () => {
  test.each([
    [['convert', 'in.safetensors', 'out.safetensors']],
    [['convert', 'in.safetensors', 'out.safetensors', '--dtype', 'F64']],
    [['convert', 'in.safetensors', 'out.safetensors', '--dtype', 'float16']],
    [['convert', 'in.safetensors', 'out.safetensors', '--dtype']],
    [['convert', 'in.safetensors', '--dtype', 'F32']],
    [['convert', 'in.safetensors', 'out.safetensors', 'extra', '--dtype', 'F32']],
    [['convert', 'in.safetensors', 'out.safetensors', '--dtype', 'F32', '--bogus']],
  ])('bad usage exits 2 and writes nothing: %j', async (args) => {
    const dir = scratch()
    const { file } = bf16Input()
    writeFileSync(join(dir, 'in.safetensors'), file)
    const run = await cli(...args.map((a) => (a.endsWith('.safetensors') || a === 'extra' ? join(dir, a) : a)))
    expect(run.code, run.stderr).toBe(2)
    expect(run.stderr).toMatch(/see safetensors-wasm --help/)
    expect(ls(dir)).toEqual(['in.safetensors'])
  })

  /** Small broken inputs, built by hand. */
  function broken(): Array<[string, Uint8Array, string]> {
    const good = referenceFile([{ name: 'a', dtype: 'BF16', shape: [4], bytes: bf16Bytes([1, 2, 3, 4]) }])
    const overlap = (() => {
      const header = new TextEncoder().encode('{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[2,6]}}')
      const f = new Uint8Array(8 + header.length + 6)
      new DataView(f.buffer).setBigUint64(0, BigInt(header.length), true)
      f.set(header, 8)
      return f
    })()
    return [
      [
        'InvalidHeaderLength',
        new Uint8Array(readFileSync(join(REAL, 'invalid', 'syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors'))),
        'the real invalid fixture',
      ],
      ['MetadataIncompleteBuffer', good.subarray(0, good.length - 1), 'a truncated file'],
      ['InvalidOffset', overlap, 'overlapping tensors'],
      ['HeaderTooSmall', new Uint8Array(5), 'five bytes'],
    ]
  }

  test.each(broken())('an invalid input (%s) exits 1 with the code on stderr and writes no output', async (code, bytes) => {
    const dir = scratch()
    writeFileSync(join(dir, 'in.safetensors'), bytes)
    const run = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'out.safetensors'), '--dtype', 'F32')
    expect(run.code, run.stderr).toBe(1)
    expect(run.stderr).toContain(code)
    expect(ls(dir)).toEqual(['in.safetensors'])
  })

  test('an invalid input leaves an existing output as it was', async () => {
    const dir = scratch()
    writeFileSync(join(dir, 'in.safetensors'), broken()[1][1])
    writeFileSync(join(dir, 'out.safetensors'), 'keep me')
    const run = await cli('convert', join(dir, 'in.safetensors'), join(dir, 'out.safetensors'), '--dtype', 'BF16')
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('MetadataIncompleteBuffer')
    expect(ls(dir)).toEqual(['in.safetensors', 'out.safetensors'])
    expect(readFileSync(join(dir, 'out.safetensors'), 'utf8')).toBe('keep me')
  })

  test('a missing input exits 1 with Io', async () => {
    const dir = scratch()
    const run = await cli('convert', join(dir, 'nope.safetensors'), join(dir, 'out.safetensors'), '--dtype', 'F32')
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('Io')
    expect(ls(dir)).toEqual([])
  })

  describe('an HTTP source that fails half-way', () => {
    let server: TestServer
    let input: Uint8Array
    let failFrom: number
    let struck: boolean
    beforeAll(async () => {
      const next = prng(77)
      // Four 64 KiB BF16 tensors. The first read past the middle of the data loses its connection half-way
      // through its body; its resumed request, and every later one, finds the file gone (410).
      input = referenceFile(['a', 'b', 'c', 'd'].map((name) => ({ name, dtype: 'BF16', shape: [128, 256], bytes: randomBytes(65536, next) })))
      failFrom = splitFile(input).dataStart + 2 * 65536 + 10
      server = await startServer(
        rangeHandler(() => input, {
          fault: (_, log) => {
            const range = parseRange(log.range, input.length)
            if (typeof range !== 'object' || range.end < failFrom) return undefined
            if (struck) return { kind: 'status', status: 410 }
            struck = true
            return { kind: 'drop', at: 0.5 }
          },
        }),
      )
    })
    afterAll(() => server.close())

    test.each([
      ['absent', false],
      ['existing', true],
    ])('exit 1, the output (%s) unchanged, no temporary file', async (_, existed) => {
      const dir = scratch()
      mkdirSync(join(dir, 'sub'))
      const target = join(dir, 'sub', 'out.safetensors')
      if (existed) writeFileSync(target, 'previous')
      server.clear()
      struck = false
      const run = await cli('convert', `${server.origin}/model.safetensors`, target, '--dtype', 'F32')
      expect(run.code, run.stderr).toBe(1)
      expect(run.stderr).toMatch(/Io/)
      expect(run.stderr).toMatch(/HTTP 410/)
      expect(server.ranges().length, 'the header and the first tensors were read before the failure').toBeGreaterThanOrEqual(3)
      expect(ls(join(dir, 'sub'))).toEqual(existed ? ['out.safetensors'] : [])
      if (existed) expect(readFileSync(target, 'utf8')).toBe('previous')
    })

    test('the same server without the failure converts fine (the failure is what the test above measures)', async () => {
      const dir = scratch()
      const saved = failFrom
      failFrom = Infinity
      try {
        const run = await cli('convert', `${server.origin}/model.safetensors`, join(dir, 'out.safetensors'), '--dtype', 'F32')
        expect(run, run.stderr).toMatchObject({ code: 0 })
      } finally {
        failFrom = saved
      }
      expect(ls(dir)).toEqual(['out.safetensors'])
    })
  })
})

// ------------------------------------------------------------------------------------------------------
// Issue 19, item 1: writes that fail. A real full disk (a 4 MiB tmpfs, test/full-disk.ts), fed from a
// slow HTTP server and from a fast local file; and outputs that cannot be created at all (a read-only disk).

describe.skipIf(fullDiskUnavailable !== undefined)('convert: failed writes', () => {
  // Input: 64 MiB of F32 tensors (32 MiB once in F16), far more than the 4 MiB disk takes.
  const inputDir = tempDir('st-full-disk-input-')
  temps.push(inputDir)
  const input = join(inputDir, 'model.safetensors')
  const model = join(inputDir, 'model')
  const tensorBytes = randomBytes(16 << 20, prng(19))
  const tensors = ['a', 'b', 'c', 'd'].map((name): RefTensor => ({ name, dtype: 'F32', shape: [4096, 1024], bytes: tensorBytes }))
  let disk: FullDisk
  let readOnly: FullDisk
  let slow: TestServer
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)

  beforeAll(async () => {
    writeFileSync(input, referenceFile(tensors))
    mkdirSync(model)
    const shards = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']
    shards.forEach((shard, i) => writeFileSync(join(model, shard), referenceFile(tensors.slice(2 * i, 2 * i + 2))))
    const weightMap = Object.fromEntries(tensors.map((t, i) => [t.name, shards[i >> 1]]))
    writeFileSync(join(model, 'model.safetensors.index.json'), pythonJsonDumps({ metadata: { total_size: 64 << 20 }, weight_map: weightMap }))
    writeFileSync(join(model, 'config.json'), '{"torch_dtype": "float32"}\n')
    // 32 MiB/s a connection: the first 16 MiB chunk takes half a second, and the write that fails overlaps the next read.
    slow = await serveFiles(
      { 'model.safetensors': input, ...Object.fromEntries([...shards, 'model.safetensors.index.json'].map((f) => [`model/${f}`, join(model, f)])) },
      { bandwidth: { perConnection: 32 << 20 } },
    )
    disk = mountTmpfs('4m')
    readOnly = mountTmpfs('1m', 'ro')
    process.on('unhandledRejection', onUnhandled)
  })
  beforeEach(() => {
    unhandled.length = 0
  })
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled)
    await slow.close()
    disk.unmount()
    readOnly.unmount()
  })

  /** A folder on the full disk holding `earlier` (bytes of an earlier output) at `name`; removed after the test. */
  function onFullDisk(name: string, earlier: Uint8Array): { dir: string; target: string; cleanup(): void } {
    const dir = join(disk.dir, `case-${Math.random().toString(36).slice(2)}`)
    mkdirSync(join(dir, name, '..'), { recursive: true })
    writeFileSync(join(dir, name), earlier)
    return { dir, target: join(dir, name), cleanup: () => rmSync(dir, { recursive: true, force: true }) }
  }

  /** Every file under `dir`, with its bytes' SHA-256: what must not change. */
  function snapshot(dir: string): Record<string, string> {
    const files: Record<string, string> = {}
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (entry.isFile())
        files[relative(dir, join(entry.parentPath, entry.name))] = createHash('sha256')
          .update(readFileSync(join(entry.parentPath, entry.name)))
          .digest('hex')
    }
    return files
  }

  /** The files under `dir` this process still holds open (a deleted temporary file's space comes back only once closed). */
  function openFilesUnder(dir: string): string[] {
    return readdirSync('/proc/self/fd')
      .map((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`)
        } catch {
          return ''
        }
      })
      .filter((target) => target.startsWith(`${dir}/`))
  }

  const earlierOutput = randomBytes(1 << 20, prng(20))
  const SOURCES = ['a slow HTTP server', 'a local file'] as const
  const fileFrom = (source: (typeof SOURCES)[number]) => (source === 'a local file' ? input : `${slow.url}model.safetensors`)
  const modelFrom = (source: (typeof SOURCES)[number]) => (source === 'a local file' ? model : `${slow.url}model/model.safetensors.index.json`)

  /** The error `call` rejects with: an Io SafetensorsError naming `target`, never a temporary file. */
  async function expectIoNaming(call: () => Promise<unknown>, target: string): Promise<SafetensorsError> {
    const error = await expectError(call, 'Io')
    expect(error.message).toContain(target)
    expect(error.message).not.toMatch(/\.tmp\b/)
    return error
  }

  test.for([
    ['convertFile', 'a slow HTTP server'],
    ['convertFile', 'a local file'],
    ['convertModel', 'a slow HTTP server'],
    ['convertModel', 'a local file'],
  ] as const)('%s into a full disk from %s rejects with Io naming the output; what was there stays byte for byte', async ([call, source]) => {
    const { dir, target, cleanup } = onFullDisk(call === 'convertFile' ? 'out.safetensors' : 'model.safetensors', earlierOutput)
    try {
      const before = snapshot(dir)
      const error =
        call === 'convertFile'
          ? await expectIoNaming(() => convertFile(fileFrom(source), target, { dtype: 'F16' }), target)
          : await expectIoNaming(() => convertModel(modelFrom(source), dir, { dtype: 'F16' }), dir)
      expect(error.message).toMatch(/ENOSPC/)
      expect(snapshot(dir)).toEqual(before)
      expect(unhandled.map(String)).toEqual([])
    } finally {
      cleanup()
    }
  })

  test.for(SOURCES)('the CLI converting into a full disk from %s exits 1 with one line naming the output, no stack', async (source) => {
    const from = fileFrom(source)
    const { dir, target, cleanup } = onFullDisk('out.safetensors', earlierOutput)
    try {
      const before = snapshot(dir)
      // A rejection that nothing handles would end the run as a crash, whatever handlers the CLI sets.
      const run = await cliWith({ env: { NODE_OPTIONS: '--unhandled-rejections=strict' } }, 'convert', from, target, '--dtype', 'F16')
      expect(run.code, run.stderr).toBe(1)
      expect(run.stderr.trimEnd().split('\n'), run.stderr).toHaveLength(1)
      expect(run.stderr).toContain(target)
      expect(run.stderr).toMatch(/ENOSPC/)
      expect(run.stderr).not.toMatch(/\.tmp\b|\n\s+at /)
      expect(snapshot(dir)).toEqual(before)
    } finally {
      cleanup()
    }
  })

  test('writeFile and saveModel into a full disk reject with Io naming the output; nothing is left', async () => {
    const { dir, target, cleanup } = onFullDisk('out.safetensors', earlierOutput)
    try {
      const before = snapshot(dir)
      const big = [{ name: 'w', dtype: 'F32' as const, shape: [2 << 20], data: new Float32Array(2 << 20) }]
      await expectIoNaming(() => writeFile(target, big), target)
      expect(snapshot(dir)).toEqual(before)
      await expectIoNaming(() => saveModel(dir, [...big, { ...big[0], name: 'v' }], { maxShardSize: 4 << 20 }), dir)
      expect(snapshot(dir)).toEqual(before)
      expect(openFilesUnder(dir)).toEqual([])
    } finally {
      cleanup()
    }
  })

  test('a model saved into a new folder that fails leaves no folder behind', async () => {
    const { dir, cleanup } = onFullDisk('earlier.bin', earlierOutput)
    try {
      const big = [{ name: 'w', dtype: 'F32' as const, shape: [2 << 20], data: new Float32Array(2 << 20) }]
      await expectIoNaming(() => convertModel(model, join(dir, 'converted', 'model'), { dtype: 'F32', maxShardSize: 4 << 20 }), join(dir, 'converted', 'model'))
      await expectIoNaming(
        () => saveModel(join(dir, 'saved', 'model'), [...big, { ...big[0], name: 'v' }], { maxShardSize: 4 << 20 }),
        join(dir, 'saved', 'model'),
      )
      expect(ls(dir)).toEqual(['earlier.bin'])
      expect(openFilesUnder(dir)).toEqual([])
    } finally {
      cleanup()
    }
  })

  test('an output that cannot be created (a missing folder, a folder at its path, a read-only disk) is Io naming it', async () => {
    const dir = scratch()
    const small = join(dir, 'in.safetensors')
    writeFileSync(small, bf16Input().file)
    mkdirSync(join(dir, 'folder.safetensors'))
    const readOnlyTarget = join(readOnly.dir, 'out.safetensors')
    for (const target of [join(dir, 'missing', 'out.safetensors'), join(dir, 'folder.safetensors'), readOnlyTarget]) {
      const error = await expectIoNaming(() => convertFile(small, target, { dtype: 'F32' }), target)
      expect(error.message).not.toMatch(/rename/)
    }
    // A model onto an existing file: its folder cannot be made.
    await expectIoNaming(() => convertModel(FLUX, small, { dtype: 'F32' }), small)
    expect(ls(dir)).toEqual(['folder.safetensors', 'in.safetensors'])
    expect(ls(join(dir, 'folder.safetensors'))).toEqual([])
    // The CLI's lines for the first two are in cli-contract.test.ts.
    const run = await cli('convert', small, readOnlyTarget, '--dtype', 'F32')
    expect(run.code, run.stderr).toBe(1)
    expect(run.stderr.trimEnd().split('\n'), run.stderr).toHaveLength(1)
    expect(run.stderr).toContain(readOnlyTarget)
    expect(run.stderr).toMatch(/EROFS/)
    expect(ls(readOnly.dir)).toEqual([])
  })
})

// ------------------------------------------------------------------------------------------------------
// Issue 19, item 5: convertFile and convertModel report one progress series (and the CLI's bar shows it).

describe('convert: one progress series', () => {
  // 32 MiB of BF16 in four tensors, each read in two chunks (a 16 MiB F32 chunk holds 4 MiB of BF16):
  // enough reads for the reads' own meter to show if it leaked into the series.
  const dir = tempDir('st-progress-')
  temps.push(dir)
  const bytes = randomBytes(8 << 20, prng(55))
  const tensors = ['a', 'b', 'c', 'd'].map((name): RefTensor => ({ name, dtype: 'BF16', shape: [2048, 2048], bytes }))
  const input = join(dir, 'in.safetensors')
  writeFileSync(input, referenceFile(tensors))
  const tensorBytes = tensors.reduce((sum, t) => sum + t.bytes.length, 0)

  /** What makes one series: a single total, loaded never going back, the last event complete. */
  function expectOneSeries(events: Progress[], total: number): void {
    expect(events.length, 'events').toBeGreaterThan(1)
    expect([...new Set(events.map((e) => e.total))], 'distinct totals').toEqual([total])
    const decreases = events.filter((e, i) => i > 0 && e.loaded < events[i - 1].loaded).length
    expect(decreases, 'times loaded went back').toBe(0)
    expect(events[0].loaded, 'the first event comes before any byte').toBe(0)
    expect(events.at(-1), 'the last event').toEqual({ loaded: total, total })
  }

  test.for(['a local file', 'HTTP'])(
    'convertFile from %s: one total (the input tensor bytes), loaded never decreasing, ending at loaded === total',
    async (from) => {
      const server = await serveFiles({ 'in.safetensors': input })
      try {
        const events: Progress[] = []
        const source = from === 'HTTP' ? `${server.url}in.safetensors` : input
        await convertFile(source, join(scratch(), 'out.safetensors'), { dtype: 'F32', onProgress: (p) => events.push({ ...p }) })
        expectOneSeries(events, tensorBytes)
      } finally {
        await server.close()
      }
    },
  )

  test('convertModel, resharded: one total over every shard, the tensor bytes the index lists', async () => {
    const index = JSON.parse(readFileSync(join(FLUX, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> }
    let total = 0
    for (const shard of new Set(Object.values(index.weight_map))) {
      for (const t of parse(new Uint8Array(readFileSync(join(FLUX, shard)))).tensors.values()) total += t.bytes.length
    }
    const events: Progress[] = []
    await convertModel(FLUX, join(scratch(), 'out'), { dtype: 'BF16', maxShardSize: 1000, onProgress: (p) => events.push({ ...p }) })
    expectOneSeries(events, total)
  })

  test('the CLI bar on a terminal: its percentage never goes back and its total never changes', async () => {
    const out = join(scratch(), 'out.safetensors')
    const command = [process.execPath, CLI, 'convert', input, out, '--dtype', 'F32'].map((a) => `'${a}'`).join(' ')
    const { stdout } = await new Promise<{ stdout: string }>((resolve, reject) =>
      execFile('script', ['-qec', command, '/dev/null'], { encoding: 'utf8' }, (error, stdout) => (error ? reject(error) : resolve({ stdout }))),
    )
    const bars = [...stdout.matchAll(/\] +(\d+)% +(\d+) of (\d+) MiB/g)].map((m) => ({ percent: Number(m[1]), total: Number(m[3]) }))
    expect(bars.length).toBeGreaterThan(1)
    expect([...new Set(bars.map((b) => b.total))]).toEqual([tensorBytes / 2 ** 20])
    expect(bars.filter((b, i) => i > 0 && b.percent < bars[i - 1].percent)).toEqual([])
    expect(bars.at(-1)?.percent).toBe(100)
  })
})

// ------------------------------------------------------------------------------------------------------
// Issue 20, item 4: converting a model folder writes a whole model folder: the other files come along,
// config.json naming the new dtype.

describe('convert: a model folder comes whole', () => {
  // config.json as transformers writes it (json.dumps(indent=2, sort_keys=True)), with floats that
  // JSON.parse would not give back as written (10000.0, 1e-05), a sub-config with a dtype of its own, a
  // "dtype" in a list that is not a config's, and a string that looks like a key.
  const config = (dtype: string) => `{
  "architectures": [
    "LlamaForCausalLM"
  ],
  "layers": [
    {
      "dtype": "float32"
    }
  ],
  "model_type": "llama",
  "note": "\\"torch_dtype\\": \\"float32\\"",
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "rope_type": "llama3"
  },
  "rope_theta": 10000.0,
  "text_config": {
    "dtype": "${dtype}",
    "torch_dtype": "${dtype}"
  },
  "torch_dtype": "${dtype}",
  "transformers_version": "4.57.1"
}
`
  const others: Record<string, string | Uint8Array> = {
    'generation_config.json': '{\n  "bos_token_id": 1,\n  "eos_token_id": 2\n}\n',
    'tokenizer.json': randomBytes(100_000, prng(200)),
    'tokenizer_config.json': '{"add_bos_token": true, "chat_template": "{{ messages }}"}',
    'special_tokens_map.json': '{"bos_token": "<s>"}',
    'README.md': '# A model\n\nÜmlauts and all.\n',
    '.gitattributes': '*.safetensors filter=lfs diff=lfs merge=lfs -text\n',
    'empty.txt': '',
  }
  const shardNames = [1, 2, 3, 4, 5, 6].map((i) => `model-0000${i}-of-00006.safetensors`)

  /** The FluxML model with the files of a Hugging Face model folder around it, and things that must stay behind. */
  function modelFolder(): string {
    const dir = join(scratch(), 'in')
    mkdirSync(dir)
    for (const f of [...shardNames, 'model.safetensors.index.json']) writeFileSync(join(dir, f), readFileSync(join(FLUX, f)))
    writeFileSync(join(dir, 'config.json'), config('float32'))
    for (const [name, bytes] of Object.entries(others)) writeFileSync(join(dir, name), bytes)
    // As in a Hugging Face cache's snapshot: a link to the file.
    writeFileSync(join(dir, '..', 'vocab-blob'), 'a\nb\n')
    symlinkSync(join(dir, '..', 'vocab-blob'), join(dir, 'vocab.txt'))
    // Not the model's: weights in another file, and a subfolder.
    writeFileSync(join(dir, 'consolidated.safetensors'), referenceFile([]))
    mkdirSync(join(dir, 'original'))
    writeFileSync(join(dir, 'original', 'params.json'), '{}')
    return dir
  }

  function expectOthersCopied(input: string, out: string): void {
    for (const name of [...Object.keys(others), 'vocab.txt']) {
      expect(Buffer.compare(readFileSync(join(out, name)), readFileSync(join(input, name))), `${name} byte-identical`).toBe(0)
    }
  }
  const copied = [...Object.keys(others), 'config.json', 'vocab.txt']

  test.for([
    ['BF16', 'bfloat16'],
    ['F16', 'float16'],
    ['F32', 'float32'],
  ])('convert <folder> <out> --dtype %s: every other file comes along, config.json names %s', async ([dtype, torchName]) => {
    const input = modelFolder()
    const out = join(scratch(), 'out')
    const run = await cli('convert', input, out, '--dtype', dtype)
    expect(run, run.stderr).toMatchObject({ code: 0 })
    expect(ls(out)).toEqual([...copied, ...shardNames, 'model.safetensors.index.json'].sort())
    expectOthersCopied(input, out)
    expect(readFileSync(join(out, 'config.json'), 'utf8')).toBe(config(torchName))
  })

  test('resharded (--max-shard-size) and from the index path: the same files come along', async () => {
    const input = modelFolder()
    const out = join(scratch(), 'out')
    const run = await cli('convert', join(input, 'model.safetensors.index.json'), out, '--dtype', 'F16', '--max-shard-size', '2KB')
    expect(run, run.stderr).toMatchObject({ code: 0 })
    const shards = ls(out).filter((f) => f.endsWith('.safetensors'))
    expect(shards.length).toBeGreaterThan(1)
    expect(ls(out)).toEqual([...copied, ...shards, 'model.safetensors.index.json'].sort())
    expectOthersCopied(input, out)
    expect(readFileSync(join(out, 'config.json'), 'utf8')).toBe(config('float16'))
  })

  test('without --dtype (resharding only), config.json is copied byte for byte', async () => {
    const input = modelFolder()
    const out = join(scratch(), 'out')
    await convertModel(input, out, { maxShardSize: 5e9 })
    expect(ls(out)).toEqual([...copied, 'model.safetensors'].sort())
    expect(readFileSync(join(out, 'config.json'), 'utf8')).toBe(config('float32'))
  })

  test('over HTTP nothing but the weights is written: a server lists no folder', async () => {
    const input = modelFolder()
    const server = await serveFiles(Object.fromEntries(ls(input).map((f) => [f, join(input, f)])))
    try {
      const out = join(scratch(), 'out')
      await convertModel(`${server.url}model.safetensors.index.json`, out, { dtype: 'BF16' })
      expect(ls(out)).toEqual([...shardNames, 'model.safetensors.index.json'])
    } finally {
      await server.close()
    }
  })

  test.for([
    ['not JSON', '{"torch_dtype": "float32",}'],
    ['not an object', '["float32"]'],
    ['not UTF-8', new Uint8Array([0x7b, 0xff, 0x7d])],
  ] as const)('a config.json that is %s: InvalidHeaderDeserialization naming it, and nothing is written', async ([, text]) => {
    const input = modelFolder()
    writeFileSync(join(input, 'config.json'), text)
    const out = join(scratch(), 'out')
    mkdirSync(out)
    const error = await expectError(() => convertModel(input, out, { dtype: 'BF16' }), 'InvalidHeaderDeserialization')
    expect(error.message).toContain(join(input, 'config.json'))
    expect(ls(out)).toEqual([])
  })

  test('a key written with an escape is the same key; strings and arrays hide nothing', async () => {
    const input = modelFolder()
    const text =
      '{"torch\\u005fdtype":"float32","a":["torch_dtype","dtype"],"b":{"torch_dtype":"float32"},"x_config":{"y_config":{"dtype":"float32"}},"c":"}{"}'
    writeFileSync(join(input, 'config.json'), text)
    const out = join(scratch(), 'out')
    await convertModel(input, out, { dtype: 'BF16' })
    expect(readFileSync(join(out, 'config.json'), 'utf8')).toBe(
      '{"torch\\u005fdtype":"bfloat16","a":["torch_dtype","dtype"],"b":{"torch_dtype":"float32"},"x_config":{"y_config":{"dtype":"bfloat16"}},"c":"}{"}',
    )
  })
})

describe('convert: on the pool', () => {
  test('--workers 0, 3 and the default write the same bytes; BF16 to F32 as the format defines it', async () => {
    const dir = scratch()
    // Several 16 MiB chunks of the pool's slots, and a tensor small enough to stay on this thread.
    const big = Uint16Array.from({ length: 10_000_000 }, (_, i) => (i * 2654435761) >>> 16)
    const input = join(dir, 'in.safetensors')
    await writeFile(input, [
      { name: 'big', dtype: 'BF16', shape: [2500, 4000], data: big },
      { name: 'small', dtype: 'BF16', shape: [3], data: big.subarray(0, 3) },
    ])
    const outputs: Buffer[] = []
    for (const workers of ['0', '3', undefined]) {
      const output = join(dir, `out-${workers}.safetensors`)
      const run = await cli('convert', input, output, '--dtype', 'F32', ...(workers === undefined ? [] : ['--workers', workers]))
      expect(run, run.stderr).toMatchObject({ code: 0, stderr: '' })
      outputs.push(readFileSync(output))
    }
    expect(outputs[1].equals(outputs[0])).toBe(true)
    expect(outputs[2].equals(outputs[0])).toBe(true)
    const parsed = parse(new Uint8Array(outputs[0]))
    const values = u32(parsed.tensors.get('big')!.bytes)
    expect(values.length).toBe(big.length)
    expect(values.findIndex((bits, i) => bits !== big[i] * 65536)).toBe(-1)
  })

  test.each(['-1', '1.5', 'many', '257'])('--workers %s is a usage error', async (workers) => {
    const run = await cli(
      'convert',
      join(REAL, 'fluxml__safetensors.jl__model.safetensors'),
      join(scratch(), 'x.safetensors'),
      '--dtype',
      'F32',
      '--workers',
      workers,
    )
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('--workers')
  })
})
