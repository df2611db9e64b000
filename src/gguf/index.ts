// ggufStream(): a Hugging Face model folder as a GGUF v3 file for llama.cpp, as a stream in bounded memory
// (docs/gguf.md). Everything before the first tensor byte (config.json, the tokenizer, every shard's
// header) is read and checked first, so the header, whose offsets follow from the shapes and types, goes
// out first; then each tensor a chunk at a time, through one wasm memory sized once: read, converted there,
// changed as llama.cpp's converter changes it (rows reordered, transposed, norms shifted), quantized in place,
// and copied out. An MoE layer's experts go into their stack one after the other, a chunk at a time. A chunk is
// bounded whatever the tensor: a head larger than a chunk is reordered a few rows of each half at a time, and a
// transposed tensor larger than GGUF_CHUNKS.transposed (chunks.ts) a block of its columns at a time.
import { byteLengthOf } from '../core/convert.ts'
import type { DType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { elementsOf } from '../format/header.ts'
import { jsonFileError } from '../format/json-values.ts'
import { readJsonObject } from '../format/model-config.ts'
import type { SliceRange } from '../format/slice.ts'
import { type Located, locate, type OpenModelOptions, openLocated, readBeside, type SafetensorsModel } from '../read/model.ts'
import { ChunkConverter, pulledStream } from '../read/streams.ts'
import { type SourceRange, sequentialReader } from '../sources/downloads.ts'
import { type ProgressCallback, ProgressMeter } from '../sources/progress.ts'
import type { ModelFiles, ModelFolder } from '../sources/source.ts'
import { FILE_TYPES, fileTypeOf, GGUF_DTYPE_NAMES, type GgufDtype, ggufDtypeOf } from './file-types.ts'
import { alignUp, type EncodedHeader, encodeHeader } from './format.ts'
import { GGML_TYPES, type GgmlType } from './ggml-types.ts'
import { loadGgmlQuantizers } from './kernels.ts'

export type { GgufDtype } from './file-types.ts'

import { type Chunk, largestChunk, partChunks, permuteRows, readColumns, transposed } from './chunks.ts'
import type { QuantizedType } from './ggml-quantizers.ts'
import { conversionNotes, modelMetadata, readModelConfig } from './metadata.ts'
import type { SentencePieceModel } from './sentencepiece.ts'
import { type FloatDtype, type PlannedTensor, planTensors, type TensorPart } from './tensors.ts'
import { tokenizerMetadata } from './tokenizer.ts'

/** Options of {@link ggufStream}: those of {@link index!openModel} for reading the model, and what the GGUF holds. */
export interface GgufOptions extends OpenModelOptions {
  /**
   * The type of the weights, in any case: F32, F16 or BF16 as llama.cpp's converter writes them (norms and other
   * 1-D tensors F32 whatever it is), or a file type of llama.cpp's `llama-quantize` (Q4_K_M, Q8_0, ...), each
   * tensor of the type that quantizer gives it, with the same bytes (docs/gguf.md).
   * @defaultValue 'F16', as llama.cpp's convert_hf_to_gguf.py
   */
  dtype?: GgufDtype | Lowercase<GgufDtype>
  /**
   * One series for the whole conversion: `total` is the bytes of tensor data to read, the same in every
   * event from the first; `loaded` the bytes read so far; the last event has loaded === total.
   * @defaultValue none
   */
  onProgress?: ProgressCallback
}

/** tokenizer.model's pieces, by its reader, which only models that have one load. */
async function readTokenizerModel(bytes: Uint8Array): Promise<SentencePieceModel> {
  const { readSentencePiece } = await import('./sentencepiece.ts')
  const model = readSentencePiece(bytes)
  if (!model) throw jsonFileError('tokenizer.model', 'not a SentencePiece model (a protobuf ModelProto with pieces)')
  return model
}

/** The model's file `name` beside its weights, whole; undefined for a missing optional one. */
async function readBesideModel(located: Located, name: string, required: boolean, options: OpenModelOptions): Promise<Uint8Array | undefined> {
  const file = await readBeside(located, name, options)
  if (file.bytes || !required) return file.bytes
  // Without the system's error as its cause: it is about the input, not a file being written.
  const { missing } = file
  throw new SafetensorsError('Io', `${file.where} is missing, and a GGUF needs it`, { status: missing?.status, url: missing?.url, path: missing?.path })
}

/** Whether a tensor's type is one of ggml's quantized ones (not a float). */
const quantized = (type: GgmlType) => type !== 'F32' && type !== 'F16' && type !== 'BF16'

/** The dtype a tensor has in wasm memory before it is copied out: its type, or F32, which the quantizers read. */
function middleOf(t: PlannedTensor): DType {
  return quantized(t.type) ? 'F32' : (t.type as DType)
}

/**
 * The seam through which the GGUF reads every source value: each of `part`'s chunks (partChunks) in turn with its
 * values as `dtype` (little-endian; each a view valid until the next is asked for). Nothing after it knows where
 * the values come from: shardValues reads stored tensors' byte ranges, logicalValues a quantized module's
 * dequantized weights.
 */
type PartValues = (t: PlannedTensor, part: TensorPart, dtype: DType) => AsyncGenerator<{ chunk: Chunk; values: Uint8Array }>

/**
 * PartValues for tensors stored in the shards: the byte ranges of `tensors`' parts, in the order they are
 * asked for, read by one sequential reader (over HTTP, the next chunks, of this tensor and the ones after it,
 * are fetched in parallel while this one is converted and taken) into one wasm memory sized once, converted
 * there. A part read by columns is read with a request per run instead, several at a time.
 */
function shardValues(tensors: PlannedTensor[], signal: AbortSignal, meter: ProgressMeter | undefined): { values: PartValues; close(): void } {
  const planned = tensors.flatMap((t) => t.parts.filter((part) => part.file).map((part) => ({ t, part, chunk: largestChunk(t, part.info) })))
  const converter = new ChunkConverter(
    Math.max(0, ...planned.map(({ t, part, chunk }) => Math.max(byteLengthOf(part.info.dtype, chunk), byteLengthOf(middleOf(t), chunk)))),
  )
  const startOf = ({ file, info }: TensorPart) => file!.header.dataStart + info.dataOffsets[0]
  // The byte ranges of the chunks' runs, in order, runs that follow one another joined.
  const ranges: SourceRange[] = []
  for (const { t, part } of planned) {
    const { source } = part.file!
    for (const { runs } of partChunks(t, part.info)) {
      for (const [first, count] of runs) {
        const offset = startOf(part) + byteLengthOf(part.info.dtype, first)
        const length = byteLengthOf(part.info.dtype, count)
        const last = ranges.at(-1)
        if (last?.source === source && last.offset + last.length === offset) last.length += length
        else ranges.push({ source, offset, length })
      }
    }
  }
  const input = sequentialReader(ranges, signal)
  async function* values(t: PlannedTensor, part: TensorPart, dtype: DType) {
    const { file, info } = part
    for (const chunk of partChunks(t, info)) {
      const inBytes = byteLengthOf(info.dtype, chunk.count)
      let arrived = 0
      const onBytes = (bytes: number) => {
        arrived += bytes
        meter?.arrived(bytes)
      }
      const fill = async (target: Uint8Array) => {
        if (chunk.columns) return readColumns(file!.source, startOf(part), info, chunk.columns, target, signal, onBytes)
        let at = 0
        for (const [, count] of chunk.runs) {
          const length = byteLengthOf(info.dtype, count)
          await input.read(target.subarray(at, at + length), onBytes)
          at += length
        }
      }
      yield { chunk, values: await converter.convert(info.dtype, dtype, file!.byteOrder, inBytes, fill) }
      // A source that does not stream tells of its bytes only now.
      meter?.arrived(inBytes - arrived)
    }
  }
  return { values, close: () => input.close() }
}

/**
 * PartValues for a quantized module's logical tensor: its dequantized values, as the model's reads compute them:
 * in order, or, for chunks of several runs, a read of each of their slices.
 */
function logicalValues(model: SafetensorsModel, signal: AbortSignal, meter: ProgressMeter | undefined): PartValues {
  const quantized = model.quantized!
  return async function* values(t, { info }, dtype) {
    const [first] = partChunks(t, info)
    if (first?.runs.length === 1) {
      // Runs in order, all of the first one's size but the last.
      const chunks = partChunks(t, info)
      for await (const values of quantized.chunks(info.name, dtype, first.count, signal)) {
        meter?.arrived(values.length)
        yield { chunk: chunks.next().value as Chunk, values }
      }
      return
    }
    const columns = elementsOf(info) / info.shape[0]
    for (const chunk of partChunks(t, info)) {
      const slices: SliceRange[][] = chunk.columns ? [[null, chunk.columns]] : chunk.runs.map(([from, n]) => [[from / columns, (from + n) / columns]])
      const out = new Uint8Array(byteLengthOf(dtype, chunk.count))
      let at = 0
      for (const ranges of slices) {
        const { data } = await quantized.read(info.name, ranges, { dtype, signal })
        out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at)
        at += data.byteLength
      }
      meter?.arrived(out.length)
      yield { chunk, values: out }
    }
  }
}

