// Conversion and loading against plain I/O of the same bytes, in the same run (issue 10):
// - CLI `convert` of a 1 GiB BF16 file to F16 against `dd` copying the input, and to F32 against `cat`
//   writing as many bytes as the F32 output. Our output is fsync'ed before its rename (atomic and durable),
//   so the baselines sync theirs too (dd conv=fsync, cat then sync FILE); the unsynced dd is shown beside,
//   and a Node process that copies the input the same way, converting nothing (NODE_COPY).
//   Targets: at most 1.3x each, peak RSS under 200 MiB. Both outputs are checked by numpy (python3).
//   Every timed command writes a new file, from the same settled machine state (see settle()). Over an
//   existing file, the kernel's freeing of the old 2 GiB lands inside the timed command, and more of it for
//   an atomic writer, whose old and new files coexist until the rename (cat truncates first): the F32
//   conversion and cat are also timed that way, shown beside.
// - Loading every tensor as F32 (file.tensors()) cold, with the page cache dropped (root only), against
//   max(cold `dd` of the file to /dev/null, the same load warm). Target: at most 1.25x.
// Every figure is the median of interleaved rounds, each command in a child process of its own.
import { execFile, execFileSync } from 'node:child_process'
import { statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { median, table } from './util.js'
import { CLI_CHILD, child, makeInput, REPORT_RSS } from './write.js'

const MiB = 2 ** 20
const INPUT = { path: join(tmpdir(), 'safetensors-wasm-bench-1gib-bf16.safetensors'), tensors: 16, elements: 32 << 20 } // 16 x 64 MiB
const ROUNDS = 5
const RSS_TARGET = 200 * MiB

/**
 * The least a conversion by a Node process can take, converting nothing: the runtime's start, and the input
 * copied to a temporary file in 16 MiB reads and writes, fsync'ed and renamed, as the CLI's atomic writer does.
 */
const NODE_COPY = `
  import { closeSync, fsyncSync, openSync, readSync, renameSync, writeSync } from 'node:fs'
  const [input, output] = process.argv.slice(1)
  const buffer = new Uint8Array(16 << 20)
  const from = openSync(input, 'r')
  const to = openSync(output + '.tmp', 'w')
  for (let n; (n = readSync(from, buffer)) > 0; ) writeSync(to, buffer, 0, n)
  fsyncSync(to)
  closeSync(to)
  renameSync(output + '.tmp', output)`

/** Milliseconds a shell command takes. */
export function timed(command) {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    execFile('sh', ['-c', command], (error, _stdout, stderr) => (error ? reject(new Error(`${command}: ${stderr}`)) : resolve(performance.now() - start)))
  })
}

