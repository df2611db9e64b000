// Streams, in memory bounded by a few chunks whatever the size (docs/streams-and-workers.md):
// - tensorStream: one tensor or slice as a ReadableStream of little-endian bytes, converted on the way;
// - validateStream: a whole file checked as it flows by (and, optionally, forwarded once checked);
// - convertStream: a whole file re-encoded in another dtype, as a stream of the new file.
// Every chunk lands in a wasm memory of its own that never grows (so views into it survive the awaits
// between a read and its conversion), is converted there in place, and leaves as one copy.
import type { ByteOrder } from './byte-order.ts'
import {
  byteLengthOf,
  type ConvertTarget,
  type Core,
  checkConversion,
  convertInto,
  elementCountOf,
  instantiate,
  swapElementsInCore,
  targetOf,
} from './convert.ts'
import { type SequentialReader, sequentialReader } from './downloads.ts'
import type { DType } from './dtypes.ts'
import { SafetensorsError } from './errors.ts'
import type { SafetensorsFile } from './file.ts'
import { type Header, notSafetensors, parseHeaderOfUnknownSize, readHeaderSize, type TensorInfo } from './header.ts'
import { PARALLEL_READS, runPool } from './pool.ts'
import { packedStarts, type SlicePlan } from './slice.ts'
import { abortedError, linkedAbort, readInto, throwIfAborted } from './source.ts'
import { SafetensorsWriter, streamSink } from './writer.ts'

/** Options of {@link SafetensorsFile.stream} (which adds `ranges`, a slice). */
export interface StreamOptions<D extends DType = DType> {
  /**
   * Convert to this dtype on the way.
   * @defaultValue the tensor's own dtype
   */
  dtype?: D
  /** Aborting errors the stream with `Aborted` and aborts the read in flight. */
  signal?: AbortSignal
}

/**
 * Elements per chunk: a multiple of 4 (whole F4/F6 bytes), so at most 2 MiB of input (8-byte dtypes)
 * and 1 MiB of F32 output; large enough that a kernel call and a read cost nothing extra per chunk.
 */
const CHUNK_ELEMENTS = 1 << 18

/** The most bytes one chunk takes in its memory, input or output: 8-byte input elements. */
const MAX_SLOT_BYTES = CHUNK_ELEMENTS * 8

/** Input bytes of one full chunk of `from`. */
const chunkBytesOf = (from: DType) => byteLengthOf(from, CHUNK_ELEMENTS)

/**
 * One chunk's working set: a wasm memory sized once for the largest chunk it will convert. The input is
 * placed where the kernels' in-place contract wants it (at the end of a wider output, at the start of a
 * narrower one), so nothing is allocated per chunk but the copy handed out.
 */
export class ChunkConverter {
  readonly #core: Core

  constructor(bytes: number) {
    this.#core = instantiate(bytes, false)
  }

