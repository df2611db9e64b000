// The checks inside a module Web Worker (started by app.js); posts the results, or the error.
import { runChecks } from './checks.js'

runChecks().then(
  (results) => postMessage({ results }),
  (error) => postMessage({ error: String(error?.stack ?? error) }),
)
