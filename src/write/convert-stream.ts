// A whole SafeTensors file re-encoded in another dtype, as a stream of the new file: from a stream of a file
// (checked as it flows by, as validateStream checks it) or from an open file read by ranges.
import type { ByteOrder } from '../core/byte-order.ts'
import { type ConvertTarget, convertedDtypeOf } from '../core/convert.ts'
import type { Header, TensorInfo } from '../format/header.ts'
import type { SafetensorsFile } from '../read/file.ts'
import { abortableRun, asSafetensorsError, ChunkConverter, chunkBytesOf, MAX_SLOT_BYTES, StreamInput } from '../read/streams.ts'
import { cutShort, expectEnd, readStreamHeader } from '../read/validate-stream.ts'
import { readInto, throwIfAborted } from '../sources/source.ts'
import { SafetensorsWriter, streamSink } from './writer.ts'

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
    await writeConvertedFile(header, byteOrder, !isFile, bytes, writable, options.dtype, signal, async () => stream && expectEnd(stream, header))
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
async function writeConvertedFile(
  header: Header,
  byteOrder: ByteOrder,
  keepOrder: boolean,
  bytes: TensorBytes,
  writable: WritableStream<Uint8Array>,
  dtype: ConvertTarget | undefined,
  signal: AbortSignal,
  beforeClose: () => Promise<void>,
): Promise<void> {
  const declarations = header.tensors.map((info) => ({ name: info.name, dtype: convertedDtypeOf(info, dtype), shape: info.shape }))
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
