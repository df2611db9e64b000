// open(): one SafeTensors file behind any source, read lazily: the header first, then only the bytes of
// the tensors (or slices) asked for.

import { localFiles } from '#platform'
import { checkCache, type RangeCache, withCache } from '../cache/hook.ts'
import { type ByteOrder, hostByteOrder } from '../core/byte-order.ts'
import {
  byteLengthOf,
  type Core,
  checkConversion,
  convertInto,
  convertOverlapping,
  elementCountOf,
  instantiate,
  kernelModule,
  POOL_MIN_BYTES,
  swapElements,
  swapElementsInCore,
  wantsDedicatedCore,
} from '../core/convert.ts'
import { DTYPE_INFO, type DType, dtypeIndex, type Float16Array, type TypedArray } from '../core/dtypes.ts'
import { inContext, SafetensorsError } from '../errors.ts'
import { type Header, type Metadata, parseHeader, readHeaderSize, type TensorInfo } from '../format/header.ts'
import { planSlice, type SliceRange } from '../format/slice.ts'
import { requireLocalFiles } from '../platform/platform.ts'
import type { PoolReads } from '../pool/read.ts'
import { connectionsOption } from '../sources/downloads.ts'
import { type HttpOptions, type HttpSource, httpSource } from '../sources/http/source.ts'
import { readingAhead } from '../sources/pool.ts'
import { metered, type ProgressCallback, ProgressMeter } from '../sources/progress.ts'
import { readRuns } from '../sources/read-plan.ts'
import { integerOption, retrySettings } from '../sources/retry.ts'
import { abortedError, blobSource, memorySource, type OnBytes, onAbort, type RangeSource, readInto, throwIfAborted } from '../sources/source.ts'
import { type StreamOptions, tensorStream } from './tensor-stream.ts'

/** A tensor read from a file or model: its name, dtype, shape and values. */
export interface Tensor<T extends TypedArray | Float16Array = TypedArray> {
  /** The tensor's name in the file. */
  readonly name: string
  /** The dtype of `data`: the file's, or the one asked for. */
  readonly dtype: DType
  /** The tensor's dimensions (a slice's, for getSlice); `[]` for a scalar. */
  readonly shape: number[]
  /** The natural TypedArray of `dtype` (see DTYPE_INFO). */
  readonly data: T
}

/**
 * The array a read gives for a requested dtype: Float32Array for F32, Uint16Array of bits for BF16, and
 * for F16 Uint16Array of bits, or Float16Array when the read asks for it (`H`: its `float16Array`).
 */
export type DataFor<D extends DType, H extends boolean = false> = D extends 'F32'
  ? Float32Array
  : D extends 'BF16'
    ? Uint16Array
    : D extends 'F16'
      ? H extends true
        ? Float16Array
        : Uint16Array
      : H extends true
        ? TypedArray | Float16Array
        : TypedArray

/** Options of {@link open}; the HTTP ones ({@link HttpOptions}) apply to http(s) URLs only. */
export interface OpenOptions extends HttpOptions {
  /**
   * Byte order of the tensor data in the file: 'big' for legacy files written on big-endian hosts.
   * @defaultValue 'little'
   */
  byteOrder?: ByteOrder
  /**
   * Every read made through this file (header included), as its bytes arrive: `loaded` never decreases
   * and `total` is the bytes asked for so far, so loaded === total whenever nothing is pending.
   */
  onProgress?: ProgressCallback
  /**
   * http(s): a persistent cache ({@link index!createCache}) of the bytes read; repeat reads come from it.
   * @defaultValue none
   */
  cache?: RangeCache
  /** Aborts the open (the header's read) with `Aborted`; not the reads of the open file, which take their own `signal`. */
  signal?: AbortSignal
  /**
   * The workers that convert this file's reads (docs/memory.md, "The conversion pool"): 0 converts on the
   * calling thread; N uses N workers of the pool that every open file shares. Results read on the pool are
   * in a SharedArrayBuffer where the runtime allows it (Node, Deno, Bun, cross-origin isolated pages).
   * @defaultValue one worker per core, at most 8 (none in workerd)
   */
  workers?: number
}

