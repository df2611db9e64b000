// A tensor's read on the conversion pool: its runs cut into pieces that the workers read (a local file, a
// Blob) or are sent (bytes in memory, bytes the calling thread reads), convert, and write into
// the result: shared memory where the runtime allows it, or else sent back and copied in. The memory model is
// docs/memory.md, "The conversion pool". Loaded on demand (src/read/file.ts, loadPool), this module imports
// none of the library's modules at run time: they are lent (PoolRuntime), so that no module of a bundle's
// first load is shared with it, which a bundler would otherwise move into a chunk that both load, with all
// this module needs.
import type { ByteOrder, hostByteOrder } from '../core/byte-order.ts'
import type { byteLengthOf, elementCountOf } from '../core/convert.ts'
import type { DTYPE_INFO, DType, dtypeIndex, TypedArray } from '../core/dtypes.ts'
import type { WorkerReads } from '../sources/progress.ts'
import type { readRuns } from '../sources/read-plan.ts'
import type { abortedError, OnBytes, onAbort, RangeSource, throwIfAborted, WorkerReadable } from '../sources/source.ts'
import { type ConversionPool, conversionPool, type PoolNeeds } from './pool.ts'
import type { CallTask, PieceInput, PieceRun, PieceTask } from './worker.ts'

/** What the pool's reads are lent: the library's functions they call (src/read/file.ts, loadPool). */
interface PoolRuntime extends PoolNeeds {
  hostByteOrder: typeof hostByteOrder
  byteLengthOf: typeof byteLengthOf
  elementCountOf: typeof elementCountOf
  DTYPE_INFO: typeof DTYPE_INFO
  dtypeIndex: typeof dtypeIndex
  readRuns: typeof readRuns
  abortedError: typeof abortedError
  onAbort: typeof onAbort
  throwIfAborted: typeof throwIfAborted
}

let rt: PoolRuntime

/** The pool's reads over `runtime`. */
export function poolReads(runtime: PoolRuntime) {
  rt = runtime
  return { readOnPool, callOnPool, runsOnPool }
}

/** The pool's reads, as poolReads gives them. */
export type PoolReads = ReturnType<typeof poolReads>

/** Elements of a piece: a few per worker for a large tensor, so that the workers finish together. */
const PIECE_MIN_ELEMENTS = 1 << 18
const PIECE_MAX_ELEMENTS = 1 << 22

/** One read of a tensor (or slice), as src/read/file.ts asks for it. */
interface PooledRead {
  name: string
  from: DType
  to: DType
  /** The byte order of the source's data. */
  byteOrder: ByteOrder
  /** Where the tensor's data starts in the source, and the runs to read from there: [offset, length] in bytes. */
  start: number
  runs: ReadonlyArray<readonly [number, number]>
  outBytes: number
  /** The caller's output, or undefined for a new array. */
  out?: { data: TypedArray; bytes: Uint8Array }
  signal?: AbortSignal
  onBytes?: OnBytes
}

/**
 * Reads on the pool, or undefined where it cannot run (no workers here, `workers: 0`) or need not (bytes in memory
 * that need no conversion, which the calling thread hands out as a view): then the calling thread reads.
 */
