// openGguf(): a GGUF file behind any source, read lazily as open() reads a SafeTensors file: the header first
// (src/gguf/reader.ts), then only the bytes of the tensors or rows asked for. Tensors of the plain types (F32,
// F16, BF16, F64, I8 to I64) are read as a SafeTensors file's are, by a SafetensorsFile over the same source
// whose header lists them; the quantized types are read as their blocks, through the same source and read plan,
// and dequantized by ggml's kernels (src/gguf/kernels.ts loads them on the first such read).
import { type ConvertTarget, POOL_MIN_BYTES } from '../core/convert.ts'
import { type DType, type Float16Array, isDType, type TypedArray } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { Header, type TensorInfo } from '../format/header.ts'
import { planSlice, type SliceRange } from '../format/slice.ts'
import {
  allocate,
  type DataFor,
  float16ArrayFor,
  loadPool,
  type OpenOptions,
  openSource,
  outputIn,
  type ReadOptions,
  SafetensorsFile,
  type Source,
  type Tensor,
} from '../read/file.ts'
import { ProgressMeter } from '../sources/progress.ts'
import { readRuns } from '../sources/read-plan.ts'
import { type RangeSource, throwIfAborted } from '../sources/source.ts'
import type { GgmlKernels } from './ggml-kernels.ts'
import { GGML_TYPES } from './ggml-types.ts'
import { loadGgmlKernels } from './kernels.ts'
import { type GgufHeader, type GgufTensorInfo, type GgufValue, readGgufHeader } from './reader.ts'

/** Options of {@link openGguf}: those of {@link index!open} but `byteOrder`, which a GGUF file states itself. */
export type GgufOpenOptions = Omit<OpenOptions, 'byteOrder'>

/**
 * Opens a GGUF file (v2 or v3, little- or big-endian) and reads its header: over HTTP the first 64 KiB, then
 * more only as far as the header goes. Tensors are read when asked for, each reading only its own bytes.
 *
 * @throws {@link index!SafetensorsError} `InvalidGguf` for a file that is not a GGUF this library reads (the message
 * names the key, tensor or byte offset); `Io` when the source cannot be read; `Aborted` when `options.signal` aborts.
 * @throws TypeError for a value that cannot be opened (an unsupported URL scheme; a path in the browser entry) or
 * an option of the wrong type; RangeError for an option out of range.
 */
export async function openGguf(input: Source, options: GgufOpenOptions = {}): Promise<GgufFile> {
  const meter = options.onProgress && new ProgressMeter(options.onProgress)
  return openSource(input, options, meter, async (source) => new GgufFile(await readGgufHeader(source, options.signal), source, options.workers))
}

/** An open GGUF file, from {@link openGguf}: its header and metadata, and reads of its tensors. */
export class GgufFile {
  readonly #byName: Map<string, GgufTensorInfo>
  /** The plain tensors as a SafeTensors file's, which reads them. */
  readonly #plain: SafetensorsFile

  /** @internal made by openGguf() */
  constructor(
    /** The parsed, checked header: version, byte order, alignment, metadata, tensors. */
    readonly header: GgufHeader,
    /** Where the bytes come from. */
    readonly source: RangeSource,
    /** The `workers` option of {@link openGguf}. */
    readonly workers?: number,
  ) {
    this.#byName = new Map(header.tensors.map((t) => [t.name, t]))
    const plain: TensorInfo[] = header.tensors.flatMap(({ name, type, shape, byteLength, offset }) => {
      if (!isDType(type)) return []
      const begin = offset - header.dataStart
      return [{ name, dtype: type, shape, dataOffsets: [begin, begin + byteLength], byteLength }]
    })
    // The data section starts where a SafeTensors header of dataStart - 8 bytes would end.
    this.#plain = new SafetensorsFile(new Header(header.dataStart - 8, header.fileSize, null, plain), source, header.byteOrder, workers)
  }

  /** Every key-value pair of the header, in file order: 64-bit integers as bigint, arrays of numbers as typed arrays. */
  get metadata(): Record<string, GgufValue> {
    return this.header.metadata
  }

  /** Tensor names in file order. */
  names(): string[] {
    return this.header.tensors.map((t) => t.name)
  }

