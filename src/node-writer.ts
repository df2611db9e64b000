// Writing to disk (Node, Deno, Bun): reached only from the Node entry. Every file is written beside its
// target under a unique temporary name and renamed into place once complete, so a failure leaves the
// target as it was. A model save (a folder of shards and an index) goes further: see writeModel.
import { constants } from 'node:fs'
import { copyFile, link, mkdir, open as openFile, readdir, readFile, rename, rm, rmdir, stat, writeFile as writeText } from 'node:fs/promises'
import { hostname } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { SafetensorsError } from './errors.ts'
import { compareCodePoints, tensorByteLength } from './layout.ts'
import { DEFAULT_INDEX, type ModelIndex } from './model.ts'
import { parseIndex, readIndex } from './model-index.ts'
import { fileSource } from './node-source.ts'
import { named, type Prepared, prepare, type TensorCollection, type WriteOptions, type WriterSink } from './writer.ts'

/** A name part no other file of this process or another has: the time and a random part, in base 36. */
function uniqueId(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`
}

/** Makes the renames and removals in `folder` durable, so a power cut cannot reorder them (where a folder can be opened: not on Windows). */
async function syncFolder(folder: string): Promise<void> {
  const handle = await openFile(folder, 'r').catch(() => undefined)
  if (!handle) return
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/**
 * Files that appear together or not at all: each is written beside its target under a unique temporary
 * name, and publish() renames them all into place once every one is complete (a sharded model and its
 * index); discard() removes whatever was written.
 */
export interface FileSet {
  /** A sink for one file of the set; its commit() only completes the file (data synced, handle closed). */
  sink(path: string): Promise<WriterSink>
  /** Renames the complete files (those `only` accepts, by default all) into place, in the order they completed. */
  publish(only?: (path: string) => boolean): Promise<void>
  discard(): Promise<void>
}

/**
 * An Io error about the file the caller named (never the temporary file beside it, which the caller
 * does not know of): "cannot write /models/out.safetensors: no space left on device (ENOSPC)".
 */
export function fileError(action: string, path: string, cause: unknown): SafetensorsError {
  return new SafetensorsError('Io', `cannot ${action} ${path}: ${systemMessage(cause)}`, { cause })
}

/** A system error's own words and code, without the syscall and the paths Node appends (a temporary file's). */
function systemMessage(cause: unknown): string {
  const { code, message } = cause as { code?: unknown; message?: unknown }
  const text = String(message ?? cause)
  return typeof code === 'string' && text.startsWith(`${code}: `) ? `${text.slice(code.length + 2).split(', ')[0]} (${code})` : text
}

export function fileSet(): FileSet {
  const complete: Array<[temporary: string, path: string]> = []
  /** Each temporary file not yet renamed, with what closes its handle (a deleted file keeps its space while open). */
  const started = new Map<string, () => Promise<void>>()
  return {
    async sink(path) {
      // Found before any byte is written: the rename at the end would fail on a folder.
      if ((await stat(path).catch(() => undefined))?.isDirectory()) throw new SafetensorsError('Io', `cannot write ${path}: it is a folder`)
      const temporary = `${path}.${uniqueId()}.tmp`
      const handle = await openFile(temporary, 'wx').catch((cause) => {
        throw fileError('create', path, cause)
      })
      let closed = false
      const close = async () => {
        if (!closed) {
          closed = true
          await handle.close()
        }
      }
      started.set(temporary, close)
      return {
        seekable: true,
        async write(bytes, position) {
          try {
            for (let done = 0; done < bytes.length; ) {
              const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position + done)
              done += bytesWritten
            }
          } catch (cause) {
            throw fileError('write', path, cause)
          }
        },
        async commit() {
          try {
            // Synced before any rename, so a crash never leaves a renamed file without its data.
            await handle.sync()
            await close()
          } catch (cause) {
            throw fileError('write', path, cause)
          }
          complete.push([temporary, path])
        },
        async abort() {
          await close().catch(() => {})
          started.delete(temporary)
          await rm(temporary, { force: true })
        },
      }
    },
    async publish(only = () => true) {
      for (const entry of [...complete]) {
        const [temporary, path] = entry
        if (!only(path)) continue
        await rename(temporary, path)
        started.delete(temporary)
        complete.splice(complete.indexOf(entry), 1)
      }
    },
    async discard() {
      await Promise.all(
        [...started].map(async ([temporary, close]) => {
          await close().catch(() => {})
          await rm(temporary, { force: true })
        }),
      )
      started.clear()
      complete.length = 0
    },
  }
}

/**
 * A file on disk, written beside the target under a temporary name and renamed into place at the end.
 * @throws {@link SafetensorsError} `Io` when the file cannot be created, written or renamed.
 */
export async function fileSink(path: string): Promise<WriterSink> {
  const set = fileSet()
  const sink = await set.sink(path)
  return {
    ...sink,
    async commit() {
      await sink.commit()
      await set.publish()
    },
  }
}

type Parts = Iterable<readonly [bytes: Uint8Array, position: number]>

async function writeParts(sink: WriterSink, parts: Parts): Promise<void> {
  for (const [bytes, position] of parts) await sink.write(bytes, position)
  await sink.commit()
}

/** Runs `write` on a new file set and publishes it; on any failure nothing of it is left and the targets are untouched. */
export async function writeSet<T>(write: (set: FileSet) => Promise<T>): Promise<T> {
  const set = fileSet()
  try {
    const result = await write(set)
    await set.publish()
    return result
  } catch (cause) {
    await set.discard()
    if (isOwnError(cause)) throw cause
    throw new SafetensorsError('Io', `writing failed: ${systemMessage(cause)}`, { cause })
  }
}

/** An error that escapes a write as it is: a SafetensorsError, or the caller's misuse (TypeError, RangeError). What else fails is the disk's. */
function isOwnError(cause: unknown): boolean {
  return cause instanceof SafetensorsError || cause instanceof TypeError || cause instanceof RangeError
}

function* partsOf({ layout, chunks }: Prepared): Generator<readonly [Uint8Array, number]> {
  yield [layout.head, 0]
  for (const [i, e] of layout.entries.entries()) yield [chunks[i], layout.dataStart + e.dataOffsets[0]]
}

/**
 * Writes `tensors` to `path` atomically.
 * @throws {@link SafetensorsError} the codes of {@link planLayout} (`InvalidHeaderDeserialization`,
 * `ValidationOverflow`, `MisalignedSlice`, `HeaderTooLarge`) and `TensorInvalidInfo` (data not the size its
 * dtype and shape take), before anything is written; `Io` when a write fails (a full disk, EIO), naming the
 * output, with the target left untouched.
 */
export async function writeFile(path: string, tensors: TensorCollection, options: WriteOptions = {}): Promise<void> {
  const prepared = prepare(named(tensors), options.metadata)
  await writeSet(async (set) => writeParts(await set.sink(path), partsOf(prepared)))
}

/** Options of saveModel. */
export interface SaveModelOptions extends WriteOptions {
  /**
   * Largest shard in bytes of tensor data (default 5 GB, as transformers). A larger tensor gets a shard alone.
   * @defaultValue 5000000000
   */
  maxShardSize?: number
}

export const DEFAULT_MAX_SHARD_SIZE = 5_000_000_000

/**
 * Splits tensors into shards as transformers does: in the order given, a new shard whenever the next
 * tensor would take the current one past `maxShardSize` (a larger tensor gets a shard alone). Returns
 * each shard's tensors and its file name: model-0000i-of-0000n.safetensors, or model.safetensors alone.
 */
export function planShards<T>(tensors: readonly T[], byteLength: (t: T) => number, maxShardSize: number): Array<{ file: string; tensors: T[] }> {
  if (!(maxShardSize > 0)) throw new RangeError(`maxShardSize must be a positive number of bytes, got ${maxShardSize}`)
  const shards: T[][] = []
  let size = 0
  for (const t of tensors) {
    const bytes = byteLength(t)
    if (shards.length === 0 || (size + bytes > maxShardSize && size > 0)) {
      shards.push([])
      size = 0
    }
    shards[shards.length - 1].push(t)
    size += bytes
  }
  if (shards.length === 0) shards.push([])
  const count = shards.length
  const file = (i: number) => (count === 1 ? 'model.safetensors' : `model-${String(i + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.safetensors`)
  return shards.map((shard, i) => ({ file: file(i), tensors: shard }))
}

/** What a model save writes: its shards (file names and the tensors in each) and the name of its index, if it has one. */
export interface ModelPlan {
  shards: ReadonlyArray<{ file: string; names: readonly string[] }>
  /** By default model.safetensors.index.json when there is more than one shard, none for one (model.safetensors alone). */
  index?: string
}

/** What a model save's `write` reports once its shards are in the set: the index's total_size and its other metadata. */
export interface ModelWritten {
  totalSize: number
  metadata?: Record<string, unknown>
}

/**
 * Saves a model into `folder`: `write` puts every shard of `plan` into the set; this adds the index and
 * publishes them all-or-nothing for any reader that follows the index (this library, Python's
 * safetensors and transformers): whenever the process stops, the folder holds the earlier model or the
 * new one, each complete. Under the folder's lock (one save at a time):
 * 1. every file is written under a temporary name (fileSet);
 * 2. if a new shard takes a name the current index uses, the current model's files of those names get
 *    second names (hard links) and the current index is replaced by one naming those: still the
 *    earlier model, which no longer needs the names;
 * 3. the shards are renamed into place: for a model of one file, this is the commit point;
 * 4. the index is renamed into place: the commit point for a reader of the index. A model.safetensors
 *    beside it would still be loaded first (transformers' order), so its removal is the commit point
 *    for a reader of the folder;
 * 5. every file of earlier saves that nothing names any more is removed.
 * The folder is synced between the steps. A failure before the commit rejects and leaves the earlier
 * model; after it the save is done, and what the cleanup could not remove goes at the next save, which
 * also removes what a crash left, before it writes anything (so that a full disk gets its room back).
 * Returns the names written.
 */
export async function writeModel(folder: string, plan: ModelPlan, write: (set: FileSet) => Promise<ModelWritten>): Promise<string[]> {
  const created = await mkdir(folder, { recursive: true }).catch((cause) => {
    throw fileError('create the folder', folder, cause)
  })
  try {
    return await saveLocked(folder, plan, write)
  } catch (cause) {
    // A save that fails leaves what was there before, and before it there was no folder.
    if (created !== undefined) await removeEmptyFolders(folder, created)
    throw cause
  }
}

/** `folder` and its parents up to `top`, each removed if empty: what mkdir made for a save that failed. */
async function removeEmptyFolders(folder: string, top: string): Promise<void> {
  const last = resolve(top)
  for (let dir = resolve(folder); ; dir = dirname(dir)) {
    const removed = await rmdir(dir).then(
      () => true,
      () => false,
    )
    if (!removed || dir === last) return
  }
}

async function saveLocked(folder: string, plan: ModelPlan, write: (set: FileSet) => Promise<ModelWritten>): Promise<string[]> {
  const files = plan.shards.map((s) => s.file)
  const index = plan.index ?? (files.length > 1 ? DEFAULT_INDEX : undefined)
  const saved = index === undefined ? files : [...files, index]
  const names = modelNames(files, index)
  const unlock = await lockFolder(folder)
  try {
    const live = await liveModel(folder, names)
    const isSaveFile = (file: string) => names.isModelFile(file) || live.shards.includes(file)
    await removeStale(folder, isSaveFile, live.files).catch(() => {})
    await writeSet(async (set) => {
      const { totalSize, metadata } = await write(set)
      const indexPath = index === undefined ? undefined : join(folder, index)
      if (indexPath !== undefined) {
        const weightMap: Record<string, string> = {}
        for (const shard of plan.shards) for (const name of shard.names) weightMap[name] = shard.file
        await writeParts(await set.sink(indexPath), [[indexBytes({ metadata: { ...metadata, total_size: totalSize }, weight_map: weightMap }), 0]])
      }
      const replaced = files.filter((file) => live.shards.includes(file))
      if (replaced.length > 0) await pointAtBackups(folder, names.index, live.text!, replaced)
      await set.publish((path) => path !== indexPath)
      if (indexPath === undefined) return
      await syncFolder(folder)
      await set.publish()
      if (live.single && !files.includes(names.single!)) {
        await syncFolder(folder)
        await rm(join(folder, names.single!))
      }
    })
    // Committed: the save is done, whatever happens to the cleanup. Synced first, so that no removal
    // can reach the disk before the commit.
    await syncFolder(folder)
      .then(() => removeStale(folder, isSaveFile, new Set(saved)))
      .catch(() => {})
    return saved
  } catch (cause) {
    throw isOwnError(cause) ? cause : fileError('save into', folder, cause)
  } finally {
    await unlock().catch(() => {})
  }
}

interface ModelNames {
  /** The model's single file, model.safetensors (undefined for an index whose name says none). */
  single: string | undefined
  index: string
  /** Whether `file` is one of the model's files by name (this save's, or another save's of the same model). */
  isModelFile(file: string): boolean
}

/**
 * The names of a model's files: a save of one file is `single`, beside which an index would be
 * `single`.index.json; a sharded model's index X.safetensors.index.json goes with the single file
 * X.safetensors and the shards X-0000i-of-0000n.safetensors, as transformers names them.
 */
function modelNames(files: readonly string[], index: string | undefined): ModelNames {
  const suffix = '.index.json'
  const indexName = index ?? `${files[0]}${suffix}`
  const single = index === undefined ? files[0] : indexName.endsWith(`.safetensors${suffix}`) ? indexName.slice(0, -suffix.length) : undefined
  const stem = single?.slice(0, -'.safetensors'.length).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const pattern = stem === undefined ? undefined : new RegExp(`^${stem}(-\\d{5}-of-\\d{5})?\\.safetensors(\\.index\\.json)?$`)
  const own = new Set([...files, indexName, ...(single === undefined ? [] : [single])])
  return { single, index: indexName, isModelFile: (file) => own.has(file) || (pattern?.test(file) ?? false) }
}

interface LiveModel {
  /** Whether model.safetensors is there: a reader of the folder loads it before any index. */
  single: boolean
  /** The index's text, when it is one a reader can load. */
  text?: string
  /** The shards that index names. */
  shards: string[]
  /** Every file a reader of the folder or of the index uses. */
  files: Set<string>
}

/** The model in `folder` now, as readers find it. An index no reader can load names nothing; one that cannot be read stops the save. */
async function liveModel(folder: string, names: ModelNames): Promise<LiveModel> {
  const single = names.single !== undefined && (await isFile(join(folder, names.single)))
  const indexPath = join(folder, names.index)
  const live: LiveModel = { single, shards: [], files: new Set(single ? [names.single!] : []) }
  if (!(await isFile(indexPath))) return live
  live.files.add(names.index)
  const source = await fileSource(indexPath)
  let bytes: Uint8Array
  try {
    bytes = await readIndex(source, indexPath)
  } finally {
    await source.close?.()
  }
  try {
    live.shards = parseIndex(indexPath, bytes).shards
  } catch (error) {
    if (!(error instanceof SafetensorsError) || error.code === 'Io') throw error
    return live
  }
  live.text = new TextDecoder().decode(bytes)
  for (const shard of live.shards) live.files.add(shard)
  return live
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile()
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw new SafetensorsError('Io', `cannot stat ${path}: ${(cause as Error).message}`, { cause })
  }
}

/**
 * Gives the current model's files `replaced` second names and replaces its index (`text`) by one that
 * names those: the folder still holds the earlier model, and the new shards can take the names.
 */
async function pointAtBackups(folder: string, index: string, text: string, replaced: readonly string[]): Promise<void> {
  const backups = new Map(replaced.map((file) => [file, `${file}.${uniqueId()}.old`]))
  for (const [file, backup] of backups) await linkOrCopy(join(folder, file), join(folder, backup))
  await syncFolder(folder)
  const current = JSON.parse(text) as ModelIndex
  const weightMap = Object.fromEntries(Object.entries(current.weight_map).map(([tensor, shard]) => [tensor, backups.get(shard) ?? shard]))
  await writeSet(async (set) => writeParts(await set.sink(join(folder, index)), [[indexBytes({ ...current, weight_map: weightMap }), 0]]))
  await syncFolder(folder)
}

/** Error codes of a file system without hard links (FAT, exFAT, some network shares). */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS'])

/** Makes `to` a second name of the file `from`, which must not exist yet; a copy where there are no hard links. */
async function linkOrCopy(from: string, to: string): Promise<void> {
  try {
    await link(from, to)
  } catch (error) {
    if (!NO_HARD_LINKS.has((error as NodeJS.ErrnoException).code!)) throw error
    await copyFile(from, to, constants.COPYFILE_EXCL)
  }
}

/** What a save leaves behind when it stops: `<file>.<id>.tmp` (fileSet, being written) and `<file>.<id>.old` (pointAtBackups). */
const LEFTOVER = /^(.+)\.[0-9a-z]{8,}\.(tmp|old)$/

/** A file a model save makes besides the model's own (its lock, a leftover of a save that stopped): not part of any model. */
export function isSaveLeftover(file: string): boolean {
  return file.startsWith(SAVE_LOCK) || /\.(safetensors|index\.json)$/.test(LEFTOVER.exec(file)?.[1] ?? '')
}

/**
 * Removes from `folder` the files of saves of this model (`isSaveFile`, and their leftovers) that are not
 * in `keep`, and the temporary files of locks whose process is gone. Never a file of another name.
 */
async function removeStale(folder: string, isSaveFile: (file: string) => boolean, keep: ReadonlySet<string>): Promise<void> {
  const stale: string[] = []
  for (const file of await readdir(folder)) {
    if (keep.has(file)) continue
    const leftover = LEFTOVER.exec(file)
    const lockWriter = LOCK_TEMPORARY.exec(file)?.[1]
    const gone =
      (lockWriter !== undefined && (Number(lockWriter) === process.pid ? !writingHere.has(file) : processGone(Number(lockWriter)))) ||
      (file === TAKEOVER && (await heldBy(join(folder, file)))?.gone)
    if (isSaveFile(file) || (leftover && isSaveFile(leftover[1])) || gone) stale.push(file)
  }
  // Indexes first: a reader of an index whose shards went first would find it broken, rather than gone.
  stale.sort((a, b) => Number(b.endsWith('.index.json')) - Number(a.endsWith('.index.json')))
  for (const file of stale) await rm(join(folder, file), { force: true })
  await syncFolder(folder)
}

// ---------------------------------------------------------------------------------------------------
// The lock: one save into a folder at a time.

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

/** No process of this host has the pid. */
function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
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
  }
}

function inProgress(folder: string, path: string, holder: Holder | undefined): SafetensorsError {
  const who = holder ? `process ${holder.pid} on ${holder.hostname}` : `its lock ${path} names no process`
  return new SafetensorsError('Io', `cannot save into ${folder}: another save into that folder is in progress (${who}); if none is, remove ${path}`)
}

/**
 * Takes the folder's lock, or rejects saying who holds it. A lock whose process is gone is taken over,
 * under a second lock (`.takeover`) so that of two processes that find it stale only one removes it;
 * the other finds the lock gone, or new. Returns the release.
 */
async function lockFolder(folder: string): Promise<() => Promise<void>> {
  const path = join(folder, SAVE_LOCK)
  // Asked here, not at import: Deno wants --allow-sys for it, and a program that never saves a model must not need that.
  const me: Holder = { pid: process.pid, hostname: hostname(), token: uniqueId() }
  const text = JSON.stringify(me)
  try {
    for (let attempt = 0; attempt < 10; attempt++) {
      if (await createExclusive(path, text)) {
        heldHere.add(me.token)
        return async () => {
          heldHere.delete(me.token)
          if ((await heldBy(path))?.text === text) await rm(path)
        }
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
  }
  throw new SafetensorsError('Io', `cannot lock ${folder} for a save: ${path} was taken over and came back 10 times`)
}

// ---------------------------------------------------------------------------------------------------

/**
 * Saves a sharded model as transformers does: model-0000i-of-0000n.safetensors plus
 * model.safetensors.index.json ({ metadata: { total_size }, weight_map }), or a single model.safetensors
 * when everything fits one shard. Tensors go to shards in the order given; the save is all-or-nothing
 * (writeModel).
 * @throws {@link SafetensorsError} the codes of {@link planLayout} (`InvalidHeaderDeserialization`,
 * `ValidationOverflow`, `MisalignedSlice`, `HeaderTooLarge`) and `TensorInvalidInfo` (data not the size its
 * dtype and shape take), before anything is written; `Io` when a write fails (a full disk, EIO), naming the
 * output, with the folder holding the earlier model, and `Io` while another save into the folder is in
 * progress (the message names the folder and the process).
 */
export async function saveModel(folder: string, tensors: TensorCollection, options: SaveModelOptions = {}): Promise<string[]> {
  const list = named(tensors)
  const shards = planShards(list, tensorByteLength, options.maxShardSize ?? DEFAULT_MAX_SHARD_SIZE)
  // Every shard is validated before any is written.
  const prepared = shards.map((shard) => prepare(shard.tensors, options.metadata))
  const plan = { shards: shards.map((s) => ({ file: s.file, names: s.tensors.map((t) => t.name) })) }
  return writeModel(folder, plan, async (set) => {
    for (const [i, shard] of shards.entries()) await writeParts(await set.sink(join(folder, shard.file)), partsOf(prepared[i]))
    return { totalSize: list.reduce((sum, t) => sum + tensorByteLength(t), 0) }
  })
}

/**
 * model.safetensors.index.json as transformers writes it: Python's json.dumps(indent=2, sort_keys=True)
 * and a newline, so keys in code point order and everything past ASCII as \u escapes (ensure_ascii).
 */
function indexBytes(index: ModelIndex): Uint8Array {
  return new TextEncoder().encode(`${pythonJson(index, '')}\n`)
}

/** json.dumps(value, indent=2, sort_keys=True): built by hand, since JS objects reorder integer-like keys. */
function pythonJson(value: unknown, indent: string): string {
  const inner = `${indent}  `
  if (Array.isArray(value)) {
    return value.length === 0 ? '[]' : `[\n${value.map((v) => inner + pythonJson(v, inner)).join(',\n')}\n${indent}]`
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => compareCodePoints(a, b))
    return entries.length === 0 ? '{}' : `{\n${entries.map(([k, v]) => `${inner}${pythonJson(k, inner)}: ${pythonJson(v, inner)}`).join(',\n')}\n${indent}}`
  }
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}
