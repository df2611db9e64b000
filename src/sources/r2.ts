// Cloudflare R2 through a Worker's bucket binding (env.BUCKET): a file read by ranged gets pinned to the
// object first seen, and a model under a key prefix. The R2 types are the few members used here, declared
// by shape, so that nothing depends on Cloudflare's type package (a binding of @cloudflare/workers-types'
// R2Bucket fits them).
import { SafetensorsError } from '../errors.ts'
import { abortedError, checkRange, type ModelFolder, onAbort, type RangeSource, readOver, throwIfAborted } from './source.ts'

/** An R2 object's metadata, as `bucket.head()` and a `get()` whose condition failed give it. */
export interface R2Object {
  /** The object's key. */
  readonly key: string
  /** The ETag unquoted, as `onlyIf.etagMatches` takes it (the quoted `httpEtag` is a TypeError there). */
  readonly etag: string
  /** The whole object's size in bytes, whatever range was asked for. */
  readonly size: number
}

/** An R2 object with its bytes (those of the range asked for), as a `get()` gives it. */
export interface R2ObjectBody extends R2Object {
  /** The bytes of the range. */
  readonly body: ReadableStream<Uint8Array>
}

/** The members of a Worker's R2 bucket binding (`env.BUCKET`) that r2Source and r2Model use. */
export interface R2Bucket {
  /** The object's metadata, or null when there is no object of that key. */
  head(key: string): Promise<R2Object | null>
  /** A range of the object, if it still has that ETag: an object without a body when it does not, null when it is gone. */
  get(key: string, options: { range: { offset: number; length: number }; onlyIf: { etagMatches: string } }): Promise<R2ObjectBody | R2Object | null>
}

/** Options of {@link r2Source}. */
export interface R2SourceOptions {
  /**
   * Aborts every read of the source (each read takes a signal of its own as well).
   * @defaultValue none
   */
  signal?: AbortSignal
}

/** Simultaneous subrequests a Worker may have open; more wait for one to finish. */
const R2_CONNECTIONS = 6

/** At most R2_CONNECTIONS tasks at once; the others wait, in order. */
class Slots {
  #free = R2_CONNECTIONS
  readonly #waiting: Array<() => void> = []

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--
    else await new Promise<void>((resolve) => this.#waiting.push(resolve))
    try {
      return await task()
    } finally {
      const next = this.#waiting.shift()
      if (next) next()
      else this.#free++
    }
  }
}

function checkBinding(bucket: R2Bucket, key: string): void {
  if (typeof bucket !== 'object' || bucket === null || typeof bucket.get !== 'function' || typeof bucket.head !== 'function')
    throw new TypeError(`expected an R2 bucket binding (with get and head), got ${Object.prototype.toString.call(bucket)}`)
  if (typeof key !== 'string') throw new TypeError(`an R2 key or prefix must be a string, got ${Object.prototype.toString.call(key)}`)
}

const objectName = (key: string) => `R2 object ${JSON.stringify(key)}`

/** Anything R2 throws (a refused range, a failed subrequest) is Io, naming the object. */
function r2Error(where: string, what: string, cause: unknown): SafetensorsError {
  if (cause instanceof SafetensorsError) return cause
  return new SafetensorsError('Io', `${where}: ${what} failed: ${(cause as Error)?.message ?? String(cause)}`, { cause })
}

/** Fills `target` from a get's body, which must hold exactly its length. */
async function fill(
  body: ReadableStream<Uint8Array>,
  target: Uint8Array,
  where: string,
  offset: number,
  aborted: Promise<never>,
  onBytes?: (bytes: number) => void,
): Promise<void> {
  const reader = body.getReader()
  try {
    for (let filled = 0; ; ) {
      const { done, value } = await Promise.race([reader.read(), aborted])
      if (done) {
        if (filled < target.length) throw new SafetensorsError('Io', `${where}: the read of ${target.length} bytes at offset ${offset} gave ${filled}`)
        return
      }
      if (filled + value.length > target.length)
        throw new SafetensorsError('Io', `${where}: the read of ${target.length} bytes at offset ${offset} gave more (${filled + value.length})`)
      target.set(value, filled)
      filled += value.length
      onBytes?.(value.length)
    }
  } finally {
    reader.cancel().catch(() => {})
  }
}

