// Conversion and loading against plain I/O of the same bytes, in the same run (issue 10):
// - CLI `convert` of a 1 GiB BF16 file to F16 against `dd` copying the input, and to F32 against `cat`
//   writing as many bytes as the F32 output. Our output is fsync'ed before its rename (atomic and durable),
//   so the baselines sync theirs too (dd conv=fsync, cat then sync FILE); the unsynced dd is shown beside.
//   Targets: at most 1.3x each, peak RSS under 200 MiB. Both outputs are checked by numpy (python3).
// - Loading every tensor as F32 (file.tensors()) cold, with the page cache dropped (root only), against
//   max(cold `dd` of the file to /dev/null, the same load warm). Target: at most 1.25x.
// Every figure is the median of interleaved rounds, each command in a child process of its own.
import { execFile, execFileSync } from 'node:child_process'
import { rm } from 'node:fs/promises'
import { statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CLI_CHILD, REPORT_RSS, child, makeInput } from './write.js'
import { median, table } from './util.js'

const MiB = 2 ** 20
const INPUT = { path: join(tmpdir(), 'safetensors-wasm-bench-1gib-bf16.safetensors'), tensors: 16, elements: 32 << 20 } // 16 x 64 MiB
const ROUNDS = 5
const RSS_TARGET = 200 * MiB

/** Milliseconds a shell command takes. */
function timed(command) {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    execFile('sh', ['-c', command], (error, _stdout, stderr) => (error ? reject(new Error(`${command}: ${stderr}`)) : resolve(performance.now() - start)))
  })
}

const quote = (path) => `'${path.replace(/'/g, `'\\''`)}'`

/** Drops the page cache (needs root); false where that is not possible. */
function dropCaches() {
  try {
    execFileSync('sh', ['-c', 'sync && echo 3 > /proc/sys/vm/drop_caches'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** numpy's verdict on a converted file: its tensors equal astype() of the input's (BF16 widened exactly by a 16-bit shift). */
function numpyCheck(input, output, dtype) {
  const script = `
import json, struct, sys
import numpy as np
def tensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
    header.pop('__metadata__', None)
    data = np.memmap(path, dtype=np.uint8, mode='r', offset=8 + n)
    return {k: (v['dtype'], data[v['data_offsets'][0]:v['data_offsets'][1]]) for k, v in header.items()}
src, out = tensors(sys.argv[1]), tensors(sys.argv[2])
assert src.keys() == out.keys()
for name, (dt, raw) in src.items():
    f32 = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    want = f32.astype(np.float16 if sys.argv[3] == 'F16' else np.float32)
    got_dtype, got = out[name]
    assert got_dtype == sys.argv[3], (name, got_dtype)
    assert np.array_equal(got.view(want.dtype).view(np.uint8), want.view(np.uint8)), name
