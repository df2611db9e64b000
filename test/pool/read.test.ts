// Reads on the conversion pool (src/pool/read.ts) give the very bits the calling thread gives ({ workers: 0 }),
// for every dtype pair, every kind of source, slices, big-endian files and a caller's `out`; and values
// against the tests' own float reference where the conversion is not a copy. Errors are those of the
// calling thread: the same code and path. Where results cannot be shared memory (a page that is not cross-origin
// isolated, played here by a `#workers` that says so), each tensor is one piece and its result is handed over.
import { truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { POOL_MIN_BYTES } from '../../src/core/convert.ts'
import { open, type SafetensorsFile } from '../../src/node.ts'
import { DTYPE_BITS, FORMAT_DTYPES } from '../dtype-table.ts'
import { FLOAT_SOURCES, referenceConvert } from '../float-reference.ts'
import { rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { prng } from '../random.ts'
import { buildFile, expectError, expectSameBytes } from '../read-helpers.ts'
import { scratchFolders } from '../write-helpers.ts'

// Enough elements that every result is past the pool's threshold and cut in several pieces (the smallest
// piece is 2^18 elements): twice as many for the floats, whose F16 and BF16 results are half the size of F32's.
// Rows of a multiple of 4 elements, so that F4 and F6 slices of whole rows are whole bytes, but of no power of
// two above.
const ROWS = 4
const countOf = (dtype: string) => (POOL_MIN_BYTES / 4 + 48) * (FLOAT_SOURCES.includes(dtype) ? 2 : 1)
const WORKER_COUNTS = [undefined, 1, 3] as const

function randomBytes(length: number, seed: number): Uint8Array {
  const random = prng(seed)
  const bytes = new Uint8Array(length)
  for (let i = 0; i < length; i++) bytes[i] = random() * 256
  return bytes
}

function tensorOf(dtype: string, seed: number) {
  const count = countOf(dtype)
  return { name: `t.${dtype}`, dtype, shape: [ROWS, count / ROWS], bytes: randomBytes((count * DTYPE_BITS.get(dtype)!) / 8, seed) }
}

/** Every dtype but C64 (which converts to nothing). */
const TENSORS = FORMAT_DTYPES.filter(([dtype]) => dtype !== 'C64').map(([dtype], i) => tensorOf(dtype, i + 1))
const FILE = buildFile(TENSORS)
/** The tensors that every kind of source is read for. */
const SMALL = buildFile(TENSORS.filter((t) => ['BF16', 'F8_E5M2', 'U8'].includes(t.dtype)))

/** The targets a dtype converts to, from the format's rules (DESIGN.md): itself, F32, and F16/BF16 from floats. */
function targetsOf(dtype: string): string[] {
  return [...new Set([dtype, 'F32', ...(FLOAT_SOURCES.includes(dtype) ? ['F16', 'BF16'] : [])])]
}

const scratch = scratchFolders()
let path: string
let server: TestServer

beforeAll(async () => {
  path = join(scratch(), 'pool.safetensors')
  writeFileSync(path, FILE)
  server = await startServer(rangeHandler(() => SMALL))
})
afterAll(() => server?.close())

async function read(file: SafetensorsFile, name: string, dtype: string, ranges?: Array<[number, number]>) {
  const options = { dtype: dtype as 'F32' }
  const tensor = ranges ? await file.getSlice(name, ranges, options) : await file.getTensor(name, options)
  return tensor.data
}

describe('the same bits on the pool as on the calling thread', () => {
  test('every dtype to every target it converts to, with 1, 3 and the default number of workers', async () => {
    const single = await open(path, { workers: 0 })
    const pooled = await Promise.all(WORKER_COUNTS.map((workers) => open(path, { workers })))
    for (const tensor of TENSORS) {
      for (const to of targetsOf(tensor.dtype)) {
        const expected = await read(single, tensor.name, to)
        expect(expected.buffer).toBeInstanceOf(ArrayBuffer)
        for (const [i, file] of pooled.entries()) {
          const data = await read(file, tensor.name, to)
          if ((countOf(tensor.dtype) * DTYPE_BITS.get(to)!) / 8 >= POOL_MIN_BYTES)
            expect(data.buffer, `${tensor.dtype} -> ${to} read on the pool`).toBeInstanceOf(SharedArrayBuffer)
          expectSameBytes(data, expected, `${tensor.dtype} -> ${to}, workers ${WORKER_COUNTS[i]}`)
        }
      }
    }
  })

  test.each(['BF16', 'F8_E4M3', 'F6_E2M3', 'F64', 'I64'])('%s values against the reference conversion', async (dtype) => {
    const file = await open(path)
    const tensor = TENSORS.find((t) => t.dtype === dtype)!
    for (const to of targetsOf(dtype).filter((to) => to !== dtype)) {
      expectSameBytes(await read(file, tensor.name, to), referenceConvert(dtype, to, tensor.bytes), `${dtype} -> ${to}`)
    }
  })

  test('slices of several runs, F4 and F6 among them', async () => {
    const single = await open(path, { workers: 0 })
    const pooled = await open(path)
    for (const dtype of ['F4', 'F6_E3M2', 'BF16', 'F32']) {
      // Rows 1-3, the columns from a multiple of 4 in: one run per row, each of several pieces.
      const ranges: Array<[number, number]> = [
        [1, 4],
        [4, countOf(dtype) / ROWS - 8],
      ]
      const expected = await read(single, `t.${dtype}`, 'F32', ranges)
      expectSameBytes(await read(pooled, `t.${dtype}`, 'F32', ranges), expected, `a slice of ${dtype}`)
    }
  })

  test('a big-endian file: swapped on the workers before the conversion', async () => {
    const swapped = buildFile(
      TENSORS.filter((t) => ['BF16', 'F32', 'F64', 'I16'].includes(t.dtype)).map((t) => {
        const unit = DTYPE_BITS.get(t.dtype)! / 8
        const bytes = t.bytes.slice()
        for (let i = 0; i < bytes.length; i += unit) bytes.subarray(i, i + unit).reverse()
        return { ...t, bytes }
      }),
    )
    const bigPath = join(scratch(), 'big-endian.safetensors')
    writeFileSync(bigPath, swapped)
    const single = await open(path, { workers: 0 })
    const pooled = await open(bigPath, { byteOrder: 'big' })
    for (const name of pooled.names()) {
      for (const to of targetsOf(pooled.info(name).dtype)) expectSameBytes(await read(pooled, name, to), await read(single, name, to), `${name} -> ${to}`)
    }
  })
})

const sharedSmall = new Uint8Array(new SharedArrayBuffer(SMALL.length))
sharedSmall.set(SMALL)
/** Every kind of source, holding SMALL (a file holding FILE). */
const SOURCES: Array<[string, () => Parameters<typeof open>[0]]> = [
  ['a local file', () => path],
  ['bytes in memory', () => SMALL],
  ['bytes in shared memory', () => sharedSmall],
  ['a Blob', () => new Blob([SMALL as Uint8Array<ArrayBuffer>])],
  ['an http URL', () => `${server.url}small.safetensors`],
]

describe('every kind of source', () => {
  test.each(SOURCES)('%s: tensors and slices as the calling thread reads them', async (_, source) => {
    const single = await open(path, { workers: 0 })
    const pooled = await open(source())
    for (const name of ['t.BF16', 't.F8_E5M2', 't.U8']) {
      expectSameBytes(await read(pooled, name, 'F32'), await read(single, name, 'F32'), name)
      const ranges: Array<[number, number]> = [
        [0, 3],
        [8, countOf(name.slice(2)) / ROWS],
      ]
      expectSameBytes(await read(pooled, name, 'F32', ranges), await read(single, name, 'F32', ranges), `a slice of ${name}`)
    }
  })

  test('Promise.all and tensors() as a loop of getTensor', async () => {
    const single = await open(path, { workers: 0 })
    const pooled = await open(path)
    const expected = await Promise.all(TENSORS.map((t) => read(single, t.name, 'F32')))
    const all = await Promise.all(TENSORS.map((t) => read(pooled, t.name, 'F32')))
    const iterated: ArrayBufferView[] = []
    for await (const tensor of pooled.tensors({ dtype: 'F32' })) iterated.push(tensor.data)
    expected.forEach((data, i) => {
      expectSameBytes(all[i], data, `Promise.all: ${TENSORS[i].name}`)
      expectSameBytes(iterated[i], data, `tensors(): ${TENSORS[i].name}`)
    })
  })
})

describe('results', () => {
  test.each([
    ['an ArrayBuffer', () => new ArrayBuffer(countOf('BF16') * 4 + 64)],
    ['a SharedArrayBuffer', () => new SharedArrayBuffer(countOf('BF16') * 4 + 64)],
  ])('into %s of the caller: written there', async (_, make) => {
    const single = await open(path, { workers: 0 })
    const pooled = await open(path)
    const out = make()
    const data = (await pooled.getTensor('t.BF16', { dtype: 'F32', out: new Float32Array(out, 16) })).data
    expect(data.buffer).toBe(out)
    expect(data.byteOffset).toBe(16)
    expectSameBytes(data, await read(single, 't.BF16', 'F32'))
  })

  test('small results stay on the calling thread, in memory of their own', async () => {
    const file = buildFile([{ name: 'x', dtype: 'BF16', shape: [POOL_MIN_BYTES / 4 - 1], bytes: randomBytes(POOL_MIN_BYTES / 2 - 2, 9) }])
    const data = (await (await open(file)).getTensor('x', { dtype: 'F32' })).data
    expect(data.buffer).toBeInstanceOf(ArrayBuffer)
  })

  test('progress counts every byte once', async () => {
    const events: number[] = []
    const file = await open(path)
    await file.getTensor('t.F16', { dtype: 'F32', onProgress: ({ loaded }) => events.push(loaded) })
    expect(events.at(-1)).toBe(countOf('F16') * 2)
    expect(events.length).toBeGreaterThan(2)
  })
})

describe('failures are the calling thread’s', () => {
  test('a file truncated after its open: Io naming the path, as on the calling thread', async () => {
    const shrinking = join(scratch(), 'shrinking.safetensors')
    writeFileSync(shrinking, FILE)
    const single = await open(shrinking, { workers: 0 })
    const pooled = await open(shrinking)
    truncateSync(shrinking, FILE.length - 1000)
    for (const file of [single, pooled]) {
      const error = await expectError(() => file.getTensor(TENSORS.at(-1)!.name, { dtype: 'F32' }), 'Io')
      expect(error.path).toBe(shrinking)
      expect(error.message).toContain(shrinking)
    }
  })

  test('an abort stops the read: Aborted, and the pieces not begun are not read', async () => {
    const big = join(scratch(), 'big.safetensors')
    const elements = 1 << 25
    writeFileSync(big, buildFile([{ name: 'w', dtype: 'BF16', shape: [elements], bytes: new Uint8Array(elements * 2) }]))
    const file = await open(big, { workers: 1 })
    const controller = new AbortController()
    let loaded = 0
    const reading = file.getTensor('w', {
      dtype: 'F32',
      signal: controller.signal,
      onProgress: (event) => {
        loaded = event.loaded
        controller.abort()
      },
    })
    await expectError(() => reading, 'Aborted')
    expect(loaded).toBeGreaterThan(0)
    expect(loaded).toBeLessThan(elements)
  })

  test.each([
    [-1, RangeError],
    [1.5, RangeError],
    ['2', TypeError],
  ])('workers: %j is a %o', async (workers, type) => {
    await expect(open(path, { workers: workers as number })).rejects.toThrow(type)
  })
})

describe('where results cannot be shared memory', () => {
  /** The tasks the pool's workers were sent. */
  const posted = vi.hoisted((): Array<{ runs?: unknown[] }> => [])
  let unshared: typeof import('../../src/node.ts')

  beforeAll(async () => {
    vi.resetModules()
    vi.doMock('#workers', async (importOriginal) => {
      const { workers } = await importOriginal<typeof import('../../src/platform/node-workers.ts')>()
      return {
        workers: {
          ...workers!,
          sharedMemory: () => false,
          start(...args: Parameters<NonNullable<typeof workers>['start']>) {
            const worker = workers!.start(...args)
            const post = (message: never, transfer?: unknown[]) => {
              posted.push(message)
              worker.post(message, transfer as never)
            }
            return { ...worker, post }
          },
        },
      }
    })
    unshared = await import('../../src/node.ts')
  })
  afterAll(() => {
    vi.doUnmock('#workers')
    vi.resetModules()
  })

  // Shared memory in, where there is none, cannot be.
  const sources = SOURCES.filter(([name]) => name !== 'bytes in shared memory')
  test.each(sources)('%s: each tensor one piece, its result ordinary memory, the bits the calling thread gives', async (_, source) => {
    const single = await open(path, { workers: 0 })
    const pooled = await unshared.open(source())
    for (const name of ['t.BF16', 't.F8_E5M2']) {
      const ranges: Array<[number, number]> = [
        [0, 3],
        [8, countOf(name.slice(2)) / ROWS],
      ]
      for (const range of [undefined, ranges]) {
        posted.length = 0
        const data = await read(pooled, name, 'F32', range)
        expect(data.buffer).toBeInstanceOf(ArrayBuffer)
        expect(posted.filter((task) => task.runs).length, `${name}: pieces`).toBe(1)
        expectSameBytes(data, await read(single, name, 'F32', range), range ? `a slice of ${name}` : name)
      }
    }
  })

  test('Promise.all: the tensors spread over the workers', async () => {
    const single = await open(path, { workers: 0 })
    const pooled = await unshared.open(path)
    posted.length = 0
    const all = await Promise.all(TENSORS.map((t) => read(pooled, t.name, 'F32')))
    expect(posted.filter((task) => task.runs).length).toBe(TENSORS.length)
    for (const [i, t] of TENSORS.entries()) expectSameBytes(all[i], await read(single, t.name, 'F32'), t.name)
  })
})
