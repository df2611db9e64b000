// An upload gateway: POST /<name> with a SafeTensors file. The upload is checked as it streams through
// to env.STORAGE (PUT <name>), and only checked bytes go on: a bad file is answered 422 with its code
// and its upload to storage is aborted, so storage never holds a complete invalid object; a good one is
// answered 201 with its tensor count once storage has it.
import { SafetensorsError, validateStream } from 'safetensors-wasm'

/** @type {ExportedHandler<{ STORAGE: string }>} */
export default {
  async fetch(request, env) {
    if (request.method !== 'POST' || !request.body) return new Response('POST a .safetensors file', { status: 405 })
    const name = new URL(request.url).pathname.slice(1) || 'upload.safetensors'
    const { readable, writable } = new TransformStream()
    const stored = fetch(new URL(name, env.STORAGE), { method: 'PUT', body: readable })
    try {
      const header = await validateStream(request.body, { forward: writable })
      const response = await stored
      if (!response.ok) return new Response(`storage answered ${response.status}`, { status: 502 })
      return Response.json({ tensors: header.tensors.length }, { status: 201 })
    } catch (error) {
      // validateStream aborted the upload: its failure is this one.
      stored.catch(() => {})
      if (!(error instanceof SafetensorsError)) throw error
      return Response.json({ code: error.code, message: error.message }, { status: error.code === 'Io' ? 502 : 422 })
    }
  },
}
