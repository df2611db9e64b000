// A converting proxy over R2: GET /<key>?dtype=F16 answers with the object <key> of env.BUCKET with its
// floating-point tensors in that dtype (F32, F16 or BF16), converted as the object's body streams in: the
// new header first, then each tensor, in memory bounded by a few chunks, from one get.
import { convertStream } from 'safetensors-wasm'
/** @import { ConvertTarget } from 'safetensors-wasm' */

/** @type {ExportedHandler<{ BUCKET: R2Bucket }>} */
export default {
  async fetch(request, env) {
    const url = new URL(request.url)
    const key = decodeURIComponent(url.pathname.slice(1))
    const object = await env.BUCKET.get(key)
    if (object === null) return new Response(`no object ${key} in the bucket`, { status: 404 })
    try {
      // convertStream checks the dtype: a TypeError for one it does not convert to.
      const dtype = /** @type {ConvertTarget} */ (url.searchParams.get('dtype') ?? 'F16')
      const body = convertStream(object.body, { dtype })
      return new Response(body, { headers: { 'content-type': 'application/octet-stream' } })
    } catch (error) {
      await object.body.cancel()
      if (!(error instanceof TypeError)) throw error
      return new Response(error.message, { status: 400 })
    }
  },
}