/** Options of a read: {@link SafetensorsFile.getTensor}, {@link SafetensorsFile.getSlice}, {@link SafetensorsFile.tensors}. */
export interface ReadOptions<D extends DType = DType, H extends boolean = boolean> {
  /**
   * Convert to this dtype on read: 'F32' from every dtype but C64, 'F16' and 'BF16' from every float dtype.
   * @defaultValue the tensor's own dtype
   */
  dtype?: D
  /**
   * true: an F16 result (the file's dtype, or the one asked for) comes as the runtime's native
   * Float16Array over the same bits, instead of a Uint16Array of them; other dtypes are unaffected.
   * A TypeError where the runtime has no Float16Array (Node 20). Default false, the same on every runtime.
   * @defaultValue false
   */
  float16Array?: H
  /** Aborts the read: it rejects with `Aborted`. */
  signal?: AbortSignal
  /** This read alone, as its bytes arrive; the last event has loaded === total. */
  onProgress?: ProgressCallback
  /**
   * Write the result here (e.g. `gpuBuffer.getMappedRange()`): an ArrayBuffer or a view with at least
   * the result's byte length, aligned for its array. `data` is then a view of it, and no array of the
   * result's size is allocated. Too small an `out` is a RangeError before anything is read.
   * @defaultValue a new array
   */
  out?: ArrayBuffer | ArrayBufferView
}

/**
 * What {@link open} reads: the file's bytes, a Blob or File, an http(s) URL (a string, or a URL object; in a
 * page, a string is a URL relative to the page), a file path or `file:` URL (Node entry only), or any
 * {@link RangeSource}.
 */
export type Source = Uint8Array | ArrayBuffer | Blob | URL | string | RangeSource

function isRangeSource(value: unknown): value is RangeSource {
  return typeof value === 'object' && value !== null && typeof (value as RangeSource).read === 'function'
}

/**
 * The URL a string or URL names: an http(s) or file: URL, or, in a page (where there are no local files), a
 * URL relative to it; undefined for a local path.
 */
export function urlOf(input: string | URL): URL | undefined {
  if (input instanceof URL) return input
  if (/^(https?|file):/i.test(input)) return new URL(input)
  const page = localFiles ? undefined : (globalThis as { location?: { href: string } }).location
  return page && new URL(input, page.href)
}

/** Picks the RangeSource for an input: memory, Blob/File, http(s) URL, a local file path, or a RangeSource. */
export async function toRangeSource(input: Source, options: OpenOptions = {}): Promise<RangeSource> {
  if (input instanceof Uint8Array) return memorySource(input)
  if (input instanceof ArrayBuffer) return memorySource(new Uint8Array(input))
  if (typeof Blob !== 'undefined' && input instanceof Blob) return blobSource(input)
  if (isRangeSource(input)) return input
  if (typeof input !== 'string' && !(input instanceof URL)) throw new TypeError(`cannot open ${Object.prototype.toString.call(input)}`)
  const url = urlOf(input)
  if (url?.protocol === 'http:' || url?.protocol === 'https:') return withCache(httpSource(url, options), options.cache)
  if (url && url.protocol !== 'file:') throw new TypeError(`cannot open ${url}: unsupported URL scheme`)
  const local = requireLocalFiles(localFiles, `open(${JSON.stringify(String(input))})`)
  return local.open(url ? local.pathOf(url) : (input as string))
}

/**
 * Opens a SafeTensors file and reads its header (over HTTP, the first 64 KiB); tensors are read only when
 * asked for.
 *
 * @throws {@link SafetensorsError} any of the header's codes, in the order of {@link ErrorCode}
 * (`HeaderTooSmall`, `HeaderTooLarge`, `InvalidHeaderLength`, `InvalidHeader`, `InvalidHeaderDeserialization`,
 * `InvalidOffset`, `ValidationOverflow`, `MisalignedSlice`, `TensorInvalidInfo`, `MetadataIncompleteBuffer`);
 * `Io` when the source cannot be read (a missing file, an HTTP error, a file that changed); `Aborted` when
 * `options.signal` aborts.
 * @throws TypeError for a value that cannot be opened (an unsupported URL scheme; a path in the browser
 * entry) or an option of the wrong type; RangeError for an option out of range.
 */
