// The CLI contract of DESIGN.md "Contract additions, December 2026", checked on node dist/cli.js with real
// files and real failures: a PNG and random bytes, a missing file, an HTTP 404, an existing file or folder in
// the output's place, a missing folder, a full disk (a 1 MiB tmpfs). Expected values come from package.json,
// the test's own reading of the files (writer-reference.ts) and the format's definition, never from the CLI.

import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { crc32, deflateSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type FullDisk, fullDiskUnavailable, mountTmpfs } from './full-disk.ts'
import { FIXTURES_REAL } from './helpers.ts'
import { rangeHandler, startServer, type TestServer } from './http-server.ts'
import { prng } from './random.ts'
import { buildFile, headerOf, tensorBytes } from './read-helpers.ts'
import { CLI, cli, cliWith, expectOneLine, lines, spawnCli, spawnCliWith } from './run-cli.ts'
import { ls, orderedEntries, referenceFile, randomBytes as seededBytes, splitFile, tempDir } from './writer-reference.ts'

const FILE = `${FIXTURES_REAL}fluxml__safetensors.jl__model.with_metadata.safetensors`
const INVALID = `${FIXTURES_REAL}invalid/syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors`
const SHARDED = `${FIXTURES_REAL}sharded/fluxml__safetensors.jl`
const VERSION = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version as string

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`)
})

// Every folder a test makes is in this one, removed at the end.
const TEMP = tempDir('cli-contract-')
afterAll(() => rmSync(TEMP, { recursive: true, force: true }))
const scratch = () => mkdtempSync(join(TEMP, 'test-'))

/** A real 1x1 PNG: the signature, IHDR, IDAT (zlib-compressed scanline), IEND, each chunk with its CRC. */
function png(): Uint8Array {
  const chunk = (type: string, data: Uint8Array) => {
    const out = Buffer.alloc(12 + data.length)
    out.writeUInt32BE(data.length, 0)
    out.write(type, 4, 'latin1')
    out.set(data, 8)
    out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length)
    return out
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(1, 0)
  ihdr.writeUInt32BE(1, 4)
  ihdr.set([8, 2, 0, 0, 0], 8) // 8-bit RGB, no interlace
  const pixel = deflateSync(Uint8Array.from([0, 255, 0, 0])) // filter byte, one red pixel
  const signature = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  return Buffer.concat([signature, chunk('IHDR', ihdr), chunk('IDAT', pixel), chunk('IEND', new Uint8Array(0))])
}

/** The tensors of a written file as the test's own parser reads them: name -> dtype. */
function dtypesOf(path: string): Map<string, string> {
  const { text } = splitFile(new Uint8Array(readFileSync(path)))
  return new Map(orderedEntries(text).flatMap(([name, v]) => (name === '__metadata__' ? [] : [[name, (v as { dtype: string }).dtype]])))
}

/** "3 F32, 1 I64" -> { F32: 3, I64: 1 }, and the same tally of a list of dtypes. */
const tallyText = (text: string) => Object.fromEntries(text.split(', ').map((part) => [part.split(' ')[1], Number(part.split(' ')[0].replace(/,/g, ''))]))
const tally = (dtypes: Iterable<string>) => {
  const out: Record<string, number> = {}
  for (const d of dtypes) out[d] = (out[d] ?? 0) + 1
  return out
}

describe('--version', () => {
  test.each(['--version', '-v'])('%s prints the version of package.json', async (flag) => {
    expect(await cli(flag)).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' })
  })
})

describe('usage', () => {
  test('no command: the reason and where the usage is, on stderr, nothing on stdout, exit 2', async () => {
    const run = await cli()
    expect(run).toMatchObject({ code: 2, stdout: '' })
    expect(lines(run.stderr)).toEqual(['a command is needed: inspect, validate or convert', 'see safetensors-wasm --help'])
  })

  test('a usage error: the reason, then where the usage is (at most 3 lines), on stderr; exit 2', async () => {
    const run = await cli('validate', FILE, '--bogus')
    expect(run).toMatchObject({ code: 2, stdout: '' })
    expect(lines(run.stderr)).toEqual(['unknown option --bogus', 'see safetensors-wasm --help'])
  })

  test('--help asks for the usage: on stdout, exit 0', async () => {
    const run = await cli('--help')
    expect(run).toMatchObject({ code: 0, stderr: '' })
    expect(run.stdout).toContain('usage:')
    expect(run.stdout).toContain('safetensors-wasm validate <file|url|model>...')
  })

  test('--dtype Q8_0 for a SafeTensors output: a GGUF type, and how to write GGUF', async () => {
    const dir = scratch()
    const run = await cli('convert', FILE, join(dir, 'x.safetensors'), '--dtype', 'q8_0')
    expect(run).toMatchObject({ code: 2, stdout: '' })
    expect(lines(run.stderr)).toEqual([
      '--dtype q8_0 is a GGUF type: name an output ending in .gguf to write GGUF, or take F32, F16 or BF16 for SafeTensors',
      'see safetensors-wasm --help',
    ])
    expect(ls(dir)).toEqual([])
  })
})

describe('a write into its own input: bad usage, nothing changed', () => {
  test.each([
    ['the file itself', (dir: string) => [join(dir, 'in.safetensors'), join(dir, 'in.safetensors')], []],
    ['the file by another path', (dir: string) => [join(dir, 'in.safetensors'), join(dir, '.', 'sub', '..', 'in.safetensors')], []],
    ['the folder the file is in, resharded', (dir: string) => [join(dir, 'in.safetensors'), dir], ['--max-shard-size', '1KB']],
    ['a model folder into itself', (dir: string) => [join(dir, 'model'), join(dir, 'model')], []],
  ])('%s: exit 2 before any byte is written', async (_, paths, extra) => {
    const dir = scratch()
    mkdirSync(join(dir, 'sub'))
    writeFileSync(join(dir, 'in.safetensors'), readFileSync(FILE))
    execFileSync('cp', ['-r', SHARDED, join(dir, 'model')])
    const before = snapshot(dir)
    const [input, output] = paths(dir)
    const run = await cli('convert', input, output, '--dtype', 'F16', ...extra)
    expect(run).toMatchObject({ code: 2, stdout: '' })
    const [reason, see] = lines(run.stderr)
    expect(reason).toMatch(/the output (folder )?is the (input|input's|model's)/)
    expect(see).toBe('see safetensors-wasm --help')
    expect(snapshot(dir)).toEqual(before)
  })
})

/** Every file under `dir` and its bytes, to compare a folder before and after. */
function snapshot(dir: string): Record<string, string> {
  return Object.fromEntries(
    readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => statSync(join(dir, f)).isFile())
      .sort()
      .map((f) => [f, readFileSync(join(dir, f)).toString('base64')]),
  )
}

/**
 * The Qwen2 test model with an MLP of 36 MiB a layer, in `folder`: its GGUF export takes long enough to be stopped
 * mid-write. Its counts agree with its shapes, as config.json and tokenizer.json say them.
 */
function largeModel(folder: string): string {
  const fixture = new URL('./fixtures/gguf/qwen2/', import.meta.url)
  cpSync(fixture, folder, { recursive: true })
  const config = JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8'))
  const intermediate = 1 << 16
  writeFileSync(join(folder, 'config.json'), JSON.stringify({ ...config, intermediate_size: intermediate }))
  const file = new Uint8Array(readFileSync(join(folder, 'model.safetensors')))
  const tensors = Object.entries(headerOf(file).tensors).map(([name, { dtype, shape }]) => {
    if (!name.includes('.mlp.')) return { name, dtype, shape, bytes: tensorBytes(file, name) }
    const resized = shape.map((n) => (n === config.intermediate_size ? intermediate : n))
    return { name, dtype, shape: resized, bytes: new Uint8Array(new Float32Array(resized[0] * resized[1]).fill(0.25).buffer) }
  })
  writeFileSync(join(folder, 'model.safetensors'), buildFile(tensors))
  return folder
}

describe('an interrupted write leaves nothing', () => {
  let server: TestServer
  let release: () => void = () => {}
  const bytes = new Uint8Array(readFileSync(FILE))
  beforeAll(async () => {
    // Every data read (after the header's) stops half-way until the test lets it go: the CLI is then mid-write.
    server = await startServer(
      rangeHandler(() => bytes, {
        fault: (n) => (n === 0 ? undefined : { kind: 'pause', at: 0.5, until: new Promise<void>((resolve) => (release = resolve)) }),
      }),
    )
  })
  afterAll(async () => {
    release()
    await server?.close()
  })

  /** A convert of the served file into `target`, once it has begun writing: a temporary file is beside the target. */
  function writing(target: string, ...extra: string[]) {
    // Request 0 is the header's again.
    server.clear()
    const run = spawnCli('convert', `${server.origin}/model.safetensors`, target, '--dtype', 'F32', ...extra)
    return onceWriting(extra.length > 0 ? target : join(target, '..'), run)
  }

  /** `run` once a temporary file is in `folder` (which it may have to make first). */
  async function onceWriting(folder: string, run: ReturnType<typeof spawnCli>) {
    const temporary = () => existsSync(folder) && readdirSync(folder, { recursive: true, encoding: 'utf8' }).some((f) => f.endsWith('.tmp'))
    for (let waited = 0; !temporary(); waited += 20) {
      if (waited > 20_000)
        throw new Error(`no temporary file in ${folder} after 20 s: ${await Promise.race([run.done.then((r) => r.stderr), 'still running'])}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return run
  }

  test.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)('%s mid-convert: exit %i with one line, no temporary file, the target as it was', async (signal, code) => {
    const dir = scratch()
    const target = join(dir, 'out.safetensors')
    writeFileSync(target, 'the old target')
    const { child, done } = await writing(target)
    child.kill(signal)
    const run = await done
    expect(run.code).toBe(code)
    expect(expectOneLine(run.stderr)).toBe(`${target}: stopped by ${signal}; the temporary files are removed`)
    expect(ls(dir)).toEqual(['out.safetensors'])
    expect(readFileSync(target, 'utf8')).toBe('the old target')
  })

  test('SIGINT mid-convert into a folder of shards: no temporary file, no lock, nothing new', async () => {
    const dir = scratch()
    const target = join(dir, 'model')
    mkdirSync(target)
    const { child, done } = await writing(target, '--max-shard-size', '1KB')
    child.kill('SIGINT')
    expect((await done).code).toBe(130)
    expect(ls(target)).toEqual([])
  })

  test('SIGTERM mid-convert into a folder of shards that did not exist: the folders it made are removed', async () => {
    const dir = scratch()
    const { child, done } = await writing(join(dir, 'new', 'model'), '--max-shard-size', '1KB')
    child.kill('SIGTERM')
    expect((await done).code).toBe(143)
    expect(ls(dir)).toEqual([])
  })

  test('a convert that fails into a folder that did not exist removes the folders it made', async () => {
    // The header is served; every read of the data is a 404.
    const failing = await startServer(rangeHandler(() => bytes, { fault: (n) => (n === 0 ? undefined : { kind: 'status', status: 404 }) }))
    try {
      const dir = scratch()
      const input = `${failing.origin}/model.safetensors`
      const run = await cli('convert', input, join(dir, 'new', 'model'), '--dtype', 'F32', '--max-shard-size', '1KB')
      expect(run.code).toBe(1)
      expect(expectOneLine(run.stderr)).toMatch(new RegExp(`^${input}: Io: .*404`))
      expect(ls(dir)).toEqual([])
    } finally {
      await failing.close()
    }
  })

  test('SIGINT mid-GGUF export: one line, even when the export writes on into the file the cleanup closed', async () => {
    const dir = scratch()
    const model = largeModel(join(dir, 'model'))
    // The exit after the cleanup, 0.5 s late: time for the export, still converting, to try its next write.
    const preload = join(dir, 'late-exit.cjs')
    writeFileSync(preload, 'const exit = process.exit\nprocess.exit = (code) => void setTimeout(() => exit(code), 500)\n')
    const target = join(dir, 'out.gguf')
    const run = spawnCliWith({ env: { NODE_OPTIONS: `--require ${preload}` } }, 'convert', model, target, '--dtype', 'F16')
    const { child, done } = await onceWriting(dir, run)
    child.kill('SIGINT')
    const { code, stderr } = await done
    expect(code).toBe(130)
    expect(expectOneLine(stderr)).toBe(`${target}: stopped by SIGINT; the temporary files are removed`)
    expect(ls(dir)).toEqual(['late-exit.cjs', 'model'])
  })

  test('SIGKILL mid-convert leaves a temporary file, which the next convert to that target removes', async () => {
    const dir = scratch()
    const target = join(dir, 'out.safetensors')
    const { child, done } = await writing(target)
    child.kill('SIGKILL')
    expect((await done).signal).toBe('SIGKILL')
    expect(ls(dir).filter((f) => f.endsWith('.tmp')).length).toBe(1)
    expect(await cli('convert', FILE, target, '--dtype', 'F16')).toMatchObject({ code: 0 })
    expect(ls(dir)).toEqual(['out.safetensors'])
  })

  test('a writer still at work keeps its temporary file: another convert to the target does not remove it', async () => {
    const dir = scratch()
    const target = join(dir, 'out.safetensors')
    const { child, done } = await writing(target)
    expect(await cli('convert', FILE, target, '--dtype', 'F16')).toMatchObject({ code: 0 })
    expect(ls(dir).filter((f) => f.endsWith('.tmp')).length).toBe(1)
    child.kill('SIGINT')
    expect((await done).code).toBe(130)
    expect(ls(dir)).toEqual(['out.safetensors'])
  })
})

