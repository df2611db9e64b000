// The edge worker of the workerd test (test/integration/workerd/workerd.test.ts). It imports the package by name;
// the test resolves that name through the package's `workerd` export condition and declares the .wasm
// files it imports as compiled wasm modules, as a Workers bundler would.
//
//   GET /?url=<safetensors URL>&tensor=<name>[&dtype=F32]
//     200: the tensor's data (little-endian bytes), with x-dtype and x-shape headers
//     422: {"code": ..., "message": ...} when the library rejects the file
import { open, SafetensorsError } from 'safetensors-wasm'

export default {
  async fetch(request) {
    const params = new URL(request.url).searchParams
    try {
      // open(url) reads through fetch() with Range requests: the header first, then this tensor only.
      const file = await open(params.get('url'))
      const tensor = await file.getTensor(params.get('tensor'), { dtype: params.get('dtype') ?? undefined })
      const { buffer, byteOffset, byteLength } = tensor.data
      return new Response(buffer.slice(byteOffset, byteOffset + byteLength), {
        headers: { 'content-type': 'application/octet-stream', 'x-dtype': tensor.dtype, 'x-shape': JSON.stringify(tensor.shape) },
      })
    } catch (error) {
      if (error instanceof SafetensorsError) return Response.json({ code: error.code, message: error.message }, { status: 422 })
      return new Response(String(error?.stack ?? error), { status: 500 })
    }
  },
}
