// One smoke script for every runtime (Deno, Bun): it imports the package by name, as the runtime resolves it
// from the consumer folder it is copied into, exercises each kind of source, and prints what it got as one
// JSON line. It judges nothing: test/integration/runtimes/runtimes.test.ts compares the report with values it computes
// from the fixture's bytes and golden JSON. Only web APIs and the package, so the same file runs anywhere.
//
// Arguments: <fixture path> <fixture URL> <invalid fixture path> <GGUF test model folder>
import { open, parseHeader, SafetensorsError, serialize } from 'safetensors-wasm'
import { ggufStream } from 'safetensors-wasm/gguf'

const [path, url, invalidPath, ggufModel] = globalThis.Deno ? Deno.args : process.argv.slice(2)
const runtime = globalThis.Deno ? `deno ${Deno.version.deno}` : `bun ${Bun.version}`

/** A tensor as JSON can carry it: 64-bit integers as decimal strings. */
const plain = (t) => ({
  dtype: t.dtype,
  shape: t.shape,
  array: t.data.constructor.name,
  values: Array.from(t.data, (v) => (typeof v === 'bigint' ? String(v) : v)),
})

/** How a failure looks from the caller's side. */
async function failure(run) {
  try {
    await run()
    return 'no error'
  } catch (e) {
    return { name: e.name, code: e.code, safetensorsError: e instanceof SafetensorsError, error: e instanceof Error }
  }
}

const fromPath = await open(path)
const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer())
const fromBlob = await open(new Blob([bytes]))
const fromBytes = await open(bytes)
const fromUrl = await open(url)

const written = serialize(
  { b: { dtype: 'I32', shape: [2], data: new Int32Array([7, -1]) }, a: { dtype: 'F32', shape: [2, 2], data: new Float32Array([1, 2.5, -3, 0.125]) } },
  { metadata: { k: 'v' } },
)
const reread = await open(written)

/** The GGUF of the test model as the stream gives it: its length, the length it announced, its digest and head. */
async function gguf() {
  const stream = await ggufStream(ggufModel, { dtype: 'F16' })
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer())
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))
  const view = new DataView(bytes.buffer)
  return {
    bytes: bytes.length,
    byteLength: stream.byteLength,
    sha256: Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join(''),
    magic: String.fromCharCode(...bytes.subarray(0, 4)),
    version: view.getUint32(4, true),
  }
}

const report = {
  runtime,
  resolved: import.meta.resolve('safetensors-wasm'),
  checks: {
    'path: header': fromPath.header.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, dataOffsets: t.dataOffsets })),
    'path: getTensor raw BF16': plain(await fromPath.getTensor('bfloat16_35')),
    'path: getTensor raw I64': plain(await fromPath.getTensor('int64_35')),
    'path: getTensor BF16 as F32': plain(await fromPath.getTensor('bfloat16_357', { dtype: 'F32' })),
    'Blob: getTensor F16 as F32': plain(await fromBlob.getTensor('float16_35', { dtype: 'F32' })),
    'bytes: getTensor F8_E4M3 as F32': plain(await fromBytes.getTensor('float8_e4m3fn_357', { dtype: 'F32' })),
    'URL: getTensor F64 as F32': plain(await fromUrl.getTensor('float64_35', { dtype: 'F32' })),
    'URL: getSlice': plain(await fromUrl.getSlice('float32_357', [[1, 3], 2, null])),
    'serialize: bytes': Array.from(written),
    'serialize: re-read': {
      metadata: reread.metadata,
      tensors: await Promise.all(reread.names().map(async (n) => ({ name: n, ...plain(await reread.getTensor(n)) }))),
    },
    'error: invalid file': await failure(() => open(invalidPath)),
    'error: too few bytes': await failure(() => parseHeader(new Uint8Array(4))),
    'error: unknown tensor': await failure(() => fromUrl.getTensor('no such tensor')),
    'error: HTTP 404': await failure(() => open(new URL('missing.safetensors', url))),
    'error: misuse': await failure(() => open(42)),
    'gguf: ggufStream of a model folder': await gguf(),
    "gguf: an error of the GGUF entry is the main entry's SafetensorsError": await failure(() => ggufStream(invalidPath)),
  },
}
await Promise.all([fromPath, fromBlob, fromBytes, fromUrl, reread].map((f) => f.close()))
console.log(JSON.stringify(report))
