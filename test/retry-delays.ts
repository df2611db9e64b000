// Backoff between retries is 200 ms and more in real use; the tests that retry on purpose make it 1 ms,
// so that a test of "retried 4 times" costs milliseconds. Node only (it reaches into src/sources/retry.ts).
import { afterAll, beforeAll } from 'vitest'
import { RETRY_DELAY } from '../src/sources/retry.ts'

export function shortRetryDelays(): void {
  const saved = { ...RETRY_DELAY }
  beforeAll(() => void Object.assign(RETRY_DELAY, { base: 1, max: 10 }))
  afterAll(() => void Object.assign(RETRY_DELAY, saved))
}