export async function open(input: Source, options: OpenOptions = {}): Promise<SafetensorsFile> {
  return openMetered(input, options, options.onProgress && new ProgressMeter(options.onProgress))
}

/** open(), with every read counted by `meter` (a model's meter counts all its shards). */
export async function openMetered(input: Source, options: OpenOptions, meter: ProgressMeter | undefined): Promise<SafetensorsFile> {
  return openSource(
    input,
    options,
    meter,
    async (source) => new SafetensorsFile(await readHeader(source, options.signal), source, options.byteOrder ?? 'little', options.workers),
  )
}

/**
 * What every open shares, whatever the format: the options checked, the source made (counted by `meter`), then
 * `read` makes the file from it; on failure the source is closed, and an error over HTTP named by its URL.
 */
export async function openSource<T>(
  input: Source,
  options: OpenOptions,
  meter: ProgressMeter | undefined,
  read: (source: RangeSource) => Promise<T>,
): Promise<T> {
  // Checked whatever the source, so that a bad value shows on a local file as it would on a URL.
  if (options.workers !== undefined) integerOption('workers', options.workers, 0)
  retrySettings(options)
  connectionsOption(options)
  checkCache(options.cache)
  throwIfAborted(options.signal)
  const opened = await toRangeSource(input, options)
  const source = meter ? metered(opened, meter, (opened as { url?: string }).url) : opened
  try {
    const file = await read(source)
    // Also where the source reads without a signal (memory, a local file): an abort during the open is its end.
    throwIfAborted(options.signal)
    return file
  } catch (error) {
    await source.close?.()
    // Over HTTP a file that is not of its format (a web page, an API's JSON) is named by its URL.
    const { url } = opened as Partial<HttpSource>
    throw url !== undefined && error instanceof SafetensorsError && error.url === undefined ? inContext(error, url, { url }) : error
  }
}

declare global {
  // What `await using` calls, declared for the libs before it (ES2022, a page's DOM): as Node's types declare it.
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol
  }
}

/** An open SafeTensors file, from {@link open}: its header, and reads of its tensors. */
export class SafetensorsFile {
  /** @internal made by open() */
  constructor(
    /** The parsed, validated header. */
    readonly header: Header,
    /** Where the bytes come from. */
    readonly source: RangeSource,
    /** Byte order of the tensor data in the file. */
    readonly byteOrder: ByteOrder = 'little',
    /** The `workers` option of {@link open}. */
    readonly workers?: number,
  ) {}

  /** The header's `__metadata__` strings, or null when it has none. */
  get metadata(): Metadata | null {
    return this.header.metadata
  }

  /** Tensor names in data order. */
  names(): string[] {
    return this.header.tensors.map((t) => t.name)
  }

  /**
   * The header's entry for one tensor.
   * @throws {@link SafetensorsError} `TensorNotFound`
   */
  info(name: string): TensorInfo {
    return this.header.tensor(name)
  }

  /**
   * Reads one tensor's bytes and nothing else, converted to `options.dtype` if given.
   * @throws {@link SafetensorsError} `TensorNotFound`; `UnsupportedConversion` (no conversion to that dtype);
   * `Io` (a failed read; a tensor too large for one buffer); `Aborted`.
   * @throws RangeError for an `out` too small or misaligned; TypeError for `float16Array` where the runtime has
   * no Float16Array.
   */
  async getTensor<D extends DType, H extends boolean = false>(name: string, options: ReadOptions<D, H> = {}): Promise<Tensor<DataFor<D, H>>> {
    const info = this.info(name)
    return this.#read(info, info.shape, [[0, info.byteLength]], options) as Promise<Tensor<DataFor<D, H>>>
  }

