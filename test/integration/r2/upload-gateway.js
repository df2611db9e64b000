// An upload gateway to R2: POST /<key> with a SafeTensors file. The upload is checked as it streams into
// env.BUCKET.put(<key>), and only checked bytes go on. R2 takes a stream of known length only (a
// FixedLengthStream of the upload's Content-Length) and stores the object once it has that many bytes,
// so validateStream holds the last ones back until the whole file checks out: a bad file is answered 422
// with its code and nothing is stored; a good one is answered 201 with its tensor count once R2 has it.
import { SafetensorsError, validateStream } from 'safetensors-wasm'

/** @type {ExportedHandler<{ BUCKET: R2Bucket }>} */
export default {
  async fetch(request, env) {
    if (request.method !== 'POST' || !request.body) return new Response('POST a .safetensors file', { status: 405 })
    const length = Number(request.headers.get('content-length') ?? Number.NaN)
    if (!Number.isSafeInteger(length)) return new Response('the upload needs a Content-Length', { status: 411 })
    const key = decodeURIComponent(new URL(request.url).pathname.slice(1)) || 'upload.safetensors'
    const { readable, writable } = new FixedLengthStream(length)
    const stored = env.BUCKET.put(key, readable)
    try {
      const header = await validateStream(request.body, { forward: writable })
      await stored
      return Response.json({ tensors: header.tensors.length }, { status: 201 })
    } catch (error) {
      // validateStream aborted the put: its failure is this one.
      stored.catch(() => {})
      if (!(error instanceof SafetensorsError)) throw error
      return Response.json({ code: error.code, message: error.message }, { status: error.code === 'Io' ? 502 : 422 })
    }
  },
}