describe('--dtype in any case', () => {
  test.each([
    ['f16', 'F16'],
    ['Bf16', 'BF16'],
    ['f32', 'F32'],
  ])('--dtype %s writes what --dtype %s writes', async (spelled, canonical) => {
    const dir = scratch()
    const [a, b] = [join(dir, 'a.safetensors'), join(dir, 'b.safetensors')]
    const run = await cli('convert', FILE, a, '--dtype', spelled)
    expect(run, run.stderr).toMatchObject({ code: 0, stderr: '' })
    expect(await cli('convert', FILE, b, '--dtype', canonical)).toMatchObject({ code: 0 })
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true)
    // The fixture's floating-point tensors are F32, F64 and BF16; all of them become the target.
    const floats = [...dtypesOf(FILE)].filter(([, d]) => /^(F|BF)\d/.test(d)).map(([name]) => name)
    expect(floats.length).toBeGreaterThan(0)
    for (const name of floats) expect(dtypesOf(a).get(name)).toBe(canonical)
  })

  test('an unknown dtype is a usage error that names it', async () => {
    const run = await cli('convert', FILE, join(scratch(), 'x.safetensors'), '--dtype', 'f17')
    expect(run).toMatchObject({ code: 2, stdout: '' })
    expect(lines(run.stderr)[0]).toBe('--dtype takes F32, F16 or BF16 (in any case), got "f17"')
  })
})