  /**
   * Reads only the bytes a slice covers: one {@link SliceRange} per leading dimension.
   * @throws {@link SafetensorsError} `TensorNotFound`; `SliceOutOfRange`; `TooManySlices`; `MisalignedSlice`
   * (an F4 or F6 slice that is not whole bytes); `UnsupportedConversion`; `Io`; `Aborted`.
   * @throws RangeError and TypeError as {@link SafetensorsFile.getTensor} does.
   */
  async getSlice<D extends DType, H extends boolean = false>(
    name: string,
    ranges: readonly SliceRange[],
    options: ReadOptions<D, H> = {},
  ): Promise<Tensor<DataFor<D, H>>> {
    const info = this.info(name)
    const plan = planSlice(name, info.dtype, info.shape, ranges)
    return this.#read(info, plan.shape, plan.runs, options) as Promise<Tensor<DataFor<D, H>>>
  }

  /**
   * The tensor's (or, with `ranges`, the slice's) little-endian bytes as a stream, converted chunk by
   * chunk as the consumer pulls, in memory bounded by a few chunks (src/read/tensor-stream.ts). Read errors error the
   * stream; cancel() aborts the reads.
   * @throws {@link SafetensorsError} at once: `TensorNotFound`, `SliceOutOfRange`, `TooManySlices`,
   * `MisalignedSlice`, `UnsupportedConversion`; later, as the stream's error: `Io`, `Aborted`.
   */
  stream(name: string, options: StreamOptions & { ranges?: readonly SliceRange[] } = {}): ReadableStream<Uint8Array> {
    const info = this.info(name)
    const runs = options.ranges === undefined ? [[0, info.byteLength] as [number, number]] : planSlice(name, info.dtype, info.shape, options.ranges).runs
    return tensorStream(this, info, runs, options)
  }

  /**
   * Every tensor in file order; the next one (up to 16 MiB) is read while this one is handled.
   * @throws {@link SafetensorsError} as {@link SafetensorsFile.getTensor} does, from the iteration.
   */
  tensors<D extends DType, H extends boolean = false>(options: ReadOptions<D, H> = {}): AsyncGenerator<Tensor<DataFor<D, H>>> {
    return readingAhead(this.header.tensors.map((info) => ({ bytes: info.byteLength, read: () => this.getTensor(info.name, options) })))
  }

  /** Releases the source (a local file's handle). A file dropped without it closes when it is collected. */
  async close(): Promise<void> {
    await this.source.close?.()
  }

