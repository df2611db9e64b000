// What a worker of the conversion pool runs. Its text (Function.prototype.toString) is the worker's whole
// script, which the platform wraps with its own message functions (src/platform/node-workers.ts,
// src/platform/web-workers.ts): so it uses nothing but its arguments, and no syntax that a consumer's
// bundler might lower into helpers of its own (async functions, classes).
import type { KernelExports } from '../core/convert.ts'
import type { WorkerReadable } from '../sources/source.ts'

/** The first message a worker gets: the conversion kernels' wasm, which it instantiates with its own memory. */
interface WorkerInit {
  kernels: Uint8Array<ArrayBuffer>
}

/** One contiguous run of a piece: `count` elements from input byte `at` to output byte `outAt`. */
export interface PieceRun {
  at: number
  count: number
  outAt: number
}

/** Where a piece's input is: a local file or Blob that the worker reads itself, or bytes sent along. */
export type PieceInput = WorkerReadable | { bytes: Uint8Array }

/**
 * A piece of a read: runs converted from dtype `from` to `to` (indices of the kernels' table, with their bit
 * widths), each input element byte-swapped first when `swap` (its size) is not 0. The output goes into
 * `shared` (a SharedArrayBuffer the result lives in) at each run's outAt, or else into a new buffer that
 * the worker sends back, runs packed from outAt of the first.
 */
export interface PieceTask {
  id: number
  input: PieceInput
  runs: PieceRun[]
  from: number
  to: number
  fromBits: number
  toBits: number
  swap: 0 | 2 | 4 | 8
  shared?: Uint8Array
}

/**
 * A call of another wasm module's function on one input (dequantizing or quantizing blocks): the worker
 * instantiates `module` once (its bytes come with the first call a worker gets of it), makes [0, memory)
 * addressable, writes each of `writes` (a call descriptor, say), reads `length` bytes of the input from
 * `offset` to `inputAt`, calls `call(...args)`, which must return 0, and writes the `outputLength` bytes at
 * `outputAt` to `shared` at outAt, or sends them back.
 */
export interface CallTask {
  id: number
  module: string
  wasm?: Uint8Array<ArrayBuffer>
  memory: number
  writes: Array<{ at: number; bytes: Uint8Array }>
  input: PieceInput
  offset: number
  length: number
  inputAt: number
  call: string
  args: number[]
  outputAt: number
  outputLength: number
  shared?: Uint8Array
  outAt: number
}

/** A worker's answer to a PieceTask or a CallTask: the output when it was not shared, or the failure. */
export interface PieceResult {
  id: number
  bytes?: ArrayBuffer
  /** `again`: a piece the calling thread reads instead (src/pool/read.ts), as the pool marks one it cannot send. */
  error?: { message: string; path?: string; again?: boolean }
}

