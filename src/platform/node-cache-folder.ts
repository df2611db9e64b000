// The persistent cache's storage on Node, Deno and Bun: a folder on disk (CacheStorage, src/platform/platform.ts).
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { type CacheStorage, type StoredEntry, storageError, tempName } from './platform.ts'

export async function cacheFolder(dir: string): Promise<CacheStorage> {
  try {
    await mkdir(dir, { recursive: true })
  } catch (cause) {
    throw storageError(cause, dir)
  }
  const path = (name: string) => join(dir, name)
  return {
    async read(name) {
      try {
        const bytes = await readFile(path(name))
        return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
        throw error
      }
    },
    // No fsync: a rename that a crash leaves pointing at incomplete data is caught by the entry's
    // checksum when read, and never served.
    async write(name, bytes) {
      const temp = path(tempName(name))
      try {
        await writeFile(temp, bytes)
        await rename(temp, path(name))
      } catch (error) {
        await rm(temp, { force: true }).catch(() => {})
        throw error
      }
    },
    delete: (name) => rm(path(name), { force: true }),
    async list() {
      const found: StoredEntry[] = []
      for (const name of await readdir(dir)) {
        // Gone between the listing and here (another process's eviction): not there, then.
        const info = await stat(path(name)).catch(() => undefined)
        if (info?.isFile()) found.push({ name, size: info.size, modified: info.mtimeMs })
      }
      return found
    },
  }
}
