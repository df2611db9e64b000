// inspect and validate as a user runs them (test/run-cli.ts); the December 2026 contract is in cli-contract.test.ts.
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FIXTURES_REAL } from './helpers.ts'
import { startServer, type TestServer } from './http-server.ts'
import { CLI, cli } from './run-cli.ts'

const MODEL = `${FIXTURES_REAL}fluxml__safetensors.jl__model.with_metadata.safetensors`
const INVALID = `${FIXTURES_REAL}invalid/syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors`

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

  test('--tensor on a terminal shows a progress bar on stderr up to 100%; on a pipe, none', async () => {
    // `script` gives the child a pseudo-terminal (its output is stdout and stderr together)
    const command = [process.execPath, CLI, 'inspect', MODEL, '--tensor', 'float32_357'].map((a) => `'${a}'`).join(' ')
    const onTerminal = await promisify(execFile)('script', ['-qec', command, '/dev/null'], { encoding: 'utf8' })
    expect(onTerminal.stdout).toMatch(/\[#{40}\]\s+100%/)
    expect(onTerminal.stdout).toContain('float32_357: F32 [3, 5, 7]')
    const piped = await cli('inspect', MODEL, '--tensor', 'float32_357')
    expect(piped).toMatchObject({ code: 0, stderr: '' })
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
    const lines = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
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

describe('sharded models', () => {
  const SHARDS = `${FIXTURES_REAL}sharded/fluxml__safetensors.jl`
  const INDEX = join(SHARDS, 'model.safetensors.index.json')
  const indexText = readFileSync(INDEX, 'utf8')
  const index = JSON.parse(indexText) as { metadata: { total_size: number }; weight_map: Record<string, string> }
  const shardFiles = [...new Set(Object.values(index.weight_map))].sort()
  const tmp = mkdtempSync(join(tmpdir(), 'cli-model-'))
  afterAll(() => rmSync(tmp, { recursive: true, force: true }))
  let folders = 0
  /** A copy of the shards with this index text. */
  const modelWith = (text: string) => {
    const dir = join(tmp, `m${++folders}`)
    mkdirSync(dir)
    for (const f of shardFiles) copyFileSync(join(SHARDS, f), join(dir, f))
    writeFileSync(join(dir, 'model.safetensors.index.json'), text)
    return dir
  }
  const withMap = (weightMap: Record<string, string>) => modelWith(JSON.stringify({ ...index, weight_map: weightMap }))

  test.each([
    ['the index', INDEX],
    ['the folder', SHARDS],
  ])('inspect %s: model totals, a line per shard, the shard column', async (_, where) => {
    const { code, stdout } = await cli('inspect', where)
    expect(code).toBe(0)
    expect(stdout).toContain(`${shardFiles.length} shards`)
    for (const f of shardFiles) {
      const tensors = Object.keys(headerOf(join(SHARDS, f))).length
      expect(stdout).toMatch(new RegExp(`^  ${f}\\s+${tensors} tensors?\\s`, 'm'))
    }
    for (const [name, shard] of Object.entries(index.weight_map)) expect(stdout).toMatch(new RegExp(`^${name}\\s.*\\s${shard}$`, 'm'))
    const bytes = shardFiles.reduce(
      (sum, f) => sum + Object.values(headerOf(join(SHARDS, f))).reduce((s, t) => s + t.data_offsets[1] - t.data_offsets[0], 0),
      0,
    )
    expect(bytes).toBe(index.metadata.total_size)
    expect(stdout).toContain(`${Object.keys(index.weight_map).length} tensors, `)
    expect(stdout).toContain(`, ${bytes.toLocaleString('en-US')} bytes`)
  })

  test('inspect --json: totals and each tensor with its shard, as the index and the shard headers say', async () => {
    const { code, stdout } = await cli('inspect', SHARDS, '--json')
    expect(code).toBe(0)
    const out = JSON.parse(stdout)
    expect(out.totals.tensors).toBe(Object.keys(index.weight_map).length)
    expect(out.totals.bytes).toBe(index.metadata.total_size)
    expect(Object.fromEntries(out.tensors.map((t: { name: string; shard: string }) => [t.name, t.shard]))).toEqual(index.weight_map)
    expect(out.shards.map((s: { file: string }) => s.file)).toEqual(shardFiles)
    for (const s of out.shards) expect(s.fileSize).toBe(readFileSync(join(SHARDS, s.file)).length)
  })

  test('validate the index and the folder: exit 0, one JSON line each with the shard counts', async () => {
    const { code, stdout } = await cli('validate', INDEX, SHARDS, '--json')
    expect(code).toBe(0)
    const shards = shardFiles.map((file) => ({ file, tensors: Object.keys(headerOf(join(SHARDS, file))).length }))
    const tensors = Object.keys(index.weight_map).length
    expect(
      stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([
      { file: INDEX, valid: true, tensors, shards },
      { file: SHARDS, valid: true, tensors, shards },
    ])
  })

  const [moved, home] = Object.entries(index.weight_map)[0]
  const elsewhere = shardFiles.find((f) => f !== home)!
  const { [moved]: _, ...withoutMoved } = index.weight_map
  const defects: Array<[string, () => string, string, RegExp]> = [
    [
      'a tensor listed but missing',
      () => withMap({ ...index.weight_map, ghost_tensor: home }),
      'TensorNotFound',
      new RegExp(`"ghost_tensor" in ${home}.*no shard has it`),
    ],
    [
      'a tensor in the wrong shard',
      () => withMap({ ...index.weight_map, [moved]: elsewhere }),
      'TensorNotFound',
      new RegExp(`"${moved}" in ${elsewhere}.*it is in ${home}`),
    ],
    [
      'a tensor present but unlisted',
      () => withMap(withoutMoved),
      'TensorNotFound',
      new RegExp(`shard ${home} holds "${moved}", which the index does not list`),
    ],
    [
      'a tensor listed twice',
      () => modelWith(indexText.replace('"weight_map": {', `"weight_map": {\n    "${moved}": "${home}",`)),
      'InvalidHeaderDeserialization',
      new RegExp(`"${moved}" appears twice`),
    ],
  ]
  test.each(defects)('validate and inspect: %s gives exit 1 and names the tensor and shard', async (_, make, code, message) => {
    const dir = make()
    expect(readdirSync(dir)).toContain('model.safetensors.index.json')
    const validate = await cli('validate', dir, '--json')
    expect(validate.code).toBe(1)
    const line = JSON.parse(validate.stdout)
    expect(line).toMatchObject({ file: dir, valid: false, code })
    expect(line.message).toMatch(message)
    const text = await cli('validate', join(dir, 'model.safetensors.index.json'))
    expect(text.code).toBe(1)
    expect(text.stdout).toMatch(message)
    const inspect = await cli('inspect', dir)
    expect(inspect.code).toBe(1)
    expect(inspect.stderr).toMatch(message)
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

describe('GGUF files', () => {
  const FIXTURES = fileURLToPath(new URL('./fixtures/gguf/reader/', import.meta.url))
  const QWEN3 = `${FIXTURES}qwen3-converter.gguf`
  const EVERY = `${FIXTURES}every-type.gguf`
  /** What gguf-py reads from a fixture (scripts/make-gguf-reader-fixtures.py). */
  const golden = (path: string) => JSON.parse(readFileSync(path.replace(/\.gguf$/, '.json'), 'utf8'))
  const tmp = mkdtempSync(join(tmpdir(), 'cli-gguf-'))
  afterAll(() => rmSync(tmp, { recursive: true, force: true }))

  test('inspect lists the metadata with its types, long arrays cut short, every tensor, and totals per type', async () => {
    const { code, stdout } = await cli('inspect', QWEN3)
    expect(code).toBe(0)
    const expected = golden(QWEN3)
    expect(stdout.split('\n')[0]).toBe(
      `${QWEN3}: GGUF v3, little-endian, 155,968 bytes, alignment 32, data from byte ${expected.dataOffset.toLocaleString('en-US')}`,
    )
    expect(stdout).toContain('  qwen3.block_count (UINT32): 2\n')
    expect(stdout).toContain('  qwen3.attention.layer_norm_rms_epsilon (FLOAT32): 0.000001\n')
    const tokens = expected.fields.find((f: { key: string }) => f.key === 'tokenizer.ggml.tokens').value as string[]
    expect(stdout).toContain(
      `  tokenizer.ggml.tokens (ARRAY[STRING]): [${tokens
        .slice(0, 8)
        .map((t) => JSON.stringify(t))
        .join(', ')}, … 512 values]\n`,
    )
    expect(stdout).toMatch(/^ {2}tokenizer\.chat_template \(STRING\): "\{% for message in messages %\}.*\\n.*"$/m)
    for (const t of expected.tensors)
      expect(stdout).toMatch(
        new RegExp(`^${t.name.replaceAll('.', '\\.')}\\s+${t.type}\\s+\\[${t.shape.join(', ')}\\]\\s+${t.bytes.toLocaleString('en-US')}$`, 'm'),
      )
    const f16 = expected.tensors.filter((t: { type: string }) => t.type === 'F16')
    expect(stdout).toMatch(
      new RegExp(
        `^ {2}F16\\s+${f16.length} tensors\\s+[\\d,]+ parameters\\s+${f16.reduce((s: number, t: { bytes: number }) => s + t.bytes, 0).toLocaleString('en-US')} bytes$`,
        'm',
      ),
    )
  })

  test('inspect --json: every key with its type, 64-bit integers as strings, long arrays as length and first values, the tensors', async () => {
    const { code, stdout } = await cli('inspect', EVERY, '--json')
    expect(code).toBe(0)
    const out = JSON.parse(stdout)
    const expected = golden(EVERY)
    expect([out.format, out.version, out.byteOrder, out.alignment, out.dataStart]).toEqual(['GGUF', 3, 'little', 32, expected.dataOffset])
    expect(Object.keys(out.metadata)).toEqual(expected.fields.map((f: { key: string }) => f.key))
    expect(out.metadata['test.u64']).toEqual({ type: 'UINT64', value: '18446744073709551615' })
    // A float32 at its shortest: the least subnormal, 1.401298464324817e-45 as a double.
    expect(out.metadata['test.f32.subnormal']).toEqual({ type: 'FLOAT32', value: 1e-45 })
    expect(out.metadata['test.array.string']).toEqual({ type: 'ARRAY[STRING]', value: ['a', '', 'ünïcødé', '😀'] })
    expect(out.metadata['test.array.long']).toEqual({
      type: 'ARRAY[STRING]',
      value: { length: 1000, first: Array.from({ length: 8 }, (_, i) => `token ${i}`) },
    })
    expect(out.tensors).toEqual(
      expected.tensors.map((t: { name: string; type: string; shape: number[]; bytes: number; offset: number }) => ({
        name: t.name,
        type: t.type,
        shape: t.shape,
        byteLength: t.bytes,
        offset: t.offset,
      })),
    )
    expect(out.totals.tensors).toBe(expected.tensors.length)
    expect(out.totals.byType.Q4_K).toEqual({ tensors: 3, parameters: 512 + 3 * 256 + 8 * 256, bytes: (2 + 3 + 8) * 144 })
  })

  test('inspect --tensor of a plain tensor: its statistics', async () => {
    const { code, stdout } = await cli('inspect', QWEN3, '--tensor', 'output_norm.weight', '--json')
    expect(code).toBe(0)
    expect(JSON.parse(stdout)).toMatchObject({ name: 'output_norm.weight', dtype: 'F32', shape: [48], count: 48 })
  })

  test('validate: valid ones, a broken one, a missing one; and a GGUF under another name is read as one', async () => {
    const broken = join(tmp, 'broken.gguf')
    writeFileSync(broken, readFileSync(QWEN3).subarray(0, 5000))
    const renamed = join(tmp, 'model.bin')
    copyFileSync(EVERY, renamed)
    const run = await cli('validate', QWEN3, renamed, broken, '--json')
    expect(run.code).toBe(1)
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.slice(0, 2)).toEqual([
      { file: QWEN3, valid: true, tensors: 24 },
      { file: renamed, valid: true, tensors: 122 },
    ])
    expect(lines[2]).toMatchObject({ file: broken, valid: false, code: 'InvalidGguf' })
    expect(lines[2].message).toMatch(/^GGUF: key "tokenizer.ggml.tokens" \(at byte \d+\): the array at byte \d+ claims 512 elements of STRING, more than/)
    expect((await cli('validate', QWEN3, join(tmp, 'missing.gguf'))).code).toBe(3)
    const inspect = await cli('inspect', broken)
    expect(inspect).toMatchObject({ code: 1, stdout: '' })
    expect(inspect.stderr).toMatch(/: InvalidGguf: GGUF: /)
  })
})
