// The lock of a folder that a model save holds, so that one save into a folder runs at a time: a file
// naming its holder (pid, host, token), created exclusively, taken over when its process is gone.
import { readFile, rm, stat, writeFile as writeText } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { SafetensorsError } from '../errors.ts'
import { fileError } from '../platform/node-files.ts'
import { linkOrCopy } from './atomic-files.ts'
import { processGone, uniqueId, whileWriting } from './temporary-files.ts'

/** The file in a folder that a model save holds from before its first file to after its cleanup. */
export const SAVE_LOCK = '.safetensors-wasm.lock'

/** The second lock, held while a stale lock is taken over. */
const TAKEOVER = `${SAVE_LOCK}.takeover`

/** Who holds a lock: the lock file's JSON. */
interface Holder {
  pid: number
  hostname: string
  /** Tells this process's locks apart. */
  token: string
}

/** The tokens of the locks this process holds: a lock of this process with another token was left by a save that could not remove it. */
const heldHere = new Set<string>()

/** The lock temporaries this process is writing (LOCK_TEMPORARY). */
const writingHere = new Set<string>()

/** The process gone: it ran on this host and no process has its pid (or this process does, and holds no lock of its token). */
function isGone(holder: Holder): boolean {
  if (holder.hostname !== hostname()) return false
  return holder.pid === process.pid ? !heldHere.has(holder.token) : processGone(holder.pid)
}

/**
 * Where a lock is written before it is linked into place, named after its writer's process: it is
 * empty for a moment, and left behind if the writer is killed then. Judged by that pid alone (another
 * host's would be taken for this host's: the window is microseconds, and its save would fail, not break).
 */
const LOCK_TEMPORARY = /^\.safetensors-wasm\.lock\.(\d+)-[0-9a-z]+\.tmp$/

/** The lock file at `path` (undefined when there is none): its text, its holder if it names one, and whether that holder is gone. */
async function heldBy(path: string): Promise<{ text: string; holder?: Holder; gone: boolean } | undefined> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  let holder: Holder | undefined
  try {
    const parsed = JSON.parse(text) as Partial<Holder>
    if (Number.isInteger(parsed.pid) && typeof parsed.hostname === 'string' && typeof parsed.token === 'string') holder = parsed as Holder
  } catch {}
  if (holder) return { text, holder, gone: isGone(holder) }
  // Naming no process: a lock being written (for microseconds), or one whose writer died doing so.
  const modified = await stat(path).then(
    (s) => s.mtimeMs,
    () => Date.now(),
  )
  return { text, gone: Date.now() - modified > UNNAMED_LOCK_AGE }
}

/** How old a lock file that names no process must be to count as left by a crash (ms). */
const UNNAMED_LOCK_AGE = 60_000

/** Creates the file `path` holding `text` unless a file has that name: written first under a temporary name, so that it never exists empty. */
async function createExclusive(path: string, text: string): Promise<boolean> {
  const temporary = join(dirname(path), `${SAVE_LOCK}.${process.pid}-${uniqueId()}.tmp`)
  const unregister = whileWriting(() => rm(temporary, { force: true }))
  writingHere.add(basename(temporary))
  try {
    await writeText(temporary, text, { flag: 'wx' })
    await linkOrCopy(temporary, path)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    // Left, it goes at the next save.
    await rm(temporary, { force: true }).catch(() => {})
    writingHere.delete(basename(temporary))
    unregister()
  }
}

function inProgress(folder: string, path: string, holder: Holder | undefined): SafetensorsError {
  const who = holder ? `process ${holder.pid} on ${holder.hostname}` : `its lock ${path} names no process`
  return new SafetensorsError('Io', `cannot save into ${folder}: another save into that folder is in progress (${who}); if none is, remove ${path}`, {
    path: folder,
  })
}

/**
 * Takes the folder's lock, or rejects saying who holds it. A lock whose process is gone is taken over,
 * under a second lock (`.takeover`) so that of two processes that find it stale only one removes it;
 * the other finds the lock gone, or new. Returns the release.
 */
export async function lockFolder(folder: string): Promise<() => Promise<void>> {
  const path = join(folder, SAVE_LOCK)
  // Asked here, not at import: Deno wants --allow-sys for it, and a program that never saves a model must not need that.
  const me: Holder = { pid: process.pid, hostname: hostname(), token: uniqueId() }
  const text = JSON.stringify(me)
  // Held from before the lock (or the takeover guard) can appear under this token: a save of this process that
  // reads it meanwhile must find it live, not left by a save that is gone.
  heldHere.add(me.token)
  // The attempt to create the lock under way, if any: a release (on an interrupt, whenever it comes) waits for it,
  // or the lock could appear after the release looked for it.
  let creating: Promise<unknown> = Promise.resolve()
  const release = async () => {
    unregister()
    await creating
    heldHere.delete(me.token)
    if ((await heldBy(path))?.text === text) await rm(path)
  }
  // An interrupted save lets go of the folder as it exits, whenever the signal comes: registered before the lock can appear.
  const unregister = whileWriting(release)
  let held = false
  try {
    for (let attempt = 0; attempt < 10; attempt++) {
      const created = createExclusive(path, text)
      creating = created.catch(() => {})
      if (await created) {
        held = true
        return release
      }
      const lock = await heldBy(path)
      if (lock === undefined) continue
      if (!lock.gone) throw inProgress(folder, path, lock.holder)
      const guard = join(folder, TAKEOVER)
      if (!(await createExclusive(guard, text))) {
        // Another save is taking it over, or died doing so (then its guard goes, and this tries again).
        const taking = await heldBy(guard)
        if (taking && !taking.gone) throw inProgress(folder, path, taking.holder)
        if (taking) await rm(guard, { force: true })
        continue
      }
      try {
        if ((await heldBy(path))?.text === lock.text) await rm(path)
      } finally {
        await rm(guard, { force: true })
      }
    }
  } catch (cause) {
    throw cause instanceof SafetensorsError ? cause : fileError('take the lock', path, cause)
  } finally {
    if (!held) {
      heldHere.delete(me.token)
      unregister()
    }
  }
  throw new SafetensorsError('Io', `cannot lock ${folder} for a save: ${path} was taken over and came back 10 times`, { path: folder })
}

/** Whether `file` in `folder` is a lock's file that nobody will finish or remove: a lock temporary or a takeover guard of a process that is gone. */
export async function isStaleLockFile(folder: string, file: string): Promise<boolean> {
  const lockWriter = LOCK_TEMPORARY.exec(file)?.[1]
  if (lockWriter !== undefined) return Number(lockWriter) === process.pid ? !writingHere.has(file) : processGone(Number(lockWriter))
  return file === TAKEOVER && (await heldBy(join(folder, file)))?.gone === true
}
