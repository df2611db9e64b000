// validateStream against parseHeader: for the same complete bytes, the same verdict (the same code, or
// the same tensors), whatever the chunking. Every fixture and VALIDATE_MUTANTS mutants (test/mutants.ts),
// each fed in random chunks of 1 byte to 64 KiB. Then the ways a stream arrives (Blob.stream(), a Node
// Readable through Readable.toWeb) and the forward option.
//
//   VALIDATE_MUTANTS=100000 VALIDATE_SEED=123|random npx vitest run test/read/validate-stream.test.ts
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { describe, expect, test } from 'vitest'
import { parseHeader, SafetensorsError, validateStream } from '../../src/index.ts'
import { FIXTURES_NUMBERS, FIXTURES_REAL, makeFile, realFixtures } from '../helpers.ts'
import { EVERY_OUTCOME, mutant, seeds } from '../mutants.ts'
import { prng } from '../random.ts'
import { buildFile } from '../read-helpers.ts'

const COUNT = Number(process.env.VALIDATE_MUTANTS ?? 10_000)
const SEED = process.env.VALIDATE_SEED === 'random' ? (Math.random() * 2 ** 32) >>> 0 : Number(process.env.VALIDATE_SEED ?? 20260114) >>> 0

/** A stream of `bytes` in chunks of random sizes: each chunk 1 byte to 64 KiB, log-uniform, so that tiny and large both come often. */
function chunked(bytes: Uint8Array, next: () => number): ReadableStream<Uint8Array> {
  let at = 0
  return new ReadableStream({
    pull(controller) {
      if (at === bytes.length) return controller.close()
      const size = Math.floor(2 ** (next() * 16.0001))
      // Copies, as a network hands out fresh buffers: a view of `bytes` would let a bug read ahead.
      controller.enqueue(bytes.slice(at, Math.min(bytes.length, at + Math.max(1, size))))
      at = Math.min(bytes.length, at + Math.max(1, size))
    },
  })
}

type Verdict = { ok: true; tensors: string; fileSize: number; metadata: string } | { ok: false; code: string }

function verdictOf(run: () => { tensors: unknown[]; fileSize: number; metadata: unknown }): Verdict {
  try {
    const h = run()
    return { ok: true, tensors: JSON.stringify(h.tensors), fileSize: h.fileSize, metadata: JSON.stringify(h.metadata) }
  } catch (error) {
    if (error instanceof SafetensorsError) return { ok: false, code: error.code }
    throw error
  }
}

async function streamVerdict(stream: ReadableStream<Uint8Array>): Promise<Verdict> {
  let header: Awaited<ReturnType<typeof validateStream>>
  try {
    header = await validateStream(stream)
  } catch (error) {
    if (error instanceof SafetensorsError) return { ok: false, code: error.code }
    throw error
  }
  return verdictOf(() => header)
}

describe('validateStream gives parseHeader verdict', () => {
  const fixtures = realFixtures()
  test.each([...fixtures.valid, ...fixtures.invalid])('%s', async (name) => {
    const bytes = new Uint8Array(readFileSync(FIXTURES_REAL + name))
    const expected = verdictOf(() => parseHeader(bytes))
    expect(expected.ok).toBe(!name.startsWith('invalid/'))
    for (let round = 0; round < 3; round++) expect(await streamVerdict(chunked(bytes, prng(round + 1)))).toEqual(expected)
  })

  test(`${COUNT} mutants in random chunkings`, async () => {
    console.log(`validateStream: seed=${SEED} mutants=${COUNT} (VALIDATE_SEED=${SEED} VALIDATE_MUTANTS=${COUNT})`)
    const corpus = seeds()
    const outcomes = new Map<string, number>()
    const failures: string[] = []
    for (let i = 0; i < COUNT && failures.length < 10; i++) {
      const { m, bytes } = mutant(SEED, i, corpus)
      const expected = verdictOf(() => parseHeader(bytes))
      const got = await streamVerdict(chunked(bytes, prng(SEED + i)))
      const key = expected.ok ? 'ok' : expected.code
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
      if (JSON.stringify(got) !== JSON.stringify(expected)) {
        failures.push(
          `mutant ${i}: parseHeader ${JSON.stringify(expected).slice(0, 200)}, validateStream ${JSON.stringify(got).slice(0, 200)}; ${m.log.join('; ')}`,
        )
      }
    }
    console.log('validateStream: outcomes', Object.fromEntries([...outcomes].sort()))
    expect(failures, failures.join('\n')).toEqual([])
    // Every rule must be reached, or the agreement says little.
    for (const code of EVERY_OUTCOME) {
      expect(outcomes.get(code) ?? 0, code).toBeGreaterThan(0)
    }
  }, 60_000)
})

