// Loading every tensor of a 1 GiB BF16 file as F32 on the conversion pool, against the same loads with
// { workers: 0 }, fs.readFile + a JS loop, and the reference loader (safetensors + torch, bench/reference-load.py,
// when BENCH_PYTHON names a Python that has them). Each load runs in a child process that times its own work
// from open() on, pool start included; 7 rounds, interleaved, medians; with the floors under them: fresh memory
// written by as many threads, by the calling thread alone, and by torch with the reference. Targets (issue 40): the loop,
// Promise.all and tensors() at most 1.1x the reference; into one reused `out` at most 0.5x; the loop on the
// pool at most 0.7x the loop with workers: 0.
import { execFileSync } from 'node:child_process'
import { BIG_FILE, ELEMENTS, makeBigFile, VARIANTS as READ_VARIANTS, TENSORS } from './read.js'
import { median, table } from './util.js'

const ROUNDS = 7
const DIST = JSON.stringify(new URL('../dist/node.js', import.meta.url).href)

/** A child's last lines: the ms since `start`, and a checksum of every array `kept`. */
const REPORT = `const ms = performance.now() - start
  let check = 0
  for (const t of kept) check += t[12345]
  console.log(JSON.stringify({ ms, check }))`

/** A child's code: `load(file, options)` returns the kept arrays; it prints ms and a checksum of every array. */
function child(load, options = '{}') {
  return `
    import { open } from ${DIST}
    const start = performance.now()
    const file = await open(process.argv[1], ${options})
    const kept = await (${load})(file)
    ${REPORT}`
}

const loop = `async (file) => { const kept = []; for (const name of file.names()) kept.push((await file.getTensor(name, { dtype: 'F32' })).data); return kept }`
// One caller-owned buffer for every tensor, as a GPU uploader's staging buffer: shared memory, so the workers write it.
const reusedOut = `async (file) => {
  const out = new Float32Array(new SharedArrayBuffer(Math.max(...file.header.tensors.map((t) => t.byteLength)) * 2))
  let check = 0
  for (const name of file.names()) check += (await file.getTensor(name, { dtype: 'F32', out })).data[12345]
  return [{ 12345: check }]
}`

// The floor of any load into fresh arrays: the pool's count of threads writing 2 GiB of new shared memory, a tensor
// at a time, each thread half of it (as torch's fill_ splits it), with nothing read or converted. Page faults are most of it.
const freshMemoryFloor = `
  import { Worker } from 'node:worker_threads'
  import { availableParallelism } from 'node:os'
  const threads = Math.min(8, availableParallelism())
  const fill = "import { parentPort } from 'node:worker_threads'; parentPort.on('message', ({ buffer, at, length }) => { new Int32Array(buffer, at, length).fill(1); parentPort.postMessage(0) })"
  const workers = Array.from({ length: threads }, () => new Worker(fill, { eval: true }))
  const start = performance.now()
  const kept = []
  for (let t = 0; t < ${TENSORS}; t++) {
    const buffer = new SharedArrayBuffer(${ELEMENTS} * 4)
    const share = ${ELEMENTS} / threads
    await Promise.all(workers.map((worker, i) => new Promise((done) => { worker.once('message', done); worker.postMessage({ buffer, at: i * share * 4, length: share }) })))
    kept.push(new Float32Array(buffer))
  }
  ${REPORT}
  process.exit(0)`

const VARIANTS = {
  'loop of getTensor': child(loop),
  'Promise.all of getTensor': child(`(file) => Promise.all(file.names().map(async (name) => (await file.getTensor(name, { dtype: 'F32' })).data))`),
  'tensors()': child(`async (file) => { const kept = []; for await (const t of file.tensors({ dtype: 'F32' })) kept.push(t.data); return kept }`),
  'one reused out': child(reusedOut),
  'loop, workers: 0': child(loop, '{ workers: 0 }'),
  'one reused out, workers: 0': child(reusedOut, '{ workers: 0 }'),
  'fs.readFile + JS loop': READ_VARIANTS['fs.readFile + JS loop'],
}

// The same 2 GiB written by the calling thread alone into new arrays, a chunk at a time: the threads' floor against
// this one is about the least the pool's loop can be against the loop with workers: 0 on this machine.
const oneThreadFloor = `
  const chunk = new Float32Array(1 << 18).fill(1)
  const start = performance.now()
  const kept = []
  for (let t = 0; t < ${TENSORS}; t++) {
    const array = new Float32Array(${ELEMENTS})
    for (let at = 0; at < array.length; at += chunk.length) array.set(chunk, at)
    kept.push(array)
  }
  ${REPORT}`

