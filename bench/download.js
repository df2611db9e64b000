// Downloads at the speed of the pipe (issue 21): one 256 MiB tensor over loopback HTTP, read by getTensor
// (parallel chunks, src/sources/downloads.ts) and converted by the CLI to F16, against one fetch() of the whole
// file measured in the same run, on three servers:
// - nginx with limit_rate 25m per connection (as CDNs cap each connection): targets getTensor >= 3.5x
//   faster than the fetch, CLI convert in at most a third of the fetch's time;
// - the tests' server (test/http-server.ts, in a worker) with one budget of 100 MB/s shared by all
//   connections: target no more than 1.1x slower than the fetch;
// - nginx uncapped: the same target.
// Every read is checked byte for byte against the file. Medians of interleaved rounds.
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileSink, open, SafetensorsWriter } from '../dist/node.js'
import { median, serveInWorker, strippedModule, table } from './util.js'

const MiB = 2 ** 20
const ELEMENTS = 64 * MiB // F32: 256 MiB of data
const FILE = join(tmpdir(), 'safetensors-wasm-bench-256mib-f32.safetensors')
const NAME = 'model.safetensors'
const CLI = new URL('../dist/cli.js', import.meta.url).pathname

/** Writes the bench file once: one F32 tensor of values F16 can hold, streamed so it never sits in memory twice. */
async function makeFile() {
  if (existsSync(FILE) && statSync(FILE).size > ELEMENTS * 4) return
  const writer = SafetensorsWriter.create(await fileSink(FILE), [{ name: 'weight', dtype: 'F32', shape: [ELEMENTS / 4096, 4096] }])
  const chunk = new Float32Array(MiB)
  for (let done = 0; done < ELEMENTS; done += chunk.length) {
    for (let i = 0; i < chunk.length; i++) chunk[i] = (((i + done) * 2654435761) >>> 16) / 4096 - 8
    await writer.write('weight', chunk)
  }
  await writer.close()
}

function sameBytes(a, b) {
  return a.byteLength === b.byteLength && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), b) === 0
}

/** The variants of one server, each returning its milliseconds; every one checks what it read. */
function variants(url, expected, withConvert) {
  const out = mkdtempSync(join(tmpdir(), 'safetensors-download-'))
  const timed = async (run) => {
    const start = performance.now()
    await run()
    return performance.now() - start
  }
  const all = {
    'one fetch of the file': () =>
      timed(async () => {
        const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer())
        if (bytes.length !== expected.file.length) throw new Error(`fetch gave ${bytes.length} bytes`)
      }),
    getTensor: () =>
      timed(async () => {
        const file = await open(url)
        const { data } = await file.getTensor('weight')
        if (!sameBytes(data, expected.data)) throw new Error('getTensor: wrong bytes')
      }),
  }
  if (withConvert) {
    all['CLI convert to F16'] = () =>
      timed(
        () =>
          new Promise((resolve, reject) =>
            execFile(process.execPath, [CLI, 'convert', url, join(out, 'f16.safetensors'), '--dtype', 'F16'], (error, _o, stderr) =>
              error ? reject(new Error(`convert: ${stderr}`)) : resolve(undefined),
            ),
          ),
      )
  }
  return { all, cleanup: () => rmSync(out, { recursive: true, force: true }) }
}

async function measure(label, url, expected, { rounds, withConvert, targets }) {
  const { all, cleanup } = variants(url, expected, withConvert)
  /** @type {Record<string, number[]>} */
  const times = Object.fromEntries(Object.keys(all).map((k) => [k, []]))
  try {
    for (let r = 0; r < rounds; r++) for (const [name, run] of Object.entries(all)) times[name].push(await run())
  } finally {
    cleanup()
  }
  const fetchMs = median(times['one fetch of the file'])
  console.log(`\n${label}: ${url} (median of ${rounds})`)
  table(
    Object.entries(times).map(([name, t]) => ({
      variant: name,
      'ms (median)': median(t).toFixed(0),
      'MB/s': ((expected.data.length / median(t)) * 1e-3).toFixed(0),
      'speed vs one fetch': (fetchMs / median(t)).toFixed(2),
    })),
  )
  for (const [name, target] of Object.entries(targets)) {
    const ratio = fetchMs / median(times[name])
    console.log(`${name}: ${ratio.toFixed(2)}x one fetch (target ${target.text}) ${target.met(ratio) ? 'met' : 'NOT MET'}`)
  }
}

export async function run() {
  await makeFile()
  const file = readFileSync(FILE)
  const dataStart = 8 + Number(file.readBigUInt64LE(0))
  const expected = { file, data: file.subarray(dataStart) }
  console.log(`\nDownloads: one ${expected.data.length / MiB} MiB F32 tensor over loopback HTTP`)
  const notSlower = { text: '>= 0.91, at most 1.1x slower', met: (r) => r >= 1 / 1.1 }
  const { findNginx, startNginx } = await import(await strippedModule('../test/nginx.ts'))
  const binary = findNginx()
  const root = mkdtempSync(join(tmpdir(), 'safetensors-download-root-'))
  let nginx
  try {
    if (binary) {
      const { symlinkSync } = await import('node:fs')
      symlinkSync(FILE, join(root, NAME))
      nginx = await startNginx(binary, root)
      await measure('nginx, limit_rate 25m per connection', `${nginx.origin}/capped/${NAME}`, expected, {
        rounds: 3,
        withConvert: true,
        targets: { getTensor: { text: '>= 3.5x', met: (r) => r >= 3.5 }, 'CLI convert to F16': { text: '>= 3x', met: (r) => r >= 3 } },
      })
    } else console.log('nginx not found: install it (apt-get install -y nginx) for the per-connection cap and the uncapped runs')
    const shared = await serveInWorker(new Map([[NAME, file]]), { bandwidth: { shared: 100e6 } })
    try {
      await measure('the tests\u2019 server, one budget of 100 MB/s for all connections', `${shared.url}${NAME}`, expected, {
        rounds: 3,
        withConvert: false,
        targets: { getTensor: notSlower },
      })
    } finally {
      await shared.close()
    }
    if (nginx)
      await measure('nginx, uncapped', `${nginx.origin}/ranged/${NAME}`, expected, { rounds: 7, withConvert: false, targets: { getTensor: notSlower } })
  } finally {
    await nginx?.close()
    rmSync(root, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
