// Files on disk (Node, Deno, Bun): reached only from the Node entry, which registers them for open()
// and openModel() (src/local-files.ts).
import { open as openFile, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SafetensorsError } from './errors.ts'
import type { LocalFiles } from './local-files.ts'
import { checkRange, throwIfAborted, type RangeSource } from './source.ts'

/** Bytes per positional read: large enough to cost nothing per call, small enough for an abort or a progress event to come soon. */
const FILE_CHUNK = 16 << 20

/** A file on disk. Reads go straight into the caller's buffer. */
export async function fileSource(path: string): Promise<RangeSource & { size: number }> {
  let handle: Awaited<ReturnType<typeof openFile>>
  try {
    handle = await openFile(path, 'r')
  } catch (cause) {
    throw new SafetensorsError('Io', `cannot open ${path}: ${(cause as Error).message}`, { cause })
  }
  let size: number
  try {
    ;({ size } = await handle.stat())
  } catch (cause) {
    await handle.close().catch(() => {})
    throw new SafetensorsError('Io', `cannot stat ${path}: ${(cause as Error).message}`, { cause })
  }
  const readInto = async (offset: number, target: Uint8Array, signal?: AbortSignal, onBytes?: (bytes: number) => void) => {
    checkRange(offset, target.length, size)
    // Positional reads in chunks: a single read is capped near 2 GiB, and chunks let an abort land and progress show.
    for (let done = 0; done < target.length; ) {
      throwIfAborted(signal)
      const chunk = Math.min(target.length - done, FILE_CHUNK)
      const { bytesRead } = await handle.read(target, done, chunk, offset + done).catch((cause: Error) => {
        throw new SafetensorsError('Io', `${path}: cannot read ${chunk} bytes at offset ${offset + done}: ${cause.message}`, { cause })
      })
      if (bytesRead === 0) throw new SafetensorsError('Io', `${path}: unexpected end of file at byte ${offset + done} (the file shrank?)`)
      done += bytesRead
      onBytes?.(bytesRead)
    }
  }
  return {
    size,
    readInto,
    async read(offset, length, signal, onBytes) {
      const bytes = new Uint8Array(length)
      await readInto(offset, bytes, signal, onBytes)
      return bytes
    },
    close: () => handle.close(),
  }
}

export const nodeFiles: LocalFiles = {
  open: fileSource,
  pathOf: (url) => fileURLToPath(url),
  async locateIndex(path, defaultIndex) {
    const index = (await stat(path).catch(() => undefined))?.isDirectory() ? join(path, defaultIndex) : path
    const folder = dirname(index)
    return { index, shard: (name) => join(folder, name) }
  },
}
