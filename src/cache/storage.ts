// Where the persistent cache (src/cache/cache.ts) keeps its entries in browsers and workers: the Origin Private
// File System behind the CacheStorage interface (src/platform/platform.ts), so the cache itself is portable; a
// folder on disk is the Node side's (#platform).
import { type CacheStorage, type StoredEntry, storageError, tempName } from '../platform/platform.ts'

// The parts of the File System API used here; TypeScript's DOM library has no AsyncIterable entries().
interface OpfsFile {
  getFile(): Promise<File>
  createWritable(): Promise<{ write(data: Uint8Array): Promise<void>; close(): Promise<void>; abort(): Promise<void> }>
  move(name: string): Promise<void>
}
interface OpfsFolder {
  getDirectoryHandle(name: string, options?: { create?: boolean }): Promise<OpfsFolder>
  getFileHandle(name: string, options?: { create?: boolean }): Promise<OpfsFile>
  removeEntry(name: string): Promise<void>
  entries(): AsyncIterable<[string, { kind: string }]>
}

const isNotFound = (error: unknown) => (error as DOMException)?.name === 'NotFoundError'

/**
 * The OPFS folder `name` (created if needed) of this origin; undefined where there is no usable OPFS: no
 * navigator.storage.getDirectory (WebKitGTK, a runtime outside browsers), or a root it refuses (a private window).
 */
export async function opfsStorage(name: string): Promise<CacheStorage | undefined> {
  const storage = (globalThis as unknown as { navigator?: { storage?: { getDirectory?(): Promise<OpfsFolder> } } }).navigator?.storage
  if (typeof storage?.getDirectory !== 'function') return undefined
  const root = await storage.getDirectory().catch(() => undefined)
  if (root === undefined) return undefined
  let folder: OpfsFolder
  try {
    folder = await root.getDirectoryHandle(name, { create: true })
  } catch (cause) {
    // An invalid folder name is the caller's mistake, as the platform says.
    if (cause instanceof TypeError) throw cause
    throw storageError(cause, `${JSON.stringify(name)} in the Origin Private File System`)
  }
  const remove = (entry: string) =>
    folder.removeEntry(entry).catch((error: unknown) => {
      if (!isNotFound(error)) throw error
    })
  return {
    async read(entry) {
      try {
        const file = await (await folder.getFileHandle(entry)).getFile()
        return new Uint8Array(await file.arrayBuffer())
      } catch (error) {
        if (isNotFound(error)) return undefined
        throw error
      }
    },
    async write(entry, bytes) {
      const temp = tempName(entry)
      try {
        const handle = await folder.getFileHandle(temp, { create: true })
        const writable = await handle.createWritable()
        try {
          await writable.write(bytes)
          await writable.close()
        } catch (error) {
          await writable.abort().catch(() => {})
          throw error
        }
        await handle.move(entry)
      } catch (error) {
        await remove(temp).catch(() => {})
        throw error
      }
    },
    delete: remove,
    async list() {
      const found: StoredEntry[] = []
      for await (const [entry, handle] of folder.entries()) {
        if (handle.kind !== 'file') continue
        // Gone between the listing and here (another tab's eviction): not there, then.
        const file = await (handle as unknown as OpfsFile).getFile().catch(() => undefined)
        if (file) found.push({ name: entry, size: file.size, modified: file.lastModified })
      }
      return found
    },
  }
}

/** Where a browser has no usable OPFS: holds nothing, and each write fails with `reason` (the cache warns once). */
export function noStorage(reason: string): CacheStorage {
  return {
    read: async () => undefined,
    write: async () => {
      throw new Error(reason)
    },
    delete: async () => {},
    list: async () => [],
  }
}