async function readOnPool(source: RangeSource, workers: number | undefined, read: PooledRead): Promise<TypedArray | undefined> {
  if (read.from === read.to && (source as { bytes?: Uint8Array }).bytes) return undefined
  const found = await poolFor(workers)
  if (!found) return undefined
  rt.throwIfAborted(read.signal)
  // Where a new result cannot be shared memory, the tensor goes whole to one worker, whose result is handed over
  // as it is: cut in pieces, each piece's output would be a copy on the calling thread (a page's main thread).
  // Reads at once (Promise.all, tensors()) still share the workers.
  const whole = !read.out && !found.pool.sharedMemory
  const output = read.out ?? (whole ? undefined : newOutput(read.name, read.to, read.outBytes, found.pool.sharedMemory))
  const fromBits = rt.DTYPE_INFO[read.from].bits
  const task = {
    from: rt.dtypeIndex(read.from),
    to: rt.dtypeIndex(read.to),
    fromBits,
    toBits: rt.DTYPE_INFO[read.to].bits,
    swap: (read.byteOrder === 'big' ? rt.DTYPE_INFO[read.from].array.BYTES_PER_ELEMENT : 0) as PieceTask['swap'],
    shared: output && sharedOf(output.bytes),
  }
  let handed: ArrayBuffer | undefined
  const place = output ? placeIn(output.bytes) : (bytes: ArrayBuffer) => void (handed = bytes)
  // The workers a read's pieces are cut for; 0: one piece.
  const spreadOver = whole ? 0 : found.size
  const pieces = new PieceSet(found, place, read.signal, read.onBytes, (source as { workerReads?: WorkerReads }).workerReads)
  await pieces.settle(async () => {
    const readable = (source as { forWorkers?: WorkerReadable }).forWorkers
    const inMemory = (source as { bytes?: Uint8Array }).bytes
    const send = (piece: Piece, input: PieceInput, transfer: ArrayBuffer[], counted: boolean, options?: SendOptions) =>
      pieces.submit({ ...task, runs: piece.runs, input }, transfer, piece.runs[0].outAt, piece.inBytes, counted, options)
    if (readable) {
      // A piece the workers cannot read (a Blob that cannot be sent to them: a file-backed one in Node) is read
      // here and sent.
      const again = async (piece: Piece) => {
        const { bytes, at } = await readHere(
          source,
          piece.runs.map((run): [number, number] => [run.at, (run.count * fromBits) / 8]),
          read,
        )
        send({ ...piece, runs: piece.runs.map((run, i) => ({ ...run, at: at[i] })), end: piece.inBytes }, { bytes }, [bytes.buffer as ArrayBuffer], true)
      }
      for (const piece of cut(elementRuns(read, read.start), spreadOver, fromBits, task.toBits)) send(piece, readable, [], false, { again: () => again(piece) })
    } else if (inMemory) {
      for (const piece of cut(elementRuns(read, read.start), spreadOver, fromBits, task.toBits)) send(...sent(inMemory, piece), false)
    } else {
      const all = cut(elementRuns(read), spreadOver, fromBits, task.toBits)
      await readThenSend(source, read, all, (piece, bytes, own) => send(...sent(bytes, piece, own), true))
    }
  })
  return output?.data ?? resultOver(handed!, read.to, read.outBytes)
}

/**
 * The pool that reads and calls with `workers` run on, started; undefined where they stay on the calling thread: no
 * workers here, `workers: 0`, or a big-endian host (the workers' kernels write little-endian results).
 */
function poolFor(workers: number | undefined): ReturnType<typeof conversionPool> {
  return rt.hostByteOrder() === 'big' ? Promise.resolve(undefined) : conversionPool(workers, rt)
}

/** Whether reads and calls with `workers` run on the pool here, which it starts. */
async function runsOnPool(workers: number | undefined): Promise<boolean> {
  return (await poolFor(workers)) !== undefined
}

/** A module of wasm that calls run on the pool with: its name, and its bytes for the workers that have not got it. */
interface PoolModule {
  name: string
  bytes(): Uint8Array<ArrayBuffer>
}

/** One call of a module's function on the pool: its input is `length` bytes of the source from `offset`. */
export type CallPiece = Omit<CallTask, 'id' | 'module' | 'wasm' | 'input' | 'shared'>

/**
 * Calls on the pool (src/pool/worker.ts, CallTask), each on its own input from the source and writing its
 * output at outAt of a result of `outBytes` (in `out`, or new: shared memory where the runtime allows it).
 * Undefined where the pool cannot run.
 */
async function callOnPool(
  source: RangeSource | Uint8Array,
  workers: number | undefined,
  module: PoolModule,
  result: { name: string; dtype: DType; outBytes: number; out?: { data: TypedArray; bytes: Uint8Array } },
  calls: CallPiece[],
  io: { signal?: AbortSignal; onBytes?: OnBytes } = {},
): Promise<TypedArray | undefined> {
  const found = await poolFor(workers)
  if (!found) return undefined
  rt.throwIfAborted(io.signal)
  const output = result.out ?? newOutput(result.name, result.dtype, result.outBytes, found.pool.sharedMemory)
  const pieces = new PieceSet(found, placeIn(output.bytes), io.signal, io.onBytes, (source as { workerReads?: WorkerReads }).workerReads)
  await pieces.settle(async () => {
    const readable = source instanceof Uint8Array ? undefined : (source as { forWorkers?: WorkerReadable }).forWorkers
    let bytes = source instanceof Uint8Array ? source : (source as { bytes?: Uint8Array }).bytes
    let counted = false
    let offsets = calls.map((call) => call.offset)
    if (!readable && !bytes) {
      // Sources the workers cannot read: every call's input read here first, packed in one buffer.
      ;({ bytes, at: offsets } = await readHere(
        source as RangeSource,
        calls.map((call): [number, number] => [call.offset, call.length]),
        io,
      ))
      counted = true
    }
    for (const [i, call] of calls.entries()) {
      const task = { ...call, module: module.name, shared: sharedOf(output.bytes) }
      if (readable) {
        const again = async () => {
          const { bytes } = await readHere(source as RangeSource, [[call.offset, call.length]], io)
          pieces.submit({ ...task, input: { bytes }, offset: 0 }, [bytes.buffer as ArrayBuffer], call.outAt, call.length, true, { module })
        }
        pieces.submit({ ...task, input: readable }, [], call.outAt, call.length, counted, { module, again })
      } else {
        const { input, at, transfer } = span(bytes!, offsets[i], call.length)
        pieces.submit({ ...task, input, offset: at }, transfer, call.outAt, call.length, counted, { module })
      }
    }
  })
  return output.data
}

