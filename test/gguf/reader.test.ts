import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type GgufFile, type GgufValue, openGguf } from '../../src/gguf-node.ts'
import { GGML_TYPES, type Ggml, type GgmlTypeName, ggmlUnsupported, loadGgml } from '../ggml.ts'
import { firstF32Difference, firstRoundingDifference } from '../ggml-compare.ts'
import { ggufBytes, type TensorSpec, type Value } from '../gguf-bytes.ts'
import { FIXTURES, fileBytes, type Golden, type GoldenTensor, golden, NAMES } from '../gguf-reader-fixtures.ts'
import { serveFiles } from '../http-server.ts'
import { serverCases } from '../nginx.ts'
import { expectError, sha256 } from '../read-helpers.ts'

/** A metadata value as the golden JSON writes it: 64-bit integers tagged, non-finite floats tagged, arrays as lists. */
function encode(value: GgufValue | number | bigint | boolean | string): unknown {
  if (typeof value === 'bigint') return { bigint: String(value) }
  if (typeof value === 'number' && !Number.isFinite(value)) return { float: Number.isNaN(value) ? 'nan' : value > 0 ? 'inf' : '-inf' }
  if (typeof value === 'object') return Array.from(value as ArrayLike<GgufValue>, encode)
  return value
}

/** The little-endian bytes of a tensor's values (the host is little-endian). */
const bytesOf = (data: ArrayBufferView) => new Uint8Array(data.buffer, data.byteOffset, data.byteLength)

/** Holds an open file to its golden: layout, every key's type and value, every tensor's info and plain values. */
async function expectAsGgufPyReads(file: GgufFile, expected: Golden, what: string): Promise<void> {
  const { header } = file
  expect([header.version, header.byteOrder, header.alignment, header.dataStart, header.fileSize], what).toEqual([
    expected.version,
    expected.byteOrder,
    expected.alignment,
    expected.dataOffset,
    expected.fileSize,
  ])
  expect(Object.keys(file.metadata), `${what}: keys in file order`).toEqual(expected.fields.map((f) => f.key))
  for (const field of expected.fields) {
    const type = header.metadataTypes[field.key]
    const types = type.startsWith('ARRAY[') ? ['ARRAY', type.slice(6, -1)] : [type]
    // gguf-py names an array of arrays by its first element's type; this reader by what all have in common.
    expect(field.types.slice(0, types.length), `${what}: type of ${field.key}`).toEqual(types)
    // gguf-py flattens arrays of arrays (and garbles those of mixed types): those are held to what was written.
    expect(encode(file.metadata[field.key]), `${what}: ${field.key}`).toEqual(field.written === undefined ? field.value : encode(field.written as GgufValue))
  }
  expect(file.names(), `${what}: tensor names`).toEqual(expected.tensors.map((t) => t.name))
  for (const t of expected.tensors) {
    const info = file.info(t.name)
    expect({ type: info.type, shape: info.shape, byteLength: info.byteLength, offset: info.offset }, `${what}: ${t.name}`).toEqual({
      type: t.type,
      shape: t.shape,
      byteLength: t.bytes,
      offset: t.offset,
    })
    if (t.valuesSha256) {
      const tensor = await file.getTensor(t.name)
      expect([tensor.dtype, tensor.shape, sha256(bytesOf(tensor.data))], `${what}: ${t.name}'s values`).toEqual([t.type, t.shape, t.valuesSha256])
    }
  }
}