describe('not a SafeTensors file', () => {
  const dir = scratch()
  const notSafetensors = (name: string, bytes: Uint8Array) => {
    const path = join(dir, name)
    writeFileSync(path, bytes)
    return { path, n: Buffer.from(bytes).readBigUInt64LE(0) }
  }

  // Random bytes that do not start as JSON, HTML or GGUF do (which the message would name).
  const random = randomBytes(4096)
  random[0] = 0x01

  test.each([
    ['a PNG', 'red.png', png()],
    ['random bytes', 'random.bin', random],
  ])('%s: HeaderTooLarge, saying "not a SafeTensors file" with the length read', async (_, name, bytes) => {
    const { path, n } = notSafetensors(name, bytes)
    // The limit is the reference's (100,000,000 bytes); random bytes exceed it but with probability 5e-12.
    expect(n).toBeGreaterThan(100_000_000n)
    const message = `not a SafeTensors file: the header length is ${n} bytes, above the limit of 100000000`
    const validate = await cli('validate', path, '--json')
    expect(validate).toEqual({ code: 1, stderr: '', stdout: `${JSON.stringify({ file: path, valid: false, code: 'HeaderTooLarge', message })}\n` })
    const inspect = await cli('inspect', path)
    expect(inspect).toEqual({ code: 1, stdout: '', stderr: `${path}: HeaderTooLarge: ${message}\n` })
  })

  test.each([
    // The magic, the version (3), and tensor and key counts, as llama.cpp's files start.
    [
      'a model index named as a file',
      'weights.json',
      readFileSync(join(SHARDED, 'model.safetensors.index.json')),
      'JSON, such as a model index (openModel opens those)',
    ],
  ])('%s: HeaderTooLarge, saying what the file is', async (_, name, bytes, kind) => {
    const { path, n } = notSafetensors(name, bytes)
    const inspect = await cli('inspect', path)
    expect(inspect).toEqual({
      code: 1,
      stdout: '',
      stderr: `${path}: HeaderTooLarge: not a SafeTensors file: it is ${kind}; the header length is ${n} bytes, above the limit of 100000000\n`,
    })
  })

  test('a file shorter than the length prefix: HeaderTooSmall, "not a SafeTensors file"', async () => {
    const path = join(dir, 'short.txt')
    writeFileSync(path, 'hi\n')
    const run = await cli('validate', path)
    expect(run).toEqual({
      code: 1,
      stderr: '',
      stdout: `${path}: INVALID HeaderTooSmall: not a SafeTensors file: the file is 3 bytes; a SafeTensors file starts with an 8-byte header length\n`,
    })
  })

  test('a real file cut inside its header: InvalidHeaderLength, "not a SafeTensors file (or a truncated one)"', async () => {
    const whole = readFileSync(FILE)
    const n = Number(whole.readBigUInt64LE(0))
    const path = join(dir, 'cut.safetensors')
    writeFileSync(path, whole.subarray(0, 8 + (n >> 1)))
    const run = await cli('validate', path, '--json')
    expect(run.code).toBe(1)
    expect(JSON.parse(run.stdout)).toEqual({
      file: path,
      valid: false,
      code: 'InvalidHeaderLength',
      message: `not a SafeTensors file (or a truncated one): the header length is ${n} bytes, but the file has only ${n >> 1} bytes after the 8-byte prefix`,
    })
  })
})