/** The GGUF's bytes after its header: each tensor's data, chunk by chunk, then its padding. */
async function* tensorBytes(header: EncodedHeader, tensors: PlannedTensor[], partValues: PartValues): AsyncGenerator<Uint8Array> {
  const quantizer = tensors.some((t) => quantized(t.type)) ? await loadGgmlQuantizers() : undefined
  for (const [index, t] of tensors.entries()) {
    if (t.computed) yield new Uint8Array(t.computed.buffer)
    const middle = middleOf(t)
    const elementBytes = byteLengthOf(middle, 1)
    for (const part of t.parts) {
      // The index in the part of the chunk's first value, by which an error names a value a type cannot hold.
      let first = 0
      for await (const { chunk, values } of partValues(t, part, middle)) {
        const { transposeRows, heads } = chunk
        const n = values.length / elementBytes
        let out = transposeRows > 0 ? transposed(values, transposeRows, elementBytes) : values
        if (t.shift !== 0) {
          const floats = new Float32Array(out.buffer, out.byteOffset, n)
          for (let i = 0; i < n; i++) floats[i] += t.shift
        }
        if (quantized(t.type)) {
          // In place: the blocks are narrower than the F32 they come from. A chunk is whole blocks of its rows
          // (partChunks), which the kernels quantize one after another whatever the rows, so it goes as rows of a
          // block.
          const type = t.type as QuantizedType
          const floats = new Float32Array(out.buffer, out.byteOffset, n)
          out = quantizer!.quantize(type, floats, GGML_TYPES[type].block, out, { name: part.info.name, first })
        }
        // Blocks lie within rows, so reordering rows after quantizing is reordering them before. Else a copy out
        // of wasm memory, unless transposing made one.
        yield heads > 0 ? permuteRows(out, heads, n / heads / (elementsOf(part.info) / part.info.shape[0])) : transposeRows > 0 ? out : out.slice()
        first += n
      }
    }
    const size = header.sizes[index]
    if (alignUp(size) > size) yield new Uint8Array(alignUp(size) - size)
  }
}