  /** close(), for `await using file = await open(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  async #read(info: TensorInfo, shape: number[], runs: Array<[number, number]>, options: ReadOptions): Promise<Tensor<TypedArray | Float16Array>> {
    throwIfAborted(options.signal)
    const from = info.dtype
    const to = options.dtype ?? from
    checkConversion(from, to)
    const half = float16ArrayFor(options.float16Array)
    const start = this.header.dataStart + info.dataOffsets[0]
    const inBytes = runs.reduce((sum, [, length]) => sum + length, 0)
    const outBytes = byteLengthOf(
      to,
      shape.reduce((a, b) => a * b, 1),
    )
    // Checked before any read: a wrong `out` is the caller's mistake, not the file's.
    const out = options.out === undefined ? undefined : outputIn(options.out, info, to, outBytes)
    const meter = options.onProgress && new ProgressMeter(options.onProgress)
    meter?.asked(inBytes)
    const io: ReadIo = { signal: options.signal, onBytes: meter && ((bytes) => meter.arrived(bytes)) }
    const pooled =
      outBytes >= POOL_MIN_BYTES && this.workers !== 0
        ? await (await loadPool())?.readOnPool(this.source, this.workers, {
            name: info.name,
            from,
            to,
            byteOrder: this.byteOrder,
            start,
            runs,
            outBytes,
            out,
            ...io,
          })
        : undefined
    const data =
      pooled ??
      (from === to
        ? await this.#readRaw(info, start, runs, inBytes, io, out)
        : !out && wantsDedicatedCore(inBytes, outBytes)
          ? await this.#readIntoCore(info, to, start, runs, inBytes, outBytes, io)
          : await this.#readAndConvert(info, to, start, runs, inBytes, io, out ?? allocate(info, to, outBytes)))
    // A copy: the caller may change it, and the header's own array must stay as the file says.
    return { name: info.name, dtype: to, shape: [...shape], data: half && to === 'F16' ? new half(data.buffer, data.byteOffset, data.length) : data }
  }

  /** Without conversion: a view of the caller's bytes where possible, else read straight into the result. */
  async #readRaw(info: TensorInfo, start: number, runs: Array<[number, number]>, inBytes: number, io: ReadIo, out?: Output): Promise<TypedArray> {
    const Natural = DTYPE_INFO[info.dtype].array
    const unit = Natural.BYTES_PER_ELEMENT
    const swap = this.byteOrder !== hostByteOrder()
    const source = this.source as { bytes?: Uint8Array }
    if (!out && source.bytes && runs.length === 1 && (!swap || unit === 1) && (source.bytes.byteOffset + start + runs[0][0]) % unit === 0) {
      // A memory source's read is a view of its bytes: no copy, and counted like any other read.
      const view = await this.source.read(start + runs[0][0], inBytes, io.signal, io.onBytes)
      return new Natural(view.buffer, view.byteOffset, inBytes / unit)
    }
    const { data, bytes } = out ?? allocate(info, info.dtype, inBytes)
    await this.#readRuns(start, runs, bytes, io)
    if (swap) swapElements(bytes, info.dtype)
    return data
  }

  /**
   * Large widening conversions: the bytes land once in a memory of their own and are converted there,
   * chunk by chunk as they arrive, so reading and converting overlap.
   */
  async #readIntoCore(
    info: TensorInfo,
    to: DType,
    start: number,
    runs: Array<[number, number]>,
    inBytes: number,
    outBytes: number,
    io: ReadIo,
  ): Promise<TypedArray> {
    let core: Core
    try {
      core = instantiate(outBytes, false)
    } catch (cause) {
      throw tooLarge(info, outBytes, to, cause)
    }
    const from = info.dtype
    const dst = core.heapBase
    // The input sits at the end of the output region, as the kernels' in-place contract wants; a chunk's
    // output ends before the next chunk's input begins, so converting chunk by chunk front to back is safe.
    const src = dst + outBytes - inBytes
    await this.#readConverting(start, runs, new Uint8Array(core.memory.buffer, src, inBytes), io, (at, end) => {
      // The kernels work on little-endian data, and the result must be in the host's order.
      if (this.byteOrder === 'big') swapElementsInCore(core, src + at, end - at, from)
      convertInto(core, src + at, dst + byteLengthOf(to, elementCountOf(from, at)), elementCountOf(from, end - at), from, to)
    })
    if (hostByteOrder() === 'big') swapElementsInCore(core, dst, outBytes, to)
    const Natural = DTYPE_INFO[to].array
    return new Natural(core.memory.buffer, dst, outBytes / Natural.BYTES_PER_ELEMENT)
  }

  /** Other conversions: read into one buffer and convert into the result through the shared core, chunk by chunk as the bytes arrive. */
  async #readAndConvert(
    info: TensorInfo,
    to: DType,
    start: number,
    runs: Array<[number, number]>,
    inBytes: number,
    io: ReadIo,
    output: Output,
  ): Promise<TypedArray> {
    const from = info.dtype
    // A wider output holds the input at its end (docs/memory.md, "Converting in place"), so the bytes are read
    // there, with no temporary: chunks convert front to back, and an element's output reaches no input
    // past its own. A narrower one needs the input beside it.
    const bytes = output.bytes.length >= inBytes ? output.bytes.subarray(output.bytes.length - inBytes) : allocate(info, from, inBytes).bytes
    await this.#readConverting(start, runs, bytes, io, (at, end) => {
      const chunk = bytes.subarray(at, end)
      if (this.byteOrder === 'big') swapElements(chunk, from)
      const first = elementCountOf(from, at)
      convertOverlapping(chunk, from, to, output.bytes.subarray(byteLengthOf(to, first), byteLengthOf(to, first + elementCountOf(from, end - at))))
    })
    if (hostByteOrder() === 'big') swapElements(output.bytes, to)
    return output.data
  }

  /**
   * Reads the runs into `target` and calls `convert(at, end)` on byte ranges that together cover it once,
   * in order. A single run is converted in chunks as its bytes land (sources fill a read front to back
   * and report each part through onBytes), so the conversion of one chunk overlaps the transfer of the
   * next; the runs of a slice arrive in any order, and are converted once all have come.
   */
  async #readConverting(
    start: number,
    runs: Array<[number, number]>,
    target: Uint8Array,
    io: ReadIo,
    convert: (at: number, end: number) => void,
  ): Promise<void> {
    if (runs.length !== 1) {
      await this.#readRuns(start, runs, target, io)
      if (target.length > 0) convert(0, target.length)
      return
    }
    let landed = 0
    let converted = 0
    // `done`: the bytes at the front complete, where parts land out of order (parallel chunks).
    const onBytes = (bytes: number, done?: number) => {
      io.onBytes?.(bytes)
      landed = done ?? landed + bytes
      const whole = landed - ((landed - converted) % CONVERT_CHUNK)
      if (whole > converted) {
        convert(converted, whole)
        converted = whole
      }
    }
    await this.#readRuns(start, runs, target, { signal: io.signal, onBytes })
    if (converted < target.length) convert(converted, target.length)
  }

  /** Reads the runs packed one after another into `target`, merged and split as their cost says (src/sources/read-plan.ts). */
  async #readRuns(start: number, runs: Array<[number, number]>, target: Uint8Array, io: ReadIo): Promise<void> {
    await readRuns(this.source, start, runs, target, io.signal, io.onBytes)
  }
}

