// Loading every tensor of a 1 GiB BF16 file from disk as F32: open() + getTensor(dtype F32) against
// fs.readFile plus a JavaScript loop, each in a child process so peak RSS is its own. Targets: at least
// 2x faster, peak RSS at most 1.15x the F32 output + 64 MiB; inspecting the file reads under 1 MiB.
import { execFileSync } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileSink, fileSource, open, SafetensorsWriter } from '../dist/node.js'
import { median, table } from './util.js'

export const TENSORS = 16
export const ELEMENTS = 32 << 20 // 64 MiB of BF16 each: 1 GiB in all
const OUTPUT_BYTES = TENSORS * ELEMENTS * 4
export const BIG_FILE = join(tmpdir(), 'safetensors-wasm-bench-1gib-bf16.safetensors')

/** Writes the bench file once (BF16 values from a cheap generator), streaming so it never sits in memory. */
export async function makeBigFile() {
  if (existsSync(BIG_FILE) && statSync(BIG_FILE).size > TENSORS * ELEMENTS * 2) return
  const names = Array.from({ length: TENSORS }, (_, i) => `layers.${i}.weight`)
  const writer = SafetensorsWriter.create(
    await fileSink(BIG_FILE),
    names.map((name) => ({ name, dtype: 'BF16', shape: [ELEMENTS >> 12, 4096] })),
  )
  const chunk = new Uint16Array(1 << 20)
  for (const [t, name] of names.entries()) {
    for (let done = 0; done < ELEMENTS; done += chunk.length) {
      for (let i = 0; i < chunk.length; i++) chunk[i] = 0x3c00 + ((i * 2654435761 + t + done) >>> 20) // values near 0.0078..2
      await writer.write(name, chunk)
    }
  }
  await writer.close()
}

// Each variant runs in a child process: it loads every tensor, keeps them all, and prints ms and maxRSS.
export const VARIANTS = {
  'open + getTensor F32': `
    import { open } from ${JSON.stringify(new URL('../dist/node.js', import.meta.url).href)}
    const start = performance.now()
    const file = await open(process.argv[1])
    const kept = []
    for (const name of file.names()) kept.push((await file.getTensor(name, { dtype: 'F32' })).data)
    await file.close()
    const ms = performance.now() - start
    let check = 0
    for (const t of kept) check += t[12345]
    console.log(JSON.stringify({ ms, maxRss: process.resourceUsage().maxRSS * 1024, check }))`,
  'fs.readFile + JS loop': `
    import { readFile } from 'node:fs/promises'
    const start = performance.now()
    const bytes = await readFile(process.argv[1])
    const n = Number(bytes.readBigUInt64LE(0))
    const header = JSON.parse(bytes.toString('utf8', 8, 8 + n))
    const kept = []
    for (const [name, t] of Object.entries(header)) {
      if (name === '__metadata__') continue
      const [begin, end] = t.data_offsets
      const input = new Uint16Array(bytes.buffer, bytes.byteOffset + 8 + n + begin, (end - begin) / 2)
      const out = new Float32Array(input.length)
      const bits = new Uint32Array(out.buffer)
      for (let i = 0; i < input.length; i++) bits[i] = input[i] << 16
      kept.push(out)
    }
    const ms = performance.now() - start
    let check = 0
    for (const t of kept) check += t[12345]
    console.log(JSON.stringify({ ms, maxRss: process.resourceUsage().maxRSS * 1024, check }))`,
}

function runChild(code) {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code, BIG_FILE], { maxBuffer: 1 << 20 }).toString())
}

export async function run() {
  await makeBigFile()
  console.log(`\nLoading a ${(statSync(BIG_FILE).size / 2 ** 30).toFixed(2)} GiB BF16 file as F32 (${TENSORS} tensors; child processes, median of 3)`)
  const results = {}
  for (let round = 0; round < 3; round++) {
    for (const [name, code] of Object.entries(VARIANTS)) (results[name] ??= []).push(runChild(code))
  }
  const checks = new Set(Object.values(results).flatMap((r) => r.map((x) => x.check)))
  if (checks.size !== 1) throw new Error(`the two loaders disagree: ${[...checks]}`)
  const ours = median(results['open + getTensor F32'].map((r) => r.ms))
  const rssLimit = 1.15 * OUTPUT_BYTES + 64 * 2 ** 20
  table(
    Object.entries(results).map(([name, r]) => ({
      loader: name,
      'ms (median)': median(r.map((x) => x.ms)).toFixed(0),
      'speed vs ours': (ours / median(r.map((x) => x.ms))).toFixed(2),
      'peak RSS MiB': (Math.max(...r.map((x) => x.maxRss)) / 2 ** 20).toFixed(0),
    })),
  )
  const baseline = median(results['fs.readFile + JS loop'].map((r) => r.ms))
  const rss = Math.max(...results['open + getTensor F32'].map((r) => r.maxRss))
  console.log(
    `open + getTensor is ${(baseline / ours).toFixed(2)}x faster than fs.readFile + loop (target 2x); peak RSS ${(rss / 2 ** 20).toFixed(0)} MiB, limit ${(rssLimit / 2 ** 20).toFixed(0)} MiB (1.15 x ${OUTPUT_BYTES / 2 ** 20} MiB F32 + 64 MiB)`,
  )

  // Inspecting reads the prefix and header only.
  const source = await fileSource(BIG_FILE)
  let bytesRead = 0
  const counting = {
    size: source.size,
    read: async (offset, length) => {
      bytesRead += length
      return source.read(offset, length)
    },
  }
  const file = await open(counting)
  await source.close?.()
  console.log(`inspecting it (${file.header.tensors.length} tensors) read ${bytesRead} bytes (target < 1 MiB)`)
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
