// open(): one SafeTensors file behind any source, read lazily: the header first, then only the bytes of
// the tensors (or slices) asked for.
import { DTYPE_INFO, type DType, type TypedArray } from './dtypes.ts'
import { SafetensorsError } from './errors.ts'
import { readHeader, type Header, type TensorInfo } from './header.ts'
import { httpSource, type HttpOptions } from './http.ts'
import { retrySettings } from './retry.ts'
import { planSlice, type SliceRange } from './slice.ts'
import { blobSource, fileSource, memorySource, readInto, throwIfAborted, type RangeSource } from './source.ts'
import { hostByteOrder, type ByteOrder } from './byte-order.ts'
import { byteLengthOf, checkConversion, convert, convertInto, elementCountOf, swapElements, swapElementsInCore, wantsDedicatedCore } from './convert.ts'
import { instantiate, type Core } from './wasm.ts'

export interface Tensor<T extends TypedArray = TypedArray> {
  readonly name: string
  /** The dtype of `data`: the file's, or the one asked for. */
  readonly dtype: DType
  readonly shape: number[]
  /** The natural TypedArray of `dtype` (see DTYPE_INFO). */
  readonly data: T
}

/** The array a read gives for a requested dtype: Float32Array for F32, Uint16Array of bits for F16/BF16. */
export type DataFor<D extends DType> = D extends 'F32' ? Float32Array : D extends 'F16' | 'BF16' ? Uint16Array : TypedArray

export interface OpenOptions extends HttpOptions {
  /** Byte order of the tensor data in the file: 'big' for legacy files written on big-endian hosts. */
  byteOrder?: ByteOrder
}

export interface ReadOptions<D extends DType = DType> {
  /** Convert to this dtype on read. */
  dtype?: D
  signal?: AbortSignal
}

export type Source = Uint8Array | ArrayBuffer | Blob | URL | string | RangeSource

function isRangeSource(value: unknown): value is RangeSource {
  return typeof value === 'object' && value !== null && typeof (value as RangeSource).read === 'function'
}

/** Picks the RangeSource for an input: memory, Blob/File, http(s) URL, a Node file path, or a RangeSource. */
export async function toRangeSource(input: Source, options: OpenOptions = {}): Promise<RangeSource> {
  if (input instanceof Uint8Array) return memorySource(input)
  if (input instanceof ArrayBuffer) return memorySource(new Uint8Array(input))
  if (typeof Blob !== 'undefined' && input instanceof Blob) return blobSource(input)
  if (isRangeSource(input)) return input
  if (typeof input !== 'string' && !(input instanceof URL)) throw new TypeError(`cannot open ${Object.prototype.toString.call(input)}`)
  const onNode = typeof process !== 'undefined' && process.versions?.node !== undefined
  // On Node a string is a path unless it is an http(s) URL; in a page, a string is a URL relative to it.
  const page = !onNode && typeof input === 'string' ? (globalThis as { location?: { href: string } }).location : undefined
  const url = input instanceof URL ? input : /^https?:\/\//i.test(input) ? new URL(input) : page ? new URL(input, page.href) : undefined
  if (url?.protocol === 'http:' || url?.protocol === 'https:') return httpSource(url, options)
  if (url && url.protocol !== 'file:') throw new TypeError(`cannot open ${url}: unsupported URL scheme`)
  if (!onNode) throw new TypeError(`file paths can only be opened on Node; pass a URL, Blob or bytes instead of ${JSON.stringify(String(input))}`)
  const { fileURLToPath } = await import('node:url')
  return fileSource(url ? fileURLToPath(url) : (input as string))
}

export async function open(input: Source, options: OpenOptions = {}): Promise<SafetensorsFile> {
  // Checked whatever the source, so that a bad value shows on a local file as it would on a URL.
  retrySettings(options)
  const source = await toRangeSource(input, options)
  try {
    return new SafetensorsFile(await readHeader(source, options.signal), source, options.byteOrder ?? 'little')
  } catch (error) {
    await source.close?.()
    throw error
  }
}

export class SafetensorsFile {
  constructor(
    readonly header: Header,
    readonly source: RangeSource,
    /** Byte order of the tensor data in the file. */
    readonly byteOrder: ByteOrder = 'little',
  ) {}

  get metadata(): Record<string, string> | null {
    return this.header.metadata
  }

  /** Tensor names in data order. */
  names(): string[] {
    return this.header.tensors.map((t) => t.name)
  }

  /** Throws TensorNotFound. */
  info(name: string): TensorInfo {
    return this.header.tensor(name)
  }

  /** Reads one tensor's bytes and nothing else. */
  async getTensor<D extends DType>(name: string, options: ReadOptions<D> = {}): Promise<Tensor<DataFor<D>>> {
    const info = this.info(name)
    return this.#read(info, info.shape, [[0, info.byteLength]], options) as Promise<Tensor<DataFor<D>>>
  }

  /** Reads only the bytes a slice covers; see SliceRange. */
  async getSlice<D extends DType>(name: string, ranges: readonly SliceRange[], options: ReadOptions<D> = {}): Promise<Tensor<DataFor<D>>> {
    const info = this.info(name)
    const plan = planSlice(name, info.dtype, info.shape, ranges)
    return this.#read(info, plan.shape, plan.runs, options) as Promise<Tensor<DataFor<D>>>
  }

