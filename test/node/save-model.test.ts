// Issue 19, model saves: all-or-nothing for a reader that follows the index, whatever stops the save, and
// one save into a folder at a time. Proved by killing child processes (test/save-child.js, on dist/) at
// random moments of re-saves, by failing each file system operation of a save in turn (node:fs/promises
// mocked), and by racing saves in one process and across two. Each folder is judged by a reader written
// here (the index's JSON, each shard's header and bytes by hand, in transformers' order: model.safetensors
// before the index) as well as by openModel. The models are generations (test/save-child.js): a save
// mixing two of them has tensors of two values.
import { type ChildProcess, spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, test, vi } from 'vitest'
import { convertModel, openModel, SafetensorsError, saveModel } from '../../src/node.ts'
import { prng } from '../random.ts'
import { ELEMENTS, generation, saveOptions, shardCount, TENSORS } from '../save-child.js'

// Every function of node:fs/promises, and every method of the handles its open() gives, counts as one
// operation while `faults.armed`; operation number `faults.failAt` throws EIO instead of running (a close
// closes and then throws).
const faults = vi.hoisted(() => ({ armed: false, count: 0, failAt: 0, failing: '', failingPaths: [] as string[], log: [] as string[], linkFails: false }))
vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>()
  const step = (what: string, paths: string[]) => {
    if (!faults.armed) return
    faults.count++
    faults.log.push(what)
    if (faults.count === faults.failAt) {
      faults.failing = what
      faults.failingPaths = paths
      throw Object.assign(new Error(`EIO: i/o error, ${what} (injected)`), { code: 'EIO' })
    }
  }
  const name = (path: unknown) => String(path).split('/').pop()
  const HANDLE_METHODS = new Set(['read', 'write', 'sync', 'datasync', 'close', 'stat', 'truncate', 'writeFile', 'readFile'])
  const counted = (handle: FileHandle, path: unknown) =>
    new Proxy(handle, {
      get(target, key) {
        const value = Reflect.get(target, key, target)
        if (typeof value !== 'function') return value
        if (!HANDLE_METHODS.has(String(key))) return value.bind(target)
        return async (...args: unknown[]) => {
          try {
            step(`${String(key)} ${name(path)}`, [String(path)])
          } catch (error) {
            // As on POSIX, a close that reports EIO has still released the descriptor (else the garbage
            // collector closes it later, with a warning for each one).
            if (key === 'close') await value.apply(target, args)
            throw error
          }
          return value.apply(target, args)
        }
      },
    })
  const wrapped: Record<string, unknown> = {}
  for (const [key, fn] of Object.entries(real)) {
    if (typeof fn !== 'function' || key === 'constants') continue
    wrapped[key] = async (...args: unknown[]) => {
      const paths = args.filter((a) => typeof a === 'string')
      step(`${key} ${paths.map(name).join(' ')}`, paths)
      if (key === 'link' && faults.armed && faults.linkFails) throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' })
      const result = await (fn as (...a: unknown[]) => Promise<unknown>)(...args)
      return key === 'open' ? counted(result as FileHandle, args[0]) : result
    }
  }
  return { ...real, ...wrapped, default: { ...real, ...wrapped } }
})

const LOCK = '.safetensors-wasm.lock'
const NAMES = Array.from({ length: TENSORS }, (_, i) => `t${i}`)
const CHILD = fileURLToPath(new URL('../save-child.js', import.meta.url))
const root = mkdtempSync(join(tmpdir(), 'safetensors-save-test-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let folders = 0
const newFolder = () => join(root, `f${++folders}`)

// A user's files beside the model, some with names close to the save's own: no save may touch them.
const USER_FILES: Record<string, string> = {
  'config.json': '{"model_type":"test"}',
  'model.safetensors.md': 'notes',
  'model-00001-of-00002.safetensors.orig': 'a copy',
  'model.safetensors.index.json.bak': '{}',
  'weights.tmp': 'x',
  'model.tmp': 'y',
}
function addUserFiles(folder: string): void {
  for (const [file, text] of Object.entries(USER_FILES)) writeFileSync(join(folder, file), text)
}

// ------------------------------------------------------------------------------------------------------
// The second reader: nothing of the library.

/** Every tensor of the SafeTensors file at `path`, by name: I32 values, from the header and bytes by hand. */
function readShard(path: string): Map<string, Int32Array> {
  const bytes = readFileSync(path)
  const n = Number(bytes.readBigUInt64LE(0))
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>
  const tensors = new Map<string, Int32Array>()
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue
    expect(info.dtype, `${path}: ${name}`).toBe('I32')
    const [begin, end] = info.data_offsets
    const data = bytes.subarray(8 + n + begin, 8 + n + end)
    tensors.set(name, new Int32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length)))
  }
  return tensors
}