/** What a worker's code uses of node:fs. */
interface WorkerFs {
  openSync(path: string, flags: string): number
  fstatSync(fd: number): { size: number; mtimeMs: number }
  readSync(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number
  closeSync(fd: number): void
}

export function poolWorker(
  listen: (handle: (message: WorkerInit | PieceTask | CallTask) => void) => void,
  post: (message: unknown, transfer?: ArrayBuffer[]) => void,
  fs?: WorkerFs,
): void {
  // Elements converted at a time: few enough that their input and output stay in cache between the read, the kernel
  // and the copy out (1.5 MiB from BF16 to F32), enough that a read's call costs little beside its bytes.
  const CHUNK = 1 << 18
  let kernels: KernelExports
  let memory: WebAssembly.Memory
  let src = 0
  let dst = 0

  function convertRuns(task: PieceTask, read: (at: number, target: Uint8Array) => void, output: Uint8Array, base: number): void {
    const swap = task.swap === 2 ? kernels.byteSwap16 : task.swap === 4 ? kernels.byteSwap32 : task.swap === 8 ? kernels.byteSwap64 : undefined
    for (const run of task.runs) {
      for (let done = 0; done < run.count; done += CHUNK) {
        const n = Math.min(CHUNK, run.count - done)
        const inBytes = (n * task.fromBits) / 8
        const outBytes = (n * task.toBits) / 8
        read(run.at + (done * task.fromBits) / 8, new Uint8Array(memory.buffer, src, inBytes))
        if (swap) swap(src, inBytes / task.swap)
        const from = task.from === task.to ? src : dst
        if (from === dst) kernels.convertKernel(task.from, task.to, src, dst, n)
        output.set(new Uint8Array(memory.buffer, from, outBytes), run.outAt - base + (done * task.toBits) / 8)
      }
    }
  }

  /** The file's descriptor: the one it was opened with, or where threads do not share it, one of the worker's own. */
  function openFile(input: { fd: number; path: string; size: number; modified: number }): { fd: number; own: boolean } {
    const files = fs as WorkerFs
    const same = (fd: number) => {
      const stat = files.fstatSync(fd)
      return stat.size === input.size && stat.mtimeMs === input.modified
    }
    try {
      if (same(input.fd)) return { fd: input.fd, own: false }
    } catch {}
    const fd = files.openSync(input.path, 'r')
    if (same(fd)) return { fd, own: true }
    files.closeSync(fd)
    throw new Error('the file changed since it was opened')
  }

  /** Runs `use` with a function that fills a target from the file at an offset. */
  function withFile(input: { fd: number; path: string; size: number; modified: number }, use: (read: (at: number, target: Uint8Array) => void) => void): void {
    const files = fs as WorkerFs
    let file: { fd: number; own: boolean } | undefined
    try {
      const { fd } = (file = openFile(input))
      use((at, target) => {
        for (let done = 0; done < target.length; ) {
          const got = files.readSync(fd, target, done, target.length - done, at + done)
          if (got === 0) throw new Error(`unexpected end of file at byte ${at + done} (the file shrank?)`)
          done += got
        }
      })
    } catch (error) {
      throw Object.assign(new Error(`${input.path}: ${(error as Error).message}`), { path: input.path })
    } finally {
      if (file?.own) files.closeSync(file.fd)
    }
  }

  /** Runs `use` with a function that fills a target from the input at an offset; a Blob is read first, as a whole span. */
  function withInput(input: PieceInput, first: number, end: number, use: (read: (at: number, target: Uint8Array) => void) => void): Promise<void> {
    if ('path' in input) return Promise.resolve(withFile(input, use))
    const fromBytes = (bytes: Uint8Array, offset: number) => use((at, target) => target.set(bytes.subarray(at - offset, at - offset + target.length)))
    if ('bytes' in input) return Promise.resolve(fromBytes(input.bytes, 0))
    return input.blob
      .slice(first, end)
      .arrayBuffer()
      .then((buffer) => fromBytes(new Uint8Array(buffer), first))
  }

  /** The output's buffer: `shared`, or a new one of `length` bytes to send back. */
  function outputOf(shared: Uint8Array | undefined, length: number): { output: Uint8Array; owned?: ArrayBuffer } {
    if (shared) return { output: shared }
    const owned = new ArrayBuffer(length)
    return { output: new Uint8Array(owned), owned }
  }

  const modules: Record<string, { exports: Record<string, (...args: number[]) => number>; memory: WebAssembly.Memory }> = {}

  function call(task: CallTask): Promise<ArrayBuffer | undefined> {
    if (task.wasm) {
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536 })
      const instance = new WebAssembly.Instance(new WebAssembly.Module(task.wasm), { env: { memory } })
      modules[task.module] = { exports: instance.exports as never, memory }
    }
    const module = modules[task.module]
    const have = module.memory.buffer.byteLength
    if (task.memory > have) module.memory.grow(Math.ceil((task.memory - have) / 65536))
    const { output, owned } = outputOf(task.shared, task.outputLength)
    return withInput(task.input, task.offset, task.offset + task.length, (read) => {
      const bytes = new Uint8Array(module.memory.buffer)
      for (const write of task.writes) bytes.set(write.bytes, write.at)
      read(task.offset, bytes.subarray(task.inputAt, task.inputAt + task.length))
      const status = module.exports[task.call](...task.args)
      if (status !== 0) throw new Error(`${task.call} failed with status ${status}`)
      output.set(new Uint8Array(module.memory.buffer, task.outputAt, task.outputLength), task.shared ? task.outAt : 0)
    }).then(() => owned)
  }

  function convert(task: PieceTask): Promise<ArrayBuffer | undefined> {
    const first = task.runs[0]
    const last = task.runs[task.runs.length - 1]
    const base = task.shared ? 0 : first.outAt
    const { output, owned } = outputOf(task.shared, last.outAt + (last.count * task.toBits) / 8 - base)
    return withInput(task.input, first.at, last.at + (last.count * task.fromBits) / 8, (read) => convertRuns(task, read, output, base)).then(() => owned)
  }

  listen((message) => {
    if ('kernels' in message) {
      memory = new WebAssembly.Memory({ initial: 1 })
      kernels = new WebAssembly.Instance(new WebAssembly.Module(message.kernels), { env: { memory } }).exports as unknown as KernelExports
      src = (kernels.heapBase() + 15) & ~15
      // The widest dtype is 8 bytes an element.
      dst = src + CHUNK * 8
      memory.grow(Math.ceil((dst + CHUNK * 8 - memory.buffer.byteLength) / 65536))
      post({ ready: true })
      return
    }
    new Promise<ArrayBuffer | undefined>((resolve) => resolve('call' in message ? call(message) : convert(message))).then(
      (bytes) => post({ id: message.id, bytes }, bytes ? [bytes] : []),
      (error: Error & { path?: string }) => post({ id: message.id, error: { message: error.message, path: error.path } }),
    )
  })
}
