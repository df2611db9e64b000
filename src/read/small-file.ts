// The whole of a model's small JSON file (its index, config.json, tokenizer.json), bounded in size.
import { SafetensorsError } from '../errors.ts'
import { type RangeSource, readInto } from '../sources/source.ts'

/** The largest small file read whole: the header's own limit, which the largest indexes (91,280 entries, 9 MB) stay far below. */
const MAX_SMALL_FILE = 100_000_000

/**
 * A whole small JSON file of a model (`what`: the index, config.json, tokenizer.json), bounded by
 * MAX_SMALL_FILE, read in at most two reads.
 */
export async function readSmallFile(source: RangeSource, where: string, signal?: AbortSignal, what = 'the index'): Promise<Uint8Array> {
  const head = await source.read(0, Math.min(source.size ?? MAX_SMALL_FILE, 64 * 1024), signal)
  const size = source.size ?? head.length
  if (size > MAX_SMALL_FILE)
    throw new SafetensorsError('InvalidHeaderDeserialization', `${where}: ${what} is ${size} bytes, above the limit of ${MAX_SMALL_FILE}`)
  const bytes = new Uint8Array(size)
  bytes.set(head)
  await readInto(source, head.length, bytes.subarray(head.length), signal)
  return bytes
}
