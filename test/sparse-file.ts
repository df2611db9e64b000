// SafeTensors files with holes, for the tests of files larger than memory (Node only: the browser run shares
// read-helpers.ts, whose node:fs is a read-only shim there).
import { closeSync, ftruncateSync, openSync, writeSync } from 'node:fs'
import { headerFor, NATURAL } from './read-helpers.ts'

/** A tensor of a sparse file: the bytes written at byte offsets into it; the rest of its bytes are zeros. */
export interface SparseTensor {
  name: string
  dtype: string
  shape: number[]
  blocks?: Array<[at: number, bytes: Uint8Array]>
}

/**
 * Writes `tensors` into `path` as a SafeTensors file with holes (its header and the blocks, nothing else: a file of
 * gigabytes in a few kilobytes of disk, its zeros read back from the holes); returns its size.
 */
export function writeSparseFile(path: string, tensors: SparseTensor[]): number {
  const lengths = tensors.map((t) => t.shape.reduce((a, b) => a * b, NATURAL[t.dtype].bytes))
  const { head, starts, dataLength } = headerFor(tensors, lengths, undefined, 8)
  const fd = openSync(path, 'w')
  try {
    writeSync(fd, head, 0, head.length, 0)
    tensors.forEach(({ blocks = [] }, i) => {
      for (const [at, bytes] of blocks) writeSync(fd, bytes, 0, bytes.length, head.length + starts[i] + at)
    })
    ftruncateSync(fd, head.length + dataLength)
  } finally {
    closeSync(fd)
  }
  return head.length + dataLength
}
