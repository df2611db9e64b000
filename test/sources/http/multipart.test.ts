// HTTP multi-range reads (src/sources/http/multipart.ts): servers that answer several ranges with parts (the
// tests' own, nginx), refuse them (200, or the first range alone), drop the answer half-way, or change the file
// in between. Expected values are sliced by hand from the bytes written.
import { randomFillSync } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { open } from '../../../src/index.ts'
import { bytesResource, type RangeOptions, rangeHandler, startServer } from '../../http-server.ts'
import { findNginx, startNginx } from '../../nginx.ts'
import { buildFile, bytesOf, columns, expectError, expectSameBytes, headerOf } from '../../read-helpers.ts'

describe('several ranges in one request', () => {
  // 64 rows of 1 MiB: the 512 columns from 100 are 64 runs with 1 MiB - 512 bytes between them, more
  // than a request costs, so the reads stay 64 ranges: 6 multi-range requests where the server answers them.
  const ROWS = 64
  const WIDTH = 1 << 20
  const data = randomFillSync(new Uint8Array(ROWS * WIDTH))
  const file = buildFile([{ name: 'm', dtype: 'U8', shape: [ROWS, WIDTH], bytes: data }])
  const want = columns(data, ROWS, WIDTH, 1, 100, 612)
  const slice = (f: Awaited<ReturnType<typeof open>>) => f.getSlice('m', [null, [100, 612]])

  async function serve(options: RangeOptions, lookup: (n: number) => Uint8Array | ReturnType<typeof bytesResource> = () => file) {
    const server = await startServer(rangeHandler((_, n) => lookup(n), options))
    const f = await open(`${server.url}m.safetensors`)
    server.clear()
    return { server, f }
  }

  test('a server that answers multipart/byteranges: 6 requests, one of them first and alone', async () => {
    const { server, f } = await serve({ multiRange: 'multipart' })
    try {
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      expect(server.ranges().length).toBe(6)
      expect(server.ranges().every((r) => r.split(',').length > 1)).toBe(true)
      expect(server.log.every((e) => e.status === 206)).toBe(true)
    } finally {
      await server.close()
    }
  })

  test.each([
    ['200 with the whole file', 'whole', 200],
    ['206 with the first range alone', 'first', 206],
  ] as const)('a server that refuses, answering %s: one request is spent learning it, once', async (_, mode, status) => {
    const { server, f } = await serve({ multiRange: mode })
    try {
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      const several = server.log.filter((e) => (e.range ?? '').includes(','))
      expect(several.length).toBe(1)
      expect(several[0].status).toBe(status)
      // The first range comes in the refusal's single range; the others one request each.
      expect(server.log.length).toBe(mode === 'first' ? ROWS : ROWS + 1)
      server.clear()
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      expect(server.ranges().filter((r) => r.includes(','))).toEqual([])
      expect(server.log.length).toBe(ROWS)
    } finally {
      await server.close()
    }
  })

  test('a multipart answer dropped half-way: the request is made again for the ranges not yet complete', async () => {
    const { server, f } = await serve({ multiRange: 'multipart', fault: (n) => (n === 0 ? { kind: 'drop', at: 0.5 } : undefined) })
    try {
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      const [first, again] = server.ranges()
      expect(again.split(',').length).toBeLessThan(first.split(',').length)
      expect(server.log.length).toBe(7)
    } finally {
      await server.close()
    }
  })

  test('the file changes before a multi-range request: an Io error, never bytes of two versions', async () => {
    const changed = file.slice()
    changed.fill(0xee, headerOf(file).dataStart)
    const { server, f } = await serve({ multiRange: 'multipart' }, (n) => (n === 0 ? bytesResource(file) : bytesResource(changed, { etag: '"v2"' })))
    try {
      const error = await expectError(() => slice(f), 'Io')
      expect(error.message).toMatch(/changed/)
    } finally {
      await server.close()
    }
  })

  const NGINX = findNginx()
  test.skipIf(!NGINX)("nginx's multipart/byteranges answer", async () => {
    const root = mkdtempSync(join(tmpdir(), 'safetensors-multirange-'))
    writeFileSync(join(root, 'm.safetensors'), file)
    const nginx = await startNginx(NGINX!, root)
    try {
      const server = nginx.server('/ranged')
      const f = await open(`${server.url}m.safetensors`)
      // nginx logs a request when its answer ends: the header read's, once the server has seen it end.
      await server.settled()
      server.clear()
      expectSameBytes(bytesOf((await slice(f)).data), want)
      await server.settled()
      expect(server.ranges().length).toBe(6)
      expect(server.log.every((e) => e.status === 206 && (e.range ?? '').includes(','))).toBe(true)
    } finally {
      await nginx.close()
      rmSync(root, { recursive: true, force: true })
    }
  })
})