/** A GGUF about to be streamed: its tensors, its size, what it says otherwise than config.json, and its stream. */
export interface GgufPlan {
  tensors: ReadonlyArray<{ type: GgmlType }>
  fileSize: number
  notes: readonly string[]
  stream: ReadableStream<Uint8Array>
}

/** Reads and checks everything a GGUF of `input` needs before its first byte, and makes its stream. */
export async function planGguf(input: string | URL | ModelFiles | ModelFolder, options: GgufOptions = {}): Promise<GgufPlan> {
  const { dtype: dtypeName = 'F16', onProgress, ...read } = options
  const dtype = ggufDtypeOf(dtypeName)
  if (dtype === undefined) throw new TypeError(`dtype must be one of ${GGUF_DTYPE_NAMES.join(', ')} (in any case), got ${JSON.stringify(dtypeName)}`)
  const meter = onProgress && new ProgressMeter(onProgress)
  const located = await locate(input)
  const json = async (name: string, required: boolean) => {
    const bytes = await readBesideModel(located, name, required, read)
    return bytes && readJsonObject(bytes, name).value
  }
  // The weights first: a missing model says so before anything about the files beside it.
  const model = await openLocated(located, read)
  let tensors: PlannedTensor[]
  let header: EncodedHeader
  let notes: string[]
  try {
    const config = readModelConfig((await json('config.json', true))!)
    // A SentencePiece model's own file, if there is one, else tokenizer.json says what the tokenizer is.
    const sentencePiece = await readBesideModel(located, 'tokenizer.model', false, read)
    const files = {
      model: sentencePiece && (await readTokenizerModel(sentencePiece)),
      json: await json('tokenizer.json', !sentencePiece),
      config: await json('tokenizer_config.json', false),
      chatTemplate: await readBesideModel(located, 'chat_template.jinja', false, read).then((bytes) => bytes && new TextDecoder().decode(bytes)),
    }
    notes = conversionNotes(config)
    // The tensors first: their shapes check config.json's counts before the tokenizer's arrays are sized by them.
    const fileType = fileTypeOf(dtype)
    tensors = planTensors(model, config, fileType ? 'F32' : (dtype as FloatDtype))
    if (fileType) {
      // The types llama.cpp's quantizer gives the tensors of the F32 GGUF, by rules only a file type loads.
      const { mixtureTypes } = await import('./mixtures.ts')
      const { architecture, blocks, heads, kvHeads, experts } = config
      const hyperparameters = { architecture: architecture.name, blocks, heads, kvHeads, experts }
      const types = mixtureTypes(fileType, FILE_TYPES[fileType].base, tensors, hyperparameters, GGML_TYPES)
      for (const [index, t] of tensors.entries()) t.type = types[index]
    }
    const metadata = [...modelMetadata(config, dtype), ...tokenizerMetadata(files, config)]
    header = encodeHeader(metadata, tensors)
  } catch (error) {
    await model.close()
    throw error
  }
  // A logical tensor's bytes are its values, as read.
  const partBytes = (t: PlannedTensor, part: TensorPart) => (part.file ? part.info.byteLength : byteLengthOf(middleOf(t), elementsOf(part.info)))
  meter?.asked(tensors.reduce((sum, t) => t.parts.reduce((bytes, part) => bytes + partBytes(t, part), sum), 0))
  meter?.arrived(0)
  async function* bytes(signal: AbortSignal) {
    yield header.head
    const stored = shardValues(tensors, signal, meter)
    const logical = logicalValues(model, signal, meter)
    try {
      yield* tensorBytes(header, tensors, (t, part, dtype) => (part.file ? stored.values : logical)(t, part, dtype))
    } finally {
      stored.close()
    }
  }
  const stream = pulledStream(options.signal, 'converting to GGUF', bytes, 0, () => model.close())
  return { tensors, fileSize: header.fileSize, notes, stream }
}