/**
 * Bytes converted at a time while a read is still arriving: a multiple of 24, so every chunk holds whole
 * elements of every dtype (F6 packs 4 in 3 bytes, F64 takes 8); large enough that a call costs nothing.
 */
const CONVERT_CHUNK = 3 << 20

/** A result's natural array and its bytes. */
interface Output {
  data: TypedArray
  bytes: Uint8Array
}

/** The result's array inside the caller's `out` (its first bytes); a RangeError when it is too small or misaligned. */
export function outputIn(out: ArrayBuffer | ArrayBufferView, info: Pick<TensorInfo, 'name'>, to: DType, outBytes: number): Output {
  const isBuffer = out instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && out instanceof SharedArrayBuffer)
  if (!isBuffer && !ArrayBuffer.isView(out))
    throw new TypeError(`out must be an ArrayBuffer or a TypedArray/DataView, got ${Object.prototype.toString.call(out)}`)
  const [buffer, offset, length] = isBuffer
    ? [out as ArrayBuffer, 0, (out as ArrayBuffer).byteLength]
    : [(out as ArrayBufferView).buffer, (out as ArrayBufferView).byteOffset, (out as ArrayBufferView).byteLength]
  const Natural = DTYPE_INFO[to].array
  if (length < outBytes) throw new RangeError(`out holds ${length} bytes, but tensor ${JSON.stringify(info.name)} as ${to} takes ${outBytes}`)
  if (offset % Natural.BYTES_PER_ELEMENT !== 0) throw new RangeError(`out starts at byte ${offset} of its buffer, which a ${Natural.name} cannot start at`)
  return { data: new Natural(buffer, offset, outBytes / Natural.BYTES_PER_ELEMENT), bytes: new Uint8Array(buffer, offset, outBytes) }
}

type Float16ArrayConstructor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Float16Array