describe('validate: exit 0 all valid, 1 any invalid, 3 none invalid but one unreadable', () => {
  let server: TestServer
  beforeAll(async () => {
    // Serves FILE as /model.safetensors; any other path is a 404.
    server = await startServer(rangeHandler((path) => (path === '/model.safetensors' ? new Uint8Array(readFileSync(FILE)) : undefined)))
  })
  afterAll(() => server.close())
  const missing = join(scratch(), 'missing.safetensors')

  test('a missing file: exit 3, an Io line that says why', async () => {
    const run = await cli('validate', missing, '--json')
    expect(run).toMatchObject({ code: 3, stderr: '' })
    const line = JSON.parse(run.stdout)
    expect(line).toMatchObject({ file: missing, valid: false, code: 'Io' })
    expect(line.message).toContain('ENOENT')
  })

  test('a named pipe: exit 3 at once (opening one waits for a writer that never comes), an Io line that says what it is', async () => {
    const fifo = join(scratch(), 'pipe.safetensors')
    execFileSync('mkfifo', [fifo])
    const run = await cli('validate', fifo, '--json')
    expect(run).toMatchObject({ code: 3, stderr: '' })
    expect(JSON.parse(run.stdout)).toMatchObject({ file: fifo, valid: false, code: 'Io', message: 'cannot open: it is a named pipe, not a file' })
  })

  test('an HTTP 404: exit 3; the same server serving the file: exit 0', async () => {
    const absent = `${server.origin}/absent.safetensors`
    const run = await cli('validate', absent, '--json')
    expect(run).toMatchObject({ code: 3, stderr: '' })
    const line = JSON.parse(run.stdout)
    expect(line).toMatchObject({ file: absent, valid: false, code: 'Io' })
    expect(line.message).toContain('404')
    expect((await cli('validate', `${server.origin}/model.safetensors`)).code).toBe(0)
  })

  test('text lines say UNREADABLE or INVALID; an invalid input outweighs an unreadable one', async () => {
    const unreadable = await cli('validate', FILE, missing)
    expect(unreadable.code).toBe(3)
    expect(lines(unreadable.stdout)[1]).toMatch(new RegExp(`^${missing}: UNREADABLE Io: `))
    const both = await cli('validate', missing, INVALID, FILE)
    expect(both.code).toBe(1)
    expect(lines(both.stdout)[1]).toMatch(new RegExp(`^${INVALID}: INVALID InvalidHeaderLength: `))
  })
})

