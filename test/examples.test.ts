// examples/ranks.js, as a user runs it: two ranks over HTTP from the tests' server, each holding its
// Megatron share of every tensor (rows of q_proj, columns of o_proj, all of a norm), values sliced by hand.
import { execFile } from 'node:child_process'
import { randomFillSync } from 'node:crypto'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { rangeHandler, startServer, type TestServer } from './http-server.ts'
import { buildFile, bytesOf, expectSameBytes } from './read-helpers.ts'

const q = randomFillSync(new Uint8Array(64 * 32 * 2))
const o = randomFillSync(new Uint8Array(32 * 64 * 2))
const norm = randomFillSync(new Uint8Array(32 * 2))
const files: Record<string, Uint8Array> = {
  'a.safetensors': buildFile([{ name: 'model.layers.0.self_attn.q_proj.weight', dtype: 'BF16', shape: [64, 32], bytes: q }]),
  'b.safetensors': buildFile([
    { name: 'model.layers.0.self_attn.o_proj.weight', dtype: 'BF16', shape: [32, 64], bytes: o },
    { name: 'model.norm.weight', dtype: 'BF16', shape: [32], bytes: norm },
  ]),
  'model.safetensors.index.json': new TextEncoder().encode(
    JSON.stringify({
      weight_map: {
        'model.layers.0.self_attn.q_proj.weight': 'a.safetensors',
        'model.layers.0.self_attn.o_proj.weight': 'b.safetensors',
        'model.norm.weight': 'b.safetensors',
      },
    }),
  ),
}
let server: TestServer
beforeAll(async () => {
  server = await startServer(rangeHandler((path) => files[path.slice(1)]))
})
afterAll(() => server.close())

test('each rank loads its share: q_proj by rows, o_proj by columns, the norm whole', async () => {
  const { loadRank } = await import('../examples/ranks.js')
  for (const rank of [0, 1]) {
    const { tensors } = await loadRank(`${server.url}model.safetensors.index.json`, rank, 2)
    expectSameBytes(bytesOf(tensors.get('model.layers.0.self_attn.q_proj.weight')!.data), q.subarray(rank * 32 * 32 * 2, (rank + 1) * 32 * 32 * 2))
    const columns = new Uint8Array(32 * 32 * 2)
    for (let r = 0; r < 32; r++) columns.set(o.subarray((r * 64 + rank * 32) * 2, (r * 64 + rank * 32 + 32) * 2), r * 32 * 2)
    expectSameBytes(bytesOf(tensors.get('model.layers.0.self_attn.o_proj.weight')!.data), columns)
    expectSameBytes(bytesOf(tensors.get('model.norm.weight')!.data), norm)
  }
})

test('node examples/ranks.js <index URL> 2 runs and reports each rank', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ['examples/ranks.js', `${server.url}model.safetensors.index.json`, '2'])
  expect(stdout).toMatch(/^rank 0\/2: 3 tensors, [\d.]+ MiB in \d+ requests, \d+ ms\nrank 1\/2: 3 tensors/)
})
