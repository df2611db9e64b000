// Turning a slice request into the byte runs it covers, so a reader fetches those bytes and no others.
import { DTYPE_INFO, type DType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'

/** Per dimension: [start, stop) keeps that range, a number keeps one index and drops the dimension, null keeps all. */
export type SliceRange = readonly [start: number, stop: number] | number | null

export interface SlicePlan {
  /** Shape of the result (dimensions indexed by a number are dropped). */
  readonly shape: number[]
  readonly elements: number
  /** Byte runs relative to the tensor's first byte, ascending; each is maximal, so no two are adjacent. */
  readonly runs: Array<[offset: number, length: number]>
}

export function planSlice(name: string, dtype: DType, shape: readonly number[], ranges: readonly SliceRange[]): SlicePlan {
  const where = `tensor ${JSON.stringify(name)} of shape [${shape.join(', ')}]`
  if (ranges.length > shape.length) {
    throw new SafetensorsError('TooManySlices', `${where}: ${ranges.length} slice ranges for ${shape.length} dimensions`)
  }
  const starts: number[] = []
  const counts: number[] = []
  const outShape: number[] = []
  shape.forEach((dim, i) => {
    const range = ranges[i] ?? null
    let start = 0
    let stop = dim
    if (typeof range === 'number') {
      if (!Number.isInteger(range) || range < 0 || range >= dim)
        throw new SafetensorsError('SliceOutOfRange', `${where}: index ${range} is out of range for dimension ${i} (size ${dim})`)
      start = range
      stop = range + 1
    } else if (range !== null) {
      ;[start, stop] = range
      if (!Number.isInteger(start) || !Number.isInteger(stop) || start < 0 || stop < start || stop > dim) {
        throw new SafetensorsError('SliceOutOfRange', `${where}: range [${start}, ${stop}) is out of bounds for dimension ${i} (size ${dim})`)
      }
    }
    starts.push(start)
    counts.push(stop - start)
    if (typeof range !== 'number') outShape.push(stop - start)
  })
  const elements = counts.reduce((a, b) => a * b, 1)

  // The innermost dimensions taken whole make one contiguous block with the first partial one above them.
  let inner = shape.length - 1
  let block = 1
  while (inner >= 0 && counts[inner] === shape[inner]) block *= shape[inner--]
  const strides = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1))
  const runLength = inner >= 0 ? counts[inner] * block : block
  const runs: Array<[number, number]> = []
  if (elements > 0) {
    // Odometer over the outer dimensions (those above `inner`).
    const index = starts.slice(0, Math.max(inner, 0))
    for (;;) {
      let first = inner >= 0 ? starts[inner] * strides[inner] : 0
      for (let d = 0; d < index.length; d++) first += index[d] * strides[d]
      runs.push(toBytes(where, dtype, first, runLength))
      let d = index.length - 1
      while (d >= 0 && ++index[d] === starts[d] + counts[d]) index[d] = starts[d--]
      if (d < 0) break
    }
  }
  return { shape: outShape, elements, runs }
}

function toBytes(where: string, dtype: DType, firstElement: number, elements: number): [number, number] {
  const bits = DTYPE_INFO[dtype].bits
  if ((firstElement * bits) % 8 !== 0 || (elements * bits) % 8 !== 0) {
    throw new SafetensorsError(
      'MisalignedSlice',
      `${where}: a run of ${elements} ${dtype} elements from element ${firstElement} does not start and end on byte boundaries`,
    )
  }
  return [(firstElement * bits) / 8, (elements * bits) / 8]
}

/** Where each run lands when the runs are packed one after another, and their total length. */
export function packedStarts(runs: SlicePlan['runs']): { starts: number[]; total: number } {
  const starts: number[] = []
  let total = 0
  for (const [, length] of runs) {
    starts.push(total)
    total += length
  }
  return { starts, total }
}
