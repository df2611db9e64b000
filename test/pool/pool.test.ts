// The conversion pool's workers (src/pool/pool.ts) as a script sees them: made on first use, they never keep a
// Node process alive, so a script that reads a tensor on the pool and returns without close() exits at once.
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'
import { POOL_MIN_BYTES } from '../../src/core/convert.ts'
import { buildFile } from '../read-helpers.ts'
import { scratchFolders } from '../write-helpers.ts'

const DIST = fileURLToPath(new URL('../../dist/node.js', import.meta.url))
const scratch = scratchFolders()

/** Runs `code` in a fresh Node; resolves with what it printed and the ms from the time it printed last (its last line) to its exit. */
function afterLastLine(code: string): Promise<{ out: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', code])
    let out = ''
    child.stdout.on('data', (data) => (out += data))
    child.on('error', reject)
    child.on('close', (status) => {
      if (status !== 0) return reject(new Error(`exit ${status}: ${out}`))
      const lines = out.trim().split('\n')
      resolve({ out, ms: performance.timeOrigin + performance.now() - Number(lines.at(-1)) })
    })
  })
}

// How soon it exits is bench/pool.js's figure (the bound: 100 ms); here, that it exits on its own, where a
// worker that kept the process alive would hold it until the test's timeout.
test('a script that reads a tensor on the pool and returns without close() exits on its own', async () => {
  const path = join(scratch(), 'w.safetensors')
  const elements = POOL_MIN_BYTES / 2
  writeFileSync(path, buildFile([{ name: 'w', dtype: 'BF16', shape: [elements], bytes: new Uint8Array(elements * 2).fill(0x3f) }]))
  const script = `
    import { open } from ${JSON.stringify(DIST)}
    const file = await open(${JSON.stringify(path)})
    const { data } = await file.getTensor('w', { dtype: 'F32' })
    console.log(Object.prototype.toString.call(data.buffer), data[12345])
    console.log(performance.timeOrigin + performance.now())`
  const { out, ms } = await afterLastLine(script)
  // Read on the pool (shared memory), and right: 0x3f3f as BF16.
  expect(out).toContain(`[object SharedArrayBuffer] ${new Float32Array(new Uint32Array([0x3f3f0000]).buffer)[0]}`)
  expect(ms).toBeLessThan(5000)
})
