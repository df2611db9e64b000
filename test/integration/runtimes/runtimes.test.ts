// Deno and Bun, for real: each runs test/integration/runtimes/smoke.mjs in a folder where the package is installed
// from `npm pack`'s tarball, against a fixture on disk and served by a loopback HTTP server started here.
// The binaries come with `npm ci` (the `deno` and `bun` packages link them from their per-platform optional
// dependencies). Every expected value comes from the golden JSON (numpy) or is written out by hand from
// the format's rules, never from the library; but for the GGUF, which must be the file Node writes of the same
// model (llama.cpp judges that file: test/integration/gguf-llama.test.ts).
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, readFileSync, rmSync } from 'node:fs'
import { join, relative } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { writeGguf } from '../../../src/gguf-node.ts'
import { FIXTURES_GOLDEN, FIXTURES_REAL, goldenName, utf8 } from '../../helpers.ts'
import { rangeHandler, startServer, type TestServer } from '../../http-server.ts'
import { packedConsumer, ROOT } from '../../packed.ts'
import { tempDir } from '../../writer-reference.ts'

const FIXTURE = 'fluxml__safetensors.jl__model.safetensors'
const INVALID = 'invalid/syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors'
const GGUF_MODEL = join(ROOT, 'test/fixtures/gguf/qwen2')
const devDependencies: Record<string, string> = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).devDependencies

interface GoldenTensor {
  dtype: string
  shape: number[]
  values: Array<number | string>
  bits?: number[]
  f32?: number[]
}
const golden = {
  header: JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(FIXTURE), 'utf8')) as {
    tensors: Array<{ name: string; dtype: string; shape: number[]; dataOffsets: number[] }>
  },
  values: JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(FIXTURE, 'values'), 'utf8')).tensors as Record<string, GoldenTensor>,
}

/** What the smoke script reports for a tensor read as F32: numpy's float32 values (printed short, so fround). */
function asF32(name: string) {
  const t = golden.values[name]
  return { dtype: 'F32', shape: t.shape, array: 'Float32Array', values: (t.f32 ?? t.values).map((v) => Math.fround(Number(v))) }
}

/** The file serialize() must write for the smoke script's two tensors, laid out by hand (DESIGN.md, "Writer layout"). */
function expectedFile(): number[] {
  // F32 sorts before I32 (dtypes in descending order of the list), then the header is padded to 8 bytes.
  const json = '{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"I32","shape":[2],"data_offsets":[16,24]}}'
  const header = json.padEnd(Math.ceil(json.length / 8) * 8, ' ')
  const file = new DataView(new ArrayBuffer(8 + header.length + 24))
  file.setBigUint64(0, BigInt(header.length), true)
  new Uint8Array(file.buffer).set(utf8(header), 8)
  ;[1, 2.5, -3, 0.125].forEach((v, i) => file.setFloat32(8 + header.length + 4 * i, v, true))
  ;[7, -1].forEach((v, i) => file.setInt32(8 + header.length + 16 + 4 * i, v, true))
  return Array.from(new Uint8Array(file.buffer))
}

const dataError = (code: string) => ({ name: 'SafetensorsError', code, safetensorsError: true, error: true })

