// ggufStream(): a Hugging Face model folder as a GGUF v3 file for llama.cpp, as a stream in bounded memory
// (docs/gguf.md). Everything before the first tensor byte (config.json, the tokenizer, every shard's
// header) is read and checked first, so the header, whose offsets follow from the shapes and types, goes
// out first; then each tensor, a chunk at a time, read into a wasm memory sized once, converted there in
// place (rows reordered, Q8_0 quantized) and copied out.
import { byteLengthOf, convertInto, swapElementsInCore } from '../convert.ts'
import type { DType } from '../dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { toRangeSource } from '../file.ts'
import { type Located, locate, type ModelFiles, type ModelFolder, type OpenModelOptions, openLocated } from '../model.ts'
import { readSmallFile } from '../model-index.ts'
import { type ProgressCallback, ProgressMeter } from '../progress.ts'
import { isMissingFile, linkedAbort, readInto } from '../source.ts'
import { asSafetensorsError } from '../stream.ts'
import { type Core, instantiate } from '../wasm.ts'
import { alignUp, type EncodedHeader, encodeHeader, GGML_TYPES, type GgmlType } from './format.ts'
import { modelMetadata, parseJsonObject, readModelConfig } from './metadata.ts'
import { q8_0ByteLength, quantizeQ8_0Into } from './q8_0.ts'
import { GGUF_DTYPES, type GgufDtype, type PlannedTensor, planTensors } from './tensors.ts'
import { tokenizerMetadata } from './tokenizer.ts'

export type { GgufDtype } from './tensors.ts'

/** Options of {@link ggufStream}: those of {@link openModel} for reading the model, and what the GGUF holds. */
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

/** A GGUF about to be streamed: its tensors (names, dims in ggml's order, types) and its size. */
export interface GgufPlan {
  tensors: ReadonlyArray<{ name: string; dims: readonly number[]; type: GgmlType }>
  fileSize: number
  stream: ReadableStream<Uint8Array>
}

/** Elements per chunk: 4 MiB as F32, a multiple of a Q8_0 block; a chunk of q_proj or k_proj is whole heads (at least one). */
const CHUNK_ELEMENTS = 1 << 20

/** The model's file `name` beside its weights, whole; undefined for a missing optional one. */
async function readBeside(located: Located, name: string, required: boolean, options: OpenModelOptions): Promise<Uint8Array | undefined> {
  const found = await located.beside(name)
  const where = typeof found === 'string' ? found : found instanceof URL ? found.href : `${name} beside ${located.where}`
  const missing = () => {
    if (required) throw new SafetensorsError('Io', `${where} is missing; a GGUF conversion reads the model's ${name}`)
    return undefined
  }
  if (found === undefined) return missing()
  try {
    const source = await toRangeSource(found, options)
    try {
      return await readSmallFile(source, where, options.signal, name)
    } finally {
      await source.close?.()
    }
  } catch (error) {
    if (isMissingFile(error)) return missing()
    throw error
  }
}

/** The tensor's elements in one chunk: whole heads for a reordered tensor, else up to CHUNK_ELEMENTS. */
function chunkElements(t: PlannedTensor): number {
  const count = t.dims.reduce((a, b) => a * b, 1)
  const unit = t.heads > 0 ? count / t.heads : GGML_TYPES.Q8_0.block
  return Math.min(count, Math.max(unit, Math.floor(CHUNK_ELEMENTS / unit) * unit))
}

/** The dtype a tensor is converted to in wasm memory: its own, or F32 for the quantizer. */
const middleOf = (type: GgmlType): DType => (type === 'Q8_0' ? 'F32' : type)

/** Bytes a chunk needs: its input or converted values (whichever is wider), then as much again for the row reorder. */
const slotBytes = (t: PlannedTensor) => {
  const n = chunkElements(t)
  return Math.max(byteLengthOf(t.info.dtype, n), byteLengthOf(middleOf(t.type), n))
}