describe('validateStream', () => {
  const good = buildFile([
    { name: 'a', dtype: 'F32', shape: [3], bytes: new Uint8Array(12).fill(1) },
    { name: 'b', dtype: 'U8', shape: [5], bytes: new Uint8Array(5).fill(2) },
  ]) as Uint8Array<ArrayBuffer>

  test("numbers about the largest double (test/fixtures/numbers): the reference's verdicts", async () => {
    const golden = JSON.parse(readFileSync(join(FIXTURES_NUMBERS, 'overflow.json'), 'utf8')) as Array<[string, boolean]>
    const wrong: string[] = []
    for (const [number, valid] of golden) {
      const bytes = makeFile(`{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"x":{"y":[${number}]}}}`, 4)
      const got = await streamVerdict(chunked(bytes, prng(number.length)))
      if (got.ok !== valid || (!got.ok && got.code !== 'InvalidHeaderDeserialization')) wrong.push(`${number}: ${JSON.stringify(got)}`)
    }
    expect(wrong.slice(0, 20), `${wrong.length} disagreements`).toEqual([])
  })

  test('a Blob, and a Node Readable through Readable.toWeb', async () => {
    expect((await validateStream(new Blob([good]).stream())).tensors.map((t) => t.name)).toEqual(['a', 'b'])
    const parts = [good.subarray(0, 3), good.subarray(3, 40), good.subarray(40)].map((p) => Buffer.from(p))
    const web = Readable.toWeb(Readable.from(parts)) as ReadableStream<Uint8Array>
    expect((await validateStream(web)).fileSize).toBe(good.length)
  })

  test('the header is rejected as soon as it has arrived, before the rest is read', async () => {
    const bad = makeFile('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,7]}}', 1 << 20)
    let pulled = 0
    let cancelled: unknown
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(bad.slice(pulled, pulled + 4096))
        pulled += 4096
      },
      cancel(reason) {
        cancelled = reason
      },
    })
    await expect(validateStream(stream)).rejects.toMatchObject({ code: 'TensorInvalidInfo' })
    expect(pulled).toBeLessThanOrEqual(2 * 4096)
    expect(cancelled).toBeInstanceOf(SafetensorsError)
  })

  test('trailing bytes are rejected as they arrive; a stream that ends early at its end', async () => {
    await expect(validateStream(new Blob([good, new Uint8Array(1)]).stream())).rejects.toMatchObject({ code: 'MetadataIncompleteBuffer' })
    await expect(validateStream(new Blob([good.subarray(0, good.length - 1)]).stream())).rejects.toMatchObject({ code: 'MetadataIncompleteBuffer' })
    await expect(validateStream(new Blob([good.subarray(0, 7)]).stream())).rejects.toMatchObject({ code: 'HeaderTooSmall' })
    await expect(validateStream(new Blob([good.subarray(0, 20)]).stream())).rejects.toMatchObject({ code: 'InvalidHeaderLength' })
  })

  test('a stream that cannot be a SafeTensors file says so first, as parseHeader does for the same bytes', async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13])
    for (const bytes of [good.subarray(0, 3), good.subarray(0, 20), png]) {
      const fromStream = await validateStream(new Blob([bytes]).stream()).catch((e: SafetensorsError) => e)
      const fromBytes = (() => {
        try {
          parseHeader(bytes)
        } catch (e) {
          return e as SafetensorsError
        }
      })()
      expect(fromStream).toBeInstanceOf(SafetensorsError)
      expect((fromStream as SafetensorsError).code).toBe(fromBytes?.code)
      expect((fromStream as SafetensorsError).message).toMatch(/^not a SafeTensors file/)
    }
  })

  test('a stream that errors is Io; an abort (even while the upstream stalls) is Aborted; a non-stream is a TypeError', async () => {
    const failing = new ReadableStream({ start: (c) => c.error(new Error('connection reset')) })
    await expect(validateStream(failing)).rejects.toMatchObject({ code: 'Io' })
    const stalled = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(good.subarray(0, 16)) })
    const controller = new AbortController()
    const pending = validateStream(stalled, { signal: controller.signal })
    setTimeout(() => controller.abort(), 20)
    await expect(pending).rejects.toMatchObject({ code: 'Aborted' })
    await expect(validateStream(good as never)).rejects.toBeInstanceOf(TypeError)
  })

  test('an abort while forward holds a write back (backpressure) rejects Aborted at once and aborts forward', async () => {
    // A sink as slow as a stalled upload: its first write never completes.
    let sink: WritableStreamDefaultController | undefined
    const forward = new WritableStream<Uint8Array>({ start: (c) => void (sink = c), write: () => new Promise<void>(() => {}) })
    let cancelled: unknown
    const input = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(good.slice()), cancel: (reason) => void (cancelled = reason) })
    const controller = new AbortController()
    const pending = validateStream(input, { forward, signal: controller.signal })
    await new Promise((resolve) => setTimeout(resolve, 20))
    const abortedAt = performance.now()
    controller.abort(new Error('client left'))
    await expect(pending).rejects.toMatchObject({ code: 'Aborted' })
    expect(performance.now() - abortedAt).toBeLessThan(200)
    expect(cancelled).toBeInstanceOf(SafetensorsError)
    // What a sink (an upload) sees at once, with the write still in flight: its controller's signal aborts.
    expect(sink?.signal.aborted).toBe(true)
    expect(sink?.signal.reason).toMatchObject({ code: 'Aborted' })
  }, 5000)

  test('forward: a valid file arrives byte for byte and closed; an invalid one aborted', async () => {
    const run = async (bytes: Uint8Array) => {
      const received: Uint8Array[] = []
      let end = 'open'
      const forward = new WritableStream<Uint8Array>({
        write: (c) => void received.push(c.slice()),
        close: () => void (end = 'closed'),
        abort: () => void (end = 'aborted'),
      })
      const result = await validateStream(chunked(bytes, prng(7)), { forward }).then(
        () => 'ok',
        (e: SafetensorsError) => e.code,
      )
      return { result, end, bytes: Buffer.concat(received) }
    }
    const ok = await run(good)
    expect(ok).toMatchObject({ result: 'ok', end: 'closed' })
    expect(Buffer.compare(ok.bytes, good)).toBe(0)
    // Cut short by one byte: everything but the end is forwarded, and then aborted, never closed.
    expect(await run(good.subarray(0, good.length - 1))).toMatchObject({ result: 'MetadataIncompleteBuffer', end: 'aborted' })
    // A bad header is not forwarded at all.
    const badHeader = await run(makeFile('{"a":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}}', 9))
    expect(badHeader).toMatchObject({ result: 'InvalidOffset', end: 'aborted' })
    expect(badHeader.bytes.length).toBe(0)
  })

  test('forward holds back the last bytes: a sink of fixed length (R2 put through a FixedLengthStream) never gets all of an invalid input', async () => {
    // Such a sink stores the object as soon as it has the length it was told (the input's own), even if
    // aborted later: so an invalid input must never reach it whole.
    const real = new Uint8Array(readFileSync(join(FIXTURES_REAL, 'fluxml__safetensors.jl__model.safetensors')))
    for (const [what, bytes] of [
      ['cut to two thirds', real.subarray(0, Math.floor((real.length * 2) / 3))],
      ['cut short by its last byte', real.subarray(0, real.length - 1)],
      ['one byte too many', new Uint8Array([...real, 0])],
      ['no data, one byte too many', new Uint8Array([...makeFile('{}', 0), 0x20])],
    ] as const) {
      for (const seed of [1, 2, 3]) {
        let received = 0
        const forward = new WritableStream<Uint8Array>({ write: (c) => void (received += c.length) })
        await expect(validateStream(chunked(bytes, prng(seed)), { forward }), what).rejects.toMatchObject({ code: 'MetadataIncompleteBuffer' })
        expect(received, `${what}, chunking ${seed}: ${received} of ${bytes.length} bytes forwarded`).toBeLessThan(bytes.length)
      }
    }
  })
})
