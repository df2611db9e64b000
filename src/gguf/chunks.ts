// How a GGUF tensor's source values are cut into chunks of bounded size, whatever the tensor's: which source
// values each chunk is made of, how they are read, and how they become the GGUF's (llama.cpp's Q/K row order,
// GPT-2's Conv1D transposed). A chunk is the unit src/gguf/index.ts converts in its wasm memory.
import { byteLengthOf } from '../core/convert.ts'
import { SafetensorsError } from '../errors.ts'
import type { TensorInfo } from '../format/header.ts'
import { elementsOf } from '../format/header.ts'
import { PARALLEL_READS, runPool } from '../sources/pool.ts'
import { type OnBytes, type RangeSource, readInto } from '../sources/source.ts'
import type { PlannedTensor } from './tensors.ts'

/**
 * elements: elements per chunk, 4 MiB as F32, a multiple of every ggml block (a chunk of a reordered tensor is whole
 * heads where a head fits). transposed: elements of a transposed tensor converted at once, the whole tensor up to
 * this (GPT-2 XL's largest, c_fc, has 10.2M), else a block of its columns of about this many (one column at least).
 * gapBytes: the runs of a block of columns whose rows are closer together than this are copied out of whole rows,
 * read a few at a time (a read of a few bytes per row costs far more than its bytes). Mutable only so that tests
 * can make them small.
 */
export const GGUF_CHUNKS = { elements: 1 << 20, transposed: 1 << 24, gapBytes: 64 << 10 }

/** One chunk of a part: the source values it is made of, and what turns them into the GGUF's values. */
export interface Chunk {
  /**
   * Runs of the source's elements, [first, count], whose values packed one after another are the chunk's; none
   * for a block of columns.
   */
  runs: ReadonlyArray<readonly [number, number]>
  /** Or the columns [first, end) of every row of the source, packed row after row. */
  columns?: readonly [number, number]
  /** Elements in all. */
  count: number
  /** The chunk's values are [rows, count / rows], to be transposed; 0 for none. */
  transposeRows: number
  /** The chunk's rows are this many heads, each reordered as llama.cpp's permute does; 0 for none. */
  heads: number
}

/**
 * A part's chunks, in the GGUF's order, each of whole ggml blocks of the GGUF's rows: of a transposed tensor,
 * blocks of its columns (all of them where they fit); of a reordered one, whole heads, or where a head is larger
 * than a chunk, rows of its first half and the rows of its second half that pair with them; else runs of
 * GGUF_CHUNKS.elements. Every chunk but the last is the largest.
 */
export function* partChunks(t: PlannedTensor, info: TensorInfo): Generator<Chunk> {
  const count = elementsOf(info)
  if (count === 0) return
  const rows = info.shape[0]
  const columns = count / rows
  if (t.transpose) {
    const width = count <= GGUF_CHUNKS.transposed ? columns : Math.max(1, Math.floor(GGUF_CHUNKS.transposed / rows))
    for (let column = 0; column < columns; column += width) {
      const n = Math.min(width, columns - column)
      const block = n === columns ? { runs: [[0, count] as const] } : { runs: [], columns: [column, column + n] as const }
      yield { ...block, count: rows * n, transposeRows: rows, heads: 0 }
    }
    return
  }
  if (t.heads > 0 && count / t.heads <= GGUF_CHUNKS.elements) {
    const head = count / t.heads
    const perChunk = Math.floor(GGUF_CHUNKS.elements / head)
    for (let first = 0; first < t.heads; first += perChunk) {
      const heads = Math.min(perChunk, t.heads - first)
      yield { runs: [[first * head, heads * head]], count: heads * head, transposeRows: 0, heads }
    }
    return
  }
  if (t.heads > 0) {
    const half = rows / t.heads / 2
    const step = Math.max(1, Math.floor(GGUF_CHUNKS.elements / 2 / columns))
    for (let head = 0; head < t.heads; head++) {
      const end = (2 * head + 1) * half
      for (let row = 2 * head * half; row < end; row += step) {
        const n = Math.min(step, end - row)
        const runs = [
          [row * columns, n * columns],
          [(row + half) * columns, n * columns],
        ] as const
        yield { runs, count: 2 * n * columns, transposeRows: 0, heads: 1 }
      }
    }
    return
  }
  for (let first = 0; first < count; first += GGUF_CHUNKS.elements) {
    const n = Math.min(GGUF_CHUNKS.elements, count - first)
    yield { runs: [[first, n]], count: n, transposeRows: 0, heads: 0 }
  }
}

