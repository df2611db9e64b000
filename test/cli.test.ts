// The CLI as a user runs it: node dist/cli.js (built by npm test before vitest runs).
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FIXTURES_REAL } from './helpers.ts'
import { startServer, type TestServer } from './http-server.ts'

const CLI = new URL('../dist/cli.js', import.meta.url).pathname
const MODEL = `${FIXTURES_REAL}fluxml__safetensors.jl__model.with_metadata.safetensors`
const INVALID = `${FIXTURES_REAL}invalid/syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors`

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, ...args])
    return { code: 0, stdout, stderr }
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** The header as JSON.parse sees it, independent of the library. */
function headerOf(path: string): Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> {
  const bytes = readFileSync(path)
  const n = Number(bytes.readBigUInt64LE(0))
  const { __metadata__: _, ...tensors } = JSON.parse(bytes.toString('utf8', 8, 8 + n))
  return tensors
}

describe('inspect', () => {
  test('prints every tensor, the totals and the metadata', async () => {
    const { code, stdout } = await cli('inspect', MODEL)
    expect(code).toBe(0)
    const tensors = headerOf(MODEL)
    for (const [name, t] of Object.entries(tensors)) expect(stdout).toMatch(new RegExp(`^${name}\\s+${t.dtype}\\s+\\[${t.shape.join(', ')}\\]`, 'm'))
    expect(stdout).toContain(`${Object.keys(tensors).length} tensors`)
    expect(stdout).toContain('version: 2.2')
  })

  test('--json gives the table and per-dtype totals', async () => {
    const { code, stdout } = await cli('inspect', MODEL, '--json')
    expect(code).toBe(0)
    const out = JSON.parse(stdout)
    const tensors = headerOf(MODEL)
    expect(out.tensors.map((t: { name: string }) => t.name).sort()).toEqual(Object.keys(tensors).sort())
    const bytes = Object.values(tensors).reduce((s, t) => s + t.data_offsets[1] - t.data_offsets[0], 0)
    expect(out.totals.bytes).toBe(bytes)
    const bf16 = Object.values(tensors).filter((t) => t.dtype === 'BF16')
    expect(out.totals.byDtype.BF16.parameters).toBe(bf16.reduce((s, t) => s + t.shape.reduce((a, b) => a * b, 1), 0))
  })

  test('--tensor prints statistics of that tensor', async () => {
    const { code, stdout } = await cli('inspect', MODEL, '--tensor', 'float32_35', '--json')
    expect(code).toBe(0)
    const stats = JSON.parse(stdout)
    const bytes = readFileSync(MODEL)
    const n = Number(bytes.readBigUInt64LE(0))
    const [begin, end] = headerOf(MODEL).float32_35.data_offsets
    const values = [...new Float32Array(bytes.buffer.slice(bytes.byteOffset + 8 + n + begin, bytes.byteOffset + 8 + n + end))]
    expect(stats.count).toBe(15)
    expect(stats.min).toBe(Math.min(...values))
    expect(stats.max).toBe(Math.max(...values))
    expect(stats.mean).toBeCloseTo(values.reduce((a, b) => a + b, 0) / values.length, 12)
  })

  test('an unknown tensor or an invalid file exits 1 with the code on stderr', async () => {
    const missing = await cli('inspect', MODEL, '--tensor', 'nope')
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('TensorNotFound')
    const invalid = await cli('inspect', INVALID)
    expect(invalid.code).toBe(1)
    expect(invalid.stderr).toContain('InvalidHeaderLength')
  })
})

describe('validate', () => {
  test('--json prints one line per file; exit 1 when any is invalid', async () => {
    const { code, stdout } = await cli('validate', MODEL, INVALID, '--json')
    expect(code).toBe(1)
    const lines = stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(lines[0]).toEqual({ file: MODEL, valid: true, tensors: Object.keys(headerOf(MODEL)).length })
    expect(lines[1]).toMatchObject({ file: INVALID, valid: false, code: 'InvalidHeaderLength' })
    expect(lines[1].message).toContain('1000')
  })

  test('exit 0 when all are valid', async () => {
    expect((await cli('validate', MODEL, `${FIXTURES_REAL}tracel-ai__burn__boolean.safetensors`)).code).toBe(0)
  })

  test('bad usage exits 2', async () => {
    expect((await cli('validate')).code).toBe(2)
    expect((await cli('validate', MODEL, '--bogus')).code).toBe(2)
    expect((await cli('frobnicate', MODEL)).code).toBe(2)
    expect((await cli('inspect', MODEL, '--tensor')).code).toBe(2)
  })
})

describe('over HTTP', () => {
  let server: TestServer
  const file = readFileSync(MODEL)
  beforeAll(async () => {
    server = await startServer((req, res, log) => {
      const [, from, to] = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '') ?? []
      const end = Math.min(Number(to), file.length - 1)
      const body = file.subarray(Number(from), end + 1)
      res.writeHead(206, { 'Content-Range': `bytes ${from}-${end}/${file.length}`, 'Content-Length': body.length })
      log.bytesSent += body.length
      res.end(body)
    })
  })
  afterAll(() => server.close())

  test('inspect and validate read a URL', async () => {
    const url = `${server.origin}/model.safetensors`
    const inspect = await cli('inspect', url, '--json')
    expect(inspect.code).toBe(0)
    expect(JSON.parse(inspect.stdout).tensors).toHaveLength(Object.keys(headerOf(MODEL)).length)
    const validate = await cli('validate', url, '--json')
    expect(JSON.parse(validate.stdout)).toEqual({ file: url, valid: true, tensors: Object.keys(headerOf(MODEL)).length })
  })
})
