// The memory bound of file.stream(): a 256 MiB BF16 tensor streamed as F32 (512 MiB out) in a child
// process (so that nothing else the test runner holds counts), whose peak RSS must stay under 160 MiB.
// The bytes are checked through a SHA-256 of the stream against a SHA-256 of a conversion computed
// here, chunk by chunk, without the library.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, expect, test } from 'vitest'
import { referenceConvert } from '../float-reference.ts'

const MiB = 1 << 20
const DATA = 256 * MiB
const ENTRY = fileURLToPath(new URL('../../dist/node.js', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'safetensors-stream-memory-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Writes the file a chunk at a time: the header, then DATA bytes of xorshift noise (every BF16 value, NaNs included). */
function writeFixture(path: string): number {
  let json = `{"t":{"dtype":"BF16","shape":[${DATA / 2 / 1024},1024],"data_offsets":[0,${DATA}]}}`
  while (json.length % 8) json += ' '
  const head = Buffer.alloc(8 + json.length)
  head.writeBigUInt64LE(BigInt(json.length))
  head.write(json, 8, 'latin1')
  const fd = openSync(path, 'w')
  writeSync(fd, head)
  const chunk = new Uint32Array((4 * MiB) / 4)
  let x = 0x9e3779b9
  for (let done = 0; done < DATA; done += chunk.byteLength) {
    for (let i = 0; i < chunk.length; i++) {
      x ^= x << 13
      x ^= x >>> 17
      x ^= x << 5
      chunk[i] = x
    }
    writeSync(fd, chunk)
  }
  closeSync(fd)
  return head.length
}

test('256 MiB of BF16 streamed as F32 in a child process: peak RSS under 160 MiB, bytes exact', () => {
  const path = join(dir, 'big.safetensors')
  const dataStart = writeFixture(path)

  const child = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `
    import { createHash } from 'node:crypto'
    const { open } = await import(${JSON.stringify(ENTRY)})
    const file = await open(${JSON.stringify(path)})
    const hash = createHash('sha256')
    let bytes = 0
    for await (const chunk of file.stream('t', { dtype: 'F32' })) { hash.update(chunk); bytes += chunk.length }
    await file.close()
    console.log(JSON.stringify({ sha256: hash.digest('hex'), bytes, maxRSS: process.resourceUsage().maxRSS * 1024 }))
  `,
    ],
    { encoding: 'utf8', timeout: 120_000 },
  )
  const result = JSON.parse(child.trim().split('\n').at(-1)!)

  // The expected bytes: BF16 is the upper half of F32, so each element's F32 bits are its 16 bits
  // followed by 16 zero bits. That shortcut is checked against the reference conversion on the first chunk.
  const expected = createHash('sha256')
  const fd = openSync(path, 'r')
  const input = new Uint8Array(4 * MiB)
  for (let at = 0; at < DATA; at += input.length) {
    readSync(fd, input, 0, input.length, dataStart + at)
    const halves = new Uint16Array(input.buffer)
    const out = new Uint32Array(halves.length)
    for (let i = 0; i < halves.length; i++) out[i] = halves[i] << 16
    const outBytes = new Uint8Array(out.buffer)
    if (at === 0) expect(Buffer.compare(outBytes.subarray(0, 65536), referenceConvert('BF16', 'F32', input.subarray(0, 32768)))).toBe(0)
    expected.update(outBytes)
  }
  closeSync(fd)

  console.log(`stream memory: ${DATA / MiB} MiB BF16 -> ${result.bytes / MiB} MiB F32, child peak RSS ${(result.maxRSS / MiB).toFixed(1)} MiB`)
  expect(result.bytes).toBe(DATA * 2)
  expect(result.sha256).toBe(expected.digest('hex'))
  expect(result.maxRSS).toBeLessThan(160 * MiB)
}, 180_000)
