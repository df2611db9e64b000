// ggufStream(): a Hugging Face model folder as a GGUF v3 file for llama.cpp, as a stream in bounded memory
// (docs/gguf.md). Everything before the first tensor byte (config.json, the tokenizer, every shard's
// header) is read and checked first, so the header, whose offsets follow from the shapes and types, goes
// out first; then each tensor a chunk at a time, through one wasm memory sized once: read, converted there,
// changed as llama.cpp's converter changes it (rows reordered, transposed, norms shifted), quantized in place,
// and copied out. An MoE layer's experts go into their stack one after the other, a chunk at a time.
import { byteLengthOf } from '../core/convert.ts'
import type { DType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { jsonFileError } from '../format/json-values.ts'
import { readJsonObject } from '../format/model-config.ts'
import { type Located, locate, type OpenModelOptions, openLocated, readBeside, type SafetensorsModel } from '../read/model.ts'
import { ChunkConverter, pulledStream } from '../read/streams.ts'
import { sequentialReader } from '../sources/downloads.ts'
import { type ProgressCallback, ProgressMeter } from '../sources/progress.ts'
import type { ModelFiles, ModelFolder } from '../sources/source.ts'
import { alignUp, type EncodedHeader, encodeHeader, type GgufDtype, type GgufTensorType, type KeyValue } from './format.ts'

export type { GgufDtype } from './format.ts'

import type { Take, Unit } from './architectures.ts'
import { modelMetadata, readModelConfig } from './metadata.ts'
import { Q8_0_BLOCK, q8_0ByteLength, quantizeQ8_0 } from './q8_0.ts'
import type { SentencePieceModel } from './sentencepiece.ts'
import { type Piece, type PlannedTensor, pieceElements, planTensors } from './tensors.ts'
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

/** Elements per chunk: 4 MiB as F32, a multiple of a Q8_0 block; a chunk of a reshaped tensor is whole units (at least one). */
const CHUNK_ELEMENTS = 1 << 20

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

/** A piece's elements per chunk: whole units of a reshaped tensor, a whole piece of MXFP4 blocks or scales, else whole Q8_0 blocks. */
function chunkElements(t: PlannedTensor, piece: Piece): number {
  const count = pieceElements(piece)
  if (t.mxfp4) return count
  const unit = t.unit ? t.unit.rows * t.unit.columns : Q8_0_BLOCK
  return Math.min(count, Math.max(unit, Math.floor(CHUNK_ELEMENTS / unit) * unit))
}

/** The dtype a piece has in wasm memory before it is copied out: the tensor's type, F32 for Q8_0 (which the Q8_0 kernel reads), the stored bytes for MXFP4. */
function middleOf(t: PlannedTensor, piece: Piece): DType {
  return t.mxfp4 ? piece.part.info.dtype : t.type === 'Q8_0' ? 'F32' : (t.type as DType)
}

/**
 * The units of `bytes` (elements of `elementBytes`), each `unit.rows` rows of `unit.columns`, changed as the unit
 * says, in a new array: each head's rows from two halves to pairs (llama.cpp's `permute`: row j of the first half and
 * row j of the second become rows 2j and 2j + 1), or the columns `take` kept, then rows and columns swapped.
 */
function reshaped(bytes: Uint8Array, { rows, columns, take, transpose, pairs }: Unit, elementBytes: number): Uint8Array {
  const Elements = elementBytes === 4 ? Uint32Array : Uint16Array
  const from = new Elements(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.length / elementBytes)
  const { start, step, count } = take ?? { start: 0, step: 1, count: columns }
  const size = rows * columns
  const to = new Elements((from.length / size) * rows * count)
  for (let unit = 0, out = 0; unit < from.length; unit += size) {
    for (let row = 0; row < rows; row++) {
      const source = unit + (pairs ? (row % 2) * (rows / 2) + Math.floor(row / 2) : row) * columns + start
      for (let k = 0; k < count; k++) to[out + (transpose ? k * rows + row : row * count + k)] = from[source + k * step]
    }
    out += rows * count
  }
  return new Uint8Array(to.buffer)
}

/** Value `v` of a block of 32 E2M1 codes at `base` as gpt-oss stores them: values 2i and 2i + 1 in byte i, low nibble first. */
const storedCode = (codes: Uint8Array, base: number, v: number) => (codes[base + (v >> 1)] >> ((v & 1) * 4)) & 15

/**
 * One expert's MXFP4 blocks as ggml's block_mxfp4: for each of its `rows` rows `take`, each block of 32 values is
 * its E8M0 scale byte, then 16 bytes of codes, byte j holding value j (low nibble) and value j + 16 (high). The
 * codes and scales are ggml's as they are (E2M1, and 2^(e - 127)): the values do not change.
 */
function mxfp4Blocks(codes: Uint8Array, scales: Uint8Array, rows: number, { start, step, count }: Take): Uint8Array {
  const groups = scales.length / rows
  const out = new Uint8Array(count * groups * 17)
  let at = 0
  for (let k = 0; k < count; k++) {
    for (let group = (start + k * step) * groups, end = group + groups; group < end; group++, at += 17) {
      out[at] = scales[group]
      for (let j = 0; j < 16; j++) out[at + 1 + j] = storedCode(codes, group * 16, j) | (storedCode(codes, group * 16, j + 16) << 4)
    }
  }
  return out
}

/**
 * The seam through which the GGUF reads every source value: the elements of `piece`, `chunk` at a time, as
 * `dtype` (little-endian; each a view valid until the next is asked for). Nothing after it knows where the
 * values come from: shardValues reads stored tensors' byte ranges, logicalValues a quantized module's
 * dequantized weights.
 */
type PieceValues = (piece: Piece, dtype: DType, chunk: number) => AsyncGenerator<Uint8Array>

/** The byte range of a piece in its shard's data. */
function pieceBytes({ part: { info }, rows }: Piece): { offset: number; length: number } {
  const rowBytes = info.byteLength / (info.shape[0] ?? 1)
  return { offset: info.dataOffsets[0] + rows[0] * rowBytes, length: (rows[1] - rows[0]) * rowBytes }
}

/**
 * PieceValues for tensors stored in the shards: the byte ranges of `tensors`' pieces, in the order they are
 * asked for, read by one sequential reader (over HTTP, the next chunks, of this tensor and the ones after it,
 * are fetched in parallel while this one is converted and taken) into one wasm memory sized once, converted there.
 */
function shardValues(tensors: PlannedTensor[], signal: AbortSignal, meter: ProgressMeter | undefined): { values: PieceValues; close(): void } {
  const planned = tensors.flatMap((t) =>
    t.pieces.filter((piece) => piece.part.file).map((piece) => ({ piece, chunk: chunkElements(t, piece), middle: middleOf(t, piece) })),
  )
  const converter = new ChunkConverter(
    Math.max(0, ...planned.map(({ piece, chunk, middle }) => Math.max(byteLengthOf(piece.part.info.dtype, chunk), byteLengthOf(middle, chunk)))),
  )
  const input = sequentialReader(
    planned.map(({ piece }) => {
      const { file } = piece.part
      const { offset, length } = pieceBytes(piece)
      return { source: file!.source, offset: file!.header.dataStart + offset, length }
    }),
    signal,
  )
  async function* values(piece: Piece, dtype: DType, chunk: number) {
    const { file, info } = piece.part
    const count = pieceElements(piece)
    for (let first = 0; first < count; first += chunk) {
      const inBytes = byteLengthOf(info.dtype, Math.min(chunk, count - first))
      let arrived = 0
      const onBytes = (bytes: number) => {
        arrived += bytes
        meter?.arrived(bytes)
      }
      yield await converter.convert(info.dtype, dtype, file!.byteOrder, inBytes, (target) => input.read(target, onBytes))
      // A source that does not stream tells of its bytes only now.
      meter?.arrived(inBytes - arrived)
    }
  }
  return { values, close: () => input.close() }
}

/** PieceValues for a quantized module's logical tensor: its dequantized values, as the model's reads compute them. */
function logicalValues(model: SafetensorsModel, signal: AbortSignal, meter: ProgressMeter | undefined): PieceValues {
  return async function* values({ part: { info }, rows }, dtype, chunk) {
    for await (const chunkValues of model.quantized!.chunks(info.name, dtype, chunk, signal, rows)) {
      meter?.arrived(chunkValues.length)
      yield chunkValues
    }
  }
}

/** The GGUF's bytes after its header: each tensor's data, chunk by chunk, then its padding. */
async function* tensorBytes(header: EncodedHeader, tensors: PlannedTensor[], values: PieceValues): AsyncGenerator<Uint8Array> {
  for (const [index, t] of tensors.entries()) {
    if (t.computed) yield new Uint8Array(t.computed.buffer)
    if (t.mxfp4) {
      // Each expert's blocks then its scales, each read whole (one chunk).
      const whole = async (piece: Piece) => {
        let bytes = new Uint8Array(0)
        for await (const chunk of values(piece, middleOf(t, piece), pieceElements(piece))) bytes = chunk.slice()
        return bytes
      }
      for (let p = 0; p < t.pieces.length; p += 2) {
        const codes = await whole(t.pieces[p])
        yield mxfp4Blocks(codes, await whole(t.pieces[p + 1]), t.pieces[p].part.info.shape[1], t.mxfp4)
      }
    }
    const elementBytes = t.type === 'Q8_0' ? 4 : t.mxfp4 ? 1 : byteLengthOf(t.type as DType, 1)
    for (const piece of t.mxfp4 ? [] : t.pieces) {
      // The index in the piece of the chunk's first value, by which an error names a value Q8_0 cannot hold.
      let first = 0
      for await (const chunk of values(piece, middleOf(t, piece), chunkElements(t, piece))) {
        const n = chunk.length / elementBytes
        // A copy out of wasm memory: reshaped, or as it is.
        let out = t.unit ? reshaped(chunk, t.unit, elementBytes) : chunk.slice()
        if (t.shift !== 0) {
          const floats = new Float32Array(out.buffer, out.byteOffset, out.length / 4)
          for (let i = 0; i < floats.length; i++) floats[i] += t.shift
        }
        if (t.type === 'Q8_0') {
          // In place: the blocks are narrower than the F32 they come from.
          const floats = new Float32Array(out.buffer, out.byteOffset, out.length / 4)
          out = quantizeQ8_0(floats, new Uint8Array(out.buffer, out.byteOffset, q8_0ByteLength(floats.length)), { name: piece.part.info.name, first })
        }
        yield out
        first += n
      }
    }
    const size = header.sizes[index]
    if (alignUp(size) > size) yield new Uint8Array(alignUp(size) - size)
  }
}

/** Key-value pairs of which a later one of a key replaces an earlier one, in the earlier one's place (as gguf-py's writer does). */
function merged(kv: KeyValue[]): KeyValue[] {
  const byKey = new Map<string, KeyValue>()
  for (const pair of kv) byKey.set(pair[0], pair)
  return [...byKey.values()]
}

/** A GGUF about to be streamed: its tensors, its size and its stream. */
export interface GgufPlan {
  tensors: ReadonlyArray<{ type: GgufTensorType }>
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
    const bytes = await readBesideModel(located, name, required, read)
    return bytes && readJsonObject(bytes, name).value
  }
  // The weights first: a missing model says so before anything about the files beside it.
  const model = await openLocated(located, read)
  let tensors: PlannedTensor[]
  let header: EncodedHeader
  try {
    // The table of architectures, data only a conversion needs, loaded now.
    const config = readModelConfig((await json('config.json', true))!, await import('./architectures.ts'))
    // A SentencePiece model's own file, if there is one, else tokenizer.json says what the tokenizer is.
    const sentencePiece = await readBesideModel(located, 'tokenizer.model', false, read)
    const files = {
      model: sentencePiece && (await readTokenizerModel(sentencePiece)),
      json: await json('tokenizer.json', !sentencePiece),
      config: await json('tokenizer_config.json', false),
      chatTemplate: await readBesideModel(located, 'chat_template.jinja', false, read).then((bytes) => bytes && new TextDecoder().decode(bytes)),
    }
    // The tensors first: their shapes check config.json's counts before the tokenizer's arrays are sized by them.
    tensors = planTensors(model, config, dtype)
    const metadata = merged([...modelMetadata(config, dtype), ...tokenizerMetadata(files, config)])
    header = encodeHeader(metadata, tensors)
  } catch (error) {
    await model.close()
    throw error
  }
  // A logical tensor's bytes are its values, as read.
  const bytesOf = (t: PlannedTensor, piece: Piece) => (piece.part.file ? pieceBytes(piece).length : byteLengthOf(middleOf(t, piece), pieceElements(piece)))
  meter?.asked(tensors.reduce((sum, t) => t.pieces.reduce((bytes, piece) => bytes + bytesOf(t, piece), sum), 0))
  meter?.arrived(0)
  async function* bytes(signal: AbortSignal) {
    yield header.head
    const stored = shardValues(tensors, signal, meter)
    const logical = logicalValues(model, signal, meter)
    try {
      yield* tensorBytes(header, tensors, (piece, dtype, chunk) => (piece.part.file ? stored.values : logical)(piece, dtype, chunk))
    } finally {
      stored.close()
    }
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
 * @throws TypeError for a `dtype` other than F32, F16, BF16 or Q8_0, an `onProgress` that is not a function,
 * or an input openModel does not take.
 */
export async function ggufStream(input: string | URL | ModelFiles | ModelFolder, options: GgufOptions = {}): Promise<GgufStream> {
  const { stream, fileSize } = await planGguf(input, options)
  return Object.defineProperty(stream, 'byteLength', { value: fileSize, enumerable: true }) as GgufStream
}