  /**
   * Lets `fill` put `inBytes` bytes of `from` (in the file's `byteOrder`) into the working set, converts
   * them to `to`, and returns the little-endian result: a view, valid until the next call.
   */
  async convert(from: DType, to: DType, byteOrder: ByteOrder, inBytes: number, fill: (target: Uint8Array) => Promise<void>): Promise<Uint8Array> {
    const count = elementCountOf(from, inBytes)
    const outBytes = byteLengthOf(to, count)
    const dst = this.#core.heapBase
    const src = dst + Math.max(0, outBytes - inBytes)
    await fill(new Uint8Array(this.#core.memory.buffer, src, inBytes))
    // The kernels read and write little-endian data, which is what a stream gives out.
    if (byteOrder === 'big') swapElementsInCore(this.#core, src, inBytes, from)
    convertInto(this.#core, src, dst, count, from, to)
    return new Uint8Array(this.#core.memory.buffer, dst, outBytes)
  }
}

/** Anything but a SafetensorsError becomes one (Io), so that a stream's consumer sees only codes. */
export function asSafetensorsError(error: unknown, what: string): SafetensorsError {
  if (error instanceof SafetensorsError) return error
  return new SafetensorsError('Io', `${what}: ${(error as Error)?.message ?? String(error)}`, { cause: error })
}

/**
 * Runs `body` with a signal of its own and settles with the first of: its outcome, an abort of the
 * caller's `signal` (Aborted), or `stop(reason)`. Both end the run at once, even while `body` waits on
 * a stalled stream or on a sink's backpressure, and abort its signal. The caller's signal loses its
 * listener when the run settles.
 */
function abortableRun<T>(signal: AbortSignal | undefined, body: (signal: AbortSignal) => Promise<T>): { done: Promise<T>; stop(reason: unknown): void } {
  let reject!: (reason: unknown) => void
  const stopped = new Promise<never>((_, r) => void (reject = r))
  const link = linkedAbort(signal, reject)
  const done = Promise.race([body(link.signal), stopped]).finally(link.release)
  return {
    done,
    stop: (reason) => {
      link.abort(reason)
      reject(reason)
    },
  }
}

/**
 * The byte pieces of runs (offset, length; relative to the tensor) that make up bytes [at, at + length)
 * of their concatenation, as [offset in the tensor, offset in the chunk, length]. `next` is the index of
 * the run holding `at`, kept by the caller between chunks so that a slice of a million runs stays linear.
 */
function piecesOf(runs: SlicePlan['runs'], starts: number[], cursor: { next: number }, at: number, length: number): Array<[number, number, number]> {
  const pieces: Array<[number, number, number]> = []
  for (let into = 0; into < length; ) {
    const [offset, runLength] = runs[cursor.next]
    const skip = at + into - starts[cursor.next]
    const take = Math.min(runLength - skip, length - into)
    pieces.push([offset + skip, into, take])
    into += take
    if (skip + take === runLength) cursor.next++
  }
  return pieces
}

/**
 * A stream of the chunks `chunks` yields, each produced when the consumer asks (with `ready` of them made
 * ahead). Its reads take the signal it is given: the caller's `signal`, aborted too when the consumer
 * cancels; the caller's abort errors the stream with Aborted at once. Any failure comes out as a
 * SafetensorsError about `what`. `end` runs once, when the stream ends, fails or is cancelled.
 */
export function pulledStream(
  signal: AbortSignal | undefined,
  what: string,
  chunks: (signal: AbortSignal) => AsyncIterator<Uint8Array>,
  ready: number,
  end: () => Promise<void> = async () => {},
): ReadableStream<Uint8Array> {
  let link: ReturnType<typeof linkedAbort>
  let iterator: AsyncIterator<Uint8Array> | undefined
  const finish = () => {
    link.release()
    return end()
  }
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        link = linkedAbort(signal, (error) => controller.error(error))
      },
      async pull(controller) {
        try {
          if (signal?.aborted) throw abortedError(signal)
          iterator ??= chunks(link.signal)
          const { done, value } = await iterator.next()
          if (!done) return controller.enqueue(value)
          await finish()
          controller.close()
        } catch (error) {
          await finish().catch(() => {})
          throw asSafetensorsError(error, what)
        }
      },
      async cancel(reason) {
        link.abort(reason)
        await finish()
      },
    },
    { highWaterMark: ready },
  )
}

/**
 * The bytes of one tensor or slice (`runs` of the tensor `info` of `file`), as `dtype`, pulled chunk by
 * chunk: a chunk is read only when the consumer has taken the one before (one is kept ready, so the
 * next read overlaps the consumer's work). Known problems (an unknown conversion) throw at once.
 */
export function tensorStream(file: SafetensorsFile, info: TensorInfo, runs: SlicePlan['runs'], options: StreamOptions = {}): ReadableStream<Uint8Array> {
  const from = info.dtype
  const to = options.dtype ?? from
  checkConversion(from, to)
  const start = file.header.dataStart + info.dataOffsets[0]
  const { starts, total } = packedStarts(runs)
  // One run (a tensor, a block of rows) is read ahead in parallel chunks over HTTP (src/downloads.ts).
  let input: SequentialReader | undefined
  return pulledStream(
    options.signal,
    `reading tensor ${JSON.stringify(info.name)}`,
    async function* (signal) {
      if (runs.length === 1) input = sequentialReader([{ source: file.source, offset: start + runs[0][0], length: runs[0][1] }], signal)
      const cursor = { next: 0 }
      let converter: ChunkConverter | undefined
      for (let done = 0; done < total; ) {
        const inBytes = Math.min(chunkBytesOf(from), total - done)
        const pieces = piecesOf(runs, starts, cursor, done, inBytes)
        // Sized for this stream's largest chunk: a small tensor gets a small memory.
        converter ??= new ChunkConverter(Math.max(inBytes, byteLengthOf(to, elementCountOf(from, inBytes))))
        const out = await converter.convert(from, to, file.byteOrder, inBytes, (target) =>
          input
            ? input.read(target)
            : runPool(pieces, PARALLEL_READS, ([offset, into, length]) => readInto(file.source, start + offset, target.subarray(into, into + length), signal)),
        )
        done += inBytes
        yield out.slice()
      }
    },
    1,
    async () => input?.close(),
  )
}

/** A ReadableStream read as bytes: exact amounts across chunk boundaries, with a count of bytes taken. */
class StreamInput {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>
  #chunk: Uint8Array = new Uint8Array(0)
  #at = 0
  /** Bytes taken so far. */
  position = 0

  constructor(stream: ReadableStream<Uint8Array>) {
    if (typeof (stream as { getReader?: unknown })?.getReader !== 'function')
      throw new TypeError(`expected a ReadableStream, got ${Object.prototype.toString.call(stream)}`)
    this.#reader = stream.getReader()
  }

  /** The next at most `max` bytes (a view of the stream's own chunk), or undefined at the end of the stream. */
  async next(max: number): Promise<Uint8Array | undefined> {
    while (this.#at === this.#chunk.length) {
      let result: ReadableStreamReadResult<Uint8Array>
      try {
        result = await this.#reader.read()
      } catch (cause) {
        throw asSafetensorsError(cause, `the stream failed after ${this.position} bytes`)
      }
      if (result.done) return undefined
      if (!(result.value instanceof Uint8Array)) throw new TypeError(`the stream gave ${Object.prototype.toString.call(result.value)}, not a Uint8Array`)
      this.#chunk = result.value
      this.#at = 0
    }
    const view = this.#chunk.subarray(this.#at, this.#at + max)
    this.#at += view.length
    this.position += view.length
    return view
  }

  /** Fills `target`; returns the bytes filled, fewer only where the stream ended. */
  async fill(target: Uint8Array): Promise<number> {
    let filled = 0
    for (let part: Uint8Array | undefined; filled < target.length && (part = await this.next(target.length - filled)); filled += part.length)
      target.set(part, filled)
    return filled
  }

  /** Stops the upstream (an upload, a download): nothing more of it is wanted. */
  async cancel(reason: unknown): Promise<void> {
    await this.#reader.cancel(reason).catch(() => {})
  }
}

/** The bytes from where the data ends on, which a file must not have. */
function trailingBytes(header: Header): SafetensorsError {
  return new SafetensorsError('MetadataIncompleteBuffer', `the tensors end at file offset ${header.fileSize}, but the stream goes on past it (trailing bytes)`)
}

function cutShort(header: Header, position: number): SafetensorsError {
  return new SafetensorsError(
    'MetadataIncompleteBuffer',
    `the tensors end at file offset ${header.fileSize}, but the stream ended after ${position} bytes (${header.fileSize - position} bytes missing)`,
  )
}

/**
 * Reads a stream's length prefix and header and validates the header as parseHeader does, as soon as it
 * has arrived. Only the last rule waits: the file size is known at the end of the stream, so the
 * returned Header's fileSize is the size the offsets imply. Returns the header's bytes too (8 + N).
 */
async function readStreamHeader(input: StreamInput): Promise<{ header: Header; head: Uint8Array }> {
  const prefix = new Uint8Array(8)
  const got = await input.fill(prefix)
  if (got < 8) throw notSafetensors('HeaderTooSmall', `the stream ended after ${got} bytes; a SafeTensors file starts with an 8-byte header length`)
  // Only HeaderTooLarge can be known from the prefix alone; InvalidHeaderLength needs the bytes that follow.
  const n = readHeaderSize(prefix, Number.MAX_SAFE_INTEGER)
  // Grown as the header arrives: a prefix that lies about N costs no more than the bytes really sent.
  let head = new Uint8Array(Math.min(8 + n, 1 << 16))
  head.set(prefix)
  let filled = 8
  while (filled < 8 + n) {
    if (filled === head.length) {
      const bigger = new Uint8Array(Math.min(8 + n, head.length * 2))
      bigger.set(head)
      head = bigger
    }
    const part = await input.fill(head.subarray(filled))
    filled += part
    if (filled < head.length) {
      throw notSafetensors(
        'InvalidHeaderLength',
        `the header length is ${n} bytes, but the stream ended ${filled - 8} bytes after the 8-byte prefix`,
        ' (or a truncated one)',
      )
    }
  }
  return { header: parseHeaderOfUnknownSize(head), head }
}

/** Takes the end of the stream: trailing bytes are MetadataIncompleteBuffer. */
async function expectEnd(input: StreamInput, header: Header): Promise<void> {
  if (await input.next(1)) throw trailingBytes(header)
}

/** Options of {@link validateStream}. */
export interface ValidateStreamOptions {
  /** Aborts the check: it rejects with `Aborted`, and the stream is cancelled. */
  signal?: AbortSignal
  /**
   * Where the checked bytes go (an upload, say): the header once it is valid, then the data as it
   * arrives, each part once the next has come and the last once the whole file checks out. Closed when
   * the whole file is valid, aborted with the error otherwise, so that whatever reads from it sees a
   * complete file or a failure: an invalid file never reaches it whole, so even a sink that stores what
   * reaches its length (R2's put through a FixedLengthStream) stores nothing.
   * @defaultValue none: the bytes are only checked
   */
  forward?: WritableStream<Uint8Array>
}

/**
 * Checks a whole SafeTensors file as it flows by, holding the header and one chunk at most: the header
 * as soon as it has arrived (parseHeader's scanner and codes), then the data's length against the
 * offsets, then the end. Resolves with the Header; rejects with the code parseHeader gives for the same
 * bytes. The stream is consumed, and cancelled on a failure.
 * @throws {@link SafetensorsError} `HeaderTooSmall`, `HeaderTooLarge`, `InvalidHeaderLength`,
 * `InvalidHeader`, `InvalidHeaderDeserialization`, `InvalidOffset`, `ValidationOverflow`, `MisalignedSlice`,
 * `TensorInvalidInfo`, `MetadataIncompleteBuffer` (data cut short, or bytes after the last tensor); `Io` when the stream errors or `forward` fails; `Aborted`.
 */
export async function validateStream(stream: ReadableStream<Uint8Array>, options: ValidateStreamOptions = {}): Promise<Header> {
  const input = new StreamInput(stream)
  const out = options.forward?.getWriter()
  const forward = async (send: () => Promise<void>) => {
    try {
      await send()
    } catch (cause) {
      throw asSafetensorsError(cause, 'forwarding the stream failed')
    }
  }
  const run = abortableRun(options.signal, async () => {
    const { header, head } = await readStreamHeader(input)
    // Each part goes on once the next has come, and the last once the end checks out: a sink that stores
    // whatever reaches the length it was told (R2's put through a FixedLengthStream of the upload's
    // Content-Length) then never gets the whole of an invalid file, cut short or running on.
    let held = head
    while (input.position < header.fileSize) {
      const part = await input.next(header.fileSize - input.position)
      if (!part) throw cutShort(header, input.position)
      if (out) await forward(() => out.write(held))
      held = part
    }
    await expectEnd(input, header)
    if (out) {
      await forward(() => out.write(held))
      await forward(() => out.close())
    }
    return header
  })
  try {
    return await run.done
  } catch (error) {
    await input.cancel(error)
    // Not awaited: a sink's abort waits for the write in flight, which backpressure may hold for ever.
    out?.abort(error).catch(() => {})
    throw error
  }
}

/** Options of {@link convertStream}. */
export interface ConvertStreamOptions {
  /**
   * Floating-point tensors become this dtype; the others (integers, BOOL, C64) are copied.
   * @defaultValue none: every tensor is copied as it is
   */
  dtype?: ConvertTarget
  /** Aborts the conversion: the output stream errors with `Aborted`, and the input is cancelled. */
  signal?: AbortSignal
}

/** Where convertStream's tensors come from: the bytes of one tensor, a chunk at a time, in order. */
type TensorBytes = (info: TensorInfo, at: number, target: Uint8Array) => Promise<void>

/**
 * A SafeTensors file in another dtype, as a stream: the header first (every size is known from the
 * input's header), then each tensor as it is read and converted, a chunk at a time, as fast as the
 * consumer takes it. The input is a stream of a whole file (a fetch Response's body), checked as it
 * flows by as validateStream checks it, whose tensors keep their order (they arrive in it); or an open
 * file, read by ranges, whose output is laid out as the reference writer lays it out. Errors, the input's
 * or the consumer's cancel, abort the output stream and the input.
 * @throws {@link SafetensorsError} as the output stream's error: for a stream input, the codes of
 * {@link validateStream}; for an open file, `Io`; and `Aborted`.
 * @throws TypeError at once, for a `dtype` other than 'F32', 'F16' or 'BF16'.
 */
export function convertStream(input: ReadableStream<Uint8Array> | SafetensorsFile, options: ConvertStreamOptions = {}): ReadableStream<Uint8Array> {
  if (options.dtype !== undefined && options.dtype !== 'F32' && options.dtype !== 'F16' && options.dtype !== 'BF16') {
    throw new TypeError(`dtype must be F32, F16 or BF16, got ${JSON.stringify(options.dtype)}`)
  }
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>()
  const isFile = typeof (input as SafetensorsFile).header === 'object'
  const stream = isFile ? undefined : new StreamInput(input as ReadableStream<Uint8Array>)
  const run = abortableRun(options.signal, async (signal) => {
    let header: Header
    let bytes: TensorBytes
    if (stream) {
      header = (await readStreamHeader(stream)).header
      bytes = async (_info, _at, target) => {
        if ((await stream.fill(target)) < target.length) throw cutShort(header, stream.position)
      }
    } else {
      const file = input as SafetensorsFile
      header = file.header
      bytes = (info, at, target) => readInto(file.source, header.dataStart + info.dataOffsets[0] + at, target, signal)
    }
    const byteOrder = isFile ? (input as SafetensorsFile).byteOrder : 'little'
    // A stream's tensors arrive in its data order, so the output must keep it; a file is read in any order.
    // A stream's end is checked before the output is closed: trailing bytes must not leave a complete file.
    await writeConverted(header, byteOrder, !isFile, bytes, writable, options.dtype, signal, async () => stream && expectEnd(stream, header))
  })
  run.done.catch((error) => {
    const failure = asSafetensorsError(error, 'converting the stream')
    void stream?.cancel(failure)
    // The consumer sees the failure as the output stream's error (the writer has aborted it if it began).
    writable.abort(failure).catch(() => {})
  })
  // The output as a stream of this function's own: a TransformStream does not tell its writer that the
  // consumer cancelled until the next write, which a stalled input may never reach. Its end and its
  // cancel wait for the run to settle, so that the consumer sees them once nothing is left running.
  const output = readable.getReader()
  const settled = () =>
    run.done.then(
      () => {},
      () => {},
    )
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { done, value } = await output.read()
          if (!done) return controller.enqueue(value)
        } catch (error) {
          await settled()
          throw error
        }
        await settled()
        controller.close()
      },
      async cancel(reason) {
        void stream?.cancel(reason)
        run.stop(reason)
        await output.cancel(reason)
        await settled()
      },
    },
    { highWaterMark: 0 },
  )
}

