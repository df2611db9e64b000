// src/node/folder-lock.ts: the lock a model save holds on its folder, taken directly (test/node/save-model.test.ts
// races whole saves on it). A lock names its holder; it is refused while that holder lives, taken over when it
// is gone (a process that exited, a lock of this process that no save holds, a lock naming nobody for a minute),
// and exactly one of many at once gets it. Dead processes are real ones: children that have exited.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { SafetensorsError } from '../../src/errors.ts'
import { isStaleLockFile, lockFolder, SAVE_LOCK } from '../../src/node/folder-lock.ts'

const root = mkdtempSync(join(tmpdir(), 'safetensors-lock-test-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let folders = 0
const newFolder = () => mkdtempSync(join(root, `f${++folders}-`))

/** The pid of a process that has exited: a child that ran and ended. */
function deadPid(): number {
  const { pid, status } = spawnSync(process.execPath, ['-e', ''])
  expect(status).toBe(0)
  return pid!
}

async function refusal(folder: string): Promise<SafetensorsError> {
  const error = await lockFolder(folder).then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(SafetensorsError)
  expect((error as SafetensorsError).code).toBe('Io')
  expect((error as SafetensorsError).path).toBe(folder)
  expect((error as Error).message).toContain(`remove ${join(folder, SAVE_LOCK)}`)
  return error as SafetensorsError
}

describe('lockFolder', () => {
  test('the lock names its holder; while held, another lock is refused naming it; released, the file goes', async () => {
    const folder = newFolder()
    const release = await lockFolder(folder)
    const holder = JSON.parse(readFileSync(join(folder, SAVE_LOCK), 'utf8'))
    expect([holder.pid, holder.hostname, typeof holder.token]).toEqual([process.pid, hostname(), 'string'])
    expect((await refusal(folder)).message).toContain(`another save into that folder is in progress (process ${process.pid} on ${hostname()})`)
    await release()
    expect(existsSync(join(folder, SAVE_LOCK))).toBe(false)
    await (await lockFolder(folder))()
  })

  test("a lock of a process that has exited is taken over, and the new lock is this process's", async () => {
    const folder = newFolder()
    writeFileSync(join(folder, SAVE_LOCK), JSON.stringify({ pid: deadPid(), hostname: hostname(), token: 'left' }))
    const release = await lockFolder(folder)
    expect(JSON.parse(readFileSync(join(folder, SAVE_LOCK), 'utf8')).pid).toBe(process.pid)
    await release()
  })

  test('a lock of this process that no save of it holds (one that could not remove it) is taken over', async () => {
    const folder = newFolder()
    writeFileSync(join(folder, SAVE_LOCK), JSON.stringify({ pid: process.pid, hostname: hostname(), token: 'not-held' }))
    await (await lockFolder(folder))()
  })

  test('a lock of another host is never taken over, whatever its pid', async () => {
    const folder = newFolder()
    writeFileSync(join(folder, SAVE_LOCK), JSON.stringify({ pid: deadPid(), hostname: `not-${hostname()}`, token: 't' }))
    expect((await refusal(folder)).message).toContain(`on not-${hostname()}`)
  })

  test('a lock naming no process: refused while fresh (it may be being written), taken over after a minute', async () => {
    const folder = newFolder()
    const path = join(folder, SAVE_LOCK)
    writeFileSync(path, 'not json')
    expect((await refusal(folder)).message).toContain('names no process')
    const old = new Date(Date.now() - 120_000)
    utimesSync(path, old, old)
    await (await lockFolder(folder))()
  })

  test('20 locks of one folder at once: exactly one is taken, the others refused', async () => {
    const folder = newFolder()
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => lockFolder(folder)))
    const taken = results.filter((r) => r.status === 'fulfilled')
    expect(taken).toHaveLength(1)
    for (const r of results) if (r.status === 'rejected') expect((r.reason as SafetensorsError).code).toBe('Io')
    await (taken[0] as PromiseFulfilledResult<() => Promise<void>>).value()
    expect(existsSync(join(folder, SAVE_LOCK))).toBe(false)
  })
})

describe('isStaleLockFile', () => {
  test('a lock temporary is stale when its writer is gone, not while it lives', async () => {
    const folder = newFolder()
    expect(await isStaleLockFile(folder, `${SAVE_LOCK}.${deadPid()}-abc123.tmp`)).toBe(true)
    expect(await isStaleLockFile(folder, `${SAVE_LOCK}.${process.ppid}-abc123.tmp`)).toBe(false)
    // This process writes none now: one of its own is left over.
    expect(await isStaleLockFile(folder, `${SAVE_LOCK}.${process.pid}-abc123.tmp`)).toBe(true)
  })

  test('a takeover guard is stale when its holder is gone', async () => {
    const folder = newFolder()
    const guard = `${SAVE_LOCK}.takeover`
    writeFileSync(join(folder, guard), JSON.stringify({ pid: deadPid(), hostname: hostname(), token: 't' }))
    expect(await isStaleLockFile(folder, guard)).toBe(true)
    writeFileSync(join(folder, guard), JSON.stringify({ pid: process.ppid, hostname: hostname(), token: 't' }))
    expect(await isStaleLockFile(folder, guard)).toBe(false)
  })

  test('nothing else is: the lock itself, a user file, names that only look alike', async () => {
    const folder = newFolder()
    writeFileSync(join(folder, SAVE_LOCK), JSON.stringify({ pid: deadPid(), hostname: hostname(), token: 't' }))
    for (const file of [SAVE_LOCK, 'model.safetensors', `${SAVE_LOCK}.tmp`, `${SAVE_LOCK}.${deadPid()}.tmp`, `x${SAVE_LOCK}.takeover`])
      expect(await isStaleLockFile(folder, file), file).toBe(false)
  })
})
