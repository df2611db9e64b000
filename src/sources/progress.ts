// Progress of reads: bytes asked for and bytes arrived, reported as they land (not when a read ends),
// so a page can show a bar for a tensor of a gigabyte. Every source reports through the same meter
// (metered() below); sources that stream (HTTP, files, Blobs) report each chunk, others each read.
import { type OnBytes, type RangeSource, readInto } from './source.ts'

/** Bytes arrived out of the bytes asked for so far; `url` names the file over HTTP. */
export interface Progress {
  /** Bytes arrived so far; never decreases. */
  loaded: number
  /** Bytes asked for so far: `loaded === total` whenever nothing is pending. */
  total: number
  /** The file being read, over HTTP. */
  url?: string
}

/** What the `onProgress` options take: called as bytes arrive, at most once per 64 KiB or 16 ms, and at the end. */
export type ProgressCallback = (progress: Progress) => void

/** Events come at most once per this many bytes or this many milliseconds (about a frame), and always at the end. */
const STEP_BYTES = 64 * 1024
const STEP_MS = 16

export class ProgressMeter {
  #loaded = 0
  #total = 0
  #reportedLoaded = 0
  #reportedAt = -Infinity
  readonly #onProgress: ProgressCallback

  constructor(onProgress: ProgressCallback) {
    if (typeof onProgress !== 'function') throw new TypeError(`onProgress must be a function, got ${typeof onProgress}`)
    this.#onProgress = onProgress
  }

  asked(bytes: number): void {
    this.#total += bytes
  }

  arrived(bytes: number, url?: string): void {
    this.#loaded += bytes
    this.#report(url)
  }

  /** Bytes asked for that will not come: a read that failed, or ended at the end of a file of unknown size. */
  withdrawn(bytes: number, url?: string): void {
    this.#total -= bytes
    if (bytes > 0) this.#report(url)
  }

  #report(url: string | undefined): void {
    const now = performance.now()
    const done = this.#loaded === this.#total
    if (!done && this.#loaded - this.#reportedLoaded < STEP_BYTES && now - this.#reportedAt < STEP_MS) return
    this.#reportedLoaded = this.#loaded
    this.#reportedAt = now
    this.#onProgress(url === undefined ? { loaded: this.#loaded, total: this.#total } : { loaded: this.#loaded, total: this.#total, url })
  }
}

/**
 * A metered source's meter and URL, which count the bytes the pool's workers read themselves (src/pool/read.ts):
 * no read of the source sees them.
 */
export interface WorkerReads {
  meter: ProgressMeter
  url?: string
}

/**
 * `source` with every read counted by `meter`: asked when the read starts, arrived as the source reports
 * its bytes (or all at once when it resolves, for a source that does not stream), withdrawn if it fails.
 * Keeps `bytes` (zero-copy views of memory), `size` and `requestCost`; readRanges is counted like the reads; `workerReads`
 * counts what the pool's workers read themselves.
 */
export function metered<S extends RangeSource>(source: S, meter: ProgressMeter, url?: string): S {
  async function counted<T>(length: number, onBytes: OnBytes | undefined, run: (report: OnBytes) => Promise<T>, received: (result: T) => number): Promise<T> {
    meter.asked(length)
    let seen = 0
    const report = (bytes: number, done?: number) => {
      seen += bytes
      meter.arrived(bytes, url)
      onBytes?.(bytes, done)
    }
    try {
      const result = await run(report)
      const got = received(result)
      if (got > seen) report(got - seen)
      meter.withdrawn(length - got, url)
      return result
    } catch (error) {
      meter.withdrawn(length - seen, url)
      throw error
    }
  }
  const wrapped: RangeSource & { workerReads: WorkerReads } = {
    read: (offset, length, signal, onBytes) =>
      counted(
        length,
        onBytes,
        (report) => source.read(offset, length, signal, report),
        (bytes) => bytes.length,
      ),
    readInto: (offset, target, signal, onBytes) =>
      counted(
        target.length,
        onBytes,
        (report) => readInto(source, offset, target, signal, report),
        () => target.length,
      ),
    close: source.close && (() => source.close!()),
    workerReads: { meter, url },
  }
  if (source.readRanges) {
    const total = (ranges: ReadonlyArray<{ target: Uint8Array }>) => ranges.reduce((sum, r) => sum + r.target.length, 0)
    wrapped.readRanges = (ranges, signal, onBytes) =>
      counted(
        total(ranges),
        undefined,
        (report) =>
          source.readRanges!(ranges, signal, (bytes, i) => {
            report(bytes)
            onBytes?.(bytes, i)
          }),
        () => total(ranges),
      )
  }
  return Object.create(source, Object.getOwnPropertyDescriptors(wrapped)) as S
}
