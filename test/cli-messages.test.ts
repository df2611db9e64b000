// What the CLI says about a wrong input (issue 38), on node dist/cli.js: each line names the input once; a GGUF
// given where a SafeTensors model is expected says it is one; a URL that names a folder is bad usage that says
// which URLs to give, before any request; the input's faults come before any about the output. Expected texts
// are the system's (ENOENT), the GGUF format's magic and the test's own paths, never the CLI's output.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FIXTURES_REAL } from './helpers.ts'
import { fileResource, rangeHandler, startServer, type TestServer } from './http-server.ts'
import { cli, expectOneLine, lines } from './run-cli.ts'
import { tempDir } from './writer-reference.ts'

const FILE = `${FIXTURES_REAL}fluxml__safetensors.jl__model.with_metadata.safetensors`
const QWEN2 = new URL('./fixtures/gguf/qwen2/', import.meta.url).pathname

const TEMP = tempDir('cli-messages-')
afterAll(() => rmSync(TEMP, { recursive: true, force: true }))
const scratch = () => mkdtempSync(join(TEMP, 'test-'))

/** How many times `text` holds `part`. */
const occurrences = (text: string, part: string) => text.split(part).length - 1

describe('a line names its input once', () => {
  const dir = scratch()
  const missing = join(dir, 'missing.safetensors')
  const noFolder = join(dir, 'no-folder')
  const empty = join(dir, 'empty')
  mkdirSync(empty)

  test.each([
    ['validate', [missing], missing, 'stdout', 'no such file or directory (ENOENT)'],
    ['validate --json', [missing, '--json'], missing, 'stdout', 'no such file or directory (ENOENT)'],
    ['inspect', [missing], missing, 'stderr', 'no such file or directory (ENOENT)'],
    ['inspect --json', [missing, '--json'], missing, 'stdout', 'no such file or directory (ENOENT)'],
    ['inspect of a folder with no model', [empty], empty, 'stderr', 'no model'],
    ['convert of a file', ['convert', missing, join(dir, 'out.safetensors'), '--dtype', 'F16'], missing, 'stderr', 'ENOENT'],
    ['convert of a folder', ['convert', noFolder, join(dir, 'out'), '--dtype', 'F16'], noFolder, 'stderr', 'ENOENT'],
    ['convert to GGUF', ['convert', missing, join(dir, 'out.gguf')], missing, 'stderr', 'ENOENT'],
  ])('%s', async (name, args, input, stream, reason) => {
    const command = name.split(' ')[0]
    const run = await cli(...(command === 'convert' ? args : [command, ...args]))
    expect(run.code).not.toBe(0)
    const line = expectOneLine(run[stream as 'stdout' | 'stderr'])
    expect(line).toContain(reason)
    expect(occurrences(line, input), line).toBe(1)
  })
})

/** The smallest GGUF file, as the format defines it: magic "GGUF", version 3, no tensors, no metadata. */
function ggufFile(path: string): string {
  const bytes = Buffer.alloc(24)
  bytes.write('GGUF', 0, 'latin1')
  bytes.writeUInt32LE(3, 4)
  writeFileSync(path, bytes)
  return path
}

// inspect and validate read a GGUF file as one (test/cli.test.ts).
describe('a GGUF file where a SafeTensors file or model is expected says it is one', () => {
  const dir = scratch()
  const gguf = ggufFile(join(dir, 'model.gguf'))
  test.each([['convert to GGUF', ['convert', gguf, join(dir, 'out.gguf')]]])('%s: exit 1, one line naming it a GGUF file, nothing written', async (_, args) => {
    const run = await cli(...args)
    expect(run.code).toBe(1)
    const line = expectOneLine(run.stderr)
    expect(line).toMatch(new RegExp(`^${gguf}: \\w+: not a SafeTensors file: it is a GGUF file`))
    expect(line).not.toContain('index')
    expect(readdirSync(dir)).toEqual(['model.gguf'])
  })
})

