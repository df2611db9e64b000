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
