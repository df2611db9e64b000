// Local files are the one thing a portable entry cannot reach: the Node entry (src/node.ts) registers
// how to open them, so no module of the browser entry imports a Node built-in, not even through a
// dynamic import() (bundlers resolve those too, and fail on them).
import type { RangeSource } from './source.ts'

export interface LocalFiles {
  /** A RangeSource over the file at `path`. */
  open(path: string): Promise<RangeSource>
  /** The path of a `file:` URL. */
  pathOf(url: URL): string
  /**
   * The file a model is read from (`name`: its file name): `path` itself, or when it is a folder the
   * first of `names` there (undefined when it holds none); and where its shards are.
   */
  locateModel(path: string, names: readonly string[]): Promise<{ file: string; name: string; shard(name: string): string } | undefined>
}

let registered: LocalFiles | undefined

/** Called once by the Node entry. */
export function registerLocalFiles(files: LocalFiles): void {
  registered = files
}

/** The registered file access, if this entry has one. */
export function localFiles(): LocalFiles | undefined {
  return registered
}

/** The registered file access, or the TypeError that says which entry has it. */
export function requireLocalFiles(what: string): LocalFiles {
  if (registered) return registered
  throw new TypeError(
    `${what}: local files can only be read through the Node entry of safetensors-wasm (Node, Deno, Bun); here pass a URL, Blob, bytes or a RangeSource`,
  )
}
