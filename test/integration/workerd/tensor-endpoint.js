// A tensor endpoint in front of object storage: GET /tensor/<name>?dtype=F16 streams one tensor of the
// file at env.ORIGIN, converted as it is read (open() reads the header by a Range request, stream()
// reads the tensor's bytes chunk by chunk as the client takes them). A client that goes away cancels
// the stream, which aborts the read from the origin.
import { open, SafetensorsError } from 'safetensors-wasm'
/** @import { DType } from 'safetensors-wasm' */

/** @type {ExportedHandler<{ ORIGIN: string }>} */
export default {
  async fetch(request, env) {
    const url = new URL(request.url)
    const match = /^\/tensor\/(.+)$/.exec(url.pathname)
    if (!match) return new Response('try GET /tensor/<name>?dtype=F16', { status: 404 })
    const name = decodeURIComponent(match[1])
    // stream() checks the dtype: a SafetensorsError for one it cannot convert to.
    const dtype = /** @type {DType | undefined} */ (url.searchParams.get('dtype') ?? undefined)
    try {
      const file = await open(env.ORIGIN)
      const info = file.info(name)
      return new Response(file.stream(name, { dtype }), {
        headers: { 'content-type': 'application/octet-stream', 'x-dtype': dtype ?? info.dtype, 'x-shape': JSON.stringify(info.shape) },
      })
    } catch (error) {
      if (!(error instanceof SafetensorsError)) throw error
      return Response.json({ code: error.code, message: error.message }, { status: error.code === 'TensorNotFound' ? 404 : 422 })
    }
  },
}
