// A GGUF file to the Hugging Face folder transformers loads (convertModel and the CLI's `convert x.gguf OUT_DIR`):
// the parameters of src/gguf/hf-model.ts read a piece at a time (rows of a tensor, one expert of a stack),
// the converter's changes undone, converted to the chosen dtype and written into shards, with config.json,
// generation_config.json and the tokenizer's files, all published at once by writeModel (src/node/save-model.ts).
import { join } from 'node:path'
import { type ConvertTarget, convert } from '../core/convert.ts'
import { tensorByteLength } from '../format/layout.ts'
import { reshaped } from '../gguf/chunks.ts'
import { type GgufFile, openGguf } from '../gguf/file.ts'
import { configText, type HfTensor, planHfModel } from '../gguf/hf-model.ts'
import { tokenizerFiles } from '../gguf/hf-tokenizer.ts'
import type { GgufValue } from '../gguf/reader.ts'
import { Staging } from '../pool/staging.ts'
import type { OpenOptions, Source } from '../read/file.ts'
import { throwIfAborted } from '../sources/source.ts'
import { DEFAULT_MAX_SHARD_SIZE, planShards } from '../write/model-files.ts'
import { SafetensorsWriter } from '../write/writer.ts'
import type { FileSet } from './atomic-files.ts'
import { writeModel } from './save-model.ts'

/** Values per piece read: 4 MiB as F32 (a reordered tensor's pieces are whole heads, a transposed one is read whole). */
const PIECE_ELEMENTS = 1 << 20

/** Options of a GGUF's conversion to a folder: the GGUF's reads, and the parameters' dtype and shards. */
interface GgufModelOptions extends OpenOptions {
  /** @defaultValue 'F32': the values as ggml dequantizes them, exactly */
  dtype?: ConvertTarget
  /** @defaultValue 5 GB, as transformers shards */
  maxShardSize?: number
  /** Every tensor under its GGUF name and shape, as stored (nothing undone), the GGUF's keys in __metadata__. */
  raw?: boolean
}

/** A GGUF value as a string of __metadata__: a string as it is, anything else as JSON (arrays and bigints included). */
const metadataText = (value: GgufValue): string =>
  typeof value === 'string'
    ? value
    : JSON.stringify(typeof value === 'object' ? Array.from(value as ArrayLike<GgufValue>, (v) => (typeof v === 'bigint' ? String(v) : v)) : String(value))

/** The GGUF as it is: each tensor by its GGUF name, the keys as __metadata__ (no config or tokenizer files). */
function rawModel(file: GgufFile): { tensors: HfTensor[]; metadata: Record<string, string> } {
  const tensors = file.header.tensors.map((gguf) => ({ name: gguf.name, shape: [...gguf.shape], gguf, heads: 0, transpose: false, shift: 0 }))
  const metadata = Object.fromEntries(Object.entries(file.metadata).map(([key, value]) => [key, metadataText(value)]))
  return { tensors, metadata: { format: 'pt', ...metadata } }
}

const jsonBytes = (value: unknown) => new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`)

/**
 * A parameter's values as F32, a piece at a time, with what llama.cpp's converter did undone; each piece is valid
 * until the next is asked for.
 */
async function* parameterValues(file: GgufFile, t: HfTensor, staging: Staging, signal: AbortSignal | undefined): AsyncGenerator<Float32Array> {
  const { gguf, expert, heads, transpose, shift } = t
  const outer: Array<[number, number]> = expert === undefined ? [] : [[expert, expert + 1]]
  const stored = expert === undefined ? gguf.shape : gguf.shape.slice(1)
  const rows = stored.length < 2 || transpose ? 1 : stored[0]
  const rowElements = stored.reduce((a, b) => a * b, 1) / rows
  // Rows of one head come together: their order is undone within it.
  const unit = heads > 0 ? rows / heads : 1
  const step = Math.max(unit, Math.floor(PIECE_ELEMENTS / rowElements / unit) * unit)
  for (let first = 0; first < rows; first += step) {
    const last = Math.min(rows, first + step)
    const ranges = rows === 1 ? outer : [...outer, [first, last] as [number, number]]
    const out = staging.floats((last - first) * rowElements)
    const read =
      ranges.length === 0 ? file.getTensor(gguf.name, { dtype: 'F32', signal, out }) : file.getSlice(gguf.name, ranges, { dtype: 'F32', signal, out })
    let values = (await read).data as Float32Array
    const bytes = () => new Uint8Array(values.buffer, values.byteOffset, values.byteLength)
    if (heads > 0) values = new Float32Array(reshaped(bytes(), { rows: unit, columns: rowElements, pairs: true }, 4, true).buffer)
    if (transpose) values = new Float32Array(reshaped(bytes(), { rows: stored[0], columns: values.length / stored[0], transpose: true }, 4).buffer)
    if (shift !== 0) for (let i = 0; i < values.length; i++) values[i] -= shift
    yield values
  }
}

/** The transformers model of a GGUF: its parameters, and config.json, generation_config.json and the tokenizer's files. */
async function hfModel(
  file: GgufFile,
  dtype: ConvertTarget,
): Promise<{ tensors: HfTensor[]; metadata: Record<string, string>; others: Record<string, Uint8Array> }> {
  const model = await planHfModel(file)
  const arch = String(file.metadata['general.architecture'])
  const context = (model.config.max_position_embeddings ?? model.config.n_positions) as number | undefined
  const others = {
    'config.json': new TextEncoder().encode(configText({ ...model.config, dtype: { F32: 'float32', F16: 'float16', BF16: 'bfloat16' }[dtype] })),
    'generation_config.json': jsonBytes(model.generationConfig),
    ...tokenizerFiles(file, arch, context),
  }
  return { tensors: model.tensors, metadata: { format: 'pt' }, others }
}

/**
 * Writes the Hugging Face model of a GGUF file into `folder`, as {@link convertModel} does for a `.gguf` input.
 * Resolves to the names of the files written.
 */
export async function convertGguf(input: Source, folder: string, options: GgufModelOptions = {}): Promise<string[]> {
  const { dtype = 'F32', maxShardSize = DEFAULT_MAX_SHARD_SIZE, raw = false, ...read } = options
  const file = await openGguf(input, read)
  try {
    const { tensors, metadata, others } = raw ? { ...rawModel(file), others: {} } : await hfModel(file, dtype)
    const declared = (t: HfTensor) => ({ name: t.name, dtype, shape: t.shape })
    const shards = planShards(tensors, (t) => tensorByteLength(declared(t)), maxShardSize)
    const staging = new Staging()
    const plan = { shards: shards.map((s) => ({ file: s.file, names: s.tensors.map((t) => t.name) })) }
    const written = await writeModel(folder, plan, async (set: FileSet) => {
      let totalSize = 0
      for (const shard of shards) {
        const writer = SafetensorsWriter.create(await set.sink(join(folder, shard.file)), shard.tensors.map(declared), { metadata })
        try {
          for (const t of shard.tensors) {
            for await (const values of parameterValues(file, t, staging, options.signal)) {
              throwIfAborted(options.signal)
              await writer.write(t.name, dtype === 'F32' ? values : convert(values, 'F32', dtype))
            }
          }
          await writer.close()
        } catch (error) {
          await writer.abort(error)
          throw error
        }
        totalSize += writer.layout.fileSize - writer.layout.dataStart
      }
      for (const [name, bytes] of Object.entries(others)) {
        const sink = await set.sink(join(folder, name))
        await sink.write(bytes, 0)
        await sink.commit()
      }
      return { totalSize }
    })
    return [...written, ...Object.keys(others)]
  } finally {
    await file.close()
  }
}