/** The one generation all of `tensors` hold, each one whole; throws naming what differs. */
function generationOf(tensors: Map<string, Int32Array>, where: string): number {
  expect([...tensors.keys()].sort(), `${where}: tensor names`).toEqual(NAMES)
  const g = tensors.get('t0')![0]
  for (const [name, data] of tensors) {
    expect(data.length, `${where}: ${name}'s length`).toBe(ELEMENTS)
    const other = data.findIndex((v) => v !== g)
    if (other >= 0) throw new Error(`${where}: ${name}[${other}] is ${data[other]}, t0[0] is ${g}: two saves mixed`)
  }
  return g
}

/** The generation a reader of the index finds (undefined with no index): the weight_map's tensors, each from its shard. */
function indexGeneration(folder: string): number | undefined {
  const path = join(folder, 'model.safetensors.index.json')
  if (!existsSync(path)) return undefined
  const index = JSON.parse(readFileSync(path, 'utf8')) as { weight_map: Record<string, string> }
  const shards = new Map<string, Map<string, Int32Array>>()
  const tensors = new Map<string, Int32Array>()
  for (const [name, shard] of Object.entries(index.weight_map)) {
    if (!shards.has(shard)) shards.set(shard, readShard(join(folder, shard)))
    const data = shards.get(shard)!.get(name)
    if (!data) throw new Error(`${folder}: the index puts ${name} in ${shard}, which has no such tensor`)
    tensors.set(name, data)
  }
  return generationOf(tensors, `${folder} (by its index)`)
}

/** The generation a reader of the folder finds, in transformers' order: model.safetensors, else the index. */
function folderGeneration(folder: string): number {
  const single = join(folder, 'model.safetensors')
  if (existsSync(single)) return generationOf(readShard(single), single)
  const g = indexGeneration(folder)
  if (g === undefined) throw new Error(`${folder} holds no model: ${readdirSync(folder).join(', ')}`)
  return g
}

/** The generation openModel(folder) gives. */
async function libraryGeneration(folder: string): Promise<number> {
  const model = await openModel(folder)
  try {
    const tensors = new Map<string, Int32Array>()
    for (const name of model.names()) tensors.set(name, (await model.getTensor(name)).data as Int32Array)
    return generationOf(tensors, `${folder} (openModel)`)
  } finally {
    await model.close()
  }
}

/** The one whole generation `folder` holds, for both readers of the folder; its index, if any, is whole too. */
async function wholeGeneration(folder: string): Promise<number> {
  const g = folderGeneration(folder)
  expect(await libraryGeneration(folder), `${folder}: openModel against the reader by hand`).toBe(g)
  indexGeneration(folder)
  return g
}

/** The files a save of generation `g` leaves, beside the user's. */
function filesOf(g: number): string[] {
  const n = shardCount(g)
  const shards = n === 1 ? ['model.safetensors'] : Array.from({ length: n }, (_, i) => `model-0000${i + 1}-of-0000${n}.safetensors`)
  return [...(n === 1 ? shards : [...shards, 'model.safetensors.index.json']), ...Object.keys(USER_FILES)].sort()
}

const ls = (folder: string) => readdirSync(folder).sort()
const save = (folder: string, g: number) => saveModel(folder, generation(g), saveOptions(g))
// Generations of each shard count, to choose transitions.
const ofCount = (n: number, after = 0) => {
  let g = after + 1
  while (shardCount(g) !== n) g++
  return g
}

// ------------------------------------------------------------------------------------------------------
// Children

interface Child {
  process: ChildProcess
  lines: string[]
  /** Resolves with the next line of stdout. */
  next(): Promise<string>
  exited: Promise<number | null>
}

