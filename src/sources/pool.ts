/** Reads in flight at once for one slice or one HTTP source's batch of ranges: enough to hide a round trip, few enough for any server. */
export const PARALLEL_READS = 6

/**
 * Runs `task` on every item with at most `limit` in flight. After a failure no new task starts; once the
 * running ones have settled, the first failure is thrown (so a caller cleaning up after a failure sees
 * every result that was produced).
 */
export async function runPool<T>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0
  let failure: { error: unknown } | undefined
  const worker = async () => {
    while (next < items.length && !failure) {
      const i = next++
      try {
        await task(items[i], i)
      } catch (error) {
        failure ??= { error }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  if (failure) throw failure.error
}

/** The next item is read ahead only up to this size, so reading ahead never holds more than a little extra memory. */
const READ_AHEAD_BYTES = 16 << 20

/**
 * Yields each item's read in order, starting the next one (when it is at most READ_AHEAD_BYTES) before
 * yielding this one: its transfer then overlaps whatever the consumer does with this result. A large item
 * is read only when asked for; it overlaps its own transfer and conversion (src/read/file.ts).
 */
export async function* readingAhead<T>(items: ReadonlyArray<{ bytes: number; read(): Promise<T> }>): AsyncGenerator<T> {
  let ahead: Promise<T> | undefined
  try {
    for (let i = 0; i < items.length; i++) {
      const current = ahead ?? items[i].read()
      ahead = undefined
      const result = await current
      const next = items[i + 1]
      if (next && next.bytes <= READ_AHEAD_BYTES) ahead = next.read()
      yield result
    }
  } finally {
    // A consumer that stops early leaves the read ahead unwanted: its failure is nobody's to handle.
    ahead?.catch(() => {})
  }
}
