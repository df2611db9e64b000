// ggufStream(): a Hugging Face model folder as a GGUF v3 file for llama.cpp, as a stream in bounded memory
// (docs/gguf.md). Everything before the first tensor byte (config.json, the tokenizer, every shard's
// header) is read and checked first, so the header, whose offsets follow from the shapes and types, goes
// out first; then each tensor a chunk at a time, through one wasm memory sized once: read, converted or
// quantized there in place, and copied out with its rows in llama.cpp's order.
import { byteLengthOf } from '../core/convert.ts'
import type { DType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { readJsonObject } from '../format/model-config.ts'
import { toRangeSource } from '../read/file.ts'
import { type Located, locate, type OpenModelOptions, openLocated, type SafetensorsModel } from '../read/model.ts'
import { readSmallFile } from '../read/small-file.ts'
import { ChunkConverter, pulledStream, StreamInput } from '../read/streams.ts'
import { sequentialReader } from '../sources/downloads.ts'
import { type ProgressCallback, ProgressMeter } from '../sources/progress.ts'
import { isMissingFile, type ModelFiles, type ModelFolder } from '../sources/source.ts'
import { alignUp, type EncodedHeader, encodeHeader, type GgufDtype } from './format.ts'

export type { GgufDtype } from './format.ts'

import { modelMetadata, readModelConfig } from './metadata.ts'
import { Q8_0_BLOCK, q8_0ByteLength, quantizeQ8_0 } from './q8_0.ts'
import { type PlannedTensor, planTensors } from './tensors.ts'
import { tokenizerMetadata } from './tokenizer.ts'

/** Options of {@link ggufStream}: those of {@link index!openModel} for reading the model, and what the GGUF holds. */
export interface GgufOptions extends OpenModelOptions {
  /**
   * The type of the weights: norms and other 1-D tensors are F32 whatever it is, and under Q8_0 a tensor
   * whose rows are not whole blocks of 32 is F16 (as llama.cpp's converter does).
   * @defaultValue 'F16', as llama.cpp's convert_hf_to_gguf.py
   */
  dtype?: GgufDtype
  /**
   * One series for the whole conversion: `total` is the bytes of tensor data to read, the same in every
   * event from the first; `loaded` the bytes read so far; the last event has loaded === total.
   * @defaultValue none
   */
  onProgress?: ProgressCallback
}

const DTYPES: readonly GgufDtype[] = ['F32', 'F16', 'BF16', 'Q8_0']

/** Elements per chunk: 4 MiB as F32, a multiple of a Q8_0 block; a chunk of a reordered tensor is whole heads (at least one). */
const CHUNK_ELEMENTS = 1 << 20

/** The model's file `name` beside its weights, whole; undefined for a missing optional one. */
async function readBeside(located: Located, name: string, required: boolean, options: OpenModelOptions): Promise<Uint8Array | undefined> {
  const found = await located.beside(name)
  const where = found instanceof URL || typeof found === 'string' ? String(found) : name
  let missing: SafetensorsError | undefined
  if (found !== undefined) {
    try {
      const source = await toRangeSource(found, options)
      try {
        return await readSmallFile(source, where, options.signal, name)
      } finally {
        await source.close?.()
      }
    } catch (error) {
      if (!isMissingFile(error)) throw error
      missing = error as SafetensorsError
    }
  }
  // Without the system's error as its cause: it is about the input, not a file being written.
  if (required)
    throw new SafetensorsError('Io', `${where} is missing, and a GGUF needs it`, { status: missing?.status, url: missing?.url, path: missing?.path })
}

const elementsOf = (t: PlannedTensor) => t.dims.reduce((a, b) => a * b, 1)

/** A tensor's elements per chunk: whole heads for a reordered tensor, else whole Q8_0 blocks. */
function chunkElements(t: PlannedTensor): number {
  const unit = t.heads > 0 ? elementsOf(t) / t.heads : Q8_0_BLOCK
  return Math.min(elementsOf(t), Math.max(unit, Math.floor(CHUNK_ELEMENTS / unit) * unit))
}

/** The dtype a tensor has in wasm memory before it is copied out: its type, or F32, which the Q8_0 kernel reads. */
function middleOf(t: PlannedTensor): DType {
  return t.type === 'Q8_0' ? 'F32' : t.type
}

/**
 * A copy of `heads` heads of rows with each head's rows reordered as llama.cpp's converter's `permute`:
 * reshape(heads, 2, rows / heads / 2, ...).swapaxes(1, 2), so that row j of a head's first half and row j
 * of its second half become rows 2j and 2j + 1.
 */
function permuteRows(bytes: Uint8Array, heads: number, rowsPerHead: number): Uint8Array {
  const out = new Uint8Array(bytes.length)
  const rowBytes = bytes.length / heads / rowsPerHead
  const half = rowsPerHead / 2
  for (let row = 0; row < heads * rowsPerHead; row++) {
    const head = row - (row % rowsPerHead)
    const from = head + ((row - head) % 2) * half + Math.floor((row - head) / 2)
    out.set(bytes.subarray(from * rowBytes, (from + 1) * rowBytes), row * rowBytes)
  }
  return out
}

/**
 * The GGUF's bytes after its header: each tensor's data, chunk by chunk, then its padding. A quantized module's
 * logical tensor comes from `model`'s stream of its values (already in the dtype written, or F32 for Q8_0).
 */
async function* tensorBytes(
  header: EncodedHeader,
  tensors: PlannedTensor[],
  signal: AbortSignal,
  meter: ProgressMeter | undefined,
  model: SafetensorsModel,
): AsyncGenerator<Uint8Array> {
  const converter = new ChunkConverter(
    Math.max(0, ...tensors.map((t) => Math.max(t.logical ? 0 : byteLengthOf(t.info.dtype, chunkElements(t)), byteLengthOf(middleOf(t), chunkElements(t))))),
  )
  // Over HTTP the next chunks, of this tensor and the ones after it, are fetched in parallel while this one is converted and taken.
  const input = sequentialReader(
    tensors
      .filter((t) => !t.logical)
      .map(({ file, info }) => ({ source: file.source, offset: file.header.dataStart + info.dataOffsets[0], length: info.byteLength })),
    signal,
  )
  try {
    for (const [index, t] of tensors.entries()) {
      const { file, info } = t
      const count = elementsOf(t)
      const per = chunkElements(t)
      const logical = t.logical ? new StreamInput(model.stream(info.name, { dtype: middleOf(t), signal })) : undefined
      // A logical tensor's values come in the dtype asked for: its "conversion" is a copy.
      const from = logical ? middleOf(t) : info.dtype
      for (let first = 0; first < count; first += per) {
        const n = Math.min(per, count - first)
        const inBytes = byteLengthOf(from, n)
        let arrived = 0
        const onBytes = (bytes: number) => {
          arrived += bytes
          meter?.arrived(bytes)
        }
        const fill = logical ? async (target: Uint8Array) => onBytes(await logical.fill(target)) : (target: Uint8Array) => input.read(target, onBytes)
        let out = await converter.convert(from, middleOf(t), logical ? 'little' : file.byteOrder, inBytes, fill)
        // A source that does not stream tells of its bytes only now.
        meter?.arrived(inBytes - arrived)
        if (t.type === 'Q8_0') {
          // In place: the blocks are narrower than the F32 they come from.
          out = quantizeQ8_0(new Float32Array(out.buffer, out.byteOffset, n), new Uint8Array(out.buffer, out.byteOffset, q8_0ByteLength(n)), {
            name: info.name,
            first,
          })
        }
        // Q8_0 blocks lie within rows, so reordering rows after quantizing is reordering them before.
        yield t.heads > 0 ? permuteRows(out, (n * t.heads) / count, info.shape[0] / t.heads) : out.slice()
      }
      const size = header.sizes[index]
      if (alignUp(size) > size) yield new Uint8Array(alignUp(size) - size)
    }
  } finally {
    input.close()
  }
}

/** A GGUF about to be streamed: its tensors, its size and its stream. */
export interface GgufPlan {
  tensors: ReadonlyArray<{ type: GgufDtype }>
  fileSize: number
  stream: ReadableStream<Uint8Array>
}

/** Reads and checks everything a GGUF of `input` needs before its first byte, and makes its stream. */
export async function planGguf(input: string | URL | ModelFiles | ModelFolder, options: GgufOptions = {}): Promise<GgufPlan> {
  const { dtype = 'F16', onProgress, ...read } = options
  if (!DTYPES.includes(dtype)) throw new TypeError(`dtype must be ${DTYPES.join(', ')}, got ${JSON.stringify(dtype)}`)
  const meter = onProgress && new ProgressMeter(onProgress)
  const located = await locate(input)
  const json = async (name: string, required: boolean) => {
    const bytes = await readBeside(located, name, required, read)
    return bytes && readJsonObject(bytes, name).value
  }
  // The weights first: a missing model says so before anything about the files beside it.
  const model = await openLocated(located, read)
  let tensors: PlannedTensor[]
  let header: EncodedHeader
  try {
    const config = readModelConfig((await json('config.json', true))!)
    const tokenizer = await json('tokenizer.json', true)
    const tokenizerConfig = await json('tokenizer_config.json', false)
    const jinja = await readBeside(located, 'chat_template.jinja', false, read)
    const metadata = [...modelMetadata(config, dtype), ...tokenizerMetadata(tokenizer, tokenizerConfig, jinja && new TextDecoder().decode(jinja), config)]
    tensors = planTensors(model, config, dtype)
    header = encodeHeader(metadata, tensors)
  } catch (error) {
    await model.close()
    throw error
  }
  // A logical tensor's bytes are its values, as read.
  meter?.asked(tensors.reduce((sum, t) => sum + (t.logical ? byteLengthOf(middleOf(t), elementsOf(t)) : t.info.byteLength), 0))
  meter?.arrived(0)
  async function* bytes(signal: AbortSignal) {
    yield header.head
    yield* tensorBytes(header, tensors, signal, meter, model)
  }
  const stream = pulledStream(options.signal, 'converting to GGUF', bytes, 0, () => model.close())
  return { tensors, fileSize: header.fileSize, stream }
}

/** What {@link ggufStream} resolves with: the GGUF's bytes, and their number, known before the first. */
export type GgufStream = ReadableStream<Uint8Array> & {
  /** The GGUF's size in bytes: what a Worker's `new FixedLengthStream(n)` needs to store the stream in R2. */
  readonly byteLength: number
}

/**
 * A model (what {@link index!openModel} takes: a folder, an index path or URL, the files picked in a page, a
 * {@link index!ModelFolder} such as {@link index!r2Model}) as a GGUF v3 file for llama.cpp, streamed in bounded memory:
 * LlamaForCausalLM and MistralForCausalLM (as `llama`, q_proj and k_proj reordered as llama.cpp's converter
 * does) and Qwen2ForCausalLM (`qwen2`); the hyperparameters from config.json; a byte-level BPE tokenizer
 * from tokenizer.json, tokenizer_config.json and chat_template.jinja. Resolves once all of them and every
 * shard's header are read and checked, before any tensor byte; the stream's `byteLength` is the file's size.
 * @throws {@link index!SafetensorsError} `UnsupportedConversion` for another architecture (the message names it and
 * the supported ones), a RoPE scaling, a tokenizer that is not byte-level BPE or whose pre-tokenizer
 * llama.cpp does not implement, a tensor that maps to no GGUF tensor or is not floating-point (named);
 * `InvalidHeaderDeserialization` for a config.json or tokenizer file that is not the JSON it should be (a
 * missing hyperparameter named); `Io` for a missing config.json or tokenizer.json (named) and a read that
 * fails; any code of {@link index!openModel}; `Aborted`. After it resolves, the same codes come as the stream's error.
 * @throws TypeError for a `dtype` other than F32, F16, BF16 or Q8_0, an `onProgress` that is not a function,
 * or an input openModel does not take.
 */
export async function ggufStream(input: string | URL | ModelFiles | ModelFolder, options: GgufOptions = {}): Promise<GgufStream> {
  const { stream, fileSize } = await planGguf(input, options)
  return Object.defineProperty(stream, 'byteLength', { value: fileSize, enumerable: true }) as GgufStream
}