function startChild(args: string[]): Child {
  const child = spawn(process.execPath, [CHILD, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  const lines: string[] = []
  const waiting: Array<() => void> = []
  let stderr = ''
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line)
    for (const wake of waiting.splice(0)) wake()
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const died = exited.then((code) => {
    throw new Error(`save-child.js ${args.join(' ')} exited with ${code}: ${stderr}`)
  })
  died.catch(() => {})
  let read = 0
  return {
    process: child,
    lines,
    async next() {
      while (read === lines.length) await Promise.race([new Promise<void>((wake) => waiting.push(wake)), died])
      return lines[read++]
    },
    exited,
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const KILLS = Number(process.env.SAVE_KILLS ?? 200)
/** A folder per lane, each lane killing its own children: two at once use both cores of a small machine. */
const LANES = 2

// The quick loop (npm test) leaves this out, saying so (vitest.config.ts): 200 kills take a minute, and fewer
// do not reach every transition the test asks for.
describe.skipIf(process.env.TEST_QUICK === '1')('kill -9 at random moments of re-saves', () => {
  test(`${KILLS} kills: every folder holds one whole save, the last done or the one in progress; the next save removes what was left`, async () => {
    const random = prng(0x5a7e)
    const keep = process.env.SAVE_KILL_KEEP
    let kills = 0
    // Kills that found a save under way (its lock there), and the changes of shard count seen between kills.
    let midSave = 0
    const transitions = new Set<string>()
    await Promise.all(
      Array.from({ length: LANES }, async (_, lane) => {
        const folder = newFolder()
        mkdirSync(folder)
        addUserFiles(folder)
        let current = 1 + lane
        await save(folder, current)
        for (let round = 0; kills < KILLS; round++) {
          kills++
          // Generations only grow: lane, round and the saves of one child each have their own; random
          // within that, so that a child starts from any shard count.
          const first = (round + 1) * 10_000 + lane * 1000 + Math.floor(random() * 900)
          const child = startChild(['loop', folder, String(first)])
          expect(await child.next()).toBe(`start ${first}`)
          // Up to about three saves of this size (50 ms each here, most of it fsync): the kill falls in any step of them.
          await sleep(random() * 150)
          child.process.kill('SIGKILL')
          await child.exited
          const started = child.lines.filter((l) => l.startsWith('start ')).map((l) => Number(l.slice(6)))
          const done = child.lines.filter((l) => l.startsWith('done ')).map((l) => Number(l.slice(5)))
          const lastDone = done.length > 0 ? Math.max(...done) : current
          const inProgress = Math.max(...started)
          const g = await wholeGeneration(folder)
          expect([lastDone, inProgress], `${folder} after kill ${kills}: ${child.lines.slice(-4).join(', ')}; files ${ls(folder).join(', ')}`).toContain(g)
          if (existsSync(join(folder, LOCK))) midSave++
          if (g !== current) transitions.add(`${shardCount(current)} -> ${shardCount(g)}`)
          current = g
          if (keep) cpSync(folder, join(keep, `lane${lane}-${round}`), { recursive: true })
        }
        const last = current + 1
        await save(folder, last)
        expect(await wholeGeneration(folder)).toBe(last)
        expect(ls(folder)).toEqual(filesOf(last))
      }),
    )
    expect(midSave, 'kills during a save').toBeGreaterThan(KILLS / 4)
    expect([...transitions].sort()).toEqual(['1 -> 1', '1 -> 2', '1 -> 3', '2 -> 1', '2 -> 2', '2 -> 3', '3 -> 1', '3 -> 2', '3 -> 3'])
  }, 240_000)
})

describe('failing each file system operation of a save in turn', () => {
  // Every transition of shard counts, with the same shard names (2 -> 2, 3 -> 3: the current model's
  // files need second names first) and others.
  const transitions: Array<[number, number]> = [1, 2, 3].flatMap((from) => [1, 2, 3].map((to): [number, number] => [from, to]))

  async function failEachStep(before: number, after: number, next: number): Promise<number> {
    const folder = newFolder()
    let k = 1
    for (; ; k++) {
      rmSync(folder, { recursive: true, force: true })
      await save(folder, before)
      addUserFiles(folder)
      Object.assign(faults, { armed: true, count: 0, failAt: k, failing: '', failingPaths: [], log: [] })
      const outcome = await save(folder, after).then(
        () => undefined,
        (error: unknown) => error,
      )
      faults.armed = false
      const where = `${before} -> ${after}, failing operation ${k} (${faults.failing || 'none'}) of ${faults.log.join(', ')}`
      const g = await wholeGeneration(folder)
      if (outcome === undefined) {
        expect(g, where).toBe(after)
      } else {
        expect(outcome, where).toBeInstanceOf(SafetensorsError)
        expect((outcome as SafetensorsError).code, where).toBe('Io')
        expect(g, `${where}: a rejected save leaves the earlier model`).toBe(before)
      }
      await save(folder, next)
      expect(await wholeGeneration(folder), where).toBe(next)
      expect(ls(folder), `${where}: the next save removes what was left`).toEqual(filesOf(next))
      if (faults.count < k) return k
    }
  }

  test.each(transitions)('%i shard(s) -> %i shard(s)', async (from, to) => {
    const before = ofCount(from, 100)
    const after = ofCount(to, before)
    const steps = await failEachStep(before, after, ofCount(from, after))
    expect(steps, 'operations in a save').toBeGreaterThan(10)
  })

  test('without hard links (FAT, exFAT): the second names are copies, and every step still fails safely', async () => {
    faults.linkFails = true
    try {
      const before = ofCount(3, 200)
      await failEachStep(before, ofCount(3, before), ofCount(2, before + 10))
    } finally {
      faults.linkFails = false
    }
  })

  test('convertModel without resharding keeps the shard names: a re-conversion fails safely at every step', async () => {
    const input = newFolder()
    const before = ofCount(3, 300)
    const after = ofCount(3, before)
    await save(input, after)
    const folder = newFolder()
    for (let k = 1; ; k++) {
      rmSync(folder, { recursive: true, force: true })
      await save(folder, before)
      Object.assign(faults, { armed: true, count: 0, failAt: k, failing: '', failingPaths: [], log: [] })
      const outcome = await convertModel(input, folder).then(
        () => undefined,
        (error: unknown) => error,
      )
      faults.armed = false
      const where = `failing operation ${k} (${faults.failing || 'none'})`
      const g = await wholeGeneration(folder)
      if (outcome !== undefined) expect((outcome as SafetensorsError).code, where).toBe('Io')
      // Closing the input once the save is done can fail too: then the model is saved, and the call says the input failed.
      if (faults.failingPaths.every((path) => path.startsWith(input))) expect([before, after], where).toContain(g)
      else expect(g, where).toBe(outcome === undefined ? after : before)
      if (faults.count < k) break
    }
  })
})

// ------------------------------------------------------------------------------------------------------
// Saves at once

function expectInProgress(error: unknown, folder: string): void {
  expect(error).toBeInstanceOf(SafetensorsError)
  expect((error as SafetensorsError).code).toBe('Io')
  expect((error as SafetensorsError).message).toMatch(/another save into that folder is in progress \(process \d+ on /)
  expect((error as SafetensorsError).message).toContain(folder)
}

describe('saves into one folder at once', () => {
  test('300 pairs in one process: one whole model each time; a save that cannot proceed says another is in progress', async () => {
    const folder = newFolder()
    mkdirSync(folder)
    addUserFiles(folder)
    await save(folder, 1)
    const outcomes = { both: 0, one: 0 }
    for (let trial = 0; trial < 300; trial++) {
      const pair = [2 * trial + 10, 2 * trial + 11]
      const results = await Promise.allSettled(pair.map((g) => save(folder, g)))
      const saved = pair.filter((_, i) => results[i].status === 'fulfilled')
      for (const r of results) if (r.status === 'rejected') expectInProgress(r.reason, folder)
      expect(saved.length, `trial ${trial}`).toBeGreaterThan(0)
      expect(saved, `trial ${trial}: ${ls(folder).join(', ')}`).toContain(await wholeGeneration(folder))
      outcomes[saved.length === 2 ? 'both' : 'one']++
    }
    expect(outcomes.one, 'trials where the saves overlapped').toBeGreaterThan(100)
    expect(ls(folder)).toEqual(filesOf(await folderGeneration(folder)))
  })

  test('100 pairs across two processes: one whole model each time; the loser says another save is in progress', async () => {
    const folder = newFolder()
    mkdirSync(folder)
    addUserFiles(folder)
    await save(folder, 1)
    const children = [startChild(['serve', folder]), startChild(['serve', folder])]
    let overlapped = 0
    try {
      for (let trial = 0; trial < 100; trial++) {
        const pair = [2 * trial + 10, 2 * trial + 11]
        for (const [i, child] of children.entries()) child.process.stdin!.write(`${pair[i]}\n`)
        const answers = await Promise.all(children.map((c) => c.next()))
        const saved = pair.filter((g, i) => answers[i] === `ok ${g}`)
        for (const answer of answers.filter((a) => !a.startsWith('ok '))) {
          const error = JSON.parse(answer.slice('error '.length)) as { code: string; message: string }
          expect(error.code, answer).toBe('Io')
          expect(error.message, answer).toMatch(/another save into that folder is in progress \(process \d+ on /)
          expect(
            children.map((c) => c.process.pid).some((pid) => error.message.includes(`process ${pid} `)),
            answer,
          ).toBe(true)
        }
        expect(saved.length, `trial ${trial}: ${answers.join(' | ')}`).toBeGreaterThan(0)
        expect(saved, `trial ${trial}`).toContain(await wholeGeneration(folder))
        if (saved.length === 1) overlapped++
      }
    } finally {
      for (const child of children) child.process.stdin!.end()
      await Promise.all(children.map((c) => c.exited))
    }
    expect(overlapped, 'trials where the saves overlapped').toBeGreaterThan(5)
  }, 120_000)

  test('a lock held by a live process (stopped mid-save) refuses a save naming it; once it is killed, the next save takes the lock over', async () => {
    const folder = newFolder()
    mkdirSync(folder)
    await save(folder, 1)
    const lock = join(folder, LOCK)
    // Stopped the moment its lock is seen, a child that saves over and over is most often stopped holding
    // it (between two saves there is no lock for a moment: then it goes on and is stopped again).
    let refused: unknown
    for (let attempt = 0; attempt < 20 && refused === undefined; attempt++) {
      const child = startChild(['loop', folder, String(1000 * (attempt + 1))])
      await child.next()
      while (!existsSync(lock)) await new Promise(setImmediate)
      child.process.kill('SIGSTOP')
      if (existsSync(lock)) {
        refused = await save(folder, 2).then(
          () => new Error('a save went ahead while a live process held the lock'),
          (error: unknown) => error,
        )
        expectInProgress(refused, folder)
        expect((refused as Error).message).toContain(`process ${child.process.pid} `)
        expect(existsSync(lock)).toBe(true)
      }
      child.process.kill('SIGKILL')
      await child.exited
    }
    expect(refused, 'a child stopped holding the lock in one of 20 tries').toBeDefined()
    // The child is gone, its lock (if the kill found it mid-save) with it.
    await save(folder, 3)
    expect(await wholeGeneration(folder)).toBe(3)
    expect(existsSync(lock)).toBe(false)
  })

  test('a lock of another host, or one that names no process, is not taken over: Io saying what to remove', async () => {
    const folder = newFolder()
    mkdirSync(folder)
    await save(folder, 1)
    const lock = join(folder, LOCK)
    writeFileSync(lock, JSON.stringify({ pid: 1, hostname: 'another-host.example', token: 'x' }))
    const other = await save(folder, 2).catch((error: unknown) => error)
    expectInProgress(other, folder)
    expect((other as Error).message).toContain('process 1 on another-host.example')
    expect((other as Error).message).toContain(`remove ${lock}`)
    writeFileSync(lock, 'not a lock')
    const garbage = (await save(folder, 2).catch((error: unknown) => error)) as SafetensorsError
    expect(garbage.code).toBe('Io')
    expect(garbage.message).toContain(`another save into that folder is in progress (its lock ${lock} names no process)`)
    expect(await wholeGeneration(folder)).toBe(1)
    rmSync(lock)
    await save(folder, 2)
    expect(await wholeGeneration(folder)).toBe(2)
  })
})
