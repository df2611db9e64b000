// The consumer page: runs the checks here, then the same checks in a module Web Worker, and publishes
// both as window.consumerResults for the test that drives the browser.
import { runChecks } from './checks.js'

function inWorker() {
  // The standard form, which webpack and Vite bundle as a worker of its own; esbuild and Rollup get
  // worker.js as a second entry point beside app.js.
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' })
  return new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => (data.error ? reject(new Error(`in the worker: ${data.error}`)) : resolve(data.results))
    worker.onerror = (event) => reject(new Error(`the worker failed to start or threw: ${event.message}`))
  }).finally(() => worker.terminate())
}

async function main() {
  const page = await runChecks()
  return { page, worker: await inWorker() }
}

main().then(
  (results) => (window.consumerResults = results),
  (error) => (window.consumerResults = { error: String(error?.stack ?? error) }),
)