describe('a GGUF file converted into a folder is read as one', () => {
  const dir = scratch()
  const gguf = ggufFile(join(dir, 'model.gguf'))
  test('a GGUF with no architecture: exit 1, one line naming it and the key, nothing written', async () => {
    const run = await cli('convert', gguf, join(dir, 'out'), '--max-shard-size', '1MB')
    expect(run.code).toBe(1)
    expect(expectOneLine(run.stderr)).toBe(`${gguf}: InvalidGguf: GGUF: general.architecture is missing`)
    expect(readdirSync(dir)).toEqual(['model.gguf'])
  })
  test('an output ending in .safetensors: bad usage, a GGUF converts to a folder', async () => {
    const run = await cli('convert', gguf, join(dir, 'out.safetensors'), '--dtype', 'F16')
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('a GGUF converts to a folder')
    expect(readdirSync(dir)).toEqual(['model.gguf'])
  })
})

describe('a URL that names a folder: bad usage, before any request, saying which URLs to give', () => {
  let server: TestServer
  beforeAll(async () => {
    // The Qwen2 test model's files under /qwen2/; nothing else.
    const file = (path: string) => join(QWEN2, path.slice('/qwen2/'.length))
    server = await startServer(rangeHandler((path) => (path.startsWith('/qwen2/') && existsSync(file(path)) ? fileResource(file(path)) : undefined)))
  })
  afterAll(() => server.close())

  test.each([
    ['inspect of a folder URL', (url: string) => ['inspect', `${url}qwen2/`], 'qwen2/'],
    ['validate of a folder URL among files', (url: string) => ['validate', `${url}qwen2/model.safetensors`, `${url}qwen2/`], 'qwen2/'],
    ['convert of a folder URL', (url: string) => ['convert', `${url}qwen2/`, 'out', '--dtype', 'F16'], 'qwen2/'],
    ['convert to GGUF of a folder URL without its slash', (url: string) => ['convert', `${url}qwen2`, 'out.gguf'], 'qwen2'],
  ])('%s', async (_, args, path) => {
    server.clear()
    const dir = scratch()
    const run = await cli(...args(server.url).map((a) => (a.startsWith('out') ? join(dir, a) : a)))
    expect(run).toMatchObject({ code: 2, stdout: '' })
    const [reason, see] = lines(run.stderr)
    const folder = `${server.url}${path.replace(/\/?$/, '/')}`
    expect(reason).toMatch(new RegExp(`^${server.url}${path} `))
    expect(reason).toContain(`${folder}model.safetensors.index.json`)
    expect(reason).toContain(`${folder}model.safetensors`)
    expect(see).toBe('see safetensors-wasm --help')
    expect(server.log).toEqual([])
    expect(readdirSync(dir)).toEqual([])
  })

  test("the model's file by URL converts to GGUF", async () => {
    const out = join(scratch(), 'out.gguf')
    const run = await cli('convert', `${server.url}qwen2/model.safetensors`, out)
    expect(run.code, run.stderr).toBe(0)
    expect(readdirSync(join(out, '..'))).toEqual(['out.gguf'])
  })
})

describe("the input's faults come before the output's", () => {
  test.each([
    [
      'a folder with no model, into a name ending in .safetensors',
      (dir: string) => ['convert', join(dir, 'empty'), join(dir, 'out.safetensors'), '--dtype', 'F16'],
    ],
    [
      'a missing file, into shards named as a file',
      (dir: string) => ['convert', join(dir, 'missing.safetensors'), join(dir, 'out.safetensors'), '--max-shard-size', '1MB'],
    ],
    ['a missing file, onto a folder', (dir: string) => ['convert', join(dir, 'missing.safetensors'), join(dir, 'empty'), '--dtype', 'F16']],
    ['a folder with no model, to GGUF onto a folder', (dir: string) => ['convert', join(dir, 'empty'), join(dir, 'taken.gguf')]],
  ])('%s: exit 1, one line naming the input', async (_, args) => {
    const dir = scratch()
    mkdirSync(join(dir, 'empty'))
    mkdirSync(join(dir, 'taken.gguf'))
    const [, input] = args(dir)
    const run = await cli(...args(dir))
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(expectOneLine(run.stderr)).toMatch(new RegExp(`^${input}: Io: `))
    expect(readdirSync(dir).sort()).toEqual(['empty', 'taken.gguf'])
  })

  test('a good input into a name ending in .safetensors, resharded: then the output is bad usage', async () => {
    const dir = scratch()
    const run = await cli('convert', FILE, join(dir, 'out.safetensors'), '--max-shard-size', '1MB')
    expect(run.code).toBe(2)
    expect(readdirSync(dir)).toEqual([])
  })
})
