// The inspector's static server (scripts/inspector.js) on its own, without a browser: what it answers to
// requests a browser would never make but anyone on the machine can.
import { request } from 'node:http'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { startInspectorServer } from '../../scripts/inspector.js'

let server: Awaited<ReturnType<typeof startInspectorServer>>
beforeAll(async () => {
  server = await startInspectorServer()
})
afterAll(() => server?.close())

/** GET with the path exactly as given (fetch would normalise it). */
function get(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(server.url), { path }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', reject)
    req.end()
  })
}

test.each(['/inspector/%E0%A4%A', '/dist/%', '/inspector/%C0%AF'])('a malformed URL (%s) is a 400, and the server keeps serving', async (path) => {
  expect(await get(path)).toBe(400)
  expect(await get('/inspector/')).toBe(200)
})
