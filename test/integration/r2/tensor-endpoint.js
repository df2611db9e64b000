// A tensor endpoint over a model in R2: GET /tensor/<name>?dtype=F16 streams one tensor of the model
// stored under the key prefix env.PREFIX of the bucket env.BUCKET (its model.safetensors, or its index and
// shards), converted as it is read. openModel reads the headers by ranged gets; stream() reads the tensor's
// bytes chunk by chunk as the client takes them, every get pinned to the object first seen, so a model
// replaced meanwhile is an error, never a mix of two. A client that goes away cancels the stream.
import { openModel, r2Model, SafetensorsError } from 'safetensors-wasm'
/** @import { DType } from 'safetensors-wasm' */

/** @type {ExportedHandler<{ BUCKET: R2Bucket; PREFIX: string }>} */
export default {
  async fetch(request, env) {
    const url = new URL(request.url)
    const match = /^\/tensor\/(.+)$/.exec(url.pathname)
    if (!match) return new Response('try GET /tensor/<name>?dtype=F16', { status: 404 })
    const name = decodeURIComponent(match[1])
    // stream() checks the dtype: a SafetensorsError for one it cannot convert to.
    const dtype = /** @type {DType | undefined} */ (url.searchParams.get('dtype') ?? undefined)
    try {
      const model = await openModel(r2Model(env.BUCKET, env.PREFIX))
      const info = model.info(name)
      return new Response(model.stream(name, { dtype }), {
        headers: { 'content-type': 'application/octet-stream', 'x-dtype': dtype ?? info.dtype, 'x-shape': JSON.stringify(info.shape) },
      })
    } catch (error) {
      if (!(error instanceof SafetensorsError)) throw error
      return Response.json({ code: error.code, message: error.message }, { status: error.code === 'TensorNotFound' ? 404 : 422 })
    }
  },
}