describe('inspect --json: a failure is one JSON object on stdout', () => {
  test.each([
    ['an invalid file', [INVALID], INVALID, 'InvalidHeaderLength'],
    ['a missing file', ['/nonexistent/x.safetensors'], '/nonexistent/x.safetensors', 'Io'],
    ['an unknown tensor', [FILE, '--tensor', 'nope'], FILE, 'TensorNotFound'],
  ])('%s', async (_, args, file, code) => {
    const run = await cli('inspect', ...args, '--json')
    expect(run).toMatchObject({ code: 1, stderr: '' })
    expect(lines(run.stdout)).toHaveLength(1)
    const out = JSON.parse(run.stdout)
    expect(Object.keys(out)).toEqual(['file', 'valid', 'code', 'message'])
    expect(out).toMatchObject({ file, valid: false, code })
  })
})

describe('convert: errors name the output in one line', () => {
  test('a model onto an existing file: exit 1, the file untouched', async () => {
    const dir = scratch()
    const out = join(dir, 'taken')
    writeFileSync(out, 'keep me')
    const run = await cli('convert', SHARDED, out, '--dtype', 'BF16')
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(expectOneLine(run.stderr)).toBe(`${out}: Io: exists and is not a folder (a model is written as a folder of its files)`)
    expect(readFileSync(out, 'utf8')).toBe('keep me')
    expect(ls(dir)).toEqual(['taken'])
  })

  test('a file onto an existing folder: exit 1, the folder untouched', async () => {
    const dir = scratch()
    const out = join(dir, 'folder')
    mkdirSync(out)
    const run = await cli('convert', FILE, out, '--dtype', 'F16')
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(expectOneLine(run.stderr)).toBe(`${out}: Io: is a folder (name the file to write, such as ${join(out, 'model.safetensors')})`)
    expect(ls(out)).toEqual([])
    expect(ls(dir)).toEqual(['folder'])
  })

  test('a file into a folder that does not exist: under the output, not the input', async () => {
    const dir = scratch()
    const out = join(dir, 'nope', 'out.safetensors')
    const run = await cli('convert', FILE, out, '--dtype', 'F16')
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(expectOneLine(run.stderr)).toBe(`${out}: Io: cannot write: no such file or directory (ENOENT)`)
    expect(ls(dir)).toEqual([])
  })

  test('a model into a folder under a file: under the output', async () => {
    const dir = scratch()
    writeFileSync(join(dir, 'file'), '')
    const out = join(dir, 'file', 'model')
    const run = await cli('convert', SHARDED, out, '--dtype', 'BF16')
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(expectOneLine(run.stderr)).toBe(`${out}: Io: cannot write: not a directory (ENOTDIR)`)
    expect(ls(dir)).toEqual(['file'])
  })

  describe.skipIf(fullDiskUnavailable !== undefined)('a full disk', () => {
    let disk: FullDisk
    beforeAll(() => void (disk = mountTmpfs('1m')))
    afterAll(() => disk.unmount())
    // 1.2 MB of BF16 becomes 2.4 MB of F32: more than the disk holds, whatever is already on it.
    const input = join(scratch(), 'big.safetensors')
    writeFileSync(input, referenceFile([{ name: 'w', dtype: 'BF16', shape: [600, 1000], bytes: seededBytes(1_200_000, prng(3)) }]))

    test.each([
      ['a file', 'out.safetensors', []],
      ['a folder of shards', 'model', ['--max-shard-size', '500KB']],
    ])('%s: exit 1, "no space left on device" under the output, nothing left on the disk', async (_, name, extra) => {
      const out = join(disk.dir, name)
      const run = await cli('convert', input, out, '--dtype', 'F32', ...extra)
      expect(run).toMatchObject({ code: 1, stdout: '' })
      expect(expectOneLine(run.stderr)).toBe(`${out}: Io: cannot write: no space left on device (ENOSPC)`)
      const files = readdirSync(disk.dir, { recursive: true, withFileTypes: true }).filter((d) => !d.isDirectory())
      expect(files.map((d) => d.name)).toEqual([])
    })
  })
})

