// Writing to disk (Node, Deno, Bun): reached only from the Node entry. Every file is written beside its
// target under a unique temporary name and renamed into place once complete, so a failure leaves the
// target as it was.
import { mkdir, open as openFile, readdir, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { SafetensorsError } from './errors.ts'
import { compareCodePoints, tensorByteLength } from './layout.ts'
import { DEFAULT_INDEX } from './model.ts'
import { named, prepare, type Prepared, type TensorCollection, type WriteOptions, type WriterSink } from './writer.ts'

/** A file on disk, written beside the target under a temporary name and renamed into place at the end. */
export async function fileSink(path: string): Promise<WriterSink> {
  const temporary = `${path}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`
  const handle = await openFile(temporary, 'wx').catch((cause) => {
    throw new SafetensorsError('Io', `cannot create ${temporary}: ${(cause as Error).message}`, { cause })
  })
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
      for (let done = 0; done < bytes.length; ) {
        const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position + done)
        done += bytesWritten
      }
    },
    async commit() {
      await handle.sync()
      await close()
      await rename(temporary, path)
    },
    async abort() {
      await close().catch(() => {})
      await rm(temporary, { force: true })
    },
  }
}

/** Writes `parts` ([bytes, position]) through a file sink; on any failure the target is untouched and nothing is left. */
async function writeAtomically(path: string, parts: Iterable<readonly [Uint8Array, number]>): Promise<void> {
  const sink = await fileSink(path)
  try {
    for (const [bytes, position] of parts) await sink.write(bytes, position)
    await sink.commit()
  } catch (cause) {
    await sink.abort(cause)
    throw cause instanceof SafetensorsError ? cause : new SafetensorsError('Io', `writing ${path} failed: ${(cause as Error).message}`, { cause })
  }
}

function* partsOf({ layout, chunks }: Prepared): Generator<readonly [Uint8Array, number]> {
  yield [layout.head, 0]
  for (const [i, e] of layout.entries.entries()) yield [chunks[i], layout.dataStart + e.dataOffsets[0]]
}

/** Writes `tensors` to `path` atomically. */
export async function writeFile(path: string, tensors: TensorCollection, options: WriteOptions = {}): Promise<void> {
  await writeAtomically(path, partsOf(prepare(named(tensors), options.metadata)))
}

export interface SaveModelOptions extends WriteOptions {
  /** Largest shard in bytes of tensor data (default 5 GB, as transformers). A larger tensor gets a shard alone. */
  maxShardSize?: number
}

/**
 * Saves a sharded model as transformers does: model-0000i-of-0000n.safetensors plus
 * model.safetensors.index.json ({ metadata: { total_size }, weight_map }), or a single model.safetensors
 * when everything fits one shard. Tensors go to shards in the order given.
 */
export async function saveModel(folder: string, tensors: TensorCollection, options: SaveModelOptions = {}): Promise<string[]> {
  const maxShardSize = options.maxShardSize ?? 5_000_000_000
  const list = named(tensors)
  const shards: Array<typeof list> = []
  let size = 0
  for (const t of list) {
    const bytes = tensorByteLength(t)
    if (shards.length === 0 || (size + bytes > maxShardSize && size > 0)) {
      shards.push([])
      size = 0
    }
    shards[shards.length - 1].push(t)
    size += bytes
  }
  if (shards.length === 0) shards.push([])
  // Every shard is validated before any is written.
  const prepared = shards.map((shard) => prepare(shard, options.metadata))
  await mkdir(folder, { recursive: true })
  const count = shards.length
  const names = count === 1 ? ['model.safetensors'] : shards.map((_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.safetensors`)
  for (let i = 0; i < count; i++) await writeAtomically(join(folder, names[i]), partsOf(prepared[i]))
  if (count > 1) {
    const weightMap: Record<string, string> = {}
    shards.forEach((shard, i) => shard.forEach((t) => (weightMap[t.name] = names[i])))
    const totalSize = list.reduce((sum, t) => sum + tensorByteLength(t), 0)
    await writeIndex(join(folder, DEFAULT_INDEX), totalSize, weightMap)
    names.push(DEFAULT_INDEX)
  }
  // Files of an earlier save with another shard count would be loaded in place of these (a loader that
  // finds model.safetensors never looks for the index): remove them, as transformers does, once the new
  // ones are complete.
  const stale = (await readdir(folder)).filter((f) => SAVED_MODEL_FILE.test(f) && !names.includes(f))
  await Promise.all(stale.map((f) => rm(join(folder, f), { force: true })))
  return names
}

/** The files saveModel writes: model.safetensors, its shards and their index. */
const SAVED_MODEL_FILE = /^model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?$/

/**
 * model.safetensors.index.json as transformers writes it: Python's json.dumps(indent=2, sort_keys=True)
 * and a newline, so keys in code point order and everything past ASCII as \u escapes (ensure_ascii).
 */
export async function writeIndex(path: string, totalSize: number, weightMap: Record<string, string>, metadata: Record<string, unknown> = {}): Promise<void> {
  const text = pythonJson({ metadata: { ...metadata, total_size: totalSize }, weight_map: weightMap }, '')
  await writeAtomically(path, [[new TextEncoder().encode(`${text}\n`), 0]])
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