  /** Every tensor in file order, read one after the other. */
  async *tensors<D extends DType>(options: ReadOptions<D> = {}): AsyncGenerator<Tensor<DataFor<D>>> {
    for (const info of this.header.tensors) yield (await this.#read(info, info.shape, [[0, info.byteLength]], options)) as Tensor<DataFor<D>>
  }

  async close(): Promise<void> {
    await this.source.close?.()
  }

  async #read(info: TensorInfo, shape: number[], runs: Array<[number, number]>, options: ReadOptions): Promise<Tensor> {
    throwIfAborted(options.signal)
    const from = info.dtype
    const to = options.dtype ?? from
    checkConversion(from, to)
    const start = this.header.dataStart + info.dataOffsets[0]
    const inBytes = runs.reduce((sum, [, length]) => sum + length, 0)
    const outBytes = byteLengthOf(to, shape.reduce((a, b) => a * b, 1))
    const data = from === to
      ? await this.#readRaw(info, start, runs, inBytes, options.signal)
      : wantsDedicatedCore(inBytes, outBytes)
        ? await this.#readIntoCore(info, to, start, runs, inBytes, outBytes, options.signal)
        : await this.#readAndConvert(info, to, start, runs, inBytes, outBytes, options.signal)
    // A copy: the caller may change it, and the header's own array must stay as the file says.
    return { name: info.name, dtype: to, shape: [...shape], data }
  }

  /** Without conversion: a view of the caller's bytes where possible, else one buffer read into. */
  async #readRaw(info: TensorInfo, start: number, runs: Array<[number, number]>, inBytes: number, signal?: AbortSignal): Promise<TypedArray> {
    const Array = DTYPE_INFO[info.dtype].array
    const unit = Array.BYTES_PER_ELEMENT
    const swap = this.byteOrder !== hostByteOrder()
    const source = this.source as { bytes?: Uint8Array }
    if (source.bytes && runs.length === 1 && (!swap || unit === 1)) {
      const offset = source.bytes.byteOffset + start + runs[0][0]
      if (offset % unit === 0) return new Array(source.bytes.buffer, offset, inBytes / unit)
    }
    const { data, bytes } = allocate(info, info.dtype, inBytes)
    await this.#readRuns(start, runs, bytes, signal)
    if (swap) swapElements(bytes, info.dtype)
    return data
  }

  /** Large widening conversions: the bytes land once in a memory of their own and are converted there. */
  async #readIntoCore(info: TensorInfo, to: DType, start: number, runs: Array<[number, number]>, inBytes: number, outBytes: number, signal?: AbortSignal): Promise<TypedArray> {
    let core: Core
    try {
      core = instantiate(outBytes, false)
    } catch (cause) {
      throw tooLarge(info, outBytes, to, cause)
    }
    const dst = core.heapBase
    // The input sits at the end of the output region, as the kernels' in-place contract wants.
    const src = dst + outBytes - inBytes
    await this.#readRuns(start, runs, new Uint8Array(core.memory.buffer, src, inBytes), signal)
    // The kernels work on little-endian data, and the result must be in the host's order.
    if (this.byteOrder === 'big') swapElementsInCore(core, src, inBytes, info.dtype)
    convertInto(core, src, dst, elementCountOf(info.dtype, inBytes), info.dtype, to)
    if (hostByteOrder() === 'big') swapElementsInCore(core, dst, outBytes, to)
    const Array = DTYPE_INFO[to].array
    return new Array(core.memory.buffer, dst, outBytes / Array.BYTES_PER_ELEMENT)
  }

  /** Other conversions: read into one buffer, convert through the shared core in cache-sized chunks. */
  async #readAndConvert(info: TensorInfo, to: DType, start: number, runs: Array<[number, number]>, inBytes: number, outBytes: number, signal?: AbortSignal): Promise<TypedArray> {
    const output = allocate(info, to, outBytes)
    const { bytes } = allocate(info, info.dtype, inBytes)
    await this.#readRuns(start, runs, bytes, signal)
    if (this.byteOrder === 'big') swapElements(bytes, info.dtype)
    convert(bytes, info.dtype, to, output.data)
    if (hostByteOrder() === 'big') swapElements(output.bytes, to)
    return output.data
  }

  /** Reads the runs packed one after another into `target`, a few at a time (a column slice has many). */
  async #readRuns(start: number, runs: Array<[number, number]>, target: Uint8Array, signal?: AbortSignal): Promise<void> {
    const at: number[] = []
    runs.reduce((sum, [, length]) => (at.push(sum), sum + length), 0)
    let next = 0
    const reader = async () => {
      while (next < runs.length) {
        const i = next++
        const [offset, length] = runs[i]
        try {
          await readInto(this.source, start + offset, target.subarray(at[i], at[i] + length), signal)
        } catch (error) {
          next = runs.length // the others start nothing more
          throw error
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(PARALLEL_READS, runs.length) }, reader))
  }
}

/** Reads in flight at once for one slice: enough to hide HTTP latency, few enough for any server. */
const PARALLEL_READS = 6

function tooLarge(info: TensorInfo, bytes: number, dtype: DType, cause: unknown): SafetensorsError {
  return new SafetensorsError('Io', `tensor ${JSON.stringify(info.name)} needs ${bytes} bytes as ${dtype}, more than one buffer can hold here`, { cause })
}

/** A new natural array of `dtype` holding `bytes` bytes, and its bytes; an error naming the size if it cannot exist. */
function allocate(info: TensorInfo, dtype: DType, bytes: number): { data: TypedArray; bytes: Uint8Array } {
  const Array = DTYPE_INFO[dtype].array
  try {
    const data = new Array(bytes / Array.BYTES_PER_ELEMENT)
    return { data, bytes: new Uint8Array(data.buffer) }
  } catch (cause) {
    throw tooLarge(info, bytes, dtype, cause)
  }
}
