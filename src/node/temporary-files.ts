// The temporary files a write makes beside its target, and what an interrupted process removes.
//
// A temporary file is named after the process that writes it (its pid and a tag of its host), so that the next
// write to the same target can tell a leftover of a process that is gone (killed with SIGKILL, a power cut)
// from the file of a writer still at work, and remove only the former: two writers of one target never remove
// each other's. A process that is interrupted (the CLI on SIGINT or SIGTERM) runs the cleanups of the writes
// in progress before it exits.
import { readdir, rm } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { SafetensorsError } from '../errors.ts'

/** A name part no other file of this process or another has: the time and a random part, in base 36. */
export function uniqueId(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`
}

let host: string | undefined
/**
 * This host, as a short tag (a hash of its name, in base 36). Asked when first needed, not at import; where the
 * name cannot be read (Deno without --allow-sys), the tag says so, and leftovers are then never judged.
 */
function hostTag(): string {
  if (host === undefined) {
    let name: string | undefined
    try {
      name = hostname()
    } catch {}
    let hash = 2166136261
    for (const c of name ?? '') hash = Math.imul(hash ^ c.charCodeAt(0), 16777619)
    host = name === undefined ? 'unknown' : (hash >>> 0).toString(36)
  }
  return host
}

/** Where `path` is written before it is renamed into place: `<path>.<pid>-<host>-<unique>.tmp`. */
export function temporaryName(path: string): string {
  return `${path}.${process.pid}-${hostTag()}-${uniqueId()}.tmp`
}

/** A temporary file of temporaryName's making: the target's name, and the writer's pid and host. */
const TEMPORARY = /^(.+)\.(\d+)-([0-9a-z]+)-[0-9a-z]{8,}\.tmp$/

/** No process of this host has the pid. */
export function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
}

/** Removes the temporary files of `path` that a process of this host left when it stopped; never a live writer's. */
export async function removeLeftovers(path: string): Promise<void> {
  const folder = dirname(path)
  const target = basename(path)
  const files = await readdir(folder).catch(() => [])
  for (const file of files) {
    const [, of, pid, tag] = TEMPORARY.exec(file) ?? []
    if (of === target && tag === hostTag() && tag !== 'unknown' && Number(pid) !== process.pid && processGone(Number(pid)))
      await rm(join(folder, file), { force: true }).catch(() => {})
  }
}

/** The cleanups of the writes in progress: files first, then the folders made for them, which go once empty. */
const cleanups = { files: new Set<() => Promise<void>>(), folders: new Set<() => Promise<void>>() }
let stopping = false

/**
 * Registers what removes the traces of a write in progress, should the process be interrupted; returns what
 * unregisters it. Called before the write makes its first file (or folder): once the process is stopping, a
 * write that has not begun is refused (Aborted) rather than begun. A `folders` cleanup runs after every `files`
 * one, when what the folder held is gone.
 */
export function whileWriting(cleanup: () => Promise<void>, kind: keyof typeof cleanups = 'files'): () => void {
  if (stopping) throw new SafetensorsError('Aborted', 'the process is stopping: no new file is written')
  cleanups[kind].add(cleanup)
  return () => cleanups[kind].delete(cleanup)
}

/** Runs the cleanups of every write in progress (the CLI, on SIGINT or SIGTERM, before it exits), and refuses new ones. */
export async function cleanUpWrites(): Promise<void> {
  stopping = true
  for (const set of [cleanups.files, cleanups.folders]) {
    const pending = [...set]
    set.clear()
    await Promise.all(pending.map((cleanup) => cleanup().catch(() => {})))
  }
}