/** What {@link ggufStream} resolves with: the GGUF's bytes, and their number, known before the first. */
export type GgufStream = ReadableStream<Uint8Array> & {
  /** The GGUF's size in bytes: what a Worker's `new FixedLengthStream(n)` needs to store the stream in R2. */
  readonly byteLength: number
  /**
   * What the GGUF says otherwise than config.json, one sentence each; empty for most models. So far one: a context
   * cut to an attention window that llama.cpp's graph of the architecture does not apply (Mistral's `sliding_window`),
   * so that llama.cpp never attends farther back than transformers does.
   */
  readonly notes: readonly string[]
}

/**
 * A model (what {@link index!openModel} takes: a folder, an index path or URL, the files picked in a page, a
 * {@link index!ModelFolder} such as {@link index!r2Model}) as a GGUF v3 file for llama.cpp, streamed in bounded memory:
 * the architectures, RoPE variants and tokenizers of docs/gguf.md (Llama 1-3.x, Mistral, Mixtral, Qwen2, Qwen3,
 * Qwen3-MoE, Gemma 2 and 3, Phi-3, GPT-2; SentencePiece and byte-level BPE), as llama.cpp's convert_hf_to_gguf.py
 * writes them; the hyperparameters from config.json; the tokenizer from tokenizer.model or tokenizer.json, with
 * tokenizer_config.json and chat_template.jinja. Resolves once all of them and every shard's header are read and
 * checked, before any tensor byte; the stream's `byteLength` is the file's size.
 * @throws {@link index!SafetensorsError} `UnsupportedConversion` for another architecture (the message names it and
 * the supported ones), a RoPE type the architecture does not take (named, with those it takes), a model llama.cpp
 * cannot run as transformers does (Qwen3-MoE's norm_topk_prob false, Gemma layer types out of llama.cpp's pattern),
 * a tokenizer that is neither SentencePiece nor byte-level BPE or whose pre-tokenizer llama.cpp does not implement,
 * a tensor that maps to no GGUF tensor or is not floating-point, an expert past config.json's count (named);
 * `TensorNotFound` for a missing expert, or no token embedding or attention query projection;
 * `InvalidHeaderDeserialization` for a config.json, tokenizer.json, tokenizer_config.json or tokenizer.model that
 * is not what it should be (a value of the wrong type or range, counts that do not fit the tensors: the file and
 * key named); `Io` for a missing config.json,
 * or neither tokenizer.json nor tokenizer.model (named), and a read that fails; any code of
 * {@link index!openModel}; `Aborted`. After it resolves, the same codes come as the stream's error.
 * @throws TypeError for a `dtype` that is not F32, F16, BF16 or a file type of llama-quantize, an `onProgress` that
 * is not a function, or an input openModel does not take.
 */
export async function ggufStream(input: string | URL | ModelFiles | ModelFolder, options: GgufOptions = {}): Promise<GgufStream> {
  const { stream, fileSize, notes } = await planGguf(input, options)
  return Object.defineProperties(stream, { byteLength: { value: fileSize, enumerable: true }, notes: { value: notes, enumerable: true } }) as GgufStream
}