/**
 * Reorders the rows of `heads` heads at `from` into `to` as llama.cpp's converter's `permute` does:
 * reshape(heads, 2, rows / heads / 2, ...).swapaxes(1, 2), so that row j of a head's first half and row
 * j of its second half become rows 2j and 2j + 1.
 */
function permuteRows(memory: Uint8Array, from: number, to: number, heads: number, rowsPerHead: number, rowBytes: number): void {
  const half = rowsPerHead / 2
  for (let h = 0; h < heads; h++) {
    const head = h * rowsPerHead
    for (let j = 0; j < half; j++) {
      for (let i = 0; i < 2; i++) {
        const source = from + (head + i * half + j) * rowBytes
        memory.copyWithin(to + (head + 2 * j + i) * rowBytes, source, source + rowBytes)
      }
    }
  }
}

/** The bytes of the GGUF after its header: each tensor's data, chunk by chunk, then its padding. */
async function* tensorBytes(
  header: EncodedHeader,
  tensors: PlannedTensor[],
  signal: AbortSignal,
  meter: ProgressMeter | undefined,
): AsyncGenerator<Uint8Array> {
  const slot = Math.max(0, ...tensors.map(slotBytes))
  const core: Core = instantiate(2 * slot, false)
  const [a, b] = [core.heapBase, core.heapBase + slot]
  for (const [index, t] of tensors.entries()) {
    const { file, info } = t
    const from = info.dtype
    const middle = middleOf(t.type)
    const count = t.dims.reduce((x, y) => x * y, 1)
    const rows = info.shape[0] ?? 1
    const start = file.header.dataStart + info.dataOffsets[0]
    const perChunk = chunkElements(t)
    for (let first = 0; first < count; first += perChunk) {
      const n = Math.min(perChunk, count - first)
      const inBytes = byteLengthOf(from, n)
      const middleBytes = byteLengthOf(middle, n)
      // The kernels' in-place layout: a wider output has the input at its end, a narrower one at its start.
      const src = a + Math.max(0, middleBytes - inBytes)
      let arrived = 0
      const onBytes =
        meter &&
        ((bytes: number) => {
          arrived += bytes
          meter.arrived(bytes)
        })
      await readInto(file.source, start + byteLengthOf(from, first), new Uint8Array(core.memory.buffer, src, inBytes), signal, onBytes)
      if (meter && arrived < inBytes) meter.arrived(inBytes - arrived)
      if (file.byteOrder === 'big') swapElementsInCore(core, src, inBytes, from)
      convertInto(core, src, a, n, from, middle)
      let at = a
      if (t.heads > 0) {
        permuteRows(new Uint8Array(core.memory.buffer), a, b, n / (count / t.heads), rows / t.heads, byteLengthOf(middle, count / rows))
        at = b
      }
      if (t.type === 'Q8_0') quantizeQ8_0Into(core, at, at, n, 'F32', info.name, first)
      const outBytes = t.type === 'Q8_0' ? q8_0ByteLength(n) : middleBytes
      yield new Uint8Array(core.memory.buffer, at, outBytes).slice()
    }
    const size = header.sizes[index]
    if (alignUp(size) > size) yield new Uint8Array(alignUp(size) - size)
  }
}

/** The input's options without onProgress: the conversion reports one series of its own. */
function inputOptions({ onProgress: _, dtype: __, ...options }: GgufOptions): OpenModelOptions {
  return options
}