export const quote = (path) => `'${path.replace(/'/g, `'\\''`)}'`

/** Drops the page cache (needs root); false where that is not possible. */
export function dropCaches() {
  try {
    execFileSync('sh', ['-c', 'sync && echo 3 > /proc/sys/vm/drop_caches'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/**
 * Brings the machine to the same state before every timed command: dirty pages written, and (as root)
 * the page cache dropped and the input read back into it. Memory freed here goes back to the hypervisor at
 * once (this VM reports free pages), so without this a command's cost would depend on what ran before it.
 */
export async function settle(canDrop, input) {
  await timed('sync')
  if (canDrop && dropCaches()) await timed(`cat ${quote(input)} > /dev/null`)
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
    with np.errstate(over='ignore'):  # large BF16 values become F16 infinities, as they must
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
  const dd = (fsync) => `dd if=${quote(INPUT.path)} of=${quote(out('dd'))} bs=8M${fsync ? ' conv=fsync' : ''} status=none`
  const cat = `cat ${quote(catSource)} > ${quote(out('cat'))} && sync ${quote(out('cat'))}`
  const nodeCopy = `${quote(process.execPath)} --input-type=module -e ${quote(NODE_COPY)} ${quote(INPUT.path)} ${quote(out('copy'))}`
  const convert = (name, dtype) => async () => {
    const { ms, maxRss } = await child(CLI_CHILD, [INPUT.path, out(name), '--dtype', dtype])
    rss[dtype] = Math.max(rss[dtype] ?? 0, maxRss)
    return ms
  }
  /** Each command, the file it reads (the input unless said), the output it writes, and whether that output is left in place for it to replace. */
  const commands = [
    { name: 'dd', output: 'dd', run: () => timed(dd(true)) },
    { name: 'dd (no fsync)', output: 'dd', run: () => timed(dd(false)) },
    { name: 'F16', output: 'f16', run: convert('f16', 'F16') },
    { name: 'Node copy', output: 'copy', run: () => timed(nodeCopy) },
    { name: 'cat', output: 'cat', input: catSource, run: () => timed(cat) },
    // A stronger baseline than cat's 128 KiB writes: dd writing the same bytes in 16 MiB blocks.
    { name: 'dd 16M', output: 'cat', input: catSource, run: () => timed(`dd if=${quote(catSource)} of=${quote(out('cat'))} bs=16M conv=fsync status=none`) },
    { name: 'F32', output: 'f32', run: convert('f32', 'F32') },
    { name: 'cat over', output: 'cat', input: catSource, over: true, run: () => timed(cat) },
    { name: 'F32 over', output: 'f32', over: true, run: convert('f32', 'F32') },
  ]
  /** @type {Record<string, number>} */
  const rss = {}
  /** @type {Record<string, number[]>} */
  const runs = Object.fromEntries(commands.map((c) => [c.name, []]))
  const canDrop = dropCaches()
  try {
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate the order, so that no command always follows the same one.
      for (const command of round % 2 ? [...commands].reverse() : commands) {
        if (!command.over) await rm(out(command.output), { force: true })
        await settle(canDrop, command.input ?? INPUT.path)
        runs[command.name].push(await command.run())
      }
    }
    verified.F16 = numpyCheck(INPUT.path, out('f16'), 'F16')
  } finally {
    await Promise.all(['dd', 'f16', 'copy', 'cat', 'f32', 'f32-for-cat'].map((name) => rm(out(name), { force: true })))
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]))
  table(
    /** @type {const} */ ([
      ['F16', 'dd', 'dd conv=fsync'],
      ['F32', 'cat', 'cat + sync'],
    ]).map(([dtype, base, baseline]) => ({
      conversion: `BF16 -> ${dtype}`,
      ms: m[dtype].toFixed(0),
      baseline,
      'baseline ms': m[base].toFixed(0),
      ratio: (m[dtype] / m[base]).toFixed(2),
      'peak RSS MiB': (rss[dtype] / MiB).toFixed(0),
      'numpy agrees': verified[dtype],
    })),
  )
  console.log(
    `(dd without fsync: ${m['dd (no fsync)'].toFixed(0)} ms; targets: ratio <= 1.3, peak RSS < ${RSS_TARGET / MiB} MiB; F32 output ${(f32Size / MiB).toFixed(0)} MiB)`,
  )
  console.log(
    `(BF16 -> F16 vs a Node process copying the input, converting nothing: ${m['Node copy'].toFixed(0)} ms, ratio ${(m.F16 / m['Node copy']).toFixed(2)}; that copy is ${(m['Node copy'] / m.dd).toFixed(2)}x dd conv=fsync)`,
  )
  console.log(`(BF16 -> F32 vs dd of the output's bytes in 16 MiB blocks, conv=fsync: ${m['dd 16M'].toFixed(0)} ms, ratio ${(m.F32 / m['dd 16M']).toFixed(2)})`)
  console.log(
    `every round, ms: ${Object.entries(runs)
      .map(([name, v]) => `${name} ${v.map((ms) => ms.toFixed(0)).join(' ')}`)
      .join('; ')}`,
  )
  if (!canDrop) console.log('cannot drop the page cache here (not root?): commands ran after a sync only, so their state varies more')
  console.log(
    `over an existing output: BF16 -> F32 ${m['F32 over'].toFixed(0)} ms, cat + sync ${m['cat over'].toFixed(0)} ms, ratio ${(m['F32 over'] / m['cat over']).toFixed(2)}`,
  )

  console.log(`\nload every tensor of that file as F32 (file.tensors()), cold and warm, vs dd of the file to /dev/null, median of ${ROUNDS}`)
  /** @type {{ dd: number[], load: number[] }} */
  const cold = { dd: [], load: [] }
  /** @type {number[]} */
  const warm = []
  for (let round = 0; round < ROUNDS && canDrop; round++) {
    dropCaches()
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