/** r2Source with the slots it shares (a model's shards share one set) and, when known, the object's metadata. */
function pinnedSource(bucket: R2Bucket, key: string, slots: Slots, options: R2SourceOptions, known?: R2Object): RangeSource {
  checkBinding(bucket, key)
  const where = objectName(key)
  let pinning: Promise<R2Object> | undefined = known && Promise.resolve(known)
  let pinned = known
  const pin = () =>
    (pinning ??= slots
      .run(() => bucket.head(key))
      .then(
        (object) => {
          if (object === null) throw new SafetensorsError('Io', `${where}: no such object in the bucket`)
          pinned = object
          return object
        },
        (cause) => {
          throw r2Error(where, 'head()', cause)
        },
      )
      .catch((error) => {
        // A failure is not kept: the next read asks again.
        pinning = undefined
        throw error
      }))
  const readInto = async (offset: number, target: Uint8Array, signal?: AbortSignal, onBytes?: (bytes: number) => void) => {
    throwIfAborted(options.signal)
    throwIfAborted(signal)
    const { etag, size } = await pin()
    checkRange(offset, target.length, size)
    if (target.length === 0) return
    const asked = `the read of ${target.length} bytes at offset ${offset}`
    await slots.run(async () => {
      let stop = (_: SafetensorsError) => {}
      const aborted = new Promise<never>((_, reject) => (stop = reject))
      const release = [options.signal, signal].map((s) => onAbort(s, () => stop(abortedError(s!))))
      try {
        throwIfAborted(options.signal)
        throwIfAborted(signal)
        const getting = bucket.get(key, { range: { offset, length: target.length }, onlyIf: { etagMatches: etag } }).catch((cause) => {
          throw r2Error(where, asked, cause)
        })
        // An abort leaves the get running: its body, when it comes, is not wanted.
        aborted.catch(() =>
          getting.then(
            (object) => void (object && 'body' in object && object.body?.cancel().catch(() => {})),
            () => {},
          ),
        )
        const object = await Promise.race([getting, aborted])
        if (object === null) throw new SafetensorsError('Io', `${where}: the object is gone (deleted since it was opened, at ETag ${etag}); ${asked} failed`)
        if (!('body' in object) || !object.body) {
          throw new SafetensorsError(
            'Io',
            `${where}: the object changed since it was opened (ETag ${etag} became ${object.etag}, ${size} bytes became ${object.size}); ${asked} failed`,
          )
        }
        await fill(object.body, target, where, offset, aborted, onBytes).catch((cause) => {
          throw r2Error(where, asked, cause)
        })
      } finally {
        for (const remove of release) remove()
      }
    })
  }
  const readExactly = readOver(readInto)
  return {
    get size() {
      return pinned?.size
    },
    readInto,
    // A caller that could not know the size yet (it comes with the first read) gets the bytes up to the end.
    async read(offset, length, signal, onBytes) {
      if (pinned !== undefined) return readExactly(offset, length, signal, onBytes)
      const { size } = await pin()
      return readExactly(offset, offset <= size ? Math.min(length, size - offset) : length, signal, onBytes)
    },
  }
}

/**
 * An object in an R2 bucket, through a Worker's binding (`env.BUCKET`), for {@link open}. The first read
 * asks for the object's metadata (`head`); every read is then one
 * `bucket.get(key, { range: { offset, length }, onlyIf: { etagMatches } })` pinned to the ETag seen then, so
 * a file never mixes the bytes of two objects. A whole tensor is one get; the source has at most 6 requests
 * in flight (the most a Worker may have open at once), and waits for a free one beyond that.
 * @throws {@link SafetensorsError} from its reads: `Io` for a key with no object (the message names the key),
 * an object replaced or deleted since it was opened ("the object changed"), a range past the end, or a
 * failed subrequest; `Aborted`.
 * @throws TypeError at once, for a `bucket` without `get` and `head` or a `key` that is not a string.
 */
export function r2Source(bucket: R2Bucket, key: string, options: R2SourceOptions = {}): RangeSource {
  return pinnedSource(bucket, key, new Slots(), options)
}

/**
 * A model stored in an R2 bucket under `prefix` (say `'llama/'`, ending with its `/`), for {@link openModel}:
 * `openModel(r2Model(env.BUCKET, 'llama/'))`. It follows the rules of a model folder on disk:
 * `model.safetensors` if the prefix holds one, else `model.safetensors.index.json` and the shards it names
 * beside it (plain file names, checked as for any index). Every file is read as {@link r2Source} reads it,
 * and all of them share at most 6 requests in flight.
 * @throws TypeError at once, for a `bucket` without `get` and `head` or a `prefix` that is not a string.
 */
export function r2Model(bucket: R2Bucket, prefix: string): ModelFolder {
  checkBinding(bucket, prefix)
  const slots = new Slots()
  return {
    where: `R2 prefix ${JSON.stringify(prefix)}`,
    async find(name) {
      const key = prefix + name
      let object: R2Object | null
      try {
        object = await slots.run(() => bucket.head(key))
      } catch (cause) {
        throw r2Error(objectName(key), 'head()', cause)
      }
      return object === null ? undefined : pinnedSource(bucket, key, slots, {}, object)
    },
    open: (name) => pinnedSource(bucket, prefix + name, slots, {}),
  }
}
