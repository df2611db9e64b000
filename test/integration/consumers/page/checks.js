// What the consumer page checks, the same code on the page and in a module Web Worker: it imports the
// package by its name, as an app would, opens a real fixture over HTTP Range and reports what it read.
// It reports raw results (bits, codes, messages); bundlers.test.ts holds the expectations.
import * as lib from 'safetensors-wasm'
import { ggufStream } from 'safetensors-wasm/gguf'

// Root-relative: a string is a URL relative to the page (or to the worker's script).
const FIXTURE = '/fixtures/model.safetensors'
const INVALID = '/fixtures/invalid.safetensors'
const GGUF_MODEL = '/fixtures/qwen2/model.safetensors'
const NODE_ONLY = ['fileSink', 'writeFile', 'saveModel', 'convertFile', 'convertModel']

/** The bit patterns of a Float32Array, so that the test compares exactly (NaN, -0 included). */
const bitsOf = (data) => Array.from(new Uint32Array(data.buffer, data.byteOffset, data.length))

/** What a rejected call reports; 'resolved' when it did not fail. */
async function failureOf(call) {
  try {
    await call()
    return 'resolved'
  } catch (error) {
    return { safetensorsError: error instanceof lib.SafetensorsError, typeError: error instanceof TypeError, code: error.code, message: error.message }
  }
}

/** The GGUF of a model served beside the fixtures, from the package's GGUF entry: its length and SHA-256. */
async function gguf() {
  const stream = await ggufStream(GGUF_MODEL, { dtype: 'F16' })
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer())
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))
  return { bytes: bytes.length, byteLength: stream.byteLength, sha256: Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('') }
}

export async function runChecks() {
  const file = await lib.open(FIXTURE)
  const tensors = {}
  for (const name of file.names().filter((n) => file.info(n).dtype === 'BF16')) {
    const raw = await file.getTensor(name)
    const f32 = await file.getTensor(name, { dtype: 'F32' })
    tensors[name] = { dtype: f32.dtype, shape: f32.shape, float32: f32.data instanceof Float32Array, bits: bitsOf(f32.data), raw: Array.from(raw.data) }
  }
  const slice = await file.getSlice('bfloat16_357', [[1, 3], 2, [4, 7]], { dtype: 'F32' })
  return {
    where: typeof document === 'undefined' ? 'worker' : 'page',
    nodeOnly: NODE_ONLY.filter((name) => name in lib),
    tensors,
    slice: { shape: slice.shape, bits: bitsOf(slice.data) },
    gguf: await gguf(),
    errors: {
      missingTensor: await failureOf(() => file.getTensor('missing')),
      sliceOutOfRange: await failureOf(() => file.getSlice('bfloat16_357', [[0, 4], null, null])),
      invalidFile: await failureOf(() => lib.open(INVALID)),
      filePath: await failureOf(() => lib.open(new URL('file:///model.safetensors'))),
    },
  }
}