  /**
   * The header's entry for one tensor: its name, ggml type, shape (outermost first), bytes and file offset.
   * @throws {@link index!SafetensorsError} `TensorNotFound`
   */
  info(name: string): GgufTensorInfo {
    const info = this.#byName.get(name)
    if (!info) throw new SafetensorsError('TensorNotFound', `no tensor named ${JSON.stringify(name)} in this GGUF file (it has ${this.#byName.size})`)
    return info
  }

  /**
   * Reads one tensor's bytes and nothing else. Plain types (F32, F16, BF16, F64, I8 to I64) come in their own
   * dtype unless `options.dtype` says otherwise, as {@link index!SafetensorsFile.getTensor} gives them; quantized
   * types as F32 (the default), F16 or BF16: F32 bit for bit as ggml's own dequantization gives it, F16 and BF16
   * that F32 rounded once to nearest even.
   * @throws {@link index!SafetensorsError} `TensorNotFound`; `UnsupportedConversion` (no conversion to that dtype);
   * `UnsupportedQuantization` (a type ggml does not dequantize, Q8_1, or a big-endian one whose layout is not
   * defined); `Io`; `Aborted`.
   * @throws RangeError for an `out` too small or misaligned; TypeError for `float16Array` where the runtime has
   * no Float16Array.
   */
  async getTensor<D extends DType, H extends boolean = false>(name: string, options: ReadOptions<D, H> = {}): Promise<Tensor<DataFor<D, H>>> {
    const info = this.info(name)
    if (isDType(info.type)) return this.#plain.getTensor(name, options)
    return this.#readQuantized(info, undefined, options) as Promise<Tensor<DataFor<D, H>>>
  }

  /**
   * Reads only the bytes a slice covers: one {@link index!SliceRange} per leading dimension, as
   * {@link index!SafetensorsFile.getSlice} takes them. A quantized tensor's rows are read as whole blocks, so its
   * last dimension is sliced only on block boundaries; a slice of its outer dimensions reads only those rows.
   * @throws {@link index!SafetensorsError} `TensorNotFound`; `SliceOutOfRange`; `TooManySlices`; `MisalignedSlice`
   * (a quantized tensor's last dimension sliced inside a block); `UnsupportedConversion`; `UnsupportedQuantization`;
   * `Io`; `Aborted`.
   * @throws RangeError and TypeError as {@link GgufFile.getTensor} does.
   */
  async getSlice<D extends DType, H extends boolean = false>(
    name: string,
    ranges: readonly SliceRange[],
    options: ReadOptions<D, H> = {},
  ): Promise<Tensor<DataFor<D, H>>> {
    const info = this.info(name)
    if (isDType(info.type)) return this.#plain.getSlice(name, ranges, options)
    return this.#readQuantized(info, ranges, options) as Promise<Tensor<DataFor<D, H>>>
  }

