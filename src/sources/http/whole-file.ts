// A server that ignores Range (python's http.server, some CDNs) answers every read with the whole file
// (a 200). Recognised once, the file is then read through one download that every later read takes its
// bytes from, so that reading every tensor costs the file once more, not once per tensor: kept whole in
// memory up to WHOLE_FILE.keepBytes (docs/memory.md); past that, held in a sliding window that
// the reads move forward, in file order, with one warning (a read behind the window downloads the file
// again, up to where it starts). The download goes only as far as the reads ask: it waits, its connection
// open, until a read wants more (or the file is closed).
//
// Only such a server needs this module, so it is loaded on demand; it imports nothing at run time (its
// download and its errors come from the source that makes it), so that a bundle puts it in a chunk alone.
import type { OnBytes } from '../source.ts'
import type { Attempt, io, RetryPlan, TransientError, withRetries } from './attempts.ts'
import type { FileState } from './responses.ts'

/**
 * keepBytes: the largest file kept whole in memory; windowBytes: the window a larger one is read through.
 * Mutable only so that tests can make them small.
 */
export const WHOLE_FILE = { keepBytes: 512 << 20, windowBytes: 64 << 20 }

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

export class WholeFile {
  readonly #source: WholeFileSource
  readonly #size: number
  readonly #window: Uint8Array
  /** The first byte of the file the window holds; the window holds [base, base + its length). */
  #base = 0
  /** The bytes of the file downloaded so far, from 0: [0, #end) have passed, [#base, #end) are held. */
  #end = 0
  #controller: AbortController | undefined
  readonly #waiting = new Set<Waiting>()
  /** Wakes the download where it waits for a read to want more, or to take what the window holds. */
  #room: (() => void) | undefined

  constructor(source: WholeFileSource) {
    const { href, size = 0 } = source.state
    this.#source = source
    this.#size = size
    const keep = size <= WHOLE_FILE.keepBytes
    this.#window = new Uint8Array(keep ? size : WHOLE_FILE.windowBytes)
    if (!keep)
      console.warn(
        `safetensors-wasm: ${href} ignores Range requests and is ${size} bytes, more than the ${WHOLE_FILE.keepBytes} kept in memory: it is read as one download in file order, and a read behind it downloads the file again`,
      )
  }

  /** Fills `target` with the bytes from `offset` on, as the download brings them. */
  read(offset: number, target: Uint8Array, signal: AbortSignal | undefined, onBytes: OnBytes | undefined): Promise<void> {
    if (target.length === 0) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const abort = () => waiting.settle(this.#source.abortedError(signal!))
      signal?.addEventListener('abort', abort, { once: true })
      const waiting: Waiting = {
        offset,
        target,
        got: 0,
        onBytes,
        settle: (error) => {
          signal?.removeEventListener('abort', abort)
          this.#waiting.delete(waiting)
          this.#room?.()
          if (error === undefined) resolve()
          else reject(error)
        },
      }
      if (signal?.aborted) return abort()
      this.#waiting.add(waiting)
      // Behind what the window holds: the download starts again.
      if (offset < this.#base) this.#restart(offset)
      this.#take(waiting)
      this.#start()
      this.#room?.()
    })
  }

  /** Stops the download. */
  close(): void {
    this.#controller?.abort()
    for (const waiting of this.#waiting) waiting.settle(this.#source.abortedError(AbortSignal.abort()))
  }

  #start(): void {
    if (this.#controller || this.#end === this.#size) return
    const controller = new AbortController()
    this.#controller = controller
    this.#download(controller.signal).then(
      () => {
        if (this.#controller === controller) this.#controller = undefined
      },
      (error: unknown) => {
        if (this.#controller !== controller) return
        this.#controller = undefined
        for (const waiting of this.#waiting) waiting.settle(error)
      },
    )
  }

  /** The file from where the download is (at each retry, again), every chunk landed in its place. */
  #download(signal: AbortSignal): Promise<void> {
    const { state, plan, request, withRetries, io, TransientError } = this.#source
    const { href } = state
    return withRetries(plan, signal, async (attempt) => {
      const from = this.#end
      const sent = request(`${from}-`, attempt)
      const response = await sent.response
      attempt.touch()
      const { skip } = state.accept(response, from, this.#size - from, sent.ifRange)
      if (!response.body) throw io(href, 'the response has no body')
      const reader = response.body.getReader()
      try {
        // A 200 starts at 0, a 206 where it was asked.
        for (let position = from - skip; ; ) {
          const { done, value } = await Promise.race([reader.read(), attempt.gone])
          if (done) break
          await this.#land(position, value, attempt)
          position += value.length
        }
      } finally {
        reader.cancel().catch(() => {})
      }
      if (this.#end < this.#size) throw new TransientError(href, `the response ended after ${this.#end} of ${this.#size} bytes`)
    })
  }

  #restart(offset: number): void {
    this.#controller?.abort()
    this.#controller = undefined
    this.#end = 0
    this.#base = offset
  }

  /** A chunk of the download at `position` (which may repeat bytes after a retry): held, and given to the reads. */
  async #land(position: number, chunk: Uint8Array, attempt: Attempt): Promise<void> {
    let at = Math.max(position, this.#end)
    const end = position + chunk.length
    while (at < end) {
      // No read wants these bytes yet, or the window is full of bytes no read has taken: wait until one does.
      while (at >= this.#base + this.#window.length || ![...this.#waiting].some((w) => w.offset + w.target.length > at))
        await attempt.idle(new Promise<void>((resolve) => (this.#room = resolve)))
      // A download that a restart superseded stops here (its attempt's signal is aborted).
      if (attempt.signal.aborted) throw this.#source.abortedError(attempt.signal)
      // Bytes before the window (a download that started again, on its way to where the reads are) pass by.
      const take = (at < this.#base ? Math.min(end, this.#base) : Math.min(end, this.#base + this.#window.length)) - at
      if (at >= this.#base) this.#copyIn(at, chunk.subarray(at - position, at - position + take))
      at += take
      this.#end = at
      attempt.touch()
      for (const waiting of this.#waiting) this.#take(waiting)
    }
  }

  #copyIn(at: number, bytes: Uint8Array): void {
    const length = this.#window.length
    const start = at % length
    const first = Math.min(bytes.length, length - start)
    this.#window.set(bytes.subarray(0, first), start)
    this.#window.set(bytes.subarray(first), 0)
  }

  /** Gives a read the bytes it can take now; settles it once it has them all, and moves the window on. */
  #take(waiting: Waiting): void {
    const from = waiting.offset + waiting.got
    const to = Math.min(waiting.offset + waiting.target.length, this.#end)
    if (to <= from || from < this.#base) return
    const length = this.#window.length
    for (let at = from; at < to; ) {
      const start = at % length
      const n = Math.min(to - at, length - start)
      waiting.target.set(this.#window.subarray(start, start + n), at - waiting.offset)
      at += n
    }
    waiting.got += to - from
    waiting.onBytes?.(to - from)
    // A window smaller than the file moves on past the bytes the earliest read has taken.
    if (length < this.#size) this.#base = Math.min(...[...this.#waiting].map((w) => w.offset + w.got), to)
    if (waiting.got === waiting.target.length) waiting.settle()
  }
}
