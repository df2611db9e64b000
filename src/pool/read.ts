// A tensor's read on the conversion pool: its runs cut into pieces that the workers read (a local file, a
// Blob) or are sent (bytes in memory, bytes arriving over HTTP), convert, and write into the result: shared
// memory where the runtime allows it, or else sent back and copied in. The memory model is docs/memory.md.
import { hostByteOrder } from '../core/byte-order.ts'
import { byteLengthOf, elementCountOf } from '../core/convert.ts'
import { DTYPE_INFO, type DType, dtypeIndex, type TypedArray } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { readRuns } from '../sources/read-plan.ts'
import { abortedError, type OnBytes, onAbort, type RangeSource, throwIfAborted, type WorkerReadable } from '../sources/source.ts'
import { conversionPool } from './pool.ts'
import type { PieceInput, PieceRun, PieceTask } from './worker.ts'

/** Elements of a piece: a few per worker for a large tensor, so that the workers finish together. */
const PIECE_MIN_ELEMENTS = 1 << 18
const PIECE_MAX_ELEMENTS = 1 << 22

/** One read of a tensor (or slice), as src/read/file.ts asks for it. */
export interface PooledRead {
  name: string
  from: DType
  to: DType
  /** The byte order of the source's data. */
  bigEndian: boolean
  /** Where the tensor's data starts in the source, and the runs to read from there: [offset, length] in bytes. */
  start: number
  runs: ReadonlyArray<readonly [number, number]>
  outBytes: number
  /** The caller's output, or undefined for a new array. */
  out?: { data: TypedArray; bytes: Uint8Array }
  signal?: AbortSignal
  onBytes?: OnBytes
}

/** Reads on the pool, or undefined where it cannot run (no workers here, `workers: 0`): then the calling thread reads. */
export async function readOnPool(source: RangeSource, workers: number | undefined, read: PooledRead): Promise<TypedArray | undefined> {
  if (hostByteOrder() === 'big') return undefined
  const found = await conversionPool(workers)
  if (!found) return undefined
  throwIfAborted(read.signal)
  const { pool, size } = found
  const output = read.out ?? newOutput(read, pool.sharedMemory)
  const fromBits = DTYPE_INFO[read.from].bits
  const task = {
    from: dtypeIndex(read.from),
    to: dtypeIndex(read.to),
    fromBits,
    toBits: DTYPE_INFO[read.to].bits,
    swap: (read.bigEndian ? DTYPE_INFO[read.from].array.BYTES_PER_ELEMENT : 0) as PieceTask['swap'],
    shared: output.bytes.buffer instanceof ArrayBuffer ? undefined : output.bytes,
  }
  const mine = new Set<object>()
  const submitted: Array<Promise<void>> = []
  let failure: { error: unknown } | undefined
  const fail = (error: unknown) => {
    failure ??= { error }
    pool.cancel((piece) => mine.has(piece), error)
  }
  /** Sends a piece; `counted`: its bytes were counted by the read that brought them, else once the worker has read them. */
  const submit = (runs: PieceRun[], input: PieceInput, transfer: Transferable[], inBytes: number, counted: boolean) => {
    const piece = { ...task, runs, input }
    mine.add(piece)
    submitted.push(
      pool.run(piece, transfer, size).then((bytes) => {
        if (bytes) output.bytes.set(new Uint8Array(bytes), runs[0].outAt)
        if (!counted) read.onBytes?.(inBytes)
      }, fail),
    )
  }
  const stopOnAbort = onAbort(read.signal, () => fail(abortedError(read.signal!)))
  try {
    const readable = (source as { forWorkers?: WorkerReadable }).forWorkers
    const inMemory = (source as { bytes?: Uint8Array }).bytes
    if (readable || inMemory) {
      for (const piece of cut(elementRuns(read, read.start), size, fromBits, task.toBits)) {
        if (readable) submit(piece.runs, readable, [], piece.inBytes, false)
        else submit(...sent(inMemory!, piece), piece.inBytes, false)
      }
    } else {
      const pieces = cut(elementRuns(read), size, fromBits, task.toBits)
      await readThenSend(source, read, pieces, pool.sharedMemory, (piece, bytes) => submit(...sent(bytes, piece), piece.inBytes, true))
    }
  } catch (error) {
    fail(error)
  } finally {
    await Promise.all(submitted)
    stopOnAbort()
  }
  if (failure) throw failure.error
  return output.data
}