  /** A quantized tensor, or a slice of it: its blocks read, then dequantized into the result. */
  async #readQuantized(info: GgufTensorInfo, ranges: readonly SliceRange[] | undefined, options: ReadOptions): Promise<Tensor<TypedArray | Float16Array>> {
    throwIfAborted(options.signal)
    const to = options.dtype ?? 'F32'
    if (to !== 'F32' && to !== 'F16' && to !== 'BF16')
      throw new SafetensorsError(
        'UnsupportedConversion',
        `cannot read ${info.type} tensor ${JSON.stringify(info.name)} as ${to}: quantized types read as F32, F16 or BF16`,
      )
    const half = float16ArrayFor(options.float16Array)
    const { shape, runs } = ranges === undefined ? { shape: info.shape, runs: [[0, info.byteLength] as [number, number]] } : planBlocks(info, ranges)
    const count = shape.reduce((a, b) => a * b, 1)
    const outBytes = count * (to === 'F32' ? 4 : 2)
    // Checked before any read: a wrong `out` is the caller's mistake, not the file's.
    const output = options.out === undefined ? undefined : outputIn(options.out, info, to, outBytes)
    const inBytes = runs.reduce((sum, [, length]) => sum + length, 0)
    const meter = options.onProgress && new ProgressMeter(options.onProgress)
    meter?.asked(inBytes)
    const io = { signal: options.signal, onBytes: meter && ((bytes: number) => meter.arrived(bytes)) }
    const kernels = await loadGgmlKernels()
    const data =
      (outBytes >= POOL_MIN_BYTES && this.workers !== 0 ? await this.#readOnPool(kernels, info, to, runs, outBytes, output, io) : undefined) ??
      (await this.#readHere(kernels, info, to, runs, inBytes, count, outBytes, output, io))
    return { name: info.name, dtype: to, shape: [...shape], data: half && to === 'F16' ? new half(data.buffer, data.byteOffset, data.length) : data }
  }

  /** Dequantized on the pool's workers, a call per 2^20 values: undefined where there is no pool. */
  async #readOnPool(
    kernels: GgmlKernels,
    info: GgufTensorInfo,
    to: ConvertTarget,
    runs: Array<[number, number]>,
    outBytes: number,
    out: ReturnType<typeof outputIn> | undefined,
    io: { signal?: AbortSignal; onBytes?: (bytes: number) => void },
  ): Promise<TypedArray | undefined> {
    const { block, bytes } = GGML_TYPES[info.type]
    let outAt = 0
    const located = runs.map(([offset, length]) => {
      const run = { offset: info.offset + offset, length, outAt }
      outAt += (length / bytes) * block * (to === 'F32' ? 4 : 2)
      return run
    })
    const { module, calls } = kernels.dequantizeCalls(info.type, to, this.header.byteOrder, located, 1 << 20)
    return (await loadPool())?.callOnPool(this.source, this.workers, module, { name: info.name, dtype: to, outBytes, out }, calls, io)
  }

  /** Read here, then dequantized on the calling thread. */
  async #readHere(
    kernels: GgmlKernels,
    info: GgufTensorInfo,
    to: ConvertTarget,
    runs: Array<[number, number]>,
    inBytes: number,
    count: number,
    outBytes: number,
    out: ReturnType<typeof outputIn> | undefined,
    io: { signal?: AbortSignal; onBytes?: (bytes: number) => void },
  ): Promise<TypedArray> {
    const blocks = allocate(info, 'U8', inBytes).bytes
    await readRuns(this.source, info.offset, runs, blocks, io.signal, io.onBytes)
    const { data } = out ?? allocate(info, to, outBytes)
    kernels.dequantizeGgml(info.type, blocks, count, to, { byteOrder: this.header.byteOrder, out: data as Float32Array | Uint16Array })
    return data
  }

  /** Releases the source (a local file's handle). A file dropped without it closes when it is collected. */
  async close(): Promise<void> {
    await this.source.close?.()
  }

  /** close(), for `await using file = await openGguf(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}

/**
 * A slice of a quantized tensor as runs of its blocks: each row (the last dimension) is whole blocks, so the tensor
 * is sliced as bytes, its last dimension counted in bytes; a range there must start and stop on block boundaries.
 */
function planBlocks(info: GgufTensorInfo, ranges: readonly SliceRange[]): { shape: number[]; runs: Array<[number, number]> } {
  const { name, type, shape } = info
  const { block, bytes } = GGML_TYPES[type]
  // The slice as the caller means it, checked as any other (ranges, bounds) and giving the result's shape.
  const plan = planSlice(name, 'U8', shape, ranges)
  const last = shape.length - 1
  const range = ranges[last] ?? null
  const toBytes = (n: number) => (n / block) * bytes
  let inBytes: SliceRange = null
  if (range !== null) {
    const [start, stop] = typeof range === 'number' ? [range, range + 1] : range
    if (start % block !== 0 || stop % block !== 0)
      throw new SafetensorsError(
        'MisalignedSlice',
        `tensor ${JSON.stringify(name)} of shape [${shape.join(', ')}]: ${typeof range === 'number' ? `index ${range}` : `range [${start}, ${stop})`} of its last dimension cuts a ${type} block of ${block} values; slice it on multiples of ${block}`,
      )
    inBytes = [toBytes(start), toBytes(stop)]
  }
  const byteShape = [...shape.slice(0, last), toBytes(shape[last])]
  return { shape: plan.shape, runs: planSlice(name, 'U8', byteShape, [...ranges.slice(0, last), inBytes]).runs }
}
