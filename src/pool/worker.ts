// What a worker of the conversion pool runs. Its text (Function.prototype.toString) is the worker's whole
// script, which the platform wraps with its own message functions (src/platform/node-workers.ts,
// src/platform/web-workers.ts): so it uses nothing but its arguments, and no syntax that a consumer's
// bundler might lower into helpers of its own (async functions, classes).
import type { KernelExports } from '../core/convert.ts'
import type { WorkerReadable } from '../sources/source.ts'

/** The first message a worker gets: the kernels' wasm, which it instantiates with its own memory. */
export interface WorkerInit {
  wasm: Uint8Array<ArrayBuffer>
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

/** A worker's answer to a PieceTask: the output when it was not shared, or the failure. */
export interface PieceResult {
  id: number
  bytes?: ArrayBuffer
  error?: { message: string; path?: string }
}

/** What a worker's code uses of node:fs. */
interface WorkerFs {
  openSync(path: string, flags: string): number
  fstatSync(fd: number): { size: number; mtimeMs: number }
  readSync(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number
  closeSync(fd: number): void
}

export function poolWorker(
  listen: (handle: (message: WorkerInit | PieceTask) => void) => void,
  post: (message: unknown, transfer?: Transferable[]) => void,
  fs?: WorkerFs,
): void {
  // Elements converted at a time: their input and output stay in cache between the read, the kernel and the copy out.
  const CHUNK = 1 << 16
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

  function readFile(input: { path: string; size: number; modified: number }, task: PieceTask, output: Uint8Array, base: number): void {
    const files = fs as WorkerFs
    const fd = files.openSync(input.path, 'r')
    try {
      const stat = files.fstatSync(fd)
      if (stat.size !== input.size || stat.mtimeMs !== input.modified) throw new Error(`${input.path} changed since it was opened`)
      convertRuns(
        task,
        (at, target) => {
          for (let done = 0; done < target.length; ) {
            const got = files.readSync(fd, target, done, target.length - done, at + done)
            if (got === 0) throw new Error(`${input.path}: unexpected end of file at byte ${at + done} (the file shrank?)`)
            done += got
          }
        },
        output,
        base,
      )
    } finally {
      files.closeSync(fd)
    }
  }

  function run(task: PieceTask): Promise<ArrayBuffer | undefined> {
    const first = task.runs[0]
    const last = task.runs[task.runs.length - 1]
    const base = task.shared ? 0 : first.outAt
    const owned = task.shared ? undefined : new ArrayBuffer(last.outAt + (last.count * task.toBits) / 8 - base)
    const output = task.shared ?? new Uint8Array(owned as ArrayBuffer)
    const input = task.input
    if ('path' in input) {
      readFile(input, task, output, base)
      return Promise.resolve(owned)
    }
    const fromBytes = (bytes: Uint8Array, offset: number) => {
      convertRuns(task, (at, target) => target.set(bytes.subarray(at - offset, at - offset + target.length)), output, base)
      return owned
    }
    if ('bytes' in input) return Promise.resolve(fromBytes(input.bytes, 0))
    const end = last.at + (last.count * task.fromBits) / 8
    return input.blob
      .slice(first.at, end)
      .arrayBuffer()
      .then((buffer) => fromBytes(new Uint8Array(buffer), first.at))
  }

  listen((message) => {
    if ('wasm' in message) {
      memory = new WebAssembly.Memory({ initial: 1 })
      kernels = new WebAssembly.Instance(new WebAssembly.Module(message.wasm), { env: { memory } }).exports as unknown as KernelExports
      src = (kernels.heapBase() + 15) & ~15
      // The widest dtype is 8 bytes an element.
      dst = src + CHUNK * 8
      memory.grow(Math.ceil((dst + CHUNK * 8 - memory.buffer.byteLength) / 65536))
      post({ ready: true })
      return
    }
    new Promise<ArrayBuffer | undefined>((resolve) => resolve(run(message))).then(
      (bytes) => post({ id: message.id, bytes }, bytes ? [bytes] : []),
      (error: Error & { path?: string }) => post({ id: message.id, error: { message: error.message, path: error.path } }),
    )
  })
}
