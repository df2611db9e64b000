// How a GGUF tensor's source values are cut into chunks of bounded size, whatever the tensor's: which source
// values each chunk is made of, how they are read, and how they become the GGUF's (the unit of an architecture's
// transform: llama.cpp's Q/K row order, columns taken, matrices transposed). A chunk is the unit src/gguf/index.ts
// converts in its wasm memory.
import { byteLengthOf } from '../core/convert.ts'
import type { DType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import type { TensorInfo } from '../format/header.ts'
import { elementsOf } from '../format/header.ts'
import { PARALLEL_READS, runPool } from '../sources/pool.ts'
import { type OnBytes, type RangeSource, readInto } from '../sources/source.ts'
import type { Unit } from './architectures.ts'
import { GGML_TYPES } from './ggml-types.ts'
import type { Piece, PlannedTensor } from './tensors.ts'

/**
 * elements: elements per chunk, 4 MiB as F32, a multiple of every ggml block (a chunk of a reordered tensor is whole
 * heads where a head fits; a chunk of a quantized tensor is whole blocks, this rounded down to them). transposed: elements of transposed matrices converted at once, whole matrices up to
 * this (GPT-2 XL's largest, c_fc, has 10.2M), else a block of a matrix's columns of about this many (one column at
 * least). gapBytes: the runs of a block of columns whose rows are closer together than this are copied out of whole
 * rows, read a few at a time (a read of a few bytes per row costs far more than its bytes). Mutable only so that
 * tests can make them small.
 */
export const GGUF_CHUNKS = { elements: 1 << 20, transposed: 1 << 24, gapBytes: 64 << 10 }

/** A block of columns of a matrix in a part: columns [from, to) of each of its `rows` rows of `rowLength` values, the first at element `first`. */
interface Columns {
  first: number
  rows: number
  rowLength: number
  from: number
  to: number
}

/** One chunk of a piece: the source values it is made of, and what turns them into the GGUF's values. */
export interface Chunk {
  /**
   * Runs of the part's elements, [first, count], whose values packed one after another are the chunk's; none for a
   * block of columns.
   */
  runs: ReadonlyArray<readonly [number, number]>
  /** Or a block of columns, packed row after row. */
  columns?: Columns
  /** Elements in all. */
  count: number
  /** What is done to the chunk's values, which are whole units of it; none for nothing. */
  unit?: Unit
}

/**
 * The seam through which the GGUF reads every source value: each of `piece`'s chunks (pieceChunks) in turn with its
 * values as `dtype` (little-endian; each a view valid until the next is asked for). Nothing after it knows where
 * the values come from: index.ts's shardValues reads stored tensors' byte ranges, quantized-values.ts's
 * logicalValues a quantized module's dequantized weights.
 */
export type PieceValues = (t: PlannedTensor, piece: Piece, dtype: DType) => AsyncGenerator<{ chunk: Chunk; values: Uint8Array }>

/**
 * A piece's chunks, in the GGUF's order, each of whole ggml blocks of the tensor's type (which the quantizers take
 * as rows of a block): runs of GGUF_CHUNKS.elements; of a transformed tensor, whole units (as many as fit), or where
 * a unit is larger than a chunk, of a transposed matrix blocks of its columns, of a reordered head rows of its first
 * half and the rows of its second half that pair with them, all of them whole rows of the GGUF. MXFP4 blocks and
 * scales are one chunk a piece (an expert's). Every chunk but the last is the largest.
 */
export function* pieceChunks(t: PlannedTensor, { part: { info }, rows }: Piece): Generator<Chunk> {
  const rowElements = elementsOf(info) / (info.shape[0] ?? 1)
  const start = rows[0] * rowElements
  const count = (rows[1] - rows[0]) * rowElements
  if (count === 0) return
  if (!t.unit || t.mxfp4) {
    const { block } = GGML_TYPES[t.type]
    const size = t.mxfp4 ? count : Math.max(block, GGUF_CHUNKS.elements - (GGUF_CHUNKS.elements % block))
    for (let first = 0; first < count; first += size) {
      const n = Math.min(size, count - first)
      yield { runs: [[start + first, n]], count: n }
    }
    return
  }
  // A unit whose rows are changed each on its own (columns taken) is cut by rows.
  const unit = t.unit.transpose || t.unit.pairs ? t.unit : { ...t.unit, rows: 1 }
  const size = unit.rows * unit.columns
  const limit = unit.transpose ? GGUF_CHUNKS.transposed : GGUF_CHUNKS.elements
  if (size <= limit || !(unit.transpose || unit.pairs)) {
    const perChunk = Math.max(1, Math.floor(limit / size)) * size
    for (let first = 0; first < count; first += perChunk) {
      const n = Math.min(perChunk, count - first)
      yield { runs: [[start + first, n]], count: n, unit }
    }
    return
  }
  for (let first = start; first < start + count; first += size) yield* unit.transpose ? columnBlocks(unit, first) : halfRows(unit, first)
}

/** A transposed matrix larger than a chunk (at element `first`), as blocks of the columns it takes, each transposed. */
function* columnBlocks({ rows, columns, take }: Unit, first: number): Generator<Chunk> {
  const { start, step, count } = take ?? { start: 0, step: 1, count: columns }
  const width = Math.max(1, Math.floor(GGUF_CHUNKS.transposed / rows / step))
  for (let k = 0; k < count; k += width) {
    const n = Math.min(width, count - k)
    const from = start + k * step
    const to = from + (n - 1) * step + 1
    const unit = { rows, columns: to - from, take: { start: 0, step, count: n }, transpose: true }
    yield { runs: [], columns: { first, rows, rowLength: columns, from, to }, count: rows * (to - from), unit }
  }
}

/** A head larger than a chunk (at element `first`), as rows of its first half with the rows of its second half that pair with them. */
function* halfRows({ rows, columns }: Unit, first: number): Generator<Chunk> {
  const half = rows / 2
  const step = Math.max(1, Math.floor(GGUF_CHUNKS.elements / 2 / columns))
  for (let row = 0; row < half; row += step) {
    const n = Math.min(step, half - row)
    const runs = [
      [first + row * columns, n * columns],
      [first + (row + half) * columns, n * columns],
    ] as const
    yield { runs, count: 2 * n * columns, unit: { rows: 2 * n, columns, pairs: true } }
  }
}

/**
 * Fills `target` with a block of columns of the tensor `info` whose bytes start at `start` in `source`: a read per
 * row where the rows' runs are far apart, several at a time; else whole rows, a few at a time, from which the runs
 * are copied.
 */
export async function readColumns(
  source: RangeSource,
  start: number,
  info: TensorInfo,
  { first, rows, rowLength, from, to }: Columns,
  target: Uint8Array,
  signal: AbortSignal,
  onBytes: OnBytes,
): Promise<void> {
  const elementBytes = byteLengthOf(info.dtype, 1)
  if (!Number.isInteger(elementBytes))
    throw new SafetensorsError(
      'UnsupportedConversion',
      `tensor ${JSON.stringify(info.name)}: a transposed ${info.dtype} tensor is converted whole, up to ${GGUF_CHUNKS.transposed} elements`,
    )
  const rowBytes = rowLength * elementBytes
  const runBytes = (to - from) * elementBytes
  const rowAt = (row: number) => start + (first + row * rowLength) * elementBytes
  if (rowBytes - runBytes >= GGUF_CHUNKS.gapBytes) {
    const each = Array.from({ length: rows }, (_, row) => row)
    await runPool(each, PARALLEL_READS, (row) =>
      readInto(source, rowAt(row) + from * elementBytes, target.subarray(row * runBytes, (row + 1) * runBytes), signal, onBytes),
    )
    return
  }
  const perRead = Math.max(1, Math.floor(GGUF_CHUNKS.gapBytes / rowBytes))
  const rowsRead = new Uint8Array(perRead * rowBytes)
  for (let row = 0; row < rows; row += perRead) {
    const n = Math.min(perRead, rows - row)
    await readInto(source, rowAt(row), rowsRead.subarray(0, n * rowBytes), signal)
    for (let i = 0; i < n; i++)
      target.set(rowsRead.subarray(i * rowBytes + from * elementBytes, i * rowBytes + from * elementBytes + runBytes), (row + i) * runBytes)
    onBytes(n * runBytes)
  }
}

/**
 * The units of `bytes` (elements of 2 or 4 bytes), each `rows` rows of `columns`, changed as the unit says, in a new
 * array: each head's rows from two halves to pairs (llama.cpp's converter's `permute`: reshape(heads, 2, rows / heads
 * / 2, ...).swapaxes(1, 2), so that row j of the first half and row j of the second become rows 2j and 2j + 1; with
 * `undo`, back), or the columns `take` kept, then rows and columns swapped.
 */
export function reshaped(bytes: Uint8Array, { rows, columns, take, transpose, pairs }: Unit, elementBytes: number, undo = false): Uint8Array {
  const Elements = elementBytes === 4 ? Uint32Array : Uint16Array
  const from = new Elements(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.length / elementBytes)
  const { start, step, count } = take ?? { start: 0, step: 1, count: columns }
  const size = rows * columns
  const to = new Elements((from.length / size) * rows * count)
  for (let unit = 0, out = 0; unit < from.length; unit += size) {
    for (let row = 0; row < rows; row++) {
      const paired = pairs ? (row % 2) * (rows / 2) + Math.floor(row / 2) : row
      const [target, source] = undo ? [paired, row] : [row, paired]
      const at = unit + source * columns + start
      for (let k = 0; k < count; k++) to[out + (transpose ? k * rows + target : target * count + k)] = from[at + k * step]
    }
    out += rows * count
  }
  return new Uint8Array(to.buffer)
}
