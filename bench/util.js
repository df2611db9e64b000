// Timing helpers: this machine is shared, so compare variants in one run, interleaved, by median.
import { pathToFileURL } from 'node:url'

/** The median of `values`. */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}

/** Runs each variant `rounds` times, interleaved; returns the median milliseconds per variant. */
export function compare(variants, rounds = 15) {
  /** @type {Record<string, number[]>} */
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
  for (const fn of Object.values(variants)) fn() // warm up
  for (let r = 0; r < rounds; r++) {
    for (const [name, fn] of Object.entries(variants)) {
      const start = performance.now()
      fn()
      times[name].push(performance.now() - start)
    }
  }
  return Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]))
}

export function table(rows) {
  const keys = Object.keys(rows[0])
  const widths = keys.map((k) => Math.max(k.length, ...rows.map((r) => String(r[k]).length)))
  const line = (cells) => cells.map((c, i) => String(c).padStart(widths[i])).join('  ')
  console.log(line(keys))
  for (const row of rows) console.log(line(keys.map((k) => row[k])))
}

/** A data: URL of a TypeScript module of the tests (path relative to bench/), its types stripped with esbuild: the benchmarks use the tests' helpers, not copies. */
export async function strippedModule(path) {
  const { transform } = await import('esbuild')
  const { readFile } = await import('node:fs/promises')
  const { code } = await transform(await readFile(new URL(path, import.meta.url), 'utf8'), { loader: 'ts', format: 'esm' })
  return `data:text/javascript,${encodeURIComponent(code)}`
}

/**
 * The tests' HTTP server (test/http-server.ts, with its simulated round trip) serving `files` (name ->
 * bytes) in a worker thread, as a remote server would: its work does not count against the client. Its
 * types are stripped with esbuild, so the benchmarks use the same server as the tests, not a copy.
 * Returns its url, requests() (answered since the last clear), clear() and close().
 */
export async function serveInWorker(files, options) {
  const { Worker } = await import('node:worker_threads')
  const main = `
    import { parentPort, workerData } from 'node:worker_threads'
    const { startServer, rangeHandler } = await import(workerData.server)
    const files = new Map(workerData.files)
    const server = await startServer(rangeHandler((path) => files.get(path.slice(1)), workerData.options))
    parentPort.on('message', async (op) => {
      if (op === 'clear') server.clear()
      if (op === 'close') await server.close()
      if (op === 'requests') await server.settled()
      parentPort.postMessage(op === 'requests' ? server.log.length : op)
    })
    parentPort.postMessage(server.url)`
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(main)}`), {
    workerData: { server: await strippedModule('../test/http-server.ts'), files: [...files], options },
  })
  const reply = () =>
    new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
  const ask = (op) => {
    worker.postMessage(op)
    return reply()
  }
  const url = await reply()
  return {
    url,
    requests: () => ask('requests'),
    clear: () => ask('clear'),
    close: async () => {
      await ask('close')
      await worker.terminate()
    },
  }
}

/**
 * Modules of the repository that are no package export (`contents` imports them, e.g. `export { x } from
 * './src/gguf/dequantize.ts'`, or test/ggml.ts), bundled with esbuild into build/bench-<name>.mjs, their .wasm and ?constants
 * imports made as the builds make them (scripts/inline-wasm.js), packages left to Node; the bundle's path, which a
 * child process can import too. Run after `npm run build:wasm`, from the repository's root.
 * @param {string} name
 * @param {string} contents
 */
export async function bundleSource(name, contents) {
  const { build } = await import('esbuild')
  const { inlineWasm } = await import('../scripts/inline-wasm.js')
  const root = new URL('..', import.meta.url).pathname
  const inline = {
    name: 'inline-wasm',
    /** @param {import('esbuild').PluginBuild} plugin */
    setup(plugin) {
      plugin.onResolve({ filter: /\.wasm$|\?constants$/ }, (args) => ({ path: inlineWasm.resolveId(args.path) ?? args.path, namespace: 'inline' }))
      plugin.onLoad({ filter: /.*/, namespace: 'inline' }, (args) => ({ contents: inlineWasm.load(args.path) ?? '', loader: 'js' }))
    },
  }
  const outfile = `${root}build/bench-${name}.mjs`
  const stdin = { contents, resolveDir: root, loader: /** @type {const} */ ('ts') }
  await build({ stdin, bundle: true, platform: 'node', format: 'esm', packages: 'external', outfile, logLevel: 'error', plugins: [inline] })
  return outfile
}

/**
 * The modules `contents` exports, bundled by bundleSource and imported.
 * @param {string} name
 * @param {string} contents
 */
export async function bundledSource(name, contents) {
  return import(pathToFileURL(await bundleSource(name, contents)).href)
}
