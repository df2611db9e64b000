// Tensor-parallel loading over HTTP (examples/ranks.js): N ranks (N concurrent loaders in this process)
// each read their share of every tensor of a sharded Llama-shaped model from a loopback server with a
// 10 ms round trip, against one loader reading every tensor whole. Column-parallel weights are row
// blocks (exactly their bytes); row-parallel ones (o_proj, down_proj) are column blocks, whose runs are
// a row apart: closer than a request costs, so each rank reads them whole, in a few large requests.
import { randomFillSync } from 'node:crypto'
import { loadRank } from '../examples/ranks.js'
import { safetensorsBytes } from './synthetic.js'
import { serveInWorker, table } from './util.js'

const LAYERS = 4
const HIDDEN = 1024
const INTERMEDIATE = 2816
const VOCAB = 8192
const RTT_MS = 10

function llamaShaped() {
  const tensor = (name, shape) => ({ name, dtype: 'BF16', shape, bytes: randomFillSync(new Uint8Array(shape[0] * (shape[1] ?? 1) * 2)) })
  const layer = (i) => {
    const p = `model.layers.${i}`
    return [
      tensor(`${p}.input_layernorm.weight`, [HIDDEN]),
      ...['q_proj', 'k_proj', 'v_proj', 'o_proj'].map((n) => tensor(`${p}.self_attn.${n}.weight`, [HIDDEN, HIDDEN])),
      tensor(`${p}.post_attention_layernorm.weight`, [HIDDEN]),
      tensor(`${p}.mlp.gate_proj.weight`, [INTERMEDIATE, HIDDEN]),
      tensor(`${p}.mlp.up_proj.weight`, [INTERMEDIATE, HIDDEN]),
      tensor(`${p}.mlp.down_proj.weight`, [HIDDEN, INTERMEDIATE]),
    ]
  }
  const shards = [
    [tensor('model.embed_tokens.weight', [VOCAB, HIDDEN]), ...layer(0), ...layer(1)],
    [...layer(2), ...layer(3), tensor('model.norm.weight', [HIDDEN]), tensor('lm_head.weight', [VOCAB, HIDDEN])],
  ]
  const files = new Map()
  const weightMap = {}
  shards.forEach((tensors, i) => {
    const name = `model-0000${i + 1}-of-00002.safetensors`
    files.set(name, safetensorsBytes(tensors))
    for (const t of tensors) weightMap[t.name] = name
  })
  files.set('model.safetensors.index.json', new TextEncoder().encode(JSON.stringify({ metadata: {}, weight_map: weightMap })))
  return files
}

export async function run() {
  const files = llamaShaped()
  const total = [...files.values()].reduce((sum, f) => sum + f.length, 0)
  const server = await serveInWorker(files, { delay: RTT_MS })
  const index = `${server.url}model.safetensors.index.json`
  try {
    console.log(
      `\nTensor-parallel loading over HTTP at ${RTT_MS} ms RTT: a ${LAYERS}-layer Llama-shaped model, ${(total / 2 ** 20).toFixed(0)} MiB BF16 in 2 shards (examples/ranks.js)`,
    )
    const full = await loadRank(index, 0, 1)
    /** @type {Array<Record<string, string | number>>} */
    const rows = [
      {
        ranks: 'full read',
        'MiB per rank': (full.bytes / 2 ** 20).toFixed(1),
        'requests per rank': full.requests,
        'ms (all ranks)': full.ms.toFixed(0),
        'vs full': '1.00',
      },
    ]
    for (const ranks of [2, 4, 8]) {
      const start = performance.now()
      const results = await Promise.all(Array.from({ length: ranks }, (_, rank) => loadRank(index, rank, ranks)))
      const ms = performance.now() - start
      // Every element of the full read is in exactly one rank's share (or in every rank's, when replicated).
      const elements = results.reduce((sum, r) => sum + [...r.tensors.values()].reduce((s, t) => s + t.data.length, 0), 0)
      const replicated = [...results[0].tensors.values()].filter((t) => t.shape.length === 1).reduce((s, t) => s + t.data.length, 0)
      const fullElements = [...full.tensors.values()].reduce((s, t) => s + t.data.length, 0)
      if (elements !== fullElements + (ranks - 1) * replicated)
        throw new Error(`the ranks' shares hold ${elements} elements, expected ${fullElements + (ranks - 1) * replicated}`)
      const bytes = results.map((r) => r.bytes)
      rows.push({
        ranks,
        'MiB per rank': `${(Math.min(...bytes) / 2 ** 20).toFixed(1)}-${(Math.max(...bytes) / 2 ** 20).toFixed(1)}`,
        'requests per rank': `${Math.min(...results.map((r) => r.requests))}-${Math.max(...results.map((r) => r.requests))}`,
        'ms (all ranks)': ms.toFixed(0),
        'vs full': (ms / full.ms).toFixed(2),
      })
    }
    table(rows)
  } finally {
    await server.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