describe('convert: what it wrote, in one line', () => {
  /** Runs convert and reads its one line of stdout into numbers. */
  async function summaryOf(...args: string[]) {
    const run = await cli('convert', ...args)
    expect(run, run.stderr).toMatchObject({ code: 0, stderr: '' })
    const m = /^(.+): wrote ([\d,]+) tensors? \(([^)]+)\), ([\d,]+) bytes(?: in ([\d,]+) shards?(?: and (\S+))?)?, \d+\.\d\d s$/.exec(expectOneLine(run.stdout))
    expect(m, run.stdout).not.toBeNull()
    const [, path, tensors, dtypes, bytes, shards, index] = m!
    const number = (text: string) => Number(text.replace(/,/g, ''))
    return { path, tensors: number(tensors), dtypes: tallyText(dtypes), bytes: number(bytes), shards: shards && number(shards), index }
  }

  test.each([
    ['out.safetensors', 'bf16'],
    // Named without .safetensors: the line still counts the file written.
    ['converted', 'F16'],
  ])('a file (%s): its tensors by dtype and its size, as the written file says', async (name, dtype) => {
    const out = join(scratch(), name)
    const summary = await summaryOf(FILE, out, '--dtype', dtype)
    const written = dtypesOf(out)
    expect(written.size).toBeGreaterThan(0)
    expect(summary).toEqual({
      path: out,
      tensors: written.size,
      dtypes: tally(written.values()),
      bytes: statSync(out).size,
      shards: undefined,
      index: undefined,
    })
  })

  test('a folder holding only model.safetensors: a folder holding only the converted model.safetensors, no index', async () => {
    const input = join(scratch(), 'one-file-model')
    mkdirSync(input)
    writeFileSync(join(input, 'model.safetensors'), readFileSync(FILE))
    const out = join(scratch(), 'converted')
    const summary = await summaryOf(input, out, '--dtype', 'F16')
    expect(readdirSync(out)).toEqual(['model.safetensors'])
    const written = dtypesOf(join(out, 'model.safetensors'))
    expect(summary).toEqual({
      path: out,
      tensors: written.size,
      dtypes: tally(written.values()),
      bytes: statSync(join(out, 'model.safetensors')).size,
      shards: 1,
      index: undefined,
    })
  })

  test('a sharded model: tensors, the shards’ bytes, how many shards and the index', async () => {
    const out = join(scratch(), 'model')
    const summary = await summaryOf(SHARDED, out, '--dtype', 'F16')
    const weightMap = JSON.parse(readFileSync(join(out, 'model.safetensors.index.json'), 'utf8')).weight_map as Record<string, string>
    const files = [...new Set(Object.values(weightMap))]
    expect(summary).toEqual({
      path: out,
      tensors: Object.keys(weightMap).length,
      dtypes: tally(files.flatMap((f) => [...dtypesOf(join(out, f)).values()])),
      bytes: files.reduce((sum, f) => sum + statSync(join(out, f)).size, 0),
      shards: files.length,
      index: 'model.safetensors.index.json',
    })
  })
})

