// Converting a 2 GiB BF16 file to F32 and back with the CLI (`node dist/cli.js convert ...`), each run in a
// child process so its peak RSS is its own (process.resourceUsage().maxRSS, read when the child exits).
// Target: peak RSS under 200 MiB in both directions. The round trip must give the input back byte for byte.
// Baseline: what a user would write without the library (fs.readFile, a JS loop, fs.writeFile). It cannot
// read a 2 GiB file at all (fs.readFile stops at 2 GiB - 1), so it is compared with the CLI on a 256 MiB file.
// The inputs are made once in os.tmpdir() by streaming (SafetensorsWriter + fileSink); outputs are deleted.
import { execFile } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { open as fsOpen, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SafetensorsWriter, fileSink } from '../dist/node.js'
import { median, table } from './util.js'

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url))
const MiB = 2 ** 20
const RSS_TARGET = 200 * MiB
const BIG = { path: join(tmpdir(), 'safetensors-wasm-bench-2gib-bf16-write.safetensors'), tensors: 32, elements: 32 << 20 } // 32 x 64 MiB
const SMALL = { path: join(tmpdir(), 'safetensors-wasm-bench-256mib-bf16-write.safetensors'), tensors: 8, elements: 16 << 20 } // 8 x 32 MiB

/** Writes a BF16 file chunk by chunk (never held in memory); values are finite, so F32 and back is exact. */
export async function makeInput({ path, tensors, elements }) {
  if (existsSync(path) && statSync(path).size > tensors * elements * 2) return
  const names = Array.from({ length: tensors }, (_, i) => `model.layers.${i}.mlp.weight`)
  const writer = SafetensorsWriter.create(
    await fileSink(path),
    names.map((name) => ({ name, dtype: 'BF16', shape: [elements >> 12, 4096] })),
    { metadata: { format: 'pt' } },
  )
  const chunk = new Uint16Array(1 << 20)
  for (const [t, name] of names.entries()) {
    for (let done = 0; done < elements; done += chunk.length) {
      // sign, exponents 2^-30..2^33 and all mantissas: never NaN or infinity
      for (let i = 0; i < chunk.length; i++) {
        const h = Math.imul(i + done + t * 7919, 2654435761) >>> 0
        chunk[i] = (h & 0x8000) | ((0x61 + ((h >>> 20) & 0x3f)) << 7) | (h & 0x7f)
      }
      await writer.write(name, chunk)
    }
  }
  await writer.close()
}

/** Runs `node -e code args...` and returns { ms, maxRss } (maxRSS as the child reports it when it exits). */
export function child(code, args) {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    execFile(process.execPath, ['--input-type=module', '-e', code, ...args], { maxBuffer: 16 * MiB }, (error, _stdout, stderr) => {
      const ms = performance.now() - start
      if (error) return reject(new Error(`child failed (${error.code}): ${stderr}`))
      const line = stderr.split('\n').find((l) => l.startsWith('BENCH '))
      if (!line) return reject(new Error(`no BENCH line from the child: ${stderr}`))
      resolve({ ms, ...JSON.parse(line.slice(6)) })
    })
  })
}

export const REPORT_RSS = `process.on('exit', () => process.stderr.write('\\nBENCH ' + JSON.stringify({ maxRss: process.resourceUsage().maxRSS * 1024, exitCode: process.exitCode ?? 0 }) + '\\n'))`

/** The CLI itself, with argv set as if it had been started as `node dist/cli.js convert in out --dtype D`. */
export const CLI_CHILD = `
  ${REPORT_RSS}
  process.argv = [process.argv[0], ${JSON.stringify(CLI)}, 'convert', ...process.argv.slice(1)]
  await import(${JSON.stringify(new URL('../dist/cli.js', import.meta.url).href)})`

/** What a user would write: read the whole file, convert in a JS loop into a new buffer, write it out. */
const BASELINE_CHILD = `
  ${REPORT_RSS}
  import { readFile, writeFile } from 'node:fs/promises'
  const [input, output, , dtype] = process.argv.slice(1)
  const bytes = await readFile(input)
  const n = Number(bytes.readBigUInt64LE(0))
  const header = JSON.parse(bytes.toString('utf8', 8, 8 + n))
  const entries = Object.entries(header).filter(([k]) => k !== '__metadata__').sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0])
  const outHeader = header.__metadata__ ? { __metadata__: header.__metadata__ } : {}
  let offset = 0
  const width = dtype === 'F32' ? 4 : 2
  for (const [name, t] of entries) {
    const count = (t.data_offsets[1] - t.data_offsets[0]) / (t.dtype === 'F32' ? 4 : 2)
    outHeader[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + count * width] }
    offset += count * width
  }
  let json = Buffer.from(JSON.stringify(outHeader))
  json = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, 0x20)])
  const out = Buffer.allocUnsafe(8 + json.length + offset)
  out.writeBigUInt64LE(BigInt(json.length), 0)
  json.copy(out, 8)
  const dataIn = 8 + n
  const dataOut = 8 + json.length
  for (const [name, t] of entries) {
    const [begin, end] = t.data_offsets
    const o = outHeader[name].data_offsets[0]
    if (dtype === 'F32') {
      const src = new Uint16Array(bytes.buffer, bytes.byteOffset + dataIn + begin, (end - begin) / 2)
      const dst = new Uint32Array(out.buffer, out.byteOffset + dataOut + o, src.length)
      for (let i = 0; i < src.length; i++) dst[i] = src[i] << 16
    } else {
      const src = new Uint32Array(bytes.buffer, bytes.byteOffset + dataIn + begin, (end - begin) / 4)
      const dst = new Uint16Array(out.buffer, out.byteOffset + dataOut + o, src.length)
      for (let i = 0; i < src.length; i++) {
        const b = src[i]
        dst[i] = (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x40 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16
      }
    }
  }
  await writeFile(output, out)`

