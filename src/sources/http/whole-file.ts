// A server that ignores Range (python's http.server, some CDNs) answers every read with the whole file
// (a 200). Recognised once, the file is then read through downloads of it that the reads take their bytes
// from, so that reading every tensor costs the file once more, not once per tensor. Each download holds the
// last bytes it passed in a window (docs/memory.md): the whole file when it is at most WHOLE_FILE.windowBytes,
// else that many bytes. A read takes its bytes from the download that holds them or is on its way to them
// (it waits for it, told of its bytes as they come); a read behind every download starts a new one: one that
// keeps the whole file when it is at most WHOLE_FILE.keepBytes, else one more window, at most two at once, so
// that reads that alternate between two places (a tensor's rows taken from its two halves) each follow
// their own. A download goes only as far as its reads ask: it waits, its connection open, until one wants
// more (or the file is closed).
//
// Only such a server needs this module, so it is loaded on demand; it imports nothing at run time (its
// download and its errors come from the source that makes it), so that a bundle puts it in a chunk alone.
import type { OnBytes } from '../source.ts'
import type { Attempt, io, RetryPlan, TransientError, withRetries } from './attempts.ts'
import type { FileState } from './responses.ts'

/**
 * keepBytes: the largest file a download keeps whole once a read fell behind a window; windowBytes: the
 * bytes each download holds. Mutable only so that tests can make them small.
 */
export const WHOLE_FILE = { keepBytes: 512 << 20, windowBytes: 32 << 20 }

/** Downloads through windows at once: two places read in turn each have one. */
const MOST_WINDOWS = 2

/** What a WholeFile takes of its source (src/sources/http/source.ts): its state, its requests, and the functions it would import. */
interface WholeFileSource {
  state: FileState
  plan: RetryPlan
  request(range: string, attempt: Attempt): { response: Promise<Response>; ifRange: string | null }
  withRetries: typeof withRetries
  io: typeof io
  TransientError: typeof TransientError
  abortedError(signal: AbortSignal): Error
}

/** One read waiting for its bytes: where they go, how many have come. */
interface Waiting {
  offset: number
  target: Uint8Array
  got: number
  onBytes?: OnBytes
  settle(error?: unknown): void
}

/** One download of the file from its start, and the last bytes it passed. */
class Download {
  readonly window: Uint8Array
  /** Bytes [0, end) of the file have passed; the window holds [held, end). */
  end = 0
  readonly reads = new Set<Waiting>()
  readonly controller = new AbortController()
  /** Wakes the download where it waits for a read to want more. */
  room: (() => void) | undefined
  /** When a read last came to it, for choosing the one to drop. */
  used = 0

  constructor(bytes: number) {
    this.window = new Uint8Array(bytes)
  }

  get held(): number {
    return Math.max(0, this.end - this.window.length)
  }

  /** The end of the bytes its reads want: a read wants the bytes before it that the download has not passed. */
  wantedEnd(): number {
    let end = 0
    for (const read of this.reads) end = Math.max(end, read.offset + read.target.length)
    return end
  }
}

export class WholeFile {
  readonly #source: WholeFileSource
  readonly #size: number
  #downloads: Download[] = []
  /** Reads so far, the clock of Download.used. */
  #reads = 0
  /** Downloads whose requests went out (a download ends, or fails, once). */
  readonly #started = new WeakSet<Download>()

  constructor(source: WholeFileSource) {
    const { href, size = 0 } = source.state
    this.#source = source
    this.#size = size
    if (size > WHOLE_FILE.keepBytes)
      console.warn(
        `safetensors-wasm: ${href} ignores Range requests and is ${size} bytes, more than the ${WHOLE_FILE.keepBytes} kept in memory: it is read as a download in file order, and a read behind it downloads the file again`,
      )
  }

  /** Fills `target` with the bytes from `offset` on, as a download brings them. */
  read(offset: number, target: Uint8Array, signal: AbortSignal | undefined, onBytes: OnBytes | undefined): Promise<void> {
    if (target.length === 0) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const abort = () => waiting.settle(this.#source.abortedError(signal!))
      const waiting: Waiting = {
        offset,
        target,
        got: 0,
        onBytes,
        settle: (error) => {
          signal?.removeEventListener('abort', abort)
          for (const download of this.#downloads) download.reads.delete(waiting)
          if (error === undefined) resolve()
          else reject(error)
        },
      }
      if (signal?.aborted) return abort()
      signal?.addEventListener('abort', abort, { once: true })
      const download = this.#downloadFor(offset)
      download.used = ++this.#reads
      download.reads.add(waiting)
      this.#take(download, waiting)
      this.#start(download)
      download.room?.()
    })
  }