describe('GGUF files as gguf-py reads them', () => {
  test('the fixtures cover v2, big-endian files of both writers, another alignment, llama.cpp`s converter and every type', () => {
    const goldens = NAMES.map(golden)
    expect(goldens.map((g) => g.version)).toContain(2)
    expect(goldens.filter((g) => g.byteOrder === 'big').length).toBe(2)
    expect(goldens.map((g) => g.alignment)).toContain(8)
    const types = new Set(goldens.flatMap((g) => g.tensors.map((t) => t.type)))
    // Every ggml type gguf-py 0.19 knows (it has no Q2_0), but Q8_1, whose blocks it sizes at 40 bytes to ggml's 36.
    expect([...types].sort()).toEqual(
      Object.keys(GGML_TYPES)
        .filter((t) => t !== 'Q8_1' && t !== 'Q2_0')
        .sort(),
    )
    const valueTypes = new Set(goldens.flatMap((g) => g.fields.flatMap((f) => f.types)))
    expect(valueTypes.size).toBe(13)
  })

  test.each(NAMES)('%s from its bytes', async (name) => {
    await using file = await openGguf(fileBytes(name))
    await expectAsGgufPyReads(file, golden(name), name)
  })

  test.each(NAMES)('%s from a path, a file: URL and a Blob', async (name) => {
    const path = join(FIXTURES, name)
    for (const source of [path, pathToFileURL(path).href, new Blob([fileBytes(name)])]) {
      const file = await openGguf(source)
      try {
        await expectAsGgufPyReads(file, golden(name), `${name} from ${typeof source === 'string' ? source : 'a Blob'}`)
      } finally {
        await file.close()
      }
    }
  })
})

const SERVERS = serverCases("the tests' server", () => serveFiles(Object.fromEntries(NAMES.map((n) => [n, join(FIXTURES, n)]))), FIXTURES, '/ranged')

describe.each(SERVERS)('GGUF over HTTP: %s', (_name, start) => {
  let running: Awaited<ReturnType<typeof start>>
  beforeAll(async () => {
    running = await start()
  })
  afterAll(async () => {
    await running?.close()
  })

  test.each(NAMES)('%s as gguf-py reads it', async (name) => {
    await using file = await openGguf(running.server.url + name)
    await expectAsGgufPyReads(file, golden(name), `${name} over HTTP`)
  })

  test('every quantized tensor reads as from the bytes, bit for bit', async () => {
    const name = 'every-type.gguf'
    await using remote = await openGguf(running.server.url + name)
    await using local = await openGguf(fileBytes(name))
    const quantized = golden(name).tensors.filter((t) => t.valuesSha256 === undefined)
    expect(quantized.length).toBe(3 * 25)
    for (const t of quantized) {
      const [a, b] = [await remote.getTensor(t.name), await local.getTensor(t.name)]
      expect(sha256(bytesOf(a.data)), t.name).toBe(sha256(bytesOf(b.data)))
    }
  })

  test("the header is read in ranges, then a tensor's bytes alone", async () => {
    const { server } = running
    const name = 'every-type.gguf'
    await server.settled()
    server.clear()
    await using file = await openGguf(server.url + name)
    await server.settled()
    expect(server.ranges()).toEqual(['bytes=0-65535'])
    server.clear()
    const t = golden(name).tensors.find((t) => t.name === 'F32.3d')!
    await file.getTensor(t.name)
    await server.settled()
    expect(server.ranges()).toEqual([`bytes=${t.offset}-${t.offset + t.bytes - 1}`])
  })
})

/** A valid file to break: a few keys, an F32 tensor and a Q8_0 tensor of 2 rows. */
function spec(): { metadata: Array<[string, Value]>; tensors: TensorSpec[] } {
  return {
    metadata: [
      ['general.architecture', { type: 'STRING', value: 'test' }],
      ['test.count', { type: 'UINT32', value: 3 }],
    ],
    tensors: [
      { name: 'w', ne: [4, 2], type: 'F32', data: new Uint8Array(32) },
      { name: 'q', ne: [32, 2], type: 'Q8_0', data: new Uint8Array(68) },
    ],
  }
}

