// Files written atomically (Node, Deno, Bun): every file is written beside its target under a unique
// temporary name and renamed into place once complete, so a failure leaves the target as it was. A set of
// files (a sharded model and its index) is published together (FileSet); src/node/save-model.ts builds the
// all-or-nothing model save on it.
import { constants } from 'node:fs'
import { copyFile, link, open as openFile, rename, rm, stat } from 'node:fs/promises'
import { SafetensorsError } from '../errors.ts'
import { fileError } from '../platform/node-files.ts'
import { named, type Prepared, prepare, type TensorCollection, type WriteOptions, type WriterSink } from '../write/writer.ts'
import { removeLeftovers, temporaryName, whileWriting } from './temporary-files.ts'

/** Makes the renames and removals in `folder` durable, so a power cut cannot reorder them (where a folder can be opened: not on Windows). */
export async function syncFolder(folder: string): Promise<void> {
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
 * name (src/node/temporary-files.ts), and publish() renames them all into place once every one is complete
 * (a sharded model and its index); discard() removes whatever was written, as an interrupted process does.
 */
export interface FileSet {
  /** A sink for one file of the set; its commit() only completes the file (data synced, handle closed). */
  sink(path: string): Promise<WriterSink>
  /** Renames the complete files (those `only` accepts, by default all) into place, in the order they completed. */
  publish(only?: (path: string) => boolean): Promise<void>
  discard(): Promise<void>
}

function fileSet(): FileSet {
  const complete: Array<[temporary: string, path: string]> = []
  /** Each temporary file not yet renamed, with what closes its handle (a deleted file keeps its space while open). */
  const started = new Map<string, () => Promise<void>>()
  let unregister: (() => void) | undefined
  const set: FileSet = {
    async sink(path) {
      // Found before any byte is written: the rename at the end would fail on a folder.
      if ((await stat(path).catch(() => undefined))?.isDirectory()) throw new SafetensorsError('Io', `cannot write ${path}: it is a folder`, { path })
      await removeLeftovers(path)
      const temporary = temporaryName(path)
      unregister ??= whileWriting(() => set.discard())
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
      if (started.size === 0) unregister?.()
    },
    async discard() {
      unregister?.()
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
  return set
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

export async function writeParts(sink: WriterSink, parts: Parts): Promise<void> {
  for (const [bytes, position] of parts) await sink.write(bytes, position)
  await sink.commit()
}

/**
 * Runs `write` on a new file set and publishes it; on any failure nothing of it is left and the targets are
 * untouched. A failure of the disk's is an Io error about `target`, the file or folder written.
 */
export async function writeSet<T>(target: string, write: (set: FileSet) => Promise<T>): Promise<T> {
  const set = fileSet()
  try {
    const result = await write(set)
    await set.publish()
    return result
  } catch (cause) {
    await set.discard()
    if (isOwnError(cause)) throw cause
    throw fileError('write', target, cause)
  }
}

/** An error that escapes a write as it is: a SafetensorsError, or the caller's misuse (TypeError, RangeError). What else fails is the disk's. */
export function isOwnError(cause: unknown): boolean {
  return cause instanceof SafetensorsError || cause instanceof TypeError || cause instanceof RangeError
}

export function* partsOf({ layout, chunks }: Prepared): Generator<readonly [Uint8Array, number]> {
  yield [layout.head, 0]
  for (const [i, e] of layout.entries.entries()) yield [chunks[i], layout.dataStart + e.dataOffsets[0]]
}

/**
 * Writes `tensors` to `path` atomically.
 * @throws {@link SafetensorsError} the codes of {@link planLayout} (`InvalidHeaderDeserialization`,
 * `ValidationOverflow`, `MisalignedSlice`, `HeaderTooLarge`) and `TensorInvalidInfo` (data not the size its
 * dtype and shape take), before anything is written; `Io` when a write fails (a full disk, EIO), naming the
 * output, with the target left untouched.
 * @throws TypeError for `keepOrder`, an option of SafetensorsWriter.create only.
 */
export async function writeFile(path: string, tensors: TensorCollection, options: WriteOptions = {}): Promise<void> {
  const prepared = prepare(named(tensors), options, 'writeFile')
  await writeSet(path, async (set) => writeParts(await set.sink(path), partsOf(prepared)))
}

/** Error codes of a file system without hard links (FAT, exFAT, some network shares). */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS'])

/** Makes `to` a second name of the file `from`, which must not exist yet; a copy where there are no hard links. */
export async function linkOrCopy(from: string, to: string): Promise<void> {
  try {
    await link(from, to)
  } catch (error) {
    if (!NO_HARD_LINKS.has((error as NodeJS.ErrnoException).code!)) throw error
    await copyFile(from, to, constants.COPYFILE_EXCL)
  }
}
