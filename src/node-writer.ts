// Writing to disk (Node, Deno, Bun): reached only from the Node entry. Every file is written beside its
// target under a unique temporary name and renamed into place once complete, so a failure leaves the
// target as it was.
import { mkdir, open as openFile, readdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { SafetensorsError } from './errors.ts'
import { compareCodePoints, tensorByteLength } from './layout.ts'
import { DEFAULT_INDEX } from './model.ts'
import { named, type Prepared, prepare, type TensorCollection, type WriteOptions, type WriterSink } from './writer.ts'

/**
 * Files that appear together or not at all: each is written beside its target under a unique temporary
 * name, and publish() renames them all into place once every one is complete (a sharded model and its
 * index); discard() removes whatever was written.
 */
export interface FileSet {
  /** A sink for one file of the set; its commit() only completes the file (data synced, handle closed). */
  sink(path: string): Promise<WriterSink>
  publish(): Promise<void>
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
  const started = new Set<string>()
  return {
    async sink(path) {
      // Found before any byte is written: the rename at the end would fail on a folder.
      if ((await stat(path).catch(() => undefined))?.isDirectory()) throw new SafetensorsError('Io', `cannot write ${path}: it is a folder`)
      const temporary = `${path}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`
      const handle = await openFile(temporary, 'wx').catch((cause) => {
        throw fileError('create', path, cause)
      })
      started.add(temporary)
      let closed = false
      const close = async () => {
        if (!closed) {
          closed = true
          await handle.close()
        }
      }
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
    async publish() {
      for (const [temporary, path] of complete) {
        await rename(temporary, path)
        started.delete(temporary)
      }
      complete.length = 0
    },
    async discard() {
      await Promise.all([...started].map((temporary) => rm(temporary, { force: true })))
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
    // The caller's misuse stays a TypeError or RangeError; what else fails is the disk's.
    if (cause instanceof SafetensorsError || cause instanceof TypeError || cause instanceof RangeError) throw cause
    throw new SafetensorsError('Io', `writing failed: ${systemMessage(cause)}`, { cause })
  }
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

/**
 * Writes a model's index into the set (`index`: its file name; by default model.safetensors.index.json
 * when there is more than one shard, none for one), then publishes the set. Files of an earlier save
 * with another shard count would be loaded in place of these (a loader that finds model.safetensors
 * never looks for the index): they are removed, as transformers does, once the new ones are in place.
 * Returns the names written.
 */
export async function finishModel(
  folder: string,
  set: FileSet,
  shards: ReadonlyArray<{ file: string; names: readonly string[] }>,
  totalSize: number,
  options: { metadata?: Record<string, unknown>; index?: string } = {},
): Promise<string[]> {
  const names = shards.map((s) => s.file)
  const index = options.index ?? (shards.length > 1 ? DEFAULT_INDEX : undefined)
  if (index !== undefined) {
    const weightMap: Record<string, string> = {}
    for (const shard of shards) for (const name of shard.names) weightMap[name] = shard.file
    await writeParts(await set.sink(join(folder, index)), [[indexBytes(totalSize, weightMap, options.metadata), 0]])
    names.push(index)
  }
  await set.publish()
  const stale = (await readdir(folder)).filter((f) => SAVED_MODEL_FILE.test(f) && !names.includes(f))
  await Promise.all(stale.map((f) => rm(join(folder, f), { force: true })))
  return names
}

/**
 * Saves a sharded model as transformers does: model-0000i-of-0000n.safetensors plus
 * model.safetensors.index.json ({ metadata: { total_size }, weight_map }), or a single model.safetensors
 * when everything fits one shard. Tensors go to shards in the order given; the files appear together.
 * @throws {@link SafetensorsError} the codes of {@link planLayout} (`InvalidHeaderDeserialization`,
 * `ValidationOverflow`, `MisalignedSlice`, `HeaderTooLarge`) and `TensorInvalidInfo` (data not the size its
 * dtype and shape take), before anything is written; `Io` when a write fails (a full disk, EIO), naming the
 * output, with the target left untouched.
 */
export async function saveModel(folder: string, tensors: TensorCollection, options: SaveModelOptions = {}): Promise<string[]> {
  const list = named(tensors)
  const shards = planShards(list, tensorByteLength, options.maxShardSize ?? DEFAULT_MAX_SHARD_SIZE)
  // Every shard is validated before any is written.
  const prepared = shards.map((shard) => prepare(shard.tensors, options.metadata))
  await mkdir(folder, { recursive: true })
  return writeSet(async (set) => {
    for (const [i, shard] of shards.entries()) await writeParts(await set.sink(join(folder, shard.file)), partsOf(prepared[i]))
    const totalSize = list.reduce((sum, t) => sum + tensorByteLength(t), 0)
    return finishModel(
      folder,
      set,
      shards.map((s) => ({ file: s.file, names: s.tensors.map((t) => t.name) })),
      totalSize,
    )
  })
}

/** The files saveModel writes: model.safetensors, its shards and their index. */
const SAVED_MODEL_FILE = /^model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?$/

/**
 * model.safetensors.index.json as transformers writes it: Python's json.dumps(indent=2, sort_keys=True)
 * and a newline, so keys in code point order and everything past ASCII as \u escapes (ensure_ascii).
 */
function indexBytes(totalSize: number, weightMap: Record<string, string>, metadata: Record<string, unknown> = {}): Uint8Array {
  return new TextEncoder().encode(`${pythonJson({ metadata: { ...metadata, total_size: totalSize }, weight_map: weightMap }, '')}\n`)
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