/** How a piece is sent: a CallTask's `module`, and what makes it `again` here. */
interface SendOptions {
  module?: PoolModule
  again?: () => Promise<void>
}

/**
 * Byte runs of the source ([offset, length]) read here, packed in one new buffer, and where each landed in it.
 * Never shared memory: a worker's heap keeps a SharedArrayBuffer it was sent until it collects its garbage, and
 * V8 does not count shared memory towards collecting, so a worker is handed the buffer, or a span's copy (see span).
 */
async function readHere(
  source: RangeSource,
  runs: Array<[number, number]>,
  io: { signal?: AbortSignal; onBytes?: OnBytes },
): Promise<{ bytes: Uint8Array; at: number[] }> {
  const total = runs.reduce((sum, [, length]) => sum + length, 0)
  const bytes = new Uint8Array(total)
  await rt.readRuns(source, 0, runs, bytes, io.signal, io.onBytes)
  let at = 0
  return { bytes, at: runs.map(([, length]) => (at += length) - length) }
}

/** The result's bytes when workers can write them in place: shared memory. */
function sharedOf(bytes: Uint8Array): Uint8Array | undefined {
  return bytes.buffer instanceof ArrayBuffer ? undefined : bytes
}

/**
 * The pieces of one read on the pool: their outputs placed, progress counted, the first failure kept, and on
 * a failure or an abort those not begun dropped; settle() waits for every piece sent, then throws that failure.
 */
class PieceSet {
  readonly #mine = new Set<object>()
  readonly #submitted: Array<Promise<void>> = []
  #failure: { error: unknown } | undefined

  constructor(
    readonly found: { pool: ConversionPool; size: number },
    /** Puts a piece's output that came back (the result is not shared memory) where it goes. */
    readonly place: (bytes: ArrayBuffer, outAt: number) => void,
    readonly signal: AbortSignal | undefined,
    readonly onBytes: OnBytes | undefined,
    /** A metered source's count of what the workers read themselves (src/sources/progress.ts). */
    readonly workerReads?: WorkerReads,
  ) {}

