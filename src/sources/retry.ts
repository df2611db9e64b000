// When and how long to wait before trying a failed HTTP transfer again, and the watchdog that turns a
// silent connection into a failure. Nothing here knows about HTTP ranges; src/sources/http/source.ts decides what is
// worth retrying.
import { SafetensorsError } from '../errors.ts'
import { onAbort } from './source.ts'

/**
 * Backoff bounds in ms. Exponential with jitter keeps many clients that failed together (a server
 * restart) from coming back in step; the cap keeps a long run of retries from waiting minutes.
 * Mutable only so that tests can make the waits short.
 */
export const RETRY_DELAY = { base: 200, max: 10_000, retryAfterMax: 60_000 }

const DEFAULT_RETRIES = 4
const DEFAULT_IDLE_TIMEOUT = 30_000

/** The option `name`, an integer of at least `least`, checked: misuse is the caller's bug, so TypeError/RangeError, not Io. */
export function integerOption(name: string, value: unknown, least: number): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be a number, not ${typeof value}`)
  if (!Number.isInteger(value) || value < least) throw new RangeError(`${name} must be an integer >= ${least}, not ${value}`)
  return value
}

/** retries and idleTimeout, checked as integerOption does. */
export function retrySettings(options: { retries?: unknown; idleTimeout?: unknown }): { retries: number; idleTimeout: number } {
  const { retries = DEFAULT_RETRIES, idleTimeout = DEFAULT_IDLE_TIMEOUT } = options
  const checkedRetries = integerOption('retries', retries, 0)
  if (typeof idleTimeout !== 'number') throw new TypeError(`idleTimeout must be a number of milliseconds, not ${typeof idleTimeout}`)
  if (!(idleTimeout > 0)) throw new RangeError(`idleTimeout must be > 0 ms (Infinity turns it off), not ${idleTimeout}`)
  return { retries: checkedRetries, idleTimeout }
}

/** The wait before retry number `attempt` (0 for the first): the server's Retry-After if it sent one. */
export function retryDelay(attempt: number, retryAfter: number | undefined): number {
  if (retryAfter !== undefined) return Math.min(retryAfter, RETRY_DELAY.retryAfterMax)
  return Math.min(RETRY_DELAY.max, RETRY_DELAY.base * 2 ** attempt) * (0.5 + Math.random() / 2)
}

/** Retry-After in ms: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  const date = Date.parse(text)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/** Waits `ms`; rejects with Aborted as soon as any of `signals` aborts. */
export function sleep(ms: number, signals: AbortSignal[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const stop = () => {
      clearTimeout(timer)
      for (const release of listeners) release()
      const aborted = signals.find((s) => s.aborted)
      if (aborted) reject(new SafetensorsError('Aborted', 'aborted while waiting to retry', { cause: aborted.reason }))
      else resolve()
    }
    const timer = setTimeout(stop, ms)
    const listeners = signals.map((s) => onAbort(s, stop))
    if (signals.some((s) => s.aborted)) stop()
  })
}

/**
 * Calls `onIdle` once if `touch` is not called for `ms` (a server that stops sending gives no error of
 * its own: without this a read would wait for the operating system's TCP timeout, or forever).
 */
export function watchdog(ms: number, onIdle: () => void): { touch(): void; stop(): void } {
  // setTimeout fires at once for delays past 2^31 - 1 ms; those (and Infinity) mean no watchdog.
  const armed = ms <= 0x7fffffff
  let timer: ReturnType<typeof setTimeout> | undefined
  const touch = () => {
    clearTimeout(timer)
    if (armed) timer = setTimeout(onIdle, ms)
  }
  touch()
  return { touch, stop: () => clearTimeout(timer) }
}