/** A new result: in shared memory that the workers write, where the runtime allows it. */
function newOutput(read: PooledRead, shared: boolean): { data: TypedArray; bytes: Uint8Array } {
  const Natural = DTYPE_INFO[read.to].array
  try {
    const buffer = shared ? new SharedArrayBuffer(read.outBytes) : new ArrayBuffer(read.outBytes)
    return { data: new Natural(buffer as ArrayBuffer, 0, read.outBytes / Natural.BYTES_PER_ELEMENT), bytes: new Uint8Array(buffer) }
  } catch (cause) {
    throw new SafetensorsError('Io', `tensor ${JSON.stringify(read.name)} needs ${read.outBytes} bytes as ${read.to}, more than one buffer can hold here`, {
      cause,
    })
  }
}

/**
 * The read's runs in elements, outputs packed in order; inputs from `start` in the source, or (without it)
 * packed too, as they land in a buffer that readRuns fills.
 */
function elementRuns(read: PooledRead, start?: number): PieceRun[] {
  let at = 0
  let outAt = 0
  return read.runs.map(([offset, length]) => {
    const count = elementCountOf(read.from, length)
    const run = { at: start === undefined ? at : start + offset, count, outAt }
    at += length
    outAt += byteLengthOf(read.to, count)
    return run
  })
}

interface Piece {
  runs: PieceRun[]
  /** The input bytes of its runs. */
  inBytes: number
  /** Where its input ends. */
  end: number
}

/**
 * Runs split and grouped into pieces: a few per worker for a large tensor, so that the workers finish
 * together. A run split in two is split at a multiple of 4 elements, so that F4 and F6 parts are whole bytes.
 */
function cut(runs: PieceRun[], workers: number, fromBits: number, toBits: number): Piece[] {
  const total = runs.reduce((sum, run) => sum + run.count, 0)
  const elements = Math.min(PIECE_MAX_ELEMENTS, Math.max(PIECE_MIN_ELEMENTS, Math.ceil(total / (workers * 4) / 4096) * 4096))
  const pieces: Piece[] = []
  let current: PieceRun[] = []
  let filled = 0
  const close = () => {
    const last = current[current.length - 1]
    pieces.push({ runs: current, inBytes: (filled * fromBits) / 8, end: last.at + (last.count * fromBits) / 8 })
    current = []
    filled = 0
  }
  for (const run of runs) {
    for (let done = 0; done < run.count; ) {
      let count = Math.min(run.count - done, elements - filled)
      if (count < run.count - done) count -= count % 4
      if (count === 0) {
        close()
        continue
      }
      current.push({ at: run.at + (done * fromBits) / 8, count, outAt: run.outAt + (done * toBits) / 8 })
      done += count
      filled += count
      if (filled >= elements) close()
    }
  }
  if (filled > 0) close()
  return pieces
}

/**
 * A piece's input taken from `bytes`, which its runs' offsets index: the bytes themselves when they are
 * shared memory, else a copy of its span, handed over.
 */
function sent(bytes: Uint8Array, piece: Piece): [PieceRun[], PieceInput, Transferable[]] {
  if (!(bytes.buffer instanceof ArrayBuffer)) return [piece.runs, { bytes }, []]
  const first = piece.runs[0].at
  const copy = bytes.slice(first, piece.end)
  return [piece.runs.map((run) => ({ ...run, at: run.at - first })), { bytes: copy }, [copy.buffer]]
}

/**
 * Sources the workers cannot read (HTTP, a RangeSource of the caller's): read here into one buffer, each
 * piece sent as soon as its bytes have landed (a single run lands front to back), the rest once all have.
 */
async function readThenSend(
  source: RangeSource,
  read: PooledRead,
  pieces: Piece[],
  shared: boolean,
  send: (piece: Piece, bytes: Uint8Array) => void,
): Promise<void> {
  const inBytes = read.runs.reduce((sum, [, length]) => sum + length, 0)
  const staging = shared ? new Uint8Array(new SharedArrayBuffer(inBytes)) : new Uint8Array(inBytes)
  let next = 0
  const sendLanded = (landed: number) => {
    while (next < pieces.length && pieces[next].end <= landed) send(pieces[next++], staging)
  }
  let landed = 0
  const onBytes: OnBytes = (bytes, done) => {
    read.onBytes?.(bytes, done)
    landed = done ?? landed + bytes
    sendLanded(landed)
  }
  await readRuns(source, read.start, read.runs, staging, read.signal, read.runs.length === 1 ? onBytes : read.onBytes)
  sendLanded(inBytes)
}
