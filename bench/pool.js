// Loading every tensor of a 1 GiB BF16 file as F32 on the conversion pool, against the same loads with
// { workers: 0 }, fs.readFile + a JS loop, and the reference loader (safetensors + torch, bench/reference-load.py,
// when BENCH_PYTHON names a Python that has them). Each load runs in a child process that times its own work
// from open() on, pool start included; 7 rounds, interleaved, medians; with the floors under them: the file read
// and 2 GiB of new arrays written, converting nothing, by as many threads and by the calling thread alone, and torch's
// fill_ of the same memory with the reference. Targets (issue 40): the loop,
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

// The floor of any JavaScript load of this file into fresh arrays, converting nothing: its bytes read (JavaScript
// cannot map a file; the reference's safetensors maps it) and 2 GiB of new arrays written, a tensor at a time.
const OPEN_FILE = `
  import { openSync, readSync } from 'node:fs'
  const fd = openSync(${JSON.stringify(BIG_FILE)}, 'r')`

/** readAndWrite(out, at) fills `out` while it reads half as many bytes of the file from `at`, as BF16 to F32 would. */
const READ_AND_WRITE = `
  const input = new Uint8Array(1 << 19)
  const written = new Float32Array(input.length / 2).fill(1)
  const readAndWrite = (out, at) => {
    for (let done = 0; done < out.length; done += written.length) {
      readSync(fd, input, 0, input.length, at + done * 2)
      out.set(written, done)
    }
  }`

/** Where tensor t's bytes start: the bench file's tensors lie in order, back to back, after its header. */
const TENSOR_AT = `
  const headerLength = new BigUint64Array(1)
  readSync(fd, new Uint8Array(headerLength.buffer), 0, 8, 0)
  const tensorAt = (t) => 8 + Number(headerLength[0]) + t * ${ELEMENTS} * 2`

// By as many threads as the pool has, each half of each tensor (as torch's fill_ splits its work), their start included.
const threadsFloor = `
  import { Worker } from 'node:worker_threads'
  import { availableParallelism } from 'node:os'
  ${OPEN_FILE}
  ${TENSOR_AT}
  const start = performance.now()
  const threads = Math.min(8, availableParallelism())
  const code = ${JSON.stringify(`${OPEN_FILE}
    ${READ_AND_WRITE}
    import { parentPort } from 'node:worker_threads'
    parentPort.on('message', ({ buffer, at, length, fileAt }) => {
      readAndWrite(new Float32Array(buffer, at, length), fileAt)
      parentPort.postMessage(0)
    })`)}
  const workers = Array.from({ length: threads }, () => new Worker(code, { eval: true }))
  const kept = []
  for (let t = 0; t < ${TENSORS}; t++) {
    const buffer = new SharedArrayBuffer(${ELEMENTS} * 4)
    const share = ${ELEMENTS} / threads
    await Promise.all(workers.map((worker, i) => new Promise((done) => {
      worker.once('message', done)
      worker.postMessage({ buffer, at: i * share * 4, length: share, fileAt: tensorAt(t) + i * share * 2 })
    })))
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

// The same by the calling thread alone: the threads' floor against this one is about the least the pool's loop
// can be against the loop with workers: 0 on this machine.
const oneThreadFloor = `
  ${OPEN_FILE}
  ${READ_AND_WRITE}
  ${TENSOR_AT}
  const start = performance.now()
  const kept = []
  for (let t = 0; t < ${TENSORS}; t++) {
    const array = new Float32Array(${ELEMENTS})
    readAndWrite(array, tensorAt(t))
    kept.push(array)
  }
  ${REPORT}`

const FLOORS = {
  'JavaScript floor: threads read 1 GiB, write 2 GiB': threadsFloor,
  'JavaScript floor: the calling thread alone': oneThreadFloor,
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
    console.log(`the floors: the threads' ${ratio(floor, reference)}x the reference, about the least a JavaScript load's ratio above can be here`)
    console.log(`the reference: ${ratio(reference, referenceFloor)}x its own floor, torch's fill_ of the same new memory`)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