/** The runtime's Float16Array when a read asks for one; a TypeError for a non-boolean or a runtime without it. */
export function float16ArrayFor(option: unknown): Float16ArrayConstructor | undefined {
  if (option === undefined || option === false) return undefined
  if (option !== true) throw new TypeError(`float16Array must be a boolean, got ${typeof option}`)
  const native = (globalThis as { Float16Array?: Float16ArrayConstructor }).Float16Array
  if (typeof native !== 'function')
    throw new TypeError(
      'float16Array: true needs the global Float16Array, which this runtime does not have (Node 20 lacks it; Node 24 and current browsers have it)',
    )
  return native
}

/** What every read of one getTensor/getSlice passes down: its abort signal and its progress. */
interface ReadIo {
  signal?: AbortSignal
  onBytes?: OnBytes
}

function tooLarge(info: Pick<TensorInfo, 'name'>, bytes: number, dtype: DType, cause: unknown): SafetensorsError {
  return new SafetensorsError('Io', `tensor ${JSON.stringify(info.name)} needs ${bytes} bytes as ${dtype}, more than one buffer can hold here`, { cause })
}

/** A new natural array of `dtype` holding `bytes` bytes, and its bytes; an error naming the size if it cannot exist. */
export function allocate(info: Pick<TensorInfo, 'name'>, dtype: DType, bytes: number): Output {
  const Natural = DTYPE_INFO[dtype].array
  try {
    const data = new Natural(bytes / Natural.BYTES_PER_ELEMENT)
    return { data, bytes: new Uint8Array(data.buffer) }
  } catch (cause) {
    throw tooLarge(info, bytes, dtype, cause)
  }
}

let pool: Promise<PoolReads | undefined> | undefined

/**
 * The conversion pool's reads (src/pool/read.ts), loaded once, on demand, with what they are lent of the library;
 * undefined where they cannot load (a page whose import map lacks `#workers`): reads stay on the calling thread.
 */
export function loadPool(): Promise<PoolReads | undefined> {
  pool ??= import('../pool/read.ts').then(
    (module) =>
      module.poolReads({
        SafetensorsError,
        hostByteOrder,
        byteLengthOf,
        elementCountOf,
        DTYPE_INFO,
        dtypeIndex,
        readRuns,
        abortedError,
        onAbort,
        throwIfAborted,
        kernelModule,
      }),
    () => undefined,
  )
  return pool
}

/** Bytes read first: most real headers (up to several hundred tensors) arrive in this one read. */
const FIRST_READ = 64 * 1024

/** A file's first bytes (64 KiB, or all of a smaller file) and its size, which a source knows once it has read. */
export async function readFirst(source: RangeSource, signal?: AbortSignal): Promise<{ first: Uint8Array; size: number }> {
  const first = await source.read(0, source.size === undefined ? FIRST_READ : Math.min(source.size, FIRST_READ), signal)
  const size = source.size
  if (size === undefined) throw new SafetensorsError('Io', 'the source did not report its size after the first read')
  return { first, size }
}

/**
 * Reads and validates a source's header, reading only the length prefix and the header bytes.
 * @throws {@link SafetensorsError} `HeaderTooSmall`, `HeaderTooLarge`, `InvalidHeaderLength`, `InvalidHeader`,
 * `InvalidHeaderDeserialization`, `InvalidOffset`, `ValidationOverflow`, `MisalignedSlice`, `TensorInvalidInfo`,
 * `MetadataIncompleteBuffer`: the first check the header fails, in this order (see {@link ErrorCode}); `Io` when the source cannot be read; `Aborted`.
 */
export async function readHeader(source: RangeSource, signal?: AbortSignal): Promise<Header> {
  const { first, size } = await readFirst(source, signal)
  const n = readHeaderSize(first, size)
  let bytes = first
  if (first.length < 8 + n) {
    bytes = new Uint8Array(8 + n)
    bytes.set(first)
    await readInto(source, first.length, bytes.subarray(first.length), signal)
  }
  return parseHeader(bytes.subarray(0, 8 + n), { fileSize: size })
}