/** The GGUF Node writes of the test model, as the smoke script reports one. */
async function expectedGguf() {
  const dir = tempDir('st-runtimes-gguf-')
  try {
    const written = await writeGguf(GGUF_MODEL, join(dir, 'model.gguf'), { dtype: 'F16' })
    const bytes = readFileSync(join(dir, 'model.gguf'))
    return { bytes: written.bytes, byteLength: written.bytes, sha256: createHash('sha256').update(bytes).digest('hex'), magic: 'GGUF', version: 3 }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function expectedChecks() {
  const float32 = asF32('float32_357')
  // float32_357 is [3, 5, 7]; the slice [[1, 3], 2, null] keeps rows 1 and 2 of column 2: shape [2, 7].
  const slice = [1, 2].flatMap((i) => float32.values.slice(i * 35 + 2 * 7, i * 35 + 3 * 7))
  const invalid = readFileSync(FIXTURES_REAL + INVALID)
  // Its prefix claims a header longer than the file, hence InvalidHeaderLength by the format's rules.
  expect(Number(invalid.readBigUInt64LE(0))).toBeGreaterThan(invalid.length - 8)
  return {
    'path: header': golden.header.tensors.map(({ name, dtype, shape, dataOffsets }) => ({ name, dtype, shape, dataOffsets })),
    'path: getTensor raw BF16': { dtype: 'BF16', shape: [3, 5], array: 'Uint16Array', values: golden.values.bfloat16_35.bits },
    'path: getTensor raw I64': { dtype: 'I64', shape: [3, 5], array: 'BigInt64Array', values: golden.values.int64_35.values },
    'path: getTensor BF16 as F32': asF32('bfloat16_357'),
    'Blob: getTensor F16 as F32': asF32('float16_35'),
    'bytes: getTensor F8_E4M3 as F32': asF32('float8_e4m3fn_357'),
    'URL: getTensor F64 as F32': asF32('float64_35'),
    'URL: getSlice': { ...float32, shape: [2, 7], values: slice },
    'serialize: bytes': expectedFile(),
    'serialize: re-read': {
      metadata: { k: 'v' },
      tensors: [
        { name: 'a', dtype: 'F32', shape: [2, 2], array: 'Float32Array', values: [1, 2.5, -3, 0.125] },
        { name: 'b', dtype: 'I32', shape: [2], array: 'Int32Array', values: [7, -1] },
      ],
    },
    'error: invalid file': dataError('InvalidHeaderLength'),
    'error: too few bytes': dataError('HeaderTooSmall'),
    'error: unknown tensor': dataError('TensorNotFound'),
    'error: HTTP 404': dataError('Io'),
    'error: misuse': { name: 'TypeError', safetensorsError: false, error: true },
    "gguf: an error of the GGUF entry is the main entry's SafetensorsError": dataError('InvalidHeaderLength'),
  }
}

// How each runtime is told to run the script. Deno reads node_modules because the folder has a package.json;
// --cached-only proves it downloads nothing, and it may read only the consumer folder and the fixtures, and
// connect only to 127.0.0.1.
const runtimes: Record<string, (dir: string) => string[]> = {
  deno: (dir) => ['run', '--cached-only', `--allow-read=${dir},${FIXTURES_REAL},${GGUF_MODEL}`, '--allow-net=127.0.0.1'],
  bun: () => [],
}

describe('Deno and Bun run the packed package', () => {
  let server: TestServer
  let dir: string

  beforeAll(async () => {
    dir = packedConsumer().dir
    copyFileSync(join(ROOT, 'test/integration/runtimes/smoke.mjs'), join(dir, 'smoke.mjs'))
    const bytes = new Uint8Array(readFileSync(FIXTURES_REAL + FIXTURE))
    server = await startServer(rangeHandler((path) => (path === `/${FIXTURE}` ? bytes : undefined)))
  }, 120_000)

  afterAll(() => server?.close())

  test.each(Object.keys(runtimes))(
    '%s',
    async (runtime) => {
      server.clear()
      const args = [...runtimes[runtime](dir), 'smoke.mjs', FIXTURES_REAL + FIXTURE, `${server.origin}/${FIXTURE}`, FIXTURES_REAL + INVALID, GGUF_MODEL]
      const { stdout } = await promisify(execFile)(join(ROOT, 'node_modules/.bin', runtime), args, {
        cwd: dir,
        env: { ...process.env, DENO_NO_UPDATE_CHECK: '1' },
      })
      const report = JSON.parse(stdout.trim().split('\n').at(-1)!)

      expect(report.runtime).toBe(`${runtime} ${devDependencies[runtime]}`)
      // It resolved the installed tarball, through the node condition (the entry with local files).
      expect(relative(dir, new URL(report.resolved).pathname)).toBe('node_modules/safetensors-wasm/dist/node.js')
      const expected = { ...expectedChecks(), 'gguf: ggufStream of a model folder': await expectedGguf() }
      expect(report.checks).toEqual(expected)
      // The URL source made Range requests for the parts it read, beyond the whole-file GET behind the Blob.
      expect(server.log.filter((e) => e.path === `/${FIXTURE}` && e.status === 206).length).toBeGreaterThanOrEqual(3)
      console.log(`${report.runtime}: ${Object.keys(expected).length} checks passed`)
    },
    120_000,
  )
})