  fail(error: unknown): void {
    this.#failure ??= { error }
    this.found.pool.cancel((task) => this.#mine.has(task), error)
  }

  /**
   * Sends a task; `counted`: its input was counted by the read that brought it, else once the worker has read
   * it. A piece that fails `again` (one the pool could not send) is handed to `options.again`.
   */
  submit(
    task: Omit<PieceTask, 'id'> | Omit<CallTask, 'id'>,
    transfer: ArrayBuffer[],
    outAt: number,
    inBytes: number,
    counted: boolean,
    options: SendOptions = {},
  ): void {
    this.#mine.add(task)
    if (!counted) this.workerReads?.meter.asked(inBytes)
    this.#submitted.push(
      this.found.pool
        .run(task, transfer, this.found.size, options.module)
        .then(
          (bytes) => {
            if (bytes) this.place(bytes, outAt)
            if (counted) return
            this.onBytes?.(inBytes)
            this.workerReads?.meter.arrived(inBytes, this.workerReads.url)
          },
          (error: { again?: boolean }) => {
            if (!counted) this.workerReads?.meter.withdrawn(inBytes, this.workerReads.url)
            if (!options.again || !error.again || this.#failure) throw error
            return options.again()
          },
        )
        .catch((error) => this.fail(error)),
    )
  }

  /** Runs `send` (which submits the pieces), then waits for them all; the first failure, of `send` or of a piece, is thrown. */
  async settle(send: () => Promise<void>): Promise<void> {
    const stopOnAbort = rt.onAbort(this.signal, () => this.fail(rt.abortedError(this.signal!)))
    try {
      await send()
    } catch (error) {
      this.fail(error)
    } finally {
      // A piece made again here submits anew while the others settle.
      while (this.#submitted.length > 0) await Promise.all(this.#submitted.splice(0))
      stopOnAbort()
    }
    if (this.#failure) throw this.#failure.error
  }
}

/** A new result: in shared memory that the workers write, where the runtime allows it. */
function newOutput(name: string, dtype: DType, outBytes: number, shared: boolean): { data: TypedArray; bytes: Uint8Array } {
  let buffer: ArrayBufferLike
  try {
    buffer = shared ? new SharedArrayBuffer(outBytes) : new ArrayBuffer(outBytes)
  } catch (cause) {
    throw new rt.SafetensorsError('Io', `tensor ${JSON.stringify(name)} needs ${outBytes} bytes as ${dtype}, more than one buffer can hold here`, { cause })
  }
  return { data: resultOver(buffer, dtype, outBytes), bytes: new Uint8Array(buffer) }
}

/** A result of `outBytes` bytes of `dtype` over `buffer`, as its natural typed array. */
function resultOver(buffer: ArrayBufferLike, dtype: DType, outBytes: number): TypedArray {
  const Natural = rt.DTYPE_INFO[dtype].array
  return new Natural(buffer as ArrayBuffer, 0, outBytes / Natural.BYTES_PER_ELEMENT)
}

/** Places a piece's output that came back at outAt of `output`. */
const placeIn = (output: Uint8Array) => (bytes: ArrayBuffer, outAt: number) => output.set(new Uint8Array(bytes), outAt)

/**
 * The read's runs in elements, outputs packed in order; inputs from `start` in the source, or (without it)
 * packed too, as they land in a buffer that rt.readRuns fills.
 */
function elementRuns(read: PooledRead, start?: number): PieceRun[] {
  let at = 0
  let outAt = 0
  return read.runs.map(([offset, length]) => {
    const count = rt.elementCountOf(read.from, length)
    const run = { at: start === undefined ? at : start + offset, count, outAt }
    at += length
    outAt += rt.byteLengthOf(read.to, count)
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
 * together, or one piece of them all for `workers` 0. A run split in two is split at a multiple of 4 elements,
 * so that F4 and F6 parts are whole bytes.
 */
function cut(runs: PieceRun[], workers: number, fromBits: number, toBits: number): Piece[] {
  const total = runs.reduce((sum, run) => sum + run.count, 0)
  const elements =
    workers === 0 ? Number.POSITIVE_INFINITY : Math.min(PIECE_MAX_ELEMENTS, Math.max(PIECE_MIN_ELEMENTS, Math.ceil(total / (workers * 4) / 4096) * 4096))
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
 * `length` bytes of `bytes` from `at` for a worker: the bytes themselves when they are shared memory, or when they
 * are all of a buffer of the pool's own (`own`), handed over; else a copy of the span, handed over; and where the
 * span starts in what the worker gets.
 */
function span(bytes: Uint8Array, at: number, length: number, own = false): { input: PieceInput; at: number; transfer: ArrayBuffer[] } {
  if (!(bytes.buffer instanceof ArrayBuffer)) return { input: { bytes }, at, transfer: [] }
  if (own && at === 0 && length === bytes.buffer.byteLength) return { input: { bytes }, at, transfer: [bytes.buffer] }
  const copy = bytes.slice(at, at + length)
  return { input: { bytes: copy }, at: 0, transfer: [copy.buffer] }
}

/** A piece's input taken from `bytes`, which its runs' offsets index (see span). */
function sent(bytes: Uint8Array, piece: Piece, own = false): [Piece, PieceInput, ArrayBuffer[]] {
  const first = piece.runs[0].at
  const { input, at, transfer } = span(bytes, first, piece.end - first, own)
  const runs = piece.runs.map((run) => ({ ...run, at: run.at - first + at }))
  return [{ ...piece, runs }, input, transfer]
}

/**
 * Sources the workers cannot read (HTTP, a RangeSource of the caller's): read here into one buffer (never shared
 * memory, as in readHere), each piece sent as soon as its bytes have landed (a single run lands front to back),
 * the last once the read has returned, when it may take the buffer itself (`own`).
 */
async function readThenSend(
  source: RangeSource,
  read: PooledRead,
  pieces: Piece[],
  send: (piece: Piece, bytes: Uint8Array, own: boolean) => void,
): Promise<void> {
  const inBytes = read.runs.reduce((sum, [, length]) => sum + length, 0)
  const staging = new Uint8Array(inBytes)
  let next = 0
  const sendLanded = (landed: number, own = false) => {
    while (next < pieces.length && pieces[next].end <= landed) send(pieces[next++], staging, own)
  }
  let landed = 0
  const onBytes: OnBytes = (bytes, done) => {
    read.onBytes?.(bytes, done)
    landed = done ?? landed + bytes
    if (landed < inBytes) sendLanded(landed)
  }
  await rt.readRuns(source, read.start, read.runs, staging, read.signal, read.runs.length === 1 ? onBytes : read.onBytes)
  sendLanded(inBytes, true)
}
