// Reading a slice's byte runs at the least cost. A request costs the source a fixed overhead, which
// RangeSource.requestCost states in bytes (a round trip over HTTP, a system call for a file): two runs
// whose gap costs less than that are read as one, the gap landing in a scratch buffer, and every run
// otherwise lands in place. A column block of a row-major matrix is thousands of short runs a few
// bytes apart: read as a few large reads instead of one request per row.
import { PARALLEL_READS, runPool } from './pool.ts'
import { type OnBytes, type RangeSource, readInto } from './source.ts'

interface PlannedRead {
  /** Relative to the tensor's first byte, like the runs. */
  readonly offset: number
  readonly length: number
  /** The runs this read covers: where each starts in the read, its length, and where it goes in the packed result. */
  readonly parts: ReadonlyArray<readonly [at: number, length: number, to: number]>
}

/** A merged read is split once it spans more than this, so that its scratch buffer stays small. */
const MAX_PIECE = 16 << 20

/**
 * Groups `runs` (ascending, non-adjacent, as planSlice gives them) into reads: a gap shorter than
 * `requestCost` bytes is read rather than paying for another request, so no read has a gap of
 * requestCost or more, and every byte read lies between a run's start and a later run's end: the bytes
 * beyond the runs never exceed the tensor's size, nor requestCost per gap. A long merged read is then cut
 * at its gaps into pieces of about 1/PARALLEL_READS of the bytes (at least 4 request costs, at most
 * MAX_PIECE), so that the pieces are read concurrently as separate runs would be.
 */
function planReads(runs: ReadonlyArray<readonly [offset: number, length: number]>, requestCost: number): PlannedRead[] {
  const groups: Array<Array<readonly [number, number, number]>> = []
  let to = 0
  let end = -Infinity
  for (const [offset, length] of runs) {
    if (offset - end >= requestCost || groups.length === 0) groups.push([])
    groups[groups.length - 1].push([offset, length, to])
    to += length
    end = offset + length
  }
  const spanOf = (group: ReadonlyArray<readonly [number, number, number]>) => group[group.length - 1][0] + group[group.length - 1][1] - group[0][0]
  const span = groups.reduce((sum, group) => sum + spanOf(group), 0)
  const piece = Math.min(MAX_PIECE, Math.max(4 * requestCost, Math.ceil(span / PARALLEL_READS)))
  const reads: PlannedRead[] = []
  for (const group of groups) {
    let first = 0
    for (let i = 1; i <= group.length; i++) {
      if (i < group.length && group[i][0] + group[i][1] - group[first][0] <= piece) continue
      const base = group[first][0]
      const parts = group.slice(first, i).map(([offset, length, to]) => [offset - base, length, to] as const)
      reads.push({ offset: base, length: spanOf(group.slice(first, i)), parts })
      first = i
    }
  }
  return reads
}

/**
 * Reads `runs` of the tensor starting at file offset `start`, packed one after another into `target`,
 * as planReads groups them: several at a time, or all through source.readRanges (an HTTP server's
 * multi-range answer). `onBytes` counts the runs' bytes only, not the gaps read with them.
 */
export async function readRuns(
  source: RangeSource,
  start: number,
  runs: ReadonlyArray<readonly [number, number]>,
  target: Uint8Array,
  signal?: AbortSignal,
  onBytes?: OnBytes,
): Promise<void> {
  const reads = planReads(runs, source.requestCost ?? 0)
  // A read of one run lands in place; a merged one in scratch, from which its runs are copied.
  const direct = (read: PlannedRead) => read.parts.length === 1
  const into = (read: PlannedRead) => (direct(read) ? target.subarray(read.parts[0][2], read.parts[0][2] + read.length) : new Uint8Array(read.length))
  const copyOut = (read: PlannedRead, scratch: Uint8Array) => {
    if (direct(read)) return
    for (const [at, length, to] of read.parts) target.set(scratch.subarray(at, at + length), to)
    onBytes?.(read.parts.reduce((sum, [, length]) => sum + length, 0))
  }
  if (source.readRanges && reads.length > 1) {
    const targets = reads.map(into)
    await source.readRanges(
      reads.map((read, i) => ({ offset: start + read.offset, target: targets[i] })),
      signal,
      onBytes && ((bytes, i) => direct(reads[i]) && onBytes(bytes)),
    )
    reads.forEach((read, i) => copyOut(read, targets[i]))
    return
  }
  await runPool(reads, PARALLEL_READS, async (read) => {
    const bytes = into(read)
    await readInto(source, start + read.offset, bytes, signal, direct(read) ? onBytes : undefined)
    copyOut(read, bytes)
  })
}
