// A model save (saveModel, and convertModel through writeModel): a folder of shards and an index, published
// all-or-nothing for any reader that follows the index, one save at a time (src/node/folder-lock.ts).
import { mkdir, readdir, rm, rmdir, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { SafetensorsError } from '../errors.ts'
import { tensorByteLength } from '../format/layout.ts'
import { DEFAULT_INDEX, type ModelIndex, parseIndex } from '../format/model-index.ts'
import { fileError, fileSource } from '../platform/node-files.ts'
import { readSmallFile } from '../read/small-file.ts'
import { DEFAULT_MAX_SHARD_SIZE, indexBytes, planShards } from '../write/model-files.ts'
import { named, prepare, type TensorCollection, type WriteOptions } from '../write/writer.ts'
import { type FileSet, isOwnError, linkOrCopy, partsOf, syncFolder, writeParts, writeSet } from './atomic-files.ts'
import { isStaleLockFile, lockFolder, SAVE_LOCK } from './folder-lock.ts'
import { uniqueId, whileWriting } from './temporary-files.ts'

/** Options of saveModel. */
export interface SaveModelOptions extends WriteOptions {
  /**
   * Largest shard in bytes of tensor data (default 5 GB, as transformers). A larger tensor gets a shard alone.
   * @defaultValue 5000000000
   */
  maxShardSize?: number
}

/** What a model save writes: its shards (file names and the tensors in each) and the name of its index, if it has one. */
interface ModelPlan {
  shards: ReadonlyArray<{ file: string; names: readonly string[] }>
  /** By default model.safetensors.index.json when there is more than one shard, none for one (model.safetensors alone). */
  index?: string
}

/** What a model save's `write` reports once its shards are in the set: the index's total_size and its other metadata. */
interface ModelWritten {
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
  // A save that fails or is interrupted leaves what was there before, and before it there was no folder.
  let created: string | undefined
  const removeCreated = async () => {
    if (created !== undefined) await removeEmptyFolders(folder, created)
  }
  const unregister = whileWriting(removeCreated, 'folders')
  try {
    created = await mkdir(folder, { recursive: true }).catch((cause) => {
      throw fileError('create the folder', folder, cause)
    })
    return await saveLocked(folder, plan, write)
  } catch (cause) {
    await removeCreated()
    throw cause
  } finally {
    unregister()
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
    await writeSet(folder, async (set) => {
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
    bytes = await readSmallFile(source, indexPath)
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
    throw new SafetensorsError('Io', `cannot stat ${path}: ${(cause as Error).message}`, { cause, path })
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
  await writeSet(join(folder, index), async (set) => writeParts(await set.sink(join(folder, index)), [[indexBytes({ ...current, weight_map: weightMap }), 0]]))
  await syncFolder(folder)
}

/**
 * What a save leaves behind when it stops: `<file>.<pid>-<host>-<id>.tmp` (fileSet, being written; before
 * version 0.2, `<file>.<id>.tmp`) and `<file>.<id>.old` (pointAtBackups).
 */
const LEFTOVER = /^(.+)\.(?:\d+-[0-9a-z]+-)?[0-9a-z]{8,}\.(tmp|old)$/

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
    if (isSaveFile(file) || (leftover && isSaveFile(leftover[1])) || (await isStaleLockFile(folder, file))) stale.push(file)
  }
  // Indexes first: a reader of an index whose shards went first would find it broken, rather than gone.
  stale.sort((a, b) => Number(b.endsWith('.index.json')) - Number(a.endsWith('.index.json')))
  for (const file of stale) await rm(join(folder, file), { force: true })
  await syncFolder(folder)
}

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
 * @throws TypeError for `keepOrder`, an option of SafetensorsWriter.create only.
 */
export async function saveModel(folder: string, tensors: TensorCollection, options: SaveModelOptions = {}): Promise<string[]> {
  const list = named(tensors)
  const shards = planShards(list, tensorByteLength, options.maxShardSize ?? DEFAULT_MAX_SHARD_SIZE)
  // Every shard is validated before any is written.
  const prepared = shards.map((shard) => prepare(shard.tensors, options, 'saveModel'))
  const plan = { shards: shards.map((s) => ({ file: s.file, names: s.tensors.map((t) => t.name) })) }
  return writeModel(folder, plan, async (set) => {
    for (const [i, shard] of shards.entries()) await writeParts(await set.sink(join(folder, shard.file)), partsOf(prepared[i]))
    return { totalSize: list.reduce((sum, t) => sum + tensorByteLength(t), 0) }
  })
}