/** Writes `header`'s file with its floats as `dtype` into `writable`, in `header`'s data order with `keepOrder`, until `signal` aborts. */
async function writeConverted(
  header: Header,
  byteOrder: ByteOrder,
  keepOrder: boolean,
  bytes: TensorBytes,
  writable: WritableStream<Uint8Array>,
  dtype: ConvertTarget | undefined,
  signal: AbortSignal,
  beforeClose: () => Promise<void>,
): Promise<void> {
  const declarations = header.tensors.map((info) => ({ name: info.name, dtype: targetOf(info, dtype), shape: info.shape }))
  const writer = SafetensorsWriter.create(streamSink(writable), declarations, { metadata: header.metadata, keepOrder })
  const converter = new ChunkConverter(MAX_SLOT_BYTES)
  try {
    for (const entry of writer.entries) {
      const info = header.tensor(entry.name)
      for (let at = 0; at < info.byteLength; ) {
        throwIfAborted(signal)
        const inBytes = Math.min(chunkBytesOf(info.dtype), info.byteLength - at)
        const out = await converter.convert(info.dtype, entry.dtype, byteOrder, inBytes, (target) => bytes(info, at, target))
        // The sink copies the chunk out before the next one is converted into the same memory.
        await writer.write(entry.name, out)
        at += inBytes
      }
    }
    await beforeClose()
    await writer.close()
  } catch (error) {
    const failure = asSafetensorsError(error, 'converting the stream')
    await writer.abort(failure)
    throw failure
  }
}
