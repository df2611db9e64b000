// The conversion pool: workers made on first use, shared by every open file and model, each with its own
// instance of the kernels (src/pool/worker.ts). Pieces queue here and go to the least busy worker, two at a
// time each so that a worker never waits for its next message. Loaded on demand, by the reads that use it
// (src/pool/read.ts), which lend it what it needs of the library.
import { workers as platformWorkers } from '#workers'
import type { SafetensorsError } from '../errors.ts'
import type { PoolWorker, Workers } from '../platform/platform.ts'
import { type CallTask, type PieceResult, type PieceTask, poolWorker } from './worker.ts'

/** The most workers the default pool has: past this, memory bandwidth, not cores, bounds a conversion. */
const DEFAULT_MAX_WORKERS = 8

/** Pieces a worker holds at once: one being converted, one waiting in its message queue. */
const PIECES_PER_WORKER = 2

/** How long a worker may take to start before the pool gives up on workers (a page whose CSP forbids them). */
const START_TIMEOUT_MS = 20_000

interface Slot {
  worker: PoolWorker
  busy: number
  ready: Promise<void>
  /** The modules of CallTasks this worker has been sent. */
  modules: Set<string>
}

/** A task as the pool takes it: the id is the pool's. */
type Task = Omit<PieceTask, 'id'> | Omit<CallTask, 'id'>

interface Job {
  task: Task
  /** The wasm a CallTask's module is, for the workers that have not got it. */
  module?: { name: string; bytes(): Uint8Array<ArrayBuffer> }
  transfer: ArrayBuffer[]
  /** The workers this job may go to: the first `limit` of the pool. */
  limit: number
  resolve(bytes: ArrayBuffer | undefined): void
  reject(error: unknown): void
}

/** What the pool is lent of the library (src/pool/read.ts says why). */
export interface PoolNeeds {
  SafetensorsError: typeof SafetensorsError
  /** The conversion kernels, whose wasm the workers get. */
  kernelModule: { bytes(): Uint8Array<ArrayBuffer> }
}

export class ConversionPool {
  readonly #workers: Workers
  readonly #runtime: PoolNeeds
  readonly #slots: Slot[] = []
  readonly #queue: Job[] = []
  readonly #running = new Map<number, { job: Job; slot: Slot }>()
  #nextId = 0
  #failed: unknown

  constructor(workers: Workers, runtime: PoolNeeds) {
    this.#workers = workers
    this.#runtime = runtime
  }

  /** The pool's size for a `workers` option: the default is the cores, at most 8. */
  sizeFor(workers: number | undefined): number {
    return workers ?? Math.min(DEFAULT_MAX_WORKERS, Math.max(1, this.#workers.cores()))
  }

  /** Whether results can be shared memory that the workers write. */
  get sharedMemory(): boolean {
    return this.#workers.sharedMemory()
  }

  /** Starts workers up to `size`; resolves once they run, false when they cannot (then reads stay on the calling thread). */
  async start(size: number): Promise<boolean> {
    if (this.#failed !== undefined) return false
    while (this.#slots.length < size) this.#slots.push(this.#startSlot())
    try {
      await Promise.all(this.#slots.slice(0, size).map((slot) => slot.ready))
      return true
    } catch (error) {
      this.#failed ??= error
      return false
    }
  }

  /** Runs one task on one of the first `limit` workers: its output, unless it went to shared memory. */
  run(task: Task, transfer: ArrayBuffer[], limit: number, module?: Job['module']): Promise<ArrayBuffer | undefined> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ task, module, transfer, limit, resolve, reject })
      this.#dispatch()
    })
  }

