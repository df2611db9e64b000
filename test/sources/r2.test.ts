// r2Source and r2Model against a real R2 implementation: Miniflare's bucket (the one a Worker's
// env.BUCKET reaches in `wrangler dev`), driven from Node. Every tensor of every fixture and of the
// sharded model is compared with the bytes sliced out of the file here, by its header parsed with
// JSON.parse; a wrapper around the binding counts the gets and how many are open at once. The binding is
// typed by Cloudflare's own package, so tsc checks that a Worker's env.BUCKET fits r2Source and r2Model.
// test/integration/r2/workers.test.ts runs the library inside workerd, on the binding's own bodies.

import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { R2Bucket as CloudflareR2Bucket } from '@cloudflare/workers-types/experimental/index.ts'
import { Miniflare } from 'miniflare'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { open, openModel, type R2Bucket, type R2Object, type R2ObjectBody, r2Model, r2Source } from '../../src/index.ts'
import { FIXTURES_REAL, realFixtures } from '../helpers.ts'
import { bytesOf, expectError, expectSameBytes, headerOf, tensorBytes } from '../read-helpers.ts'

const SHARDS = join(FIXTURES_REAL, 'sharded', 'fluxml__safetensors.jl')
const FIXTURE = 'fluxml__safetensors.jl__model.safetensors'
const fixture = (name: string) => new Uint8Array(readFileSync(join(FIXTURES_REAL, name)))

/** A stream of `bytes` in chunks of 64 KiB, as a body arrives in parts. */
function chunked(bytes: Uint8Array): ReadableStream<Uint8Array> {
  let at = 0
  return new ReadableStream({
    pull(controller) {
      if (at === bytes.length) return controller.close()
      controller.enqueue(bytes.slice(at, (at += Math.min(65_536, bytes.length - at))))
    },
  })
}

/**
 * Miniflare's binding without the race of its Node proxy. From Node, each property of a result is a
 * synchronous round trip to workerd, and the one that hands over a ReadableStream (an object's `body`)
 * can wake before the stream's message is there: Miniflare's assertion `message?.id === id` fails, and
 * so does every later call on the same channel (under load, every test of this file did). So a body
 * comes through arrayBuffer(), an asynchronous call, and is streamed from here; the range, the ETag
 * condition and the metadata are still R2's.
 */
function fromNode(binding: CloudflareR2Bucket) {
  const plain = (object: { key: string; etag: string; size: number }) => ({ key: object.key, etag: object.etag, size: object.size })
  return {
    put: (key: string, value: Uint8Array) => binding.put(key, value).then(() => {}),
    delete: (key: string) => binding.delete(key),
    head: async (key: string) => {
      const object = await binding.head(key)
      return object && plain(object)
    },
    get: async (key: string, options: Parameters<R2Bucket['get']>[1]): Promise<R2ObjectBody | R2Object | null> => {
      const object = await binding.get(key, options)
      if (object === null) return null
      // An object without a body (the condition failed) has no arrayBuffer either.
      if (!('arrayBuffer' in object)) return plain(object)
      return { ...plain(object), body: chunked(new Uint8Array(await object.arrayBuffer())) }
    },
  }
}

/** The binding, with every call counted: gets made, and the most subrequests open at once (a get is open until its body is read or cancelled). */
function counted(bucket: R2Bucket) {
  const calls = { gets: 0, heads: 0, open: 0, mostOpen: 0 }
  const opened = () => {
    calls.open++
    calls.mostOpen = Math.max(calls.mostOpen, calls.open)
  }
  const wrapped: R2Bucket = {
    async head(key) {
      calls.heads++
      opened()
      try {
        return await bucket.head(key)
      } finally {
        calls.open--
      }
    },
    async get(key, options) {
      calls.gets++
      opened()
      const object = await bucket.get(key, options).catch((error) => {
        calls.open--
        throw error
      })
      if (object === null || !('body' in object) || !object.body) {
        calls.open--
        return object
      }
      const reader = object.body.getReader()
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { done, value } = await reader.read()
          if (!done) return controller.enqueue(value)
          calls.open--
          controller.close()
        },
        cancel(reason) {
          calls.open--
          return reader.cancel(reason)
        },
      })
      return { key: object.key, etag: object.etag, size: object.size, body }
    },
  }
  return { calls, bucket: wrapped }
}

