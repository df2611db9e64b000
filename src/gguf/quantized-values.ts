// What a GGUF takes from a quantized checkpoint (src/quant/): a quantized module's weight as its dequantized values,
// and gpt-oss's MXFP4 experts as ggml's MXFP4 blocks, repacked without a value changing. index.ts loads it for a
// model with a quantization block only, and lends it what it calls of chunks.ts: it imports nothing at run time, so
// that a bundler's chunk of it holds it alone.
import type { TensorInfo } from '../format/header.ts'
import type { SliceRange } from '../format/slice.ts'
import type { SafetensorsModel } from '../read/model.ts'
import type { ProgressMeter } from '../sources/progress.ts'
import type { Take } from './architectures.ts'
import type { Chunk, PieceValues, pieceChunks } from './chunks.ts'
import type { Piece, PlannedTensor } from './tensors.ts'

/** The slices of a logical tensor `info` that a chunk's values are, one after another: runs of rows of its first dimension, or a block of columns of its last. */
function chunkSlices({ shape }: TensorInfo, chunk: Chunk): SliceRange[][] {
  const rowElements = shape.slice(1).reduce((a, b) => a * b, 1)
  const rows = (first: number, count: number): SliceRange => [first / rowElements, (first + count) / rowElements]
  if (!chunk.columns) return chunk.runs.map(([first, count]) => [rows(first, count)])
  const { first, rows: n, rowLength, from, to } = chunk.columns
  return [[rows(first, n * rowLength), ...Array<SliceRange>(shape.length - 2).fill(null), [from, to]]]
}

/**
 * PieceValues for a quantized module's logical tensor: its dequantized values, as the model's reads compute them:
 * in order, or, for chunks of several runs or of columns, a read of each of their slices.
 */
export function logicalValues(model: SafetensorsModel, signal: AbortSignal, meter: ProgressMeter | undefined, chunksOf: typeof pieceChunks): PieceValues {
  const quantized = model.quantized!
  return async function* values(t, piece, dtype) {
    const { info } = piece.part
    const [first] = chunksOf(t, piece)
    if (first?.runs.length === 1) {
      // Runs in order, all of the first one's size but the last.
      const chunks = chunksOf(t, piece)
      for await (const values of quantized.chunks(info.name, dtype, first.count, signal, piece.rows)) {
        meter?.arrived(values.length)
        yield { chunk: chunks.next().value as Chunk, values }
      }
      return
    }
    for (const chunk of chunksOf(t, piece)) {
      const slices: Uint8Array[] = []
      for (const ranges of chunkSlices(info, chunk)) {
        const { data } = await quantized.read(info.name, ranges, { dtype, signal })
        slices.push(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))
      }
      const values = new Uint8Array(slices.reduce((bytes, slice) => bytes + slice.length, 0))
      let at = 0
      for (const slice of slices) {
        values.set(slice, at)
        at += slice.length
      }
      meter?.arrived(values.length)
      yield { chunk, values }
    }
  }
}

/** Value `v` of a block of 32 E2M1 codes at `base` as gpt-oss stores them: values 2i and 2i + 1 in byte i, low nibble first. */
const storedCode = (codes: Uint8Array, base: number, v: number) => (codes[base + (v >> 1)] >> ((v & 1) * 4)) & 15

/**
 * One expert's MXFP4 blocks as ggml's block_mxfp4: for each of its `rows` rows `take`, each block of 32 values is
 * its E8M0 scale byte, then 16 bytes of codes, byte j holding value j (low nibble) and value j + 16 (high). The
 * codes and scales are ggml's as they are (E2M1, and 2^(e - 127)): the values do not change.
 */
function mxfp4Blocks(codes: Uint8Array, scales: Uint8Array, rows: number, { start, step, count }: Take): Uint8Array {
  const groups = scales.length / rows
  const out = new Uint8Array(count * groups * 17)
  let at = 0
  for (let k = 0; k < count; k++) {
    for (let group = (start + k * step) * groups, end = group + groups; group < end; group++, at += 17) {
      out[at] = scales[group]
      for (let j = 0; j < 16; j++) out[at + 1 + j] = storedCode(codes, group * 16, j) | (storedCode(codes, group * 16, j + 16) << 4)
    }
  }
  return out
}

/** The data of an MXFP4 tensor `t`: its pieces are each expert's stored blocks then its scales, each one chunk, as they are. */
export async function* mxfp4Tensor(t: PlannedTensor, pieceValues: PieceValues): AsyncGenerator<Uint8Array> {
  const whole = async (piece: Piece) => {
    let bytes = new Uint8Array(0)
    for await (const { values } of pieceValues(t, piece, piece.part.info.dtype)) bytes = values.slice()
    return bytes
  }
  for (let p = 0; p < t.pieces.length; p += 2) {
    const codes = await whole(t.pieces[p])
    yield mxfp4Blocks(codes, await whole(t.pieces[p + 1]), t.pieces[p].part.info.shape[1], t.mxfp4!)
  }
}
