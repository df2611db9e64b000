// Loading the wasm core. It is seven modules (assembly/modules/), their code in src/core/wasm-code.ts (but for the
// three that only some reads and exports need, which their callers import), each used by the one source module that
// calls it (the scanner by header.ts, the kernels by convert.ts, statistics by stats.ts, the hash by checksum.ts, ggml's
// quantizers by gguf/ggml-quantizers.ts, dequantization by quant/kernels.ts, ggml's types by gguf/dequantize.ts), so
// that a bundle carries the wasm of the functions it uses and no other. Each module is compiled once per process,
// on first use; instances own their memory.
//
// A module's shared instance is its scratch space: its memory grows as needed, so no view into it
// outlives the call that made it. Results that must stay in wasm memory as long-lived views get an
// instance of their own whose memory is sized once and never grown (instantiate with growable false):
// memory.grow would detach every view.

/**
 * What a `.wasm` import gives (src/core/wasm-modules.d.ts): the module's bytes in hex, inlined by the portable
 * and Node builds (hex, not base64: gzip packs it a third smaller), or the compiled module, which workerd
 * makes of the .wasm files beside its entry since it refuses to compile bytes at run time.
 */
export type WasmSource = string | CompiledModule

/**
 * A WebAssembly.Module, and the part of a WebAssembly.Memory this package uses: named by shape, so that the
 * package's types need no DOM library (a Node project's TypeScript has no WebAssembly namespace).
 */
type CompiledModule = object
interface WasmMemory {
  readonly buffer: ArrayBuffer
  grow(pages: number): number
}

/** The export every module has. */
interface HeapBase {
  heapBase(): number
}

export interface WasmInstance<Exports> {
  readonly exports: Exports
  readonly memory: WasmMemory
  /** The first byte of linear memory that JS manages (16-aligned). */
  readonly heapBase: number
}

const PAGE = 65536
const MAX_PAGES = 65536

/** A shared instance past this size is dropped after the call that grew it: wasm memory never shrinks. */
const SHARED_KEEP_BYTES = 64 << 20

/**
 * Every runtime this package supports has WebAssembly SIMD, so there is one build, with SIMD. A runtime
 * without it could only get a scalar build by carrying it in every bundle (parseHeader compiles
 * synchronously, so it cannot be fetched on demand): there the CompileError becomes a TypeError that says
 * what the module needs, with the runtime's own reason (which may be another, such as a page's CSP).
 */
function compile(hex: string): WebAssembly.Module {
  try {
    return new WebAssembly.Module(hexBytes(hex))
  } catch (error) {
    if (!(error instanceof WebAssembly.CompileError)) throw error
    throw new TypeError(
      `safetensors-wasm cannot compile its wasm, which needs WebAssembly SIMD (Chrome 91, Firefox 89, Safari 16.4 and later): ${error.message}`,
    )
  }
}

/** The bytes of a hex string (two lower-case digits a byte, as the build writes them). */
function hexBytes(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length >> 1)
  // A digit's value from its char code: '0'-'9' are 0x30-0x39, 'a'-'f' 0x61-0x66 (bit 6 set: add 9).
  const digit = (code: number) => (code & 0xf) + (code >> 6) * 9
  for (let i = 0; i < bytes.length; i++) bytes[i] = (digit(hex.charCodeAt(2 * i)) << 4) | digit(hex.charCodeAt(2 * i + 1))
  return bytes
}

export class WasmModule<Exports extends HeapBase> {
  readonly #source: WasmSource
  /** What every new instance needs before its first call, such as a table written from src/. */
  readonly #prepare: (instance: WasmInstance<Exports>) => void
  #module: WebAssembly.Module | undefined
  #shared: WasmInstance<Exports> | undefined

  constructor(source: WasmSource, prepare: (instance: WasmInstance<Exports>) => void = () => {}) {
    this.#source = source
    this.#prepare = prepare
  }

  #compiled(): WebAssembly.Module {
    this.#module ??= typeof this.#source === 'string' ? compile(this.#source) : this.#source
    return this.#module
  }

  /** The module's bytes, for a worker to compile (src/pool/pool.ts): inlined in every build that has workers (not workerd's). */
  bytes(): Uint8Array<ArrayBuffer> {
    return hexBytes(this.#source as string)
  }

  /** A new instance with its own memory of at least `bytes` bytes above heapBase. */
  instantiate(bytes = 0, growable = true): WasmInstance<Exports> {
    const module = this.#compiled()
    // The static data needs a page; heapBase is known only after instantiation, so size from the module's.
    const pages = 1 + Math.ceil((bytes + 16) / PAGE)
    if (pages > MAX_PAGES) throw new RangeError(`cannot allocate ${bytes} bytes of wasm memory (4 GiB at most)`)
    const memory = new WebAssembly.Memory(growable ? { initial: pages, maximum: MAX_PAGES } : { initial: pages })
    const exports = new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as Exports
    const instance = { exports, memory, heapBase: (exports.heapBase() + 15) & ~15 }
    this.#prepare(instance)
    return instance
  }

  /** The process-wide scratch instance. */
  shared(): WasmInstance<Exports> {
    this.#shared ??= this.instantiate()
    return this.#shared
  }

  /**
   * Lets the garbage collector take the shared instance's memory back after a call that grew it a lot (a
   * huge header): otherwise the process would hold that memory for good. The next call makes a fresh one.
   */
  trimShared(): void {
    if (this.#shared && this.#shared.memory.buffer.byteLength > SHARED_KEEP_BYTES) this.#shared = undefined
  }
}

/** Grows a growable instance so that [0, end) is addressable. */
export function reserveMemory(instance: WasmInstance<unknown>, end: number): void {
  const have = instance.memory.buffer.byteLength
  if (end <= have) return
  const pages = Math.ceil((end - have) / PAGE)
  try {
    instance.memory.grow(Math.max(pages, have / PAGE / 2) | 0)
  } catch {
    instance.memory.grow(pages)
  }
}
