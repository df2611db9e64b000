// One attempt of an HTTP request and its retries: what ends an attempt (the caller's signals, the watchdog
// of a stalled transfer, a failed connection), which failures another attempt may not meet (TransientError),
// and the loop that makes the attempts with backoff between them (src/sources/retry.ts).
import { SafetensorsError } from '../../errors.ts'
import { retryDelay, sleep, watchdog } from '../retry.ts'
import { onAbort } from '../source.ts'

/** An Io error about `url`, with the HTTP status of the response that failed, if one did. */
export function io(url: string, message: string, status?: number): SafetensorsError {
  return new SafetensorsError('Io', `${url}: ${message}`, { url, status })
}

/** A failure another attempt may not meet. The retry loop catches it; if it ever escapes, it is still an Io error. */
export class TransientError extends SafetensorsError {
  constructor(
    url: string,
    message: string,
    readonly retryAfter?: number,
    facts: { cause?: unknown; status?: number } = {},
  ) {
    super('Io', `${url}: ${message}`, { ...facts, url })
  }
}

/**
 * Whether a failed fetch says its host name does not resolve, which no retry changes (a typo, a host that is
 * gone): Node's and Bun's ENOTFOUND, Deno's words for it. A browser does not tell, and retries.
 */
const unresolvable = (error: unknown) => /ENOTFOUND|Name or service not known/.test(`${(error as Error).message} ${(error as Error).cause}`)

/** What one attempt's requests use: its signal, the race against its end, the watchdog's touch. */
export interface Attempt {
  signal: AbortSignal
  /**
   * `promise`, or a rejection as soon as the attempt ends, so that a fetch or a body that ignores its signal
   * still stops. Nothing is kept once `promise` settles (a race per body chunk against one promise of the
   * attempt's end kept every chunk until the attempt ended: a 600 MiB download held 600 MiB).
   */
  until<T>(promise: Promise<T>): Promise<T>
  touch(): void
  /** Waits for `wait` (the reader's demand, not the server), the watchdog paused meanwhile; rejects when the attempt ends. */
  idle(wait: Promise<void>): Promise<void>
}

/** How a source's requests are retried: the URL they name, and the retry settings. */
export interface RetryPlan {
  href: string
  retries: number
  idleTimeout: number
}

/** Runs `run` until it succeeds, again after each transient failure (each attempt resumes where the last stopped), up to `retries` times. */
export async function withRetries(plan: RetryPlan, signal: AbortSignal | undefined, run: (attempt: Attempt) => Promise<void>): Promise<void> {
  const signals = signal ? [signal] : []
  for (let n = 0; ; n++) {
    try {
      return await attempt(plan, signals, run)
    } catch (error) {
      if (!(error instanceof TransientError)) throw error
      if (n >= plan.retries)
        throw new SafetensorsError('Io', n > 0 ? `${error.message} (after ${n} retries)` : error.message, {
          cause: error.cause,
          status: error.status,
          url: error.url,
        })
      await sleep(retryDelay(n, error.retryAfter), signals)
    }
  }
}

/** One attempt: ended by any of `signals` (Aborted) or by the watchdog (a transient stall); a failed connection is transient. */
async function attempt(plan: RetryPlan, signals: AbortSignal[], run: (attempt: Attempt) => Promise<void>): Promise<void> {
  const { href, idleTimeout } = plan
  const stopIfAborted = () => {
    const by = signals.find((s) => s.aborted)
    if (by) throw new SafetensorsError('Aborted', `${href}: aborted`, { cause: by.reason, url: href })
  }
  stopIfAborted()
  // One controller per attempt, ended by the caller's signals or by the watchdog (listeners rather than
  // AbortSignal.any, which older browsers lack and which keeps a link from a long-lived signal).
  const controller = new AbortController()
  const end = () => controller.abort()
  const listeners = signals.map((s) => onAbort(s, end))
  let stalled = false
  const dog = watchdog(idleTimeout, () => {
    stalled = true
    end()
  })
  const { signal } = controller
  const until = <T>(promise: Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason)
      const release = onAbort(signal, () => reject(signal.reason))
      promise.then(resolve, reject).finally(release)
    })
  try {
    const idle = async (wait: Promise<void>) => {
      dog.stop()
      try {
        await until(wait)
      } finally {
        dog.touch()
      }
    }
    await run({ signal, until, touch: () => dog.touch(), idle })
  } catch (error) {
    stopIfAborted()
    if (stalled) throw new TransientError(href, `no byte arrived for ${idleTimeout} ms`)
    if (error instanceof SafetensorsError) throw error
    // fetch() rejects, or a body stream errors, only when the connection failed.
    if (unresolvable(error)) throw new SafetensorsError('Io', `${href}: the host ${new URL(href).hostname} does not resolve (DNS)`, { cause: error, url: href })
    throw new TransientError(href, `the connection failed: ${(error as Error).message}`, undefined, { cause: error })
  } finally {
    dog.stop()
    for (const release of listeners) release()
  }
}
