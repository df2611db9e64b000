// Files on disk (Node, Deno, Bun): the local files of open() and openModel() through #platform, and fileSource.
import type { Stats } from 'node:fs'
import { type FileHandle, open as openFile, stat } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SafetensorsError } from '../errors.ts'
import { checkRange, LOCAL_REQUEST_COST, type RangeSource, readOver, throwIfAborted, type WorkerReadable } from '../sources/source.ts'
import type { LocalFiles } from './platform.ts'

/** Bytes per positional read: large enough to cost nothing per call, small enough for an abort or a progress event to come soon. */
const FILE_CHUNK = 8 << 20

/** What a path that is not a regular file is, as messages say it; undefined for a file. */
function notAFile(stats: Stats): string | undefined {
  if (stats.isFile()) return undefined
  return stats.isDirectory() ? 'a folder' : stats.isFIFO() ? 'a named pipe' : stats.isSocket() ? 'a socket' : 'a device'
}

/**
 * A file on disk. Reads go straight into the caller's buffer.
 * @throws {@link SafetensorsError} `Io` when the file cannot be opened or read (the message names the path).
 */
export async function fileSource(path: string): Promise<
  RangeSource & {
    /** The file's size in bytes. */
    size: number
    /** @internal */
    forWorkers: WorkerReadable
  }
> {
  // Found before the open, which would wait for a writer forever on a named pipe.
  const kind = await stat(path).then(notAFile, () => undefined)
  if (kind !== undefined) throw new SafetensorsError('Io', `cannot open ${path}: it is ${kind}, not a file`, { path })
  let handle: Awaited<ReturnType<typeof openFile>>
  try {
    handle = await openFile(path, 'r')
  } catch (cause) {
    throw fileError('open', path, cause)
  }
  let size: number
  let modified: number
  try {
    ;({ size, mtimeMs: modified } = await handle.stat())
  } catch (cause) {
    await handle.close().catch(() => {})
    throw fileError('stat', path, cause)
  }
  /** Fills target[at, end) from the file at offset + at (a positional read may return less than asked). */
  const fill = async (target: Uint8Array, at: number, end: number, offset: number) => {
    for (let done = at; done < end; ) {
      const { bytesRead } = await handle.read(target, done, end - done, offset + done).catch((cause: Error) => {
        throw new SafetensorsError('Io', `${path}: cannot read ${end - done} bytes at offset ${offset + done}: ${systemMessage(cause)}`, { cause, path })
      })
      if (bytesRead === 0) throw new SafetensorsError('Io', `${path}: unexpected end of file at byte ${offset + done} (the file shrank?)`, { path })
      done += bytesRead
    }
  }
  // In chunks, with the next one always being read while the caller handles the bytes of this one
  // (progress, conversion as they arrive): so the disk and that work overlap. Chunks also keep each
  // read under the ~2 GiB cap of one read, and let an abort land between them.
  const readInto = async (offset: number, target: Uint8Array, signal?: AbortSignal, onBytes?: (bytes: number) => void) => {
    checkRange(offset, target.length, size)
    const chunk = (at: number) => fill(target, at, Math.min(at + FILE_CHUNK, target.length), offset)
    let pending: Promise<void> | undefined = chunk(0)
    try {
      for (let at = 0; at < target.length; at += FILE_CHUNK) {
        await pending
        throwIfAborted(signal)
        const end = Math.min(at + FILE_CHUNK, target.length)
        pending = end < target.length ? chunk(end) : undefined
        onBytes?.(end - at)
      }
    } catch (error) {
      await pending?.catch(() => {})
      throw error
    }
  }
  const source = {
    size,
    requestCost: LOCAL_REQUEST_COST,
    forWorkers: { fd: handle.fd, path, size, modified },
    readInto,
    read: readOver(readInto),
    close: () => {
      dropped.unregister(source)
      return handle.close().catch((cause: Error) => {
        throw fileError('close', path, cause)
      })
    },
  }
  dropped.register(source, handle, source)
  return source
}

/**
 * Closes the handle of a file source dropped without close() (a file the caller let go of): quietly, where Node
 * would close it on garbage collection with a warning (DEP0137). The registry holds the handle until then.
 */
const dropped = new FinalizationRegistry<FileHandle>((handle) => {
  handle.close().catch(() => {})
})

export const nodeFiles: LocalFiles = {
  open: fileSource,
  pathOf: (url) => fileURLToPath(url),
  async locateModel(path, names) {
    const isFolder = (await stat(path).catch(() => undefined))?.isDirectory()
    const shard = (name: string) => join(isFolder ? path : dirname(path), name)
    if (!isFolder) return { file: path, name: basename(path), shard }
    for (const name of names) if ((await stat(join(path, name)).catch(() => undefined))?.isFile()) return { file: join(path, name), name, shard }
    return undefined
  },
}

/**
 * An Io error about the file the caller named (never the temporary file beside it, which the caller
 * does not know of): "cannot write /models/out.safetensors: no space left on device (ENOSPC)".
 */
export function fileError(action: string, path: string, cause: unknown): SafetensorsError {
  return new SafetensorsError('Io', `cannot ${action} ${path}: ${systemMessage(cause)}`, { cause, path })
}

/** A system error's own words and code, without the syscall and the paths Node appends (a temporary file's). */
export function systemMessage(cause: unknown): string {
  const { code, message } = cause as { code?: unknown; message?: unknown }
  const text = String(message ?? cause)
  return typeof code === 'string' && text.startsWith(`${code}: `) ? `${text.slice(code.length + 2).split(', ')[0]} (${code})` : text
}