describe('R2 (Miniflare)', () => {
  let mf: Miniflare
  let binding: CloudflareR2Bucket
  let bucket: ReturnType<typeof fromNode>

  beforeAll(async () => {
    mf = new Miniflare({ modules: true, script: 'export default { fetch: () => new Response(null, { status: 404 }) }', r2Buckets: ['BUCKET'] })
    // Miniflare's binding is the real one, proxied to Node; its types name Cloudflare's.
    binding = (await mf.getR2Bucket('BUCKET')) as unknown as CloudflareR2Bucket
    bucket = fromNode(binding)
    for (const name of realFixtures().valid) await put(name, fixture(name))
    for (const name of readdirSync(SHARDS)) await put(`sharded/${name}`, fixture(`sharded/fluxml__safetensors.jl/${name}`))
    await put('single/model.safetensors', fixture(FIXTURE))
  }, 60_000)

  afterAll(async () => {
    await mf?.dispose()
  })

  const put = (key: string, value: Uint8Array) => bucket.put(key, value)

  test('the binding as a Worker has it fits r2Source and r2Model', async () => {
    // No body is read here, so the proxy's race (see fromNode) cannot come up.
    const error = await expectError(() => openModel(r2Model(binding, 'nowhere/')), 'Io')
    expect(error.message).toContain('nowhere/')
    await expectError(() => open(r2Source(binding, 'no/such.safetensors')), 'Io')
  })

  test.each(realFixtures().valid)('%s: every tensor byte-exact, each one get', async (name) => {
    const bytes = fixture(name)
    const { calls, bucket: wrapped } = counted(bucket)
    const file = await open(r2Source(wrapped, name))
    expect(calls.heads).toBe(1)
    for (const [tensor, info] of Object.entries(headerOf(bytes).tensors)) {
      const before = calls.gets
      const got = await file.getTensor(tensor)
      expectSameBytes(bytesOf(got.data), tensorBytes(bytes, tensor), `${name} ${tensor}`)
      expect(calls.gets - before, `gets for ${tensor}`).toBe(info.data_offsets[1] > info.data_offsets[0] ? 1 : 0)
    }
    expect(calls.open).toBe(0)
  })

  test('the sharded model through r2Model: every tensor byte-exact, one get each, at most 6 subrequests open at once', async () => {
    const { calls, bucket: wrapped } = counted(bucket)
    const model = await openModel(r2Model(wrapped, 'sharded/'))
    const index = JSON.parse(readFileSync(join(SHARDS, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> }
    expect(model.names().sort()).toEqual(Object.keys(index.weight_map).sort())
    const before = calls.gets
    // All at once: the model's files share the six subrequests a Worker may have open.
    const tensors = await Promise.all(model.names().map((name) => model.getTensor(name)))
    expect(calls.gets - before).toBe(tensors.length)
    for (const tensor of tensors) {
      const shard = fixture(`sharded/fluxml__safetensors.jl/${index.weight_map[tensor.name]}`)
      expectSameBytes(bytesOf(tensor.data), tensorBytes(shard, tensor.name), tensor.name)
    }
    expect(tensors.length).toBeGreaterThan(6)
    expect(calls.mostOpen).toBe(6)
    expect(calls.open).toBe(0)
  })

  test('r2Model of a prefix holding model.safetensors: a model of that one file', async () => {
    const model = await openModel(r2Model(bucket, 'single/'))
    const bytes = fixture(FIXTURE)
    expect(model.names()).toEqual(
      Object.keys(headerOf(bytes).tensors).sort((a, b) => headerOf(bytes).tensors[a].data_offsets[0] - headerOf(bytes).tensors[b].data_offsets[0]),
    )
    for (const name of model.names()) expectSameBytes(bytesOf((await model.getTensor(name)).data), tensorBytes(bytes, name), name)
  })

  test('r2Model of a prefix with no model: Io naming the prefix and what was looked for', async () => {
    const error = await expectError(() => openModel(r2Model(bucket, 'nothing-here/')), 'Io')
    expect(error.message).toContain('nothing-here/')
    expect(error.message).toContain('model.safetensors.index.json')
  })

  test('an index naming a shard that is not there: Io naming its key', async () => {
    const index = JSON.parse(readFileSync(join(SHARDS, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> }
    const first = Object.keys(index.weight_map)[0]
    await put('ghost/model.safetensors.index.json', new TextEncoder().encode(JSON.stringify({ weight_map: { [first]: 'gone.safetensors' } })))
    const error = await expectError(() => openModel(r2Model(bucket, 'ghost/')), 'Io')
    expect(error.message).toContain('"ghost/gone.safetensors"')
  })

  test('an index whose shard name leaves the prefix is refused before any read of it', async () => {
    await put(
      'escape/model.safetensors.index.json',
      new TextEncoder().encode(JSON.stringify({ weight_map: { a: '../sharded/model-00001-of-00006.safetensors' } })),
    )
    const { calls, bucket: wrapped } = counted(bucket)
    const error = await expectError(() => openModel(r2Model(wrapped, 'escape/')), 'InvalidHeaderDeserialization')
    expect(error.message).toContain('not a plain file name')
    expect(calls.gets).toBe(1)
  })

  test('a missing key: Io naming it, before any get', async () => {
    const { calls, bucket: wrapped } = counted(bucket)
    const error = await expectError(() => open(r2Source(wrapped, 'no/such.safetensors')), 'Io')
    expect(error.message).toContain('"no/such.safetensors"')
    expect(calls.gets).toBe(0)
  })

  test('an object replaced after open: Io that says it changed, and never bytes of the new one', async () => {
    const bytes = fixture(FIXTURE)
    await put('replaced.safetensors', bytes)
    const file = await open(r2Source(bucket, 'replaced.safetensors'))
    const [first, second] = file.names()
    expectSameBytes(bytesOf((await file.getTensor(first)).data), tensorBytes(bytes, first), first)
    // The same layout with other values: bytes mixed from both would be a silent wrong answer.
    const other = bytes.slice()
    for (let i = headerOf(bytes).dataStart; i < other.length; i++) other[i] ^= 0xff
    await put('replaced.safetensors', other)
    for (const name of [second, first]) {
      const error = await expectError(() => file.getTensor(name), 'Io')
      expect(error.message).toContain('"replaced.safetensors"')
      expect(error.message).toContain('changed')
    }
    // Shorter now: R2 refuses the range, or the condition fails; either way an Io, never a crash.
    await put('replaced.safetensors', bytes.subarray(0, 16))
    await expectError(() => file.getTensor(file.names().at(-1)!), 'Io')
  })

  test('an object deleted after open: Io that says it is gone', async () => {
    await put('deleted.safetensors', fixture(FIXTURE))
    const file = await open(r2Source(bucket, 'deleted.safetensors'))
    await bucket.delete('deleted.safetensors')
    const error = await expectError(() => file.getTensor(file.names()[0]), 'Io')
    expect(error.message).toMatch(/"deleted\.safetensors".*gone/)
  })

  test('a range starting at or past the end: Io, without asking R2 (which would refuse it)', async () => {
    const { calls, bucket: wrapped } = counted(bucket)
    const source = r2Source(wrapped, FIXTURE)
    const size = fixture(FIXTURE).length
    // Known from the first read on (until then, a read may end early at the end, as RangeSource allows).
    await source.read(0, 8)
    const before = calls.gets
    for (const offset of [size, size + 1]) {
      const error = await expectError(() => source.read(offset, 1), 'Io')
      expect(error.message).toContain(`offset ${offset}`)
    }
    expect(calls.gets).toBe(before)
    // What R2 itself does with one: an error, which the source turns into an Io.
    await expect(bucket.get(FIXTURE, { range: { offset: size, length: 1 }, onlyIf: { etagMatches: (await bucket.head(FIXTURE))!.etag } })).rejects.toThrow()
  })

  test('R2 failures become Io naming the key: a get that throws, a body that breaks off', async () => {
    const failing = (what: 'get' | 'body'): R2Bucket => ({
      head: (key) => bucket.head(key),
      async get(key, options) {
        if (what === 'get') throw new Error('get: We encountered an internal error. Please try again. (10001)')
        const object = (await bucket.get(key, options)) as R2Object & { body: ReadableStream<Uint8Array> }
        const reader = object.body.getReader()
        let sent = false
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            if (sent) return controller.error(new TypeError('Network connection lost.'))
            sent = true
            const { value } = await reader.read()
            controller.enqueue(value!.subarray(0, 1))
          },
        })
        return { key: object.key, etag: object.etag, size: object.size, body }
      },
    })
    for (const what of ['get', 'body'] as const) {
      const error = await expectError(() => open(r2Source(failing(what), FIXTURE)), 'Io')
      expect(error.message, what).toContain(`"${FIXTURE}"`)
    }
  })

  test('an aborted signal: Aborted, the source-wide one and a read one', async () => {
    const controller = new AbortController()
    controller.abort()
    await expectError(() => open(r2Source(bucket, FIXTURE, { signal: controller.signal })), 'Aborted')
    const file = await open(r2Source(bucket, FIXTURE))
    await expectError(() => file.getTensor(file.names()[0], { signal: controller.signal }), 'Aborted')
  })

  test('an abort while gets stall: Aborted at once, and their subrequest slots are free again', async () => {
    let stall = false
    const stalling: R2Bucket = { head: (key) => bucket.head(key), get: (key, options) => (stall ? new Promise(() => {}) : bucket.get(key, options)) }
    const file = await open(r2Source(stalling, FIXTURE))
    const names = file.names()
    stall = true
    const controller = new AbortController()
    // Six fill every slot; the seventh waits for one.
    const reads = names.slice(0, 7).map((name) => expectError(() => file.getTensor(name, { signal: controller.signal }), 'Aborted'))
    await new Promise((resolve) => setTimeout(resolve, 50))
    controller.abort()
    await Promise.all(reads)
    stall = false
    expectSameBytes(bytesOf((await file.getTensor(names[0])).data), tensorBytes(fixture(FIXTURE), names[0]), names[0])
  })

  test('misuse is a TypeError at once', () => {
    expect(() => r2Source({} as R2Bucket, 'k')).toThrow(TypeError)
    expect(() => r2Source(binding, 42 as unknown as string)).toThrow(TypeError)
    expect(() => r2Model(null as unknown as R2Bucket, 'p/')).toThrow(TypeError)
  })
})