describe('bad GGUF: InvalidGguf, naming what and where', () => {
  const bad = async (bytes: Uint8Array, ...words: string[]) => {
    const error = await expectError(() => openGguf(bytes), 'InvalidGguf')
    for (const word of words) expect(error.message).toContain(word)
    return error
  }

  test('the valid file they break reads', async () => {
    const file = await openGguf(ggufBytes(spec()))
    expect(file.names()).toEqual(['w', 'q'])
    expect(file.info('q')).toMatchObject({ type: 'Q8_0', shape: [2, 32], byteLength: 68 })
  })

  test('another magic, version 1, version 4', async () => {
    const bytes = ggufBytes(spec())
    bytes[0] = 0x7b
    await bad(bytes, 'not a GGUF file', '7b 47 55 46')
    await bad(ggufBytes({ ...spec(), version: 1 }), 'version 1 is not supported')
    await bad(ggufBytes({ ...spec(), version: 4 }), 'version 4')
  })

  test('a file cut anywhere in its header or data', async () => {
    const bytes = ggufBytes(spec())
    const { dataStart } = (await openGguf(bytes)).header
    for (let cut = 0; cut < bytes.length; cut++) {
      const error = await expectError(() => openGguf(bytes.subarray(0, cut)), 'InvalidGguf')
      expect(error.message, `cut at ${cut}`).toMatch(cut < dataStart - 20 ? /truncated|more than|ends at/ : /past the end|truncated|more than/)
    }
  })

  test('counts and lengths that claim more than the file holds, never allocated', async () => {
    await bad(ggufBytes({ ...spec(), tensorCount: 2n ** 40n }), '1099511627776 tensors')
    await bad(ggufBytes({ ...spec(), keyValueCount: 2n ** 64n - 1n }), '18446744073709551615 key-value pairs')
    const strings = (count: bigint): Value => ({ type: 'ARRAY', of: 'STRING', values: ['a'], count })
    await bad(ggufBytes({ metadata: [['many', strings(2n ** 40n)]] }), 'key "many"', '1099511627776 elements of STRING')
    const floats: Value = { type: 'ARRAY', of: 'FLOAT64', values: [1], count: 2n ** 61n }
    await bad(ggufBytes({ metadata: [['f', floats]] }), 'key "f"', '2305843009213693952 elements')
    // A key whose length claims 2^63 bytes.
    const bytes = ggufBytes(spec())
    new DataView(bytes.buffer).setBigUint64(24, 2n ** 63n, true)
    await bad(bytes, 'at byte 24', '9223372036854775808 bytes')
  })

  test('arrays nested deeper than 64', async () => {
    let value: Value = { type: 'ARRAY', of: 'UINT8', values: [1] }
    for (let i = 0; i < 100; i++) value = { type: 'ARRAY', of: 'ARRAY', values: [value] }
    await bad(ggufBytes({ metadata: [['deep', value]] }), 'key "deep"', 'deeper than 64')
  })

  test('an unknown value type, in a key and in an array', async () => {
    const bytes = ggufBytes({ metadata: [['k', { type: 'UINT32', value: 1 }]] })
    new DataView(bytes.buffer).setUint32(24 + 8 + 1, 13, true)
    await bad(bytes, 'key "k"', 'unknown value type 13')
  })

  test('duplicate keys and tensor names', async () => {
    const s = spec()
    await bad(ggufBytes({ ...s, metadata: [...s.metadata, ['test.count', { type: 'UINT32', value: 4 }]] }), 'key "test.count"', 'duplicate')
    await bad(ggufBytes({ ...s, tensors: [s.tensors[0], { ...s.tensors[0] }] }), 'tensor "w"', 'duplicate')
  })

  test('a string that is not UTF-8', async () => {
    const bytes = ggufBytes({ metadata: [['k', { type: 'STRING', value: 'abc' }]] })
    bytes[24 + 8 + 1 + 4 + 8] = 0xff
    await bad(bytes, 'key "k"', 'not UTF-8')
  })

  test('general.alignment of another type, or not a power of two', async () => {
    const s = spec()
    await bad(ggufBytes({ ...s, metadata: [['general.alignment', { type: 'UINT64', value: 32n }]] }), 'must be a UINT32, not a UINT64')
    await bad(ggufBytes({ ...s, metadata: [['general.alignment', { type: 'UINT32', value: 24 }]], alignment: 24 }), 'alignment 24 is not a power of two')
    await bad(ggufBytes({ ...s, metadata: [['general.alignment', { type: 'UINT32', value: 0 }]] }), 'alignment 0')
  })

  test('an unknown tensor type, too many dimensions, a dimension above 2^53', async () => {
    const [w, q] = spec().tensors
    await bad(ggufBytes({ tensors: [w, { ...q, type: 4 }] }), 'tensor "q"', 'unknown ggml type 4')
    await bad(ggufBytes({ tensors: [{ ...w, ne: [4, 2, 1, 1, 1] }] }), 'tensor "w"', '5 dimensions')
    await bad(ggufBytes({ tensors: [{ ...w, ne: [2n ** 60n, 0n] }] }), 'tensor "w"', 'dimension 0 is 1152921504606846976')
  })

  test('a shape whose rows are not whole blocks', async () => {
    const [w, q] = spec().tensors
    await bad(ggufBytes({ tensors: [w, { ...q, ne: [16, 4] }] }), 'tensor "q"', 'rows of 16 elements are not whole Q8_0 blocks of 32')
  })

  test('a tensor past the end of the file, and one that overlaps another', async () => {
    const [w, q] = spec().tensors
    await bad(ggufBytes({ tensors: [w, { ...q, ne: [32, 2000] }] }), 'tensor "q"', 'past the end')
    await bad(ggufBytes({ tensors: [{ ...w, ne: [2n ** 40n, 2n ** 12n] }] }), 'tensor "w"', 'past the end')
    const big = { ...w, ne: [32], data: new Uint8Array(128) }
    await bad(ggufBytes({ tensors: [big, { ...w, name: 'v', ne: [4], data: new Uint8Array(16), offset: 64n }] }), 'tensor "v"', 'overlaps tensor "w"')
  })

  test('a tensor offset that is not a multiple of the alignment', async () => {
    const [w] = spec().tensors
    await bad(ggufBytes({ tensors: [{ ...w, offset: 4n }] }), 'tensor "w"', 'offset 4 is not a multiple of the alignment 32')
  })

  test('empty tensors, empty arrays, no tensors: valid', async () => {
    const file = await openGguf(
      ggufBytes({
        metadata: [['empty', { type: 'ARRAY', of: 'INT64', values: [] }]],
        tensors: [
          { name: 'e', ne: [0, 3], type: 'Q4_K', data: new Uint8Array(0) },
          { name: 's', ne: [], type: 'F32', data: new Uint8Array(4) },
        ],
      }),
    )
    expect(file.metadata.empty).toEqual(new BigInt64Array(0))
    expect(file.info('e')).toMatchObject({ shape: [3, 0], byteLength: 0 })
    expect((await file.getTensor('s')).shape).toEqual([])
    expect((await openGguf(ggufBytes({}))).names()).toEqual([])
  })
})

