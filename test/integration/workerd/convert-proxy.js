// A converting proxy: GET /<file>?dtype=F16 answers with the file at env.ORIGIN/<file> with its
// floating-point tensors in that dtype (F32, F16 or BF16), converted as the upstream body streams in:
// the new header first, then each tensor, in memory bounded by a few chunks.
import { convertStream } from 'safetensors-wasm'
/** @import { ConvertTarget } from 'safetensors-wasm' */

/** @type {ExportedHandler<{ ORIGIN: string }>} */
export default {
  async fetch(request, env) {
    const url = new URL(request.url)
    const upstream = await fetch(new URL(url.pathname.slice(1), env.ORIGIN))
    if (!upstream.ok || !upstream.body) return new Response(`upstream answered ${upstream.status}`, { status: 502 })
    try {
      // convertStream checks the dtype: a TypeError for one it does not convert to.
      const dtype = /** @type {ConvertTarget} */ (url.searchParams.get('dtype') ?? 'F16')
      const body = convertStream(upstream.body, { dtype })
      return new Response(body, { headers: { 'content-type': 'application/octet-stream' } })
    } catch (error) {
      if (!(error instanceof TypeError)) throw error
      return new Response(error.message, { status: 400 })
    }
  },
}
