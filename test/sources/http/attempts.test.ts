// src/sources/http/attempts.ts: the retry loop of an HTTP read, without a server: what it retries (a
// TransientError, a failed connection, a stalled transfer), what it does not (any other SafetensorsError, a
// host that does not resolve, the caller's abort), how many times, and what the error says at the end.
import { describe, expect, test } from 'vitest'
import { SafetensorsError } from '../../../src/errors.ts'
import { type Attempt, TransientError, withRetries } from '../../../src/sources/http/attempts.ts'
import { shortRetryDelays } from '../../retry-delays.ts'

shortRetryDelays()

const URL_ = 'https://example.com/model.safetensors'
const plan = (retries: number, idleTimeout = 10_000) => ({ href: URL_, retries, idleTimeout })

/** Runs withRetries with `run` called on each attempt; what it settled with and the attempts it made. */
async function outcome(retries: number, run: (attempt: Attempt, n: number) => Promise<void>, options: { idleTimeout?: number; signal?: AbortSignal } = {}) {
  const attempts: Attempt[] = []
  const error = await withRetries(plan(retries, options.idleTimeout), options.signal, (attempt) => {
    attempts.push(attempt)
    return run(attempt, attempts.length)
  }).then(
    () => undefined,
    (e: unknown) => e as SafetensorsError,
  )
  return { error, attempts }
}

describe('what is retried', () => {
  test('a success: one attempt', async () => {
    const { error, attempts } = await outcome(3, async () => {})
    expect([error, attempts.length]).toEqual([undefined, 1])
  })

  test('TransientErrors until the third attempt succeeds: three attempts, each with a signal of its own', async () => {
    const { error, attempts } = await outcome(3, async (_, n) => {
      if (n < 3) throw new TransientError(URL_, 'HTTP 503', undefined, { status: 503 })
    })
    expect([error, attempts.length]).toEqual([undefined, 3])
    expect(new Set(attempts.map((a) => a.signal)).size).toBe(3)
  })

  test('a TransientError every time: retries + 1 attempts, then Io saying how often, with the status and URL, no longer transient', async () => {
    const { error, attempts } = await outcome(2, async () => {
      throw new TransientError(URL_, 'HTTP 503', undefined, { status: 503 })
    })
    expect(attempts).toHaveLength(3)
    expect(error).toBeInstanceOf(SafetensorsError)
    expect(error).not.toBeInstanceOf(TransientError)
    expect([error?.code, error?.message, error?.status, error?.url]).toEqual(['Io', `${URL_}: HTTP 503 (after 2 retries)`, 503, URL_])
  })

  test('retries: 0: one attempt, and its message as it was', async () => {
    const { error, attempts } = await outcome(0, async () => {
      throw new TransientError(URL_, 'HTTP 429')
    })
    expect([attempts.length, error?.message]).toEqual([1, `${URL_}: HTTP 429`])
  })

  test('a failed connection (fetch rejects with a plain error) is transient; at the end, Io naming it with its cause', async () => {
    const cause = new TypeError('fetch failed')
    const { error, attempts } = await outcome(1, async () => {
      throw cause
    })
    expect(attempts).toHaveLength(2)
    expect([error?.code, error?.message, error?.cause]).toEqual(['Io', `${URL_}: the connection failed: fetch failed (after 1 retries)`, cause])
  })
})

describe('what is not retried', () => {
  test('any other SafetensorsError: thrown as it is, after one attempt', async () => {
    const thrown = new SafetensorsError('Io', `${URL_}: HTTP 404`, { status: 404, url: URL_ })
    const { error, attempts } = await outcome(5, async () => {
      throw thrown
    })
    expect([error, attempts.length]).toEqual([thrown, 1])
  })

  test('a host that does not resolve: Io saying so, after one attempt', async () => {
    const { error, attempts } = await outcome(5, async () => {
      throw new TypeError('fetch failed', { cause: new Error('getaddrinfo ENOTFOUND example.com') })
    })
    expect(attempts).toHaveLength(1)
    expect([error?.code, error?.message, error?.url]).toEqual(['Io', `${URL_}: the host example.com does not resolve (DNS)`, URL_])
  })

  test("the caller's signal, aborted before: Aborted, with no attempt", async () => {
    const controller = new AbortController()
    controller.abort(new Error('user'))
    const { error, attempts } = await outcome(5, async () => {}, { signal: controller.signal })
    expect([error?.code, error?.message, attempts.length]).toEqual(['Aborted', `${URL_}: aborted`, 0])
  })

  test("the caller's signal, aborted during an attempt: that attempt's signal ends, Aborted, no retry", async () => {
    const controller = new AbortController()
    const { error, attempts } = await outcome(
      5,
      async (attempt) => {
        setTimeout(() => controller.abort(), 5)
        await attempt.until(new Promise<never>(() => {}))
      },
      { signal: controller.signal },
    )
    expect([error?.code, attempts.length, attempts[0].signal.aborted]).toEqual(['Aborted', 1, true])
  })
})

describe('the watchdog', () => {
  test('no byte for idleTimeout ms ends the attempt as a stall, which is retried', async () => {
    const { error, attempts } = await outcome(
      1,
      async (attempt) => {
        await attempt.until(new Promise<never>(() => {}))
      },
      { idleTimeout: 20 },
    )
    expect(attempts).toHaveLength(2)
    expect(attempts.every((a) => a.signal.aborted)).toBe(true)
    expect(error?.message).toBe(`${URL_}: no byte arrived for 20 ms (after 1 retries)`)
  })

  test('touch() keeps a slow transfer alive; idle() pauses the watchdog while the reader is busy', async () => {
    const { error, attempts } = await outcome(
      0,
      async (attempt) => {
        for (let i = 0; i < 6; i++) {
          await new Promise((resolve) => setTimeout(resolve, 20))
          attempt.touch()
        }
        await attempt.idle(new Promise((resolve) => setTimeout(resolve, 250)))
      },
      { idleTimeout: 100 },
    )
    expect([error, attempts.length, attempts[0].signal.aborted]).toEqual([undefined, 1, false])
  })
})
