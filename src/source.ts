// Where file bytes come from. Every kind of input (memory, Blob, URL, file) is read through this one
// interface, so the readers ask for exactly the byte ranges they need.
import { SafetensorsError } from './errors.ts'

export interface RangeSource {
  /** Total size in bytes, when known before the first read. */
  readonly size?: number
  /** Resolves to exactly `length` bytes starting at `offset`, or rejects. */
  read(offset: number, length: number, signal?: AbortSignal): Promise<Uint8Array>
  close?(): Promise<void>
}

/** A RangeSource over a file on disk (Node only: node:fs is loaded on first use). */
export async function fileSource(path: string): Promise<RangeSource & { size: number }> {
  const fs = await import('node:fs/promises')
  let handle: Awaited<ReturnType<typeof fs.open>>
  try {
    handle = await fs.open(path, 'r')
  } catch (cause) {
    throw new SafetensorsError('Io', `cannot open ${path}: ${(cause as Error).message}`, { cause })
  }
  const { size } = await handle.stat()
  return {
    size,
    async read(offset, length) {
      const bytes = new Uint8Array(length)
      let done = 0
      while (done < length) {
        const { bytesRead } = await handle.read(bytes, done, length - done, offset + done)
        if (bytesRead === 0) throw new SafetensorsError('Io', `${path}: unexpected end of file at byte ${offset + done} (wanted ${length} bytes from ${offset})`)
        done += bytesRead
      }
      return bytes
    },
    close: () => handle.close(),
  }
}