  /** Drops the queued pieces that `isOf` picks, rejecting them with `error`; pieces already sent run to their end. */
  cancel(isOf: (task: Task) => boolean, error: unknown): void {
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      if (isOf(this.#queue[i].task)) this.#queue.splice(i, 1)[0].reject(error)
    }
  }

  #startSlot(): Slot {
    let settle: { resolve(): void; reject(error: unknown): void } | undefined
    const slot: Slot = {
      busy: 0,
      modules: new Set(),
      ready: new Promise<void>((resolve, reject) => {
        settle = { resolve, reject }
      }),
      worker: undefined as unknown as PoolWorker,
    }
    const timer = setTimeout(() => settle?.reject(new Error(`a worker did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS)
    const started = (error?: unknown) => {
      clearTimeout(timer)
      if (error === undefined) settle?.resolve()
      else settle?.reject(error)
      settle = undefined
    }
    const onMessage = (message: unknown) => {
      if ((message as { ready?: boolean }).ready) return started()
      this.#finished(slot, message as PieceResult)
    }
    const onError = (error: unknown) => {
      started(error)
      this.#lost(slot, error)
    }
    try {
      slot.worker = this.#workers.start(poolWorker.toString(), onMessage, onError)
      slot.worker.post({ kernels: this.#runtime.kernelModule.bytes() })
    } catch (error) {
      started(error)
    }
    // A start that failed is reported by the start() that waits for it.
    slot.ready.catch(() => {})
    return slot
  }

  #dispatch(): void {
    for (let i = 0; i < this.#queue.length; ) {
      const job = this.#queue[i]
      let slot: Slot | undefined
      for (const candidate of this.#slots.slice(0, job.limit)) {
        if (candidate.busy < PIECES_PER_WORKER && (!slot || candidate.busy < slot.busy)) slot = candidate
      }
      if (!slot) {
        i++
        continue
      }
      this.#queue.splice(i, 1)
      const id = this.#nextId++
      this.#running.set(id, { job, slot })
      if (slot.busy++ === 0) slot.worker.hold(true)
      const wasm = job.module && !slot.modules.has(job.module.name) ? job.module.bytes() : undefined
      try {
        slot.worker.post({ ...job.task, id, wasm }, job.transfer)
      } catch (error) {
        // What cannot be sent (a file-backed Blob in Node) is read by the calling thread: `again`.
        this.#running.delete(id)
        if (--slot.busy === 0) slot.worker.hold(false)
        job.reject(
          Object.assign(new this.#runtime.SafetensorsError('Io', `cannot send a piece to a worker: ${(error as Error).message}`, { cause: error }), {
            again: true,
          }),
        )
        continue
      }
      if (job.module) slot.modules.add(job.module.name)
    }
  }

  #finished(slot: Slot, result: PieceResult): void {
    const running = this.#running.get(result.id)
    if (!running) return
    this.#running.delete(result.id)
    if (--slot.busy === 0) slot.worker.hold(false)
    if (result.error) {
      const { message, path, again } = result.error
      running.job.reject(Object.assign(new this.#runtime.SafetensorsError('Io', message, { path }), { again }))
    } else running.job.resolve(result.bytes)
    this.#dispatch()
  }

  /** A worker that died: its pieces fail, and it takes no more. */
  #lost(slot: Slot, error: unknown): void {
    const at = this.#slots.indexOf(slot)
    if (at < 0) return
    this.#slots.splice(at, 1)
    slot.worker.terminate()
    for (const [id, running] of this.#running) {
      if (running.slot !== slot) continue
      this.#running.delete(id)
      running.job.reject(
        new this.#runtime.SafetensorsError('Io', `a worker of the conversion pool stopped: ${(error as Error)?.message ?? error}`, { cause: error }),
      )
    }
    if (this.#slots.length === 0) {
      this.#failed ??= error
      for (const job of this.#queue.splice(0)) job.reject(new this.#runtime.SafetensorsError('Io', 'the conversion pool has no workers left', { cause: error }))
    } else this.#dispatch()
  }
}

let shared: ConversionPool | undefined

/**
 * The process's pool, started with the workers a read may use; undefined where the runtime has no workers,
 * where they cannot start, or for `workers: 0`.
 */
export async function conversionPool(workers: number | undefined, runtime: PoolNeeds): Promise<{ pool: ConversionPool; size: number } | undefined> {
  if (workers === 0 || !platformWorkers) return undefined
  shared ??= new ConversionPool(platformWorkers, runtime)
  const size = shared.sizeFor(workers)
  return (await shared.start(size)) ? { pool: shared, size } : undefined
}