/** The elements of a part's largest chunk: its first. */
export const largestChunk = (t: PlannedTensor, info: TensorInfo): number => partChunks(t, info).next().value?.count ?? 0

/**
 * Fills `target` with the columns [first, end) of every row of the tensor `info` whose bytes start at `start`
 * in `source`: a read per row where the rows' runs are far apart, several at a time; else whole rows, a few at
 * a time, from which the runs are copied.
 */
export async function readColumns(
  source: RangeSource,
  start: number,
  info: TensorInfo,
  [first, end]: readonly [number, number],
  target: Uint8Array,
  signal: AbortSignal,
  onBytes: OnBytes,
): Promise<void> {
  const rows = info.shape[0]
  const elementBytes = byteLengthOf(info.dtype, 1)
  if (!Number.isInteger(elementBytes))
    throw new SafetensorsError(
      'UnsupportedConversion',
      `tensor ${JSON.stringify(info.name)}: a transposed ${info.dtype} tensor is converted whole, up to ${GGUF_CHUNKS.transposed} elements`,
    )
  const rowBytes = (elementsOf(info) / rows) * elementBytes
  const runBytes = (end - first) * elementBytes
  const at = (row: number) => start + row * rowBytes + first * elementBytes
  if (rowBytes - runBytes >= GGUF_CHUNKS.gapBytes) {
    const each = Array.from({ length: rows }, (_, row) => row)
    await runPool(each, PARALLEL_READS, (row) => readInto(source, at(row), target.subarray(row * runBytes, (row + 1) * runBytes), signal, onBytes))
    return
  }
  const perRead = Math.max(1, Math.floor(GGUF_CHUNKS.gapBytes / rowBytes))
  const rowsRead = new Uint8Array(perRead * rowBytes)
  for (let row = 0; row < rows; row += perRead) {
    const n = Math.min(perRead, rows - row)
    await readInto(source, start + row * rowBytes, rowsRead.subarray(0, n * rowBytes), signal)
    for (let i = 0; i < n; i++)
      target.set(rowsRead.subarray(i * rowBytes + first * elementBytes, i * rowBytes + first * elementBytes + runBytes), (row + i) * runBytes)
    onBytes(n * runBytes)
  }
}

/**
 * A copy of `heads` heads of rows with each head's rows reordered as llama.cpp's converter's `permute`:
 * reshape(heads, 2, rows / heads / 2, ...).swapaxes(1, 2), so that row j of a head's first half and row j
 * of its second half become rows 2j and 2j + 1; `undo` reorders them back.
 */
export function permuteRows(bytes: Uint8Array, heads: number, rowsPerHead: number, undo = false): Uint8Array {
  const out = new Uint8Array(bytes.length)
  const rowBytes = bytes.length / heads / rowsPerHead
  const half = rowsPerHead / 2
  for (let row = 0; row < heads * rowsPerHead; row++) {
    const head = row - (row % rowsPerHead)
    const from = head + ((row - head) % 2) * half + Math.floor((row - head) / 2)
    const [to, at] = undo ? [from, row] : [row, from]
    out.set(bytes.subarray(at * rowBytes, (at + 1) * rowBytes), to * rowBytes)
  }
  return out
}

/** A copy of a matrix of `rows` rows (elements of 2 or 4 bytes) with its rows and columns swapped. */
export function transposed(bytes: Uint8Array, rows: number, elementBytes: number): Uint8Array {
  const Elements = elementBytes === 4 ? Uint32Array : Uint16Array
  const from = new Elements(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.length / elementBytes)
  const columns = from.length / rows
  const to = new Elements(from.length)
  for (let row = 0; row < rows; row++) for (let column = 0; column < columns; column++) to[column * rows + row] = from[row * columns + column]
  return new Uint8Array(to.buffer)
}
