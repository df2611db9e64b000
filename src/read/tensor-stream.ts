// One tensor or slice as a ReadableStream of little-endian bytes, converted on the way, in memory
// bounded by a few chunks whatever its size.
import type { ByteOrder } from '../core/byte-order.ts'
import { byteLengthOf, checkConversion, elementCountOf } from '../core/convert.ts'
import type { DType } from '../core/dtypes.ts'
import type { Header, TensorInfo } from '../format/header.ts'
import { packedStarts, type SlicePlan } from '../format/slice.ts'
import { type SequentialReader, sequentialReader } from '../sources/downloads.ts'
import { PARALLEL_READS, runPool } from '../sources/pool.ts'
import { type RangeSource, readInto } from '../sources/source.ts'
import { ChunkConverter, chunkBytesOf, pulledStream } from './streams.ts'

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

/** What a stream reads from: an open file's header, its bytes, and the byte order of its tensor data (a SafetensorsFile is one). */
interface OpenedFile {
  readonly header: Header
  readonly source: RangeSource
  readonly byteOrder: ByteOrder
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
 * The bytes of one tensor or slice (`runs` of the tensor `info` of `file`), as `dtype`, pulled chunk by
 * chunk: a chunk is read only when the consumer has taken the one before (one is kept ready, so the
 * next read overlaps the consumer's work). Known problems (an unknown conversion) throw at once.
 */
export function tensorStream(file: OpenedFile, info: TensorInfo, runs: SlicePlan['runs'], options: StreamOptions = {}): ReadableStream<Uint8Array> {
  const from = info.dtype
  const to = options.dtype ?? from
  checkConversion(from, to)
  const start = file.header.dataStart + info.dataOffsets[0]
  const { starts, total } = packedStarts(runs)
  // One run (a tensor, a block of rows) is read ahead in parallel chunks over HTTP (src/sources/downloads.ts).
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