describe('convert never makes a folder of a path ending in .safetensors', () => {
  test.each([
    ['--max-shard-size', FILE, ['--max-shard-size', '1KB']],
    ['a model as input', SHARDED, ['--dtype', 'BF16']],
  ])('%s: a usage error (exit 2) that says why; nothing created', async (_, input, options) => {
    const dir = scratch()
    const out = join(dir, 'out.safetensors')
    const run = await cli('convert', input, out, ...options)
    expect(run).toMatchObject({ code: 2, stdout: '' })
    expect(lines(run.stderr)[0]).toBe(
      `${out}: this writes a folder of the model's files, which a name ending in .safetensors would pass off as a file; give a folder name`,
    )
    expect(ls(dir)).toEqual([])
  })
})

describe('an unexpected error', () => {
  // new URL() refuses this: a TypeError, which the library lets through as the platform's own.
  const badUrl = 'http://[::1/x.safetensors'

  test('is one line on stderr, exit 1, no stack', async () => {
    const run = await cli('validate', badUrl)
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(expectOneLine(run.stderr)).toBe('TypeError: Invalid URL (SAFETENSORS_WASM_DEBUG=1 shows where)')
  })

  test('SAFETENSORS_WASM_DEBUG=1 shows the stack', async () => {
    const run = await cliWith({ env: { SAFETENSORS_WASM_DEBUG: '1' } }, 'validate', badUrl)
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/^TypeError: Invalid URL\n\s+at /)
  })
})

describe('a command whose work is left pending, with nothing more to wait for', () => {
  test('exits 1 with a line on stderr, never 0 without its output', async () => {
    // Every fetch stays pending and no timer keeps the process alive: what a read that never settles looks like.
    const folder = tempDir()
    const preload = join(folder, 'pending.mjs')
    writeFileSync(
      preload,
      'globalThis.fetch = () => new Promise(() => {})\nconst setTimer = globalThis.setTimeout\nglobalThis.setTimeout = (...args) => setTimer(...args).unref()\n',
    )
    const run = await cliWith({ env: { NODE_OPTIONS: `--import=${preload}` } }, 'inspect', 'http://127.0.0.1:9/model.safetensors', '--tensor', 'x')
    rmSync(folder, { recursive: true })
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toMatch(/stopped before the command finished, with nothing left to wait for/)
  })
})
