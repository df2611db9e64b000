// A GGUF maker over R2: POST /<prefix>?dtype=Q8_0 converts the model under <prefix> in env.BUCKET to GGUF
// and stores it as <prefix>model.gguf, streamed from the shards' reads into the put: R2 takes a stream of a
// known length, which ggufStream gives before its first byte.
import { r2Model, SafetensorsError } from 'safetensors-wasm'
import { ggufStream } from 'safetensors-wasm/gguf'
/** @import { GgufDtype } from 'safetensors-wasm/gguf' */

/** @type {ExportedHandler<{ BUCKET: R2Bucket }>} */
export default {
  async fetch(request, env) {
    const url = new URL(request.url)
    const prefix = decodeURIComponent(url.pathname.slice(1))
    // ggufStream checks the dtype: a TypeError for one it does not take.
    const dtype = /** @type {GgufDtype} */ (url.searchParams.get('dtype') ?? 'F16')
    let gguf
    try {
      gguf = await ggufStream(r2Model(env.BUCKET, prefix), { dtype })
    } catch (error) {
      // A bad model (its weights, config.json, its tokenizer) is a SafetensorsError; a TypeError is a bad dtype asked.
      if (!(error instanceof SafetensorsError || error instanceof TypeError)) throw error
      return new Response(error.message, { status: error instanceof TypeError ? 400 : 422 })
    }
    const { readable, writable } = new FixedLengthStream(gguf.byteLength)
    const [stored] = await Promise.all([env.BUCKET.put(`${prefix}model.gguf`, readable), gguf.pipeTo(writable)])
    return Response.json({ key: stored?.key, size: stored?.size }) // put() is null only for an onlyIf unmet
  },
}
