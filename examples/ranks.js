// Tensor-parallel loading straight from object storage: each of N ranks opens a sharded model over HTTP
// and reads only its share of every tensor, as byte ranges; no rank reads the whole model and nothing
// is sent between ranks. Split as Megatron-LM splits a transformer: column-parallel layers (q/k/v,
// gate/up, the embeddings and lm_head) by rows, the output dimension of a [out, in] weight; row-parallel
// ones (o, down) by columns, the input dimension; the rest (norms, routers) is replicated.
//
//   node examples/ranks.js <index URL, folder URL or local folder> [ranks]
//
// runs `ranks` loaders (default 2) concurrently in this process, each as one rank of a separate
// process or machine would, and prints what each one moved.
import { openModel } from 'safetensors-wasm'

const TENSORS_AT_ONCE = 4

const BY_ROWS = /(?:^|\.)(?:q_proj|k_proj|v_proj|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|gate_proj|up_proj|embed_tokens|lm_head)\.weight$/
const BY_COLUMNS = /(?:^|\.)(?:o_proj|down_proj)\.weight$/

/** How tensor `name` is split between ranks: 'rows', 'columns', or null (every rank holds all of it). */
export function splitOf(name, shape) {
  if (shape.length !== 2) return null
  if (BY_ROWS.test(name)) return 'rows'
  if (BY_COLUMNS.test(name)) return 'columns'
  return null
}

/**
 * The getSlice ranges of rank `rank` of `ranks` for a tensor of `shape` split by `split`.
 * @returns {Array<[number, number] | null>}
 */
export function shareOf(shape, split, rank, ranks) {
  if (split === null) return []
  const dim = shape[split === 'rows' ? 0 : 1]
  /** @type {[number, number]} */
  const part = [Math.floor((rank * dim) / ranks), Math.floor(((rank + 1) * dim) / ranks)]
  return split === 'rows' ? [part] : [null, part]
}

/**
 * Rank `rank` of `ranks`: opens the model and reads its share of every tensor. Returns the shares, the
 * bytes it moved (headers included), its requests and its milliseconds. `options` go to openModel.
 */
export async function loadRank(where, rank, ranks, options = {}) {
  let requests = 0
  let bytes = 0
  const start = performance.now()
  const fetchImpl = options.fetch ?? globalThis.fetch
  const model = await openModel(where, {
    ...options,
    fetch: (url, init) => (requests++, fetchImpl(url, init)),
    onProgress: (p) => void (bytes = p.loaded),
  })
  const tensors = new Map()
  try {
    // A few tensors at a time, each read a few ranges at a time: enough requests in flight to hide the
    // round trip, not so many that a model of thousands of tensors opens thousands of connections.
    const names = model.names()
    let next = 0
    await Promise.all(Array.from({ length: TENSORS_AT_ONCE }, async () => {
      while (next < names.length) {
        const name = names[next++]
        const { shape } = model.info(name)
        tensors.set(name, await model.getSlice(name, shareOf(shape, splitOf(name, shape), rank, ranks)))
      }
    }))
  } finally {
    await model.close()
  }
  return { rank, tensors, bytes, requests, ms: performance.now() - start }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [where, n = '2'] = process.argv.slice(2)
  if (!where) {
    console.error('usage: node examples/ranks.js <model index URL, folder URL or local folder> [ranks]')
    process.exit(2)
  }
  const ranks = Number(n)
  const results = await Promise.all(Array.from({ length: ranks }, (_, rank) => loadRank(where, rank, ranks)))
  for (const r of results) console.log(`rank ${r.rank}/${ranks}: ${r.tensors.size} tensors, ${(r.bytes / 2 ** 20).toFixed(1)} MiB in ${r.requests} requests, ${r.ms.toFixed(0)} ms`)
}