const unsupported = ggmlUnsupported()
if (unsupported) console.log(`gguf-reader: ${unsupported}; the quantized values are not judged by ggml`)

/** A fixture's quantized tensors: those with no plain values in the golden. */
const quantizedOf = (name: string) => golden(name).tensors.filter((t) => t.valuesSha256 === undefined)

describe.skipIf(unsupported)('quantized tensors against ggml', () => {
  let ggml: Ggml
  beforeAll(() => {
    ggml = loadGgml()
  }, 300_000)

  /** ggml's F32 values of a tensor of a fixture: dequantize_row_<type> of its bytes where gguf-py finds them. */
  const ggmlValues = (name: string, t: GoldenTensor) =>
    ggml.dequantize(t.type as GgmlTypeName, fileBytes(name).subarray(t.offset, t.offset + t.bytes), t.elements)
  const types = [...new Set(quantizedOf('every-type.gguf').map((t) => t.type))]

  test.each(types)('%s, 1-D, 2-D and 3-D: F32 bit for bit as ggml, F16 and BF16 that rounded once', async (type) => {
    await using file = await openGguf(fileBytes('every-type.gguf'))
    for (const t of quantizedOf('every-type.gguf').filter((t) => t.type === type)) {
      const expected = ggmlValues('every-type.gguf', t)
      const f32 = await file.getTensor(t.name)
      expect([f32.dtype, f32.shape], t.name).toEqual(['F32', t.shape])
      expect(firstF32Difference(f32.data as Float32Array, expected), `${t.name} as F32`).toBeUndefined()
      for (const to of ['F16', 'BF16'] as const) {
        const half = await file.getTensor(t.name, { dtype: to })
        expect(firstRoundingDifference(half.data as Uint16Array, expected, to), `${t.name} as ${to}`).toBeUndefined()
      }
    }
  })

  // Blocks whose 16-bit words run through zeros of both signs, subnormals, infinities, NaNs and ordinary values (their
  // bytes give E8M0 scales 0, 1 and NaN's 0xff, UE4M3 ones their special 0x7f), a word further on in each block:
  // whatever a type's scales are, each takes each of those values in some block.
  const SPECIAL_WORDS = [0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e00, 0x7f7f, 0x3c00, 0xc000]
  const edgeBlocks = (typeSize: number, count: number) =>
    Uint8Array.from({ length: typeSize * count }, (_, i) => {
      const [block, at] = [Math.floor(i / typeSize), i % typeSize]
      const word = SPECIAL_WORDS[(Math.floor(at / 2) + block) % SPECIAL_WORDS.length]
      return at % 2 === 0 ? word & 0xff : word >> 8
    })
  const blockTypes = (Object.keys(GGML_TYPES) as GgmlTypeName[]).filter((t) => !['F32', 'F16', 'BF16', 'F64', 'I8', 'I16', 'I32', 'I64', 'Q8_1'].includes(t))

  test.each(blockTypes)('%s: zero, subnormal, negative, infinite and NaN scales, in 1-D, 2-D and 3-D tensors, as ggml', async (type) => {
    const [block, typeSize] = [ggml.blockSize(type), ggml.typeSize(type)]
    const shapes = [[10 * block], [5 * block, 2], [block, 5, 2]]
    const data = edgeBlocks(typeSize, 10)
    const bytes = ggufBytes({ tensors: shapes.map((ne, i) => ({ name: `t${i}`, ne, type, data })) })
    await using file = await openGguf(bytes)
    const expected = ggml.dequantize(type, data, 10 * block)
    for (const [i, ne] of shapes.entries()) {
      const f32 = await file.getTensor(`t${i}`)
      expect(f32.shape).toEqual([...ne].reverse())
      expect(firstF32Difference(f32.data as Float32Array, expected), `${type} ${ne.length}-D as F32`).toBeUndefined()
      for (const to of ['F16', 'BF16'] as const) {
        const half = await file.getTensor(`t${i}`, { dtype: to })
        expect(firstRoundingDifference(half.data as Uint16Array, expected, to), `${type} ${ne.length}-D as ${to}`).toBeUndefined()
      }
    }
    // The scales do take those values: some of the results are zero, some NaN or infinite; not for IQ1_M, whose F16
    // scale is the top nibbles of four words (these words make it neither zero nor infinite), and NVFP4 has no
    // infinite or NaN results (ggml decodes every UE4M3 scale as finite).
    if (type !== 'IQ1_M') {
      expect(expected.some((v) => v === 0)).toBe(true)
      expect(expected.some((v) => !Number.isFinite(v))).toBe(type !== 'NVFP4')
    }
  })

  test('a big-endian file of llama.cpp`s swapping: every tensor as ggml reads the little-endian file it came from', async () => {
    await using big = await openGguf(fileBytes('big-endian-converted.gguf'))
    const source = 'big-endian-converted.source.gguf'
    const quantized = quantizedOf(source)
    expect(quantized.length).toBeGreaterThan(5)
    for (const t of quantized) {
      const tensor = await big.getTensor(t.name)
      expect(firstF32Difference(tensor.data as Float32Array, ggmlValues(source, t)), t.name).toBeUndefined()
    }
  })
})
