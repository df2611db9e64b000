// The consumer page: runs the checks here, then the same checks in a module Web Worker, then the
// conversion pool's loads of a large file (pool.js), and publishes all as window.consumerResults for the
// test that drives the browser. With `?pool=URL` (the page served under another policy: a CSP, cross-origin
// isolation), it runs the pool's loads of URL alone.
import { runChecks } from './checks.js'
import { poolChecks } from './pool.js'

function inWorker() {
  // The standard form, which webpack and Vite bundle as a worker of its own; esbuild and Rollup get
  // worker.js as a second entry point beside app.js.
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' })
  return new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => (data.error ? reject(new Error(`in the worker: ${data.error}`)) : resolve(data.results))
    worker.onerror = (event) => reject(new Error(`the worker failed to start or threw: ${event.message}`))
  }).finally(() => worker.terminate())
}

/** The large file's URL, root-relative like checks.js's. */
const POOL_FILE = '/fixtures/pool.safetensors'

async function main() {
  const query = new URLSearchParams(location.search)
  const only = query.get('pool')
  if (only) return { pool: await poolChecks(only) }
  const page = await runChecks()
  const worker = await inWorker()
  return { page, worker, pool: await poolChecks(POOL_FILE, { blob: true }) }
}

main().then(
  (results) => (window.consumerResults = results),
  (error) => (window.consumerResults = { error: String(error?.stack ?? error) }),
)
