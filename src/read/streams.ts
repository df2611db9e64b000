// The plumbing every stream of this library shares (docs/streams-and-workers.md): a chunk's working set
// in a wasm memory of its own that never grows (so views into it survive the awaits between a read and its
// conversion), a stream pulled chunk by chunk, a ReadableStream read as exact amounts of bytes, and runs
// that end on the caller's abort.
import type { ByteOrder } from '../core/byte-order.ts'
import { byteLengthOf, type Core, convertInto, elementCountOf, instantiate, swapElementsInCore } from '../core/convert.ts'
import type { DType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { abortedError, linkedAbort } from '../sources/source.ts'

/**
 * Elements per chunk: a multiple of 4 (whole F4/F6 bytes), so at most 2 MiB of input (8-byte dtypes)
 * and 1 MiB of F32 output; large enough that a kernel call and a read cost nothing extra per chunk.
 */
const STREAM_CHUNK_ELEMENTS = 1 << 18

/** The most bytes one chunk takes in its memory, input or output: 8-byte input elements. */
export const MAX_SLOT_BYTES = STREAM_CHUNK_ELEMENTS * 8

/** Input bytes of one full chunk of `from`. */
export const chunkBytesOf = (from: DType) => byteLengthOf(from, STREAM_CHUNK_ELEMENTS)

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
export function abortableRun<T>(signal: AbortSignal | undefined, body: (signal: AbortSignal) => Promise<T>): { done: Promise<T>; stop(reason: unknown): void } {
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

/** A ReadableStream read as bytes: exact amounts across chunk boundaries, with a count of bytes taken. */
export class StreamInput {
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
