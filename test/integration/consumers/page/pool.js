// The conversion pool in a page: a large BF16 file read as F32 by a loop of awaited getTensor (as a loader
// does), over HTTP Range and from a Blob with the default pool, and over HTTP with `{ workers: 0 }`. What each
// load gives is reported as SHA-256 per tensor and a few sampled bit patterns; while it runs, a heartbeat on
// the main thread records how long the thread was kept from it. bundlers.test.ts holds the expectations.
import * as lib from 'safetensors-wasm'

/** The main thread's heartbeat: a timer task re-armed at once, so that each gap between two is the longest task between them. */
function heartbeat() {
  const gaps = []
  const slow = []
  const t0 = performance.now()
  let last = performance.now()
  let timer
  const tick = () => {
    const now = performance.now()
    gaps.push(now - last)
    if (now - last > 20) slow.push([Math.round(last - t0), Math.round(now - last)])
    last = now
    timer = setTimeout(tick, 0)
  }
  timer = setTimeout(tick, 0)
  // Long tasks as the engine sees them (Chromium only): they include work the heartbeat cannot see into.
  const longTasks = []
  const supported = typeof PerformanceObserver !== 'undefined' && PerformanceObserver.supportedEntryTypes?.includes('longtask')
  // [ms from the start, duration]; a task begun before the start (the previous load's hashing) is not this load's.
  const keep = (entries) => longTasks.push(...entries.filter((e) => e.startTime >= t0).map((e) => [Math.round(e.startTime - t0), Math.round(e.duration)]))
  const observer = supported ? new PerformanceObserver((list) => keep(list.getEntries())) : undefined
  observer?.observe({ type: 'longtask' })
  return () => {
    clearTimeout(timer)
    gaps.push(performance.now() - last)
    if (observer) keep(observer.takeRecords())
    observer?.disconnect()
    return {
      beats: gaps.length,
      maxGap: Math.round(Math.max(...gaps)),
      // The five longest gaps, [ms from the start, length]: where a failure's time went.
      longest: slow.sort((a, b) => b[1] - a[1]).slice(0, 5),
      // Time the thread spent on other tasks beyond the timer's own 4 ms clamp: a measure of its work.
      busy: Math.round(gaps.reduce((sum, gap) => sum + Math.max(0, gap - 4), 0)),
      longTasks: supported ? longTasks : null,
    }
  }
}

/**
 * Counts the pool's workers (classic Workers from blob: URLs, src/platform/web-workers.ts) and the messages
 * they send: a message per piece converted, beyond each worker's first. Only `Worker` is wrapped; the
 * library is not touched.
 */
const poolWorkers = { started: 0, failed: 0, messages: 0 }
const NativeWorker = globalThis.Worker
globalThis.Worker = class extends NativeWorker {
  constructor(url, options) {
    const mine = String(url).startsWith('blob:')
    try {
      super(url, options)
    } catch (error) {
      if (mine) poolWorkers.failed++
      throw error
    }
    if (!mine) return
    poolWorkers.started++
    this.addEventListener('message', () => poolWorkers.messages++)
    this.addEventListener('error', () => poolWorkers.failed++)
  }
}

const hex = (digest) => Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('')

/** Indices of the elements whose bits are reported (the test checks each against the file): the ends and a spread between them. */
const sampled = (length) => [0, 1, length >> 3, length >> 1, length - (length >> 2) + 7, length - 1]

/** Reads every tensor of `source` as F32 under the heartbeat, then describes what it got. */
async function load(source, options) {
  // A task of its own: the heartbeat and the long-task count start after the task that hashed the previous load.
  await new Promise((resolve) => setTimeout(resolve, 0))
  const before = { ...poolWorkers }
  const stop = heartbeat()
  const started = performance.now()
  const file = await lib.open(source, options)
  const tensors = []
  for (const name of file.names()) tensors.push(await file.getTensor(name, { dtype: 'F32' }))
  const ms = Math.round(performance.now() - started)
  const main = stop()
  const results = {}
  for (const { name, data } of tensors) {
    const bits = new Uint32Array(data.buffer, data.byteOffset, data.length)
    results[name] = {
      length: data.length,
      float32: data instanceof Float32Array,
      shared: Object.prototype.toString.call(data.buffer) === '[object SharedArrayBuffer]',
      samples: Object.fromEntries(sampled(data.length).map((i) => [i, bits[i]])),
      // A shared view cannot be digested (nor kept in a Blob): a copy first.
      sha256: hex(await crypto.subtle.digest('SHA-256', data.buffer instanceof ArrayBuffer ? data : data.slice())),
    }
  }
  await file.close()
  return {
    ms,
    main,
    tensors: results,
    workers: { started: poolWorkers.started - before.started, failed: poolWorkers.failed - before.failed, messages: poolWorkers.messages - before.messages },
  }
}

/**
 * The loads of `url`: 'pooled' and 'calling' (`workers: 0`) over HTTP, and with `blob`, 'blob' (the pool
 * reading a Blob of the file); one after the other, so that only one load's results are alive at a time.
 */
export async function poolChecks(url, { blob = false } = {}) {
  const report = {
    isolated: globalThis.crossOriginIsolated === true,
    sharedArrayBuffer: typeof SharedArrayBuffer === 'function',
    cores: navigator.hardwareConcurrency,
    pooled: await load(url),
    calling: await load(url, { workers: 0 }),
  }
  if (blob) report.blob = await load(await (await fetch(url)).blob())
  return report
}