/** Reads and checks everything a GGUF of `input` needs before its first byte, and makes its stream. */
export async function planGguf(input: string | URL | ModelFiles | ModelFolder, options: GgufOptions = {}): Promise<GgufPlan> {
  const dtype = options.dtype ?? 'F16'
  if (!GGUF_DTYPES.includes(dtype)) throw new TypeError(`dtype must be ${GGUF_DTYPES.join(', ')}, got ${JSON.stringify(dtype)}`)
  const meter = options.onProgress === undefined ? undefined : new ProgressMeter(options.onProgress)
  const read = inputOptions(options)
  const located = await locate(input)
  const configBytes = (await readBeside(located, 'config.json', true, read))!
  const config = readModelConfig(configBytes, 'config.json')
  const tokenizerBytes = (await readBeside(located, 'tokenizer.json', true, read))!
  const tokenizerConfigBytes = await readBeside(located, 'tokenizer_config.json', false, read)
  const jinja = await readBeside(located, 'chat_template.jinja', false, read)
  const metadata = [
    ...modelMetadata(config, dtype, 32),
    ...tokenizerMetadata(
      {
        tokenizer: parseJsonObject(tokenizerBytes, 'tokenizer.json'),
        tokenizerWhere: 'tokenizer.json',
        tokenizerConfig: tokenizerConfigBytes && parseJsonObject(tokenizerConfigBytes, 'tokenizer_config.json'),
        chatTemplate: jinja && new TextDecoder().decode(jinja),
      },
      config,
    ),
  ]
  const model = await openLocated(located, read)
  let tensors: PlannedTensor[]
  let header: EncodedHeader
  try {
    tensors = planTensors(model, config, dtype)
    header = encodeHeader(metadata, tensors)
  } catch (error) {
    await model.close()
    throw error
  }
  meter?.asked(tensors.reduce((sum, t) => sum + t.info.byteLength, 0))
  meter?.arrived(0)
  let link: ReturnType<typeof linkedAbort>
  let body: AsyncGenerator<Uint8Array> | undefined
  const finish = () => {
    link.release()
    return model.close()
  }
  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        link = linkedAbort(options.signal, (error) => controller.error(error))
        controller.enqueue(header.head)
      },
      async pull(controller) {
        try {
          body ??= tensorBytes(header, tensors, link.signal, meter)
          const { done, value } = await body.next()
          if (!done) return controller.enqueue(value)
          await finish()
          controller.close()
        } catch (error) {
          await finish().catch(() => {})
          throw asSafetensorsError(error, 'converting to GGUF')
        }
      },
      async cancel(reason) {
        link.abort(reason)
        await finish()
      },
    },
    { highWaterMark: 0 },
  )
  return { tensors: tensors.map(({ name, dims, type }) => ({ name, dims, type })), fileSize: header.fileSize, stream }
}

/**
 * A model (what {@link openModel} takes: a folder, an index path or URL, the files picked in a page, a
 * {@link ModelFolder} such as {@link r2Model}) as a GGUF v3 file for llama.cpp, streamed in bounded memory:
 * the architectures LlamaForCausalLM and MistralForCausalLM (as `llama`, q_proj and k_proj reordered as
 * llama.cpp's converter does) and Qwen2ForCausalLM (`qwen2`); the hyperparameters from config.json; a
 * byte-level BPE tokenizer from tokenizer.json, tokenizer_config.json and chat_template.jinja. Resolves once
 * all of them and every shard's header are read and checked, before any tensor byte.
 * @throws {@link SafetensorsError} `UnsupportedConversion` for another architecture (the message names it and
 * the supported ones), a tokenizer that is not byte-level BPE or whose pre-tokenizer llama.cpp does not
 * implement, a tensor that maps to no GGUF tensor (named), or one that is not floating-point;
 * `InvalidHeaderDeserialization` for a config.json or tokenizer file that is not the JSON it should be (a
 * missing hyperparameter named); `Io` for a missing config.json or tokenizer.json (named) and a read that
 * fails; any code of {@link openModel}; `Aborted`. After it resolves, the same codes come as the stream's error.
 * @throws TypeError for a `dtype` other than F32, F16, BF16 or Q8_0, an `onProgress` that is not a function,
 * or an input openModel does not take.
 */
export async function ggufStream(input: string | URL | ModelFiles | ModelFolder, options: GgufOptions = {}): Promise<ReadableStream<Uint8Array>> {
  return (await planGguf(input, options)).stream
}