print('ok')
`
  return execFileSync('python3', ['-c', script, input, output, dtype], { encoding: 'utf8' }).trim() === 'ok'
}

const LOAD_CHILD = `
  ${REPORT_RSS}
  const { open } = await import(${JSON.stringify(new URL('../dist/node.js', import.meta.url).href)})
  const file = await open(process.argv[1])
  let elements = 0
  for await (const t of file.tensors({ dtype: 'F32' })) elements += t.data.length
  await file.close()
  if (elements !== ${INPUT.tensors * INPUT.elements}) throw new Error('wrong element count ' + elements)`

export async function run() {
  await makeInput(INPUT)
  const size = statSync(INPUT.path).size
  const out = (name) => `${INPUT.path}.${name}`
  console.log(
    `\nconvert a ${(size / 2 ** 30).toFixed(2)} GiB BF16 file (${INPUT.tensors} tensors) vs plain I/O of the same bytes, median of ${ROUNDS} interleaved rounds`,
  )

  // The F32 output of one conversion is the file `cat` copies: exactly the output's bytes.
  await child(CLI_CHILD, [INPUT.path, out('f32'), '--dtype', 'F32'])
  const f32Size = statSync(out('f32')).size
  const catSource = out('f32-for-cat')
  await timed(`cp ${quote(out('f32'))} ${quote(catSource)}`)
  const verified = { F16: false, F32: numpyCheck(INPUT.path, out('f32'), 'F32') }
  const runs = { dd: [], 'dd (no fsync)': [], F16: [], F16rss: [], cat: [], F32: [], F32rss: [] }
  try {
    for (let round = 0; round < ROUNDS; round++) {
      runs.dd.push(await timed(`dd if=${quote(INPUT.path)} of=${quote(out('dd'))} bs=8M conv=fsync status=none`))
      runs['dd (no fsync)'].push(await timed(`dd if=${quote(INPUT.path)} of=${quote(out('dd'))} bs=8M status=none`))
      const f16 = await child(CLI_CHILD, [INPUT.path, out('f16'), '--dtype', 'F16'])
      runs.F16.push(f16.ms)
      runs.F16rss.push(f16.maxRss)
      runs.cat.push(await timed(`cat ${quote(catSource)} > ${quote(out('cat'))} && sync ${quote(out('cat'))}`))
      const f32 = await child(CLI_CHILD, [INPUT.path, out('f32'), '--dtype', 'F32'])
      runs.F32.push(f32.ms)
      runs.F32rss.push(f32.maxRss)
    }
    verified.F16 = numpyCheck(INPUT.path, out('f16'), 'F16')
  } finally {
    await Promise.all(['dd', 'f16', 'cat', 'f32', 'f32-for-cat'].map((name) => rm(out(name), { force: true })))
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]))
  table([
    {
      conversion: 'BF16 -> F16',
      ms: m.F16.toFixed(0),
      baseline: 'dd conv=fsync',
      'baseline ms': m.dd.toFixed(0),
      ratio: (m.F16 / m.dd).toFixed(2),
      'peak RSS MiB': (Math.max(...runs.F16rss) / MiB).toFixed(0),
      'numpy agrees': verified.F16,
    },
    {
      conversion: 'BF16 -> F32',
      ms: m.F32.toFixed(0),
      baseline: 'cat + sync',
      'baseline ms': m.cat.toFixed(0),
      ratio: (m.F32 / m.cat).toFixed(2),
      'peak RSS MiB': (Math.max(...runs.F32rss) / MiB).toFixed(0),
      'numpy agrees': verified.F32,
    },
  ])
  console.log(
    `(dd without fsync: ${m['dd (no fsync)'].toFixed(0)} ms; targets: ratio <= 1.3, peak RSS < ${RSS_TARGET / MiB} MiB; F32 output ${(f32Size / MiB).toFixed(0)} MiB)`,
  )

  console.log(`\nload every tensor of that file as F32 (file.tensors()), cold and warm, vs dd of the file to /dev/null, median of ${ROUNDS}`)
  const cold = { dd: [], load: [] }
  const warm = []
  let canDrop = true
  for (let round = 0; round < ROUNDS && canDrop; round++) {
    canDrop = dropCaches()
    if (!canDrop) break
    cold.dd.push(await timed(`dd if=${quote(INPUT.path)} of=/dev/null bs=8M status=none`))
    dropCaches()
    cold.load.push((await child(LOAD_CHILD, [INPUT.path])).ms)
    warm.push((await child(LOAD_CHILD, [INPUT.path])).ms)
  }
  if (!canDrop) {
    for (let round = 0; round < ROUNDS; round++) warm.push((await child(LOAD_CHILD, [INPUT.path])).ms)
    console.log(`cannot drop the page cache here (not root?): warm load only, ${median(warm).toFixed(0)} ms`)
    return { convert: m, verified, warmLoad: median(warm) }
  }
  const c = { dd: median(cold.dd), load: median(cold.load), warm: median(warm) }
  const floor = Math.max(c.dd, c.warm)
  table([
    { what: 'cold dd to /dev/null', ms: c.dd.toFixed(0) },
    { what: 'warm load as F32', ms: c.warm.toFixed(0) },
    { what: 'cold load as F32', ms: c.load.toFixed(0) },
  ])
  console.log(`cold load / max(cold dd, warm load) = ${(c.load / floor).toFixed(2)} (target <= 1.25)`)
  return { convert: m, verified, load: c }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