const FLOORS = {
  'fresh-memory floor: threads fill 2 GiB': freshMemoryFloor,
  'fresh-memory floor: the calling thread fills 2 GiB': oneThreadFloor,
}

function runNode(code) {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code, BIG_FILE], { maxBuffer: 1 << 20 }).toString())
}

/** @param {string} python */
function runReference(python, ...args) {
  const script = new URL('./reference-load.py', import.meta.url).pathname
  return JSON.parse(execFileSync(python, [script, BIG_FILE, ...args], { maxBuffer: 1 << 20 }).toString())
}

/** Ms from a script's last line to its exit, when it read a tensor on the pool and returned without close(). */
function exitAfterLastLine() {
  const code = `
    import { open } from ${DIST}
    const file = await open(process.argv[1])
    await file.getTensor(file.names()[0], { dtype: 'F32' })
    console.log(performance.timeOrigin + performance.now())`
  const last = Number(execFileSync(process.execPath, ['--input-type=module', '-e', code, BIG_FILE]).toString())
  return performance.timeOrigin + performance.now() - last
}

export async function run() {
  await makeBigFile()
  const python = process.env.BENCH_PYTHON
  const reference = python ? 'safetensors load_file + torch .float()' : undefined
  const referenceFloor = 'fresh-memory floor: torch fill_ of 2 GiB'
  console.log(`\nThe conversion pool: every tensor of a 1 GiB BF16 file as F32 (child processes, ${ROUNDS} rounds interleaved, medians)`)
  if (!reference) console.log('BENCH_PYTHON is not set: the reference loader (bench/reference-load.py, torch) is not run')
  const results = {}
  const floors = {}
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, code] of Object.entries(VARIANTS)) (results[name] ??= []).push(runNode(code))
    for (const [name, code] of Object.entries(FLOORS)) (floors[name] ??= []).push(runNode(code))
    if (python && reference) {
      ;(results[reference] ??= []).push(runReference(python))
      ;(floors[referenceFloor] ??= []).push(runReference(python, '--fill'))
    }
  }
  const ms = (name) => median((results[name] ?? floors[name]).map((r) => r.ms))
  const checks = new Set(Object.values(results).flatMap((r) => r.map((x) => x.check.toFixed(3))))
  if (checks.size !== 1) throw new Error(`the loaders disagree: ${[...checks]}`)
  const base = reference ?? 'loop, workers: 0'
  table(
    [...Object.keys(results), ...Object.keys(floors)].map((name) => ({
      loader: name,
      'ms (median)': ms(name).toFixed(0),
      [`x ${base}`]: (ms(name) / ms(base)).toFixed(2),
    })),
  )
  const ratio = (a, b) => (ms(a) / ms(b)).toFixed(2)
  const exits = Array.from({ length: ROUNDS }, exitAfterLastLine)
  console.log(
    `a script that reads a tensor and returns without close() exits ${median(exits).toFixed(0)} ms after its last line (median of ${ROUNDS}; target at most 100 ms)`,
  )
  console.log(`the loop on the pool: ${ratio('loop of getTensor', 'loop, workers: 0')}x the loop with workers: 0 (target at most 0.7x)`)
  const [floor, oneThread] = Object.keys(FLOORS)
  console.log(`the loop on the pool: ${ratio('loop of getTensor', floor)}x the ${floor}`)
  console.log(`the loop with workers: 0: ${ratio('loop, workers: 0', oneThread)}x the ${oneThread}`)
  console.log(`the floors: the threads' ${ratio(floor, oneThread)}x the calling thread's, about the least the loop's ratio above can be here`)
  if (reference) {
    for (const name of ['loop of getTensor', 'Promise.all of getTensor', 'tensors()'])
      console.log(`${name}: ${ratio(name, reference)}x the reference (target at most 1.1x)`)
    console.log(`one reused out: ${ratio('one reused out', reference)}x the reference (target at most 0.5x)`)
    console.log(
      `the floors: threads filling fresh shared memory ${ratio(floor, referenceFloor)}x torch's fill_; the reference ${ratio(reference, referenceFloor)}x its floor`,
    )
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