  /** Stops the downloads; their reads fail with Aborted. */
  close(): void {
    for (const download of this.#drop(this.#downloads)) for (const waiting of download.reads) waiting.settle(this.#source.abortedError(AbortSignal.abort()))
  }

  /**
   * The download a read from `offset` takes its bytes from: one whose window holds that byte, else the one
   * closest before it, else a new one.
   */
  #downloadFor(offset: number): Download {
    const ahead = this.#downloads.filter((d) => d.held <= offset)
    const holding = ahead.find((d) => offset < d.end)
    if (holding) return holding
    if (ahead.length > 0) return ahead.reduce((best, d) => (d.end > best.end ? d : best))
    const first = this.#downloads.length === 0
    const windowBytes = Math.min(this.#size, WHOLE_FILE.windowBytes)
    // After a read behind the window, a file small enough is kept whole: no read is ever behind again.
    const keep = !first && this.#size <= WHOLE_FILE.keepBytes
    let dropped: Download[] = []
    if (keep) dropped = this.#drop(this.#downloads)
    else if (this.#downloads.length >= MOST_WINDOWS) dropped = this.#drop([this.#downloads.reduce((last, d) => (d.used < last.used ? d : last))])
    const download = new Download(keep ? this.#size : windowBytes)
    // The reads of a dropped download: the new one, from the file's start, brings their bytes.
    for (const d of dropped) for (const waiting of d.reads) download.reads.add(waiting)
    this.#downloads.push(download)
    if (download.reads.size > 0) this.#start(download)
    return download
  }

  /** Takes `downloads` out of the file, their connections closed; returns them. */
  #drop(downloads: Download[]): Download[] {
    const dropped = [...downloads]
    this.#downloads = this.#downloads.filter((d) => !dropped.includes(d))
    for (const download of dropped) download.controller.abort()
    return dropped
  }

  #start(download: Download): void {
    if (this.#started.has(download) || download.end === this.#size) return
    this.#started.add(download)
    this.#download(download).catch((error: unknown) => {
      // A dropped download's reads went to another.
      if (!this.#downloads.includes(download)) return
      this.#drop([download])
      for (const waiting of download.reads) waiting.settle(error)
    })
  }

  /** The file from where the download is (at each retry, again), every chunk passed to its reads. */
  #download(download: Download): Promise<void> {
    const { state, plan, request, withRetries, io, TransientError } = this.#source
    const { href } = state
    return withRetries(plan, download.controller.signal, async (attempt) => {
      const from = download.end
      const sent = request(`${from}-`, attempt)
      const response = await sent.response
      attempt.touch()
      const { skip } = state.accept(response, from, this.#size - from, sent.ifRange)
      if (!response.body) throw io(href, 'the response has no body')
      const reader = response.body.getReader()
      try {
        // A 200 starts at 0, a 206 where it was asked.
        for (let position = from - skip; ; ) {
          const { done, value } = await attempt.until(reader.read())
          if (done) break
          await this.#land(download, position, value, attempt)
          position += value.length
        }
      } finally {
        reader.cancel().catch(() => {})
      }
      if (download.end < this.#size) throw new TransientError(href, `the response ended after ${download.end} of ${this.#size} bytes`)
    })
  }

  /**
   * A chunk of the download at `position` (which may repeat bytes after a retry), passed as far as the reads want
   * its bytes (the rest waits, and the connection with it, until a read wants more): held, and given to the reads.
   */
  async #land(download: Download, position: number, chunk: Uint8Array, attempt: Attempt): Promise<void> {
    const end = position + chunk.length
    while (download.end < end) {
      while (download.wantedEnd() <= download.end) await attempt.idle(new Promise<void>((resolve) => (download.room = resolve)))
      if (attempt.signal.aborted) throw this.#source.abortedError(attempt.signal)
      const to = Math.min(end, download.wantedEnd())
      // Only the bytes the window will still hold once these are in.
      const { window } = download
      const from = Math.max(download.end, to - window.length)
      const bytes = chunk.subarray(from - position, to - position)
      const start = from % window.length
      const first = Math.min(bytes.length, window.length - start)
      window.set(bytes.subarray(0, first), start)
      window.set(bytes.subarray(first), 0)
      download.end = to
      attempt.touch()
      for (const waiting of download.reads) this.#take(download, waiting, chunk, position)
    }
  }

  /**
   * Gives a read the bytes its download has for it now: those of the chunk that just landed at `position` (a
   * chunk may be longer than the window), and before it those the window holds. Settles it once it has them all.
   */
  #take(download: Download, waiting: Waiting, chunk?: Uint8Array, position = download.end): void {
    const from = waiting.offset + waiting.got
    const to = Math.min(waiting.offset + waiting.target.length, download.end)
    if (to <= from) return
    const { window } = download
    const length = window.length
    for (let at = from; at < to; ) {
      if (chunk && at >= position) {
        waiting.target.set(chunk.subarray(at - position, to - position), at - waiting.offset)
        break
      }
      const start = at % length
      const n = Math.min(to - at, length - start, position - at)
      waiting.target.set(window.subarray(start, start + n), at - waiting.offset)
      at += n
    }
    waiting.got += to - from
    waiting.onBytes?.(to - from)
    if (waiting.got === waiting.target.length) waiting.settle()
  }
}