async function sameFiles(a, b) {
  if (statSync(a).size !== statSync(b).size) return false
  const [fa, fb] = await Promise.all([fsOpen(a), fsOpen(b)])
  try {
    const x = Buffer.allocUnsafe(16 * MiB)
    const y = Buffer.allocUnsafe(16 * MiB)
    for (let at = 0; ; at += x.length) {
      const [{ bytesRead: m }, { bytesRead: k }] = await Promise.all([fa.read(x, 0, x.length, at), fb.read(y, 0, y.length, at)])
      if (m !== k) return false
      if (m === 0) return true
      if (x.compare(y, 0, k, 0, m) !== 0) return false
    }
  } finally {
    await Promise.all([fa.close(), fb.close()])
  }
}

/** BF16 -> F32 -> BF16 with one converter; returns the two runs and whether the result equals the input. */
async function roundTrip(kind, input, code) {
  const f32 = `${input}.${kind}.f32.safetensors`
  const back = `${input}.${kind}.back.safetensors`
  try {
    const there = await child(code, [input, f32, '--dtype', 'F32'])
    const home = await child(code, [f32, back, '--dtype', 'BF16'])
    const f32Size = statSync(f32).size
    const same = await sameFiles(input, back)
    return { there, home, f32Size, same }
  } finally {
    await rm(f32, { force: true })
    await rm(back, { force: true })
  }
}

const mib = (bytes) => (bytes / MiB).toFixed(0)

export async function run() {
  await makeInput(BIG)
  await makeInput(SMALL)
  const bigSize = statSync(BIG.path).size
  const smallSize = statSync(SMALL.path).size

  console.log(`\nconvert BF16 -> F32 -> BF16, ${(bigSize / 2 ** 30).toFixed(2)} GiB input (${BIG.tensors} tensors), the CLI in a child process`)
  const big = await roundTrip('cli', BIG.path, CLI_CHILD)
  table([
    {
      step: 'BF16 -> F32',
      'in MiB': mib(bigSize),
      'out MiB': mib(big.f32Size),
      ms: big.there.ms.toFixed(0),
      'MiB/s (in)': (bigSize / MiB / (big.there.ms / 1000)).toFixed(0),
      'peak RSS MiB': mib(big.there.maxRss),
    },
    {
      step: 'F32 -> BF16',
      'in MiB': mib(big.f32Size),
      'out MiB': mib(bigSize),
      ms: big.home.ms.toFixed(0),
      'MiB/s (in)': (big.f32Size / MiB / (big.home.ms / 1000)).toFixed(0),
      'peak RSS MiB': mib(big.home.maxRss),
    },
  ])
  const peak = Math.max(big.there.maxRss, big.home.maxRss)
  console.log(
    `round trip identical to the input: ${big.same}; peak RSS ${mib(peak)} MiB (target < ${mib(RSS_TARGET)} MiB): ${peak < RSS_TARGET ? 'met' : 'NOT MET'}`,
  )

  // The baseline cannot take the 2 GiB file: show how it fails, then compare on 256 MiB.
  let bigBaseline
  try {
    await child(BASELINE_CHILD, [BIG.path, `${BIG.path}.baseline.f32.safetensors`, '--dtype', 'F32'])
    bigBaseline = 'ran (unexpectedly)'
  } catch (error) {
    bigBaseline = /ERR_FS_FILE_TOO_LARGE|RangeError[^\n]*/.exec(error.message)?.[0] ?? error.message.split('\n')[0]
  } finally {
    await rm(`${BIG.path}.baseline.f32.safetensors`, { force: true })
  }
  console.log(`fs.readFile + JS loop on the ${(bigSize / 2 ** 30).toFixed(2)} GiB file: fails (${bigBaseline})`)

  console.log(
    `\nsame round trip on a ${mib(smallSize)} MiB BF16 file (${SMALL.tensors} tensors): CLI vs fs.readFile + JS loop + fs.writeFile, median of 3, interleaved`,
  )
  const results = { 'CLI convert': [], 'fs.readFile + JS loop': [] }
  for (let round = 0; round < 3; round++) {
    results['CLI convert'].push(await roundTrip('cli', SMALL.path, CLI_CHILD))
    results['fs.readFile + JS loop'].push(await roundTrip('baseline', SMALL.path, BASELINE_CHILD))
  }
  const rows = []
  for (const [name, runs] of Object.entries(results)) {
    if (!runs.every((r) => r.same)) throw new Error(`${name}: the round trip did not give the input back`)
    for (const step of ['there', 'home']) {
      rows.push({
        converter: name,
        step: step === 'there' ? 'BF16 -> F32' : 'F32 -> BF16',
        'ms (median)': median(runs.map((r) => r[step].ms)).toFixed(0),
        'peak RSS MiB (max)': mib(Math.max(...runs.map((r) => r[step].maxRss))),
      })
    }
  }
  table(rows)
  const ratio = (step) => median(results['fs.readFile + JS loop'].map((r) => r[step].ms)) / median(results['CLI convert'].map((r) => r[step].ms))
  console.log(
    `CLI vs baseline at ${mib(smallSize)} MiB: ${ratio('there').toFixed(2)}x (BF16 -> F32), ${ratio('home').toFixed(2)}x (F32 -> BF16) the baseline's time; both round trips exact`,
  )
  return { big: { inputBytes: bigSize, f32Bytes: big.f32Size, toF32: big.there, toBF16: big.home, identical: big.same }, small: results, bigBaseline }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
