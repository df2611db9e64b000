// openModel on the shape of the largest public checkpoints (DeepSeek-V3: 163 shards, 91,280 tensors;
// bench/synthetic.js, tiny data): from a local folder against the parse floor, JSON.parse of the index
// plus parseHeader of every shard's header bytes already in memory, measured in the same run (target
// <= 2x): written in model order, as transformers writes (sorted index, shards laid out by name), and
// as neither (a sorted index over model-order shards); and over HTTP from a loopback server that
// waits 20 ms before each response (target <= 1 s; one shard header after another cannot go under
// 165 x 20 ms = 3.3 s).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openModel, parseHeader } from '../dist/node.js'
import { deepseekShaped } from './synthetic.js'
import { median, serveInWorker, table } from './util.js'

const RTT_MS = 20

export async function run() {
  const { index, files } = deepseekShaped()
  const dir = mkdtempSync(join(tmpdir(), 'safetensors-wasm-bench-model-'))
  writeFileSync(join(dir, 'model.safetensors.index.json'), index)
  for (const [name, bytes] of files) writeFileSync(join(dir, name), bytes)
  // As transformers and safetensors write it: the index's keys sorted, each shard laid out by name.
  const transformers = deepseekShaped({ layout: 'transformers' })
  mkdirSync(join(dir, 'transformers'))
  writeFileSync(join(dir, 'transformers', 'model.safetensors.index.json'), transformers.index)
  for (const [name, bytes] of transformers.files) writeFileSync(join(dir, 'transformers', name), bytes)
  // The first shards beside that sorted index: a shard's entries differ from its own order, and each is
  // looked up by name.
  writeFileSync(join(dir, 'sorted.index.json'), transformers.index)
  const headers = [...files.values()].map((bytes) => bytes.subarray(0, 8 + Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true))))
  const server = await serveInWorker(new Map([['model.safetensors.index.json', new TextEncoder().encode(index)], ...files]), { delay: RTT_MS })
  try {
    console.log(
      `\nopenModel on a DeepSeek-V3-shaped model: ${files.size} shards, a ${(index.length / 2 ** 20).toFixed(1)} MiB index, headers of ${(headers[0].length / 1024).toFixed(0)} KiB`,
    )
    /** @type {{ floor: number[], local: number[], transformers: number[], sorted: number[] }} */
    const times = { floor: [], local: [], transformers: [], sorted: [] }
    let tensors = 0
    for (let round = 0; round < 7; round++) {
      let start = performance.now()
      JSON.parse(index)
      for (const [i, bytes] of [...files.values()].entries()) parseHeader(headers[i], { fileSize: bytes.length })
      times.floor.push(performance.now() - start)
      start = performance.now()
      const model = await openModel(dir)
      times.local.push(performance.now() - start)
      tensors = model.names().length
      await model.close()
      start = performance.now()
      await (await openModel(join(dir, 'transformers'))).close()
      times.transformers.push(performance.now() - start)
      start = performance.now()
      await (await openModel(join(dir, 'sorted.index.json'))).close()
      times.sorted.push(performance.now() - start)
    }
    /** @type {number[]} */
    const http = []
    for (let round = 0; round < 3; round++) {
      await server.clear()
      const start = performance.now()
      const model = await openModel(`${server.url}model.safetensors.index.json`)
      http.push(performance.now() - start)
      await model.close()
    }
    const requests = await server.requests()
    const floor = median(times.floor)
    table([
      { what: 'parse floor (JSON.parse + parseHeader x 163)', 'ms (median)': floor.toFixed(0), 'vs floor': '1.00', requests: '-' },
      { what: 'openModel, local folder', 'ms (median)': median(times.local).toFixed(0), 'vs floor': (median(times.local) / floor).toFixed(2), requests: '-' },
      {
        what: 'the same as transformers writes it',
        'ms (median)': median(times.transformers).toFixed(0),
        'vs floor': (median(times.transformers) / floor).toFixed(2),
        requests: '-',
      },
      {
        what: 'model-order shards, sorted index',
        'ms (median)': median(times.sorted).toFixed(0),
        'vs floor': (median(times.sorted) / floor).toFixed(2),
        requests: '-',
      },
      { what: `openModel over HTTP, ${RTT_MS} ms RTT`, 'ms (median)': median(http).toFixed(0), 'vs floor': (median(http) / floor).toFixed(2), requests },
    ])
    console.log(`${tensors} tensors opened; local target <= 2x the floor, HTTP target <= 1000 ms`)
  } finally {
    await server.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
