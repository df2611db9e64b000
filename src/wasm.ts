// Loading the wasm core: one compiled module per process, cached; instances own their memory.
//
// The shared core (sharedCore) is the scratch instance: its memory grows as needed, so no view into it
// outlives the call that made it. Results that must stay in wasm memory as long-lived views get an
// instance of their own whose memory is sized once and never grown (instantiate with a fixed size):
// memory.grow would detach every view.
import { DTYPE_INFO, DTYPES } from './dtypes.ts'

/** Reverses the bytes of each of `count` elements at `ptr`, in place. */
export type SwapKernel = (ptr: number, count: number) => void

export interface CoreExports {
  heapBase(): number
  /** 1 in the SIMD build, 0 in the scalar one. */
  simdBuild(): number
  resultPtr(): number
  dtypeTable(count: number): number
  scanHeader(input: number, length: number, fileSize: number): number
  scanIndex(input: number, length: number): number
  /**
   * Converts `count` elements at `src` from dtype `from` to `to` at `dst` (indices in DTYPES; in place
   * allowed, see assembly/convert.ts); 0, touching nothing, where the pair has no kernel.
   */
  convertKernel(from: number, to: number, src: number, dst: number, count: number): number
  /** Exponent bits | mantissa bits << 8 | bias << 16 of a format the kernels decode from its fields, else 0. */
  floatFormat(dtype: number): number
  byteSwap16: SwapKernel
  byteSwap32: SwapKernel
  byteSwap64: SwapKernel
  statsPtr(): number
  statsReset(): void
  statsFirstPass(ptr: number, count: number): void
  statsSecondPass(ptr: number, count: number, mean: number, lo: number, hi: number, bins: number, counts: number): void
  /** XXH64 of `length` bytes at `ptr`; the u64 comes back as a signed bigint. */
  xxh64(ptr: number, length: number, seed: bigint): bigint
  /**
   * Quantizes `blocks` blocks of 32 values at `src` (dtype index `from`: F32, F16 or BF16) to Q8_0 at `dst`
   * (src == dst allowed); -1, the index of the first NaN or infinity, or -2 for another `from` (assembly/q8_0.ts).
   */
  quantizeQ8_0(from: number, src: number, dst: number, blocks: number): number
}

export interface Core {
  readonly exports: CoreExports
  readonly memory: WebAssembly.Memory
  /** The first byte of linear memory that JS manages (16-aligned). */
  readonly heapBase: number
}

export type Backend = 'simd' | 'scalar'

export interface ModuleSources {
  simd(): WebAssembly.Module
  scalar(): WebAssembly.Module
}

const PAGE = 65536
const MAX_PAGES = 65536

// (module (func (result v128) v128.const 0)): validates only where WebAssembly SIMD is supported.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0, 253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11,
])

let sources: ModuleSources | undefined
const modules: Partial<Record<Backend, WebAssembly.Module>> = {}
let backend: Backend | undefined
let shared: Core | undefined

/** Called once by each package entry with the way it gets the compiled modules. */
export function registerModules(entry: ModuleSources): void {
  sources = entry
}

/** The build in use: SIMD where the runtime validates SIMD, else scalar. Tests may force one. */
export function selectBackend(choice?: Backend): Backend {
  const next = choice ?? backend ?? (WebAssembly.validate(SIMD_PROBE) ? 'simd' : 'scalar')
  if (next !== backend) shared = undefined
  backend = next
  return next
}

function compiledModule(): WebAssembly.Module {
  const which = selectBackend()
  if (!sources) throw new TypeError('safetensors-wasm: no wasm module registered; import the package entry, not an internal file')
  return (modules[which] ??= sources[which]())
}

/** A new instance with its own memory of at least `bytes` bytes above heapBase. */
export function instantiate(bytes = 0, growable = true): Core {
  const module = compiledModule()
  // The static data needs a page; heapBase is known only after instantiation, so size from the module's.
  const pages = 1 + Math.ceil((bytes + 16) / PAGE)
  if (pages > MAX_PAGES) throw new RangeError(`cannot allocate ${bytes} bytes of wasm memory (4 GiB at most)`)
  const memory = new WebAssembly.Memory(growable ? { initial: pages, maximum: MAX_PAGES } : { initial: pages })
  const instance = new WebAssembly.Instance(module, { env: { memory } })
  const exports = instance.exports as unknown as CoreExports
  const heapBase = (exports.heapBase() + 15) & ~15
  writeDtypeTable(exports, memory)
  return { exports, memory, heapBase }
}

function writeDtypeTable(exports: CoreExports, memory: WebAssembly.Memory): void {
  const table = new Uint8Array(memory.buffer, exports.dtypeTable(DTYPES.length), DTYPES.length * 16)
  DTYPES.forEach((name, i) => {
    table[i * 16] = name.length
    table[i * 16 + 1] = DTYPE_INFO[name].bits
    for (let j = 0; j < name.length; j++) table[i * 16 + 4 + j] = name.charCodeAt(j)
  })
}

/** The process-wide scratch instance. */
export function sharedCore(): Core {
  return (shared ??= instantiate())
}

/** A shared core past this size is dropped after the call that grew it: wasm memory never shrinks. */
const SHARED_KEEP_BYTES = 64 << 20

/**
 * Lets the garbage collector take the shared core's memory back after a call that grew it a lot (a huge
 * header): otherwise the process would hold that memory for good. The next call makes a fresh one.
 */
export function trimSharedCore(): void {
  if (shared && shared.memory.buffer.byteLength > SHARED_KEEP_BYTES) shared = undefined
}

/** Grows a growable core so that [0, end) is addressable. */
export function reserveMemory(core: Core, end: number): void {
  const have = core.memory.buffer.byteLength
  if (end <= have) return
  const pages = Math.ceil((end - have) / PAGE)
  try {
    core.memory.grow(Math.max(pages, have / PAGE / 2) | 0)
  } catch {
    core.memory.grow(pages)
  }
}
