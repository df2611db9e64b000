// convert() and byteSwap(): the wasm kernels (assembly/convert.ts) on plain arrays, and convertInto()
// for code that already has its bytes in wasm memory. The memory model is docs/memory.md.

import { SafetensorsError } from '../errors.ts'
import { canConvert, DTYPE_INFO, type DType, dtypeIndex, isDType, type TypedArray } from './dtypes.ts'
import { reserveMemory, type WasmInstance, WasmModule } from './wasm.ts'
import { kernelsWasm } from './wasm-code.ts'

/** Reverses the bytes of each of `count` elements at `ptr`, in place. */
type SwapKernel = (ptr: number, count: number) => void

/** The kernel module's functions (assembly/modules/convert.ts). */
export interface KernelExports {
  heapBase(): number
  /**
   * Converts `count` elements at `src` from dtype `from` to `to` at `dst` (indices in DTYPES; in place
   * allowed, see assembly/convert.ts); 0, touching nothing, where the pair has no kernel.
   */
  convertKernel(from: number, to: number, src: number, dst: number, count: number): number
  byteSwap16: SwapKernel
  byteSwap32: SwapKernel
  byteSwap64: SwapKernel
}

/** An instance of the kernels, where reads and conversions put their bytes. */
export type Core = WasmInstance<KernelExports>

export const kernelModule = /* @__PURE__ */ new WasmModule<KernelExports>(kernelsWasm)

/** A kernel instance with its own memory of at least `bytes` bytes above heapBase (see src/core/wasm.ts). */
export function instantiate(bytes = 0, growable = true): Core {
  return kernelModule.instantiate(bytes, growable)
}

/**
 * Widening conversions with outputs of at least this many bytes get a wasm instance of their own and
 * return a view of its memory; everything else goes through the shared core in chunks and is copied
 * out. Measured with Node 20 on Linux (docs/memory.md): the chunked copy out stays in cache, so the
 * dedicated instance, whose fresh memory costs the same page faults as a fresh array plus ~80 us to
 * create, is slower below 32 MiB and even above.
 */
export const DEDICATED_MIN_BYTES = 32 << 20

/**
 * Reads with outputs of at least this many bytes run on the conversion pool (src/pool/read.ts) where there is
 * one; smaller ones stay on the calling thread, where a hand-off to a worker costs more than it saves
 * (measured: docs/memory.md, "The conversion pool").
 */
export const POOL_MIN_BYTES = 4 << 20

/** Elements the packed dtypes need whole: F4 packs 2 a byte, F6 4 in 3 bytes. */
function packingOf(dtype: DType): { elements: number; bytes: number } {
  const bits = DTYPE_INFO[dtype].bits
  if (bits === 4) return { elements: 2, bytes: 1 }
  if (bits === 6) return { elements: 4, bytes: 3 }
  return { elements: 1, bytes: bits / 8 }
}

/** The byte length of `count` elements; `count` must fill whole bytes (F4 even, F6 a multiple of 4). */
export function byteLengthOf(dtype: DType, count: number): number {
  const { elements, bytes } = packingOf(dtype)
  if (count % elements !== 0) {
    throw new SafetensorsError(
      'TensorInvalidInfo',
      `${count} ${dtype} elements do not fill whole bytes: ${dtype} packs ${elements} elements in ${bytes} byte${bytes > 1 ? 's' : ''}`,
    )
  }
  return (count / elements) * bytes
}

/** The element count of `byteLength` bytes of `dtype`; throws TensorInvalidInfo on a partial element. */
export function elementCountOf(dtype: DType, byteLength: number): number {
  const { elements, bytes } = packingOf(dtype)
  if (byteLength % bytes !== 0) {
    const unit = elements === 1 ? `${bytes}-byte elements` : `groups of ${elements} elements in ${bytes} bytes`
    throw new SafetensorsError('TensorInvalidInfo', `${byteLength} bytes are not whole ${dtype} data: ${dtype} comes in ${unit}`)
  }
  return (byteLength / bytes) * elements
}

function checkDType(dtype: unknown, role: string): asserts dtype is DType {
  if (!isDType(dtype)) throw new SafetensorsError('UnsupportedConversion', `unknown ${role} dtype ${JSON.stringify(dtype)}`)
}

/** Throws UnsupportedConversion unless data of `from` can be converted to `to`. */
export function checkConversion(from: DType, to: DType): void {
  if (from !== to && !canConvert(from, to)) {
    throw new SafetensorsError(
      'UnsupportedConversion',
      `cannot convert ${from} to ${to}: supported are every float dtype to F32, F16 and BF16, and every other numeric dtype but C64 to F32`,
    )
  }
}

/** The dtypes that {@link convert} and the reads' `dtype` convert to, and that quantized modules dequantize to. */
export type ConvertTarget = 'F32' | 'F16' | 'BF16'

/** The dtype a tensor gets in a file converted to `dtype` (convertFile, convertStream): floats become it, the rest stays. */
export function convertedDtypeOf(info: { dtype: DType }, dtype: ConvertTarget | undefined): DType {
  return dtype !== undefined && DTYPE_INFO[info.dtype].float !== undefined ? dtype : info.dtype
}

/**
 * Converts `count` elements at `src` in `core`'s memory to `to` at `dst`. The two may overlap as the
 * in-place contract allows (assembly/convert.ts): a wider output with the input at its end
 * (src = dst + outBytes - inBytes), or a narrower or equal one with src = dst. Nothing is copied
 * through JS; the caller makes sure both regions are addressable and checkConversion accepts the pair.
 */
export function convertInto(core: Core, src: number, dst: number, count: number, from: DType, to: DType): void {
  const inBytes = byteLengthOf(from, count)
  if (from === to) {
    if (src !== dst) new Uint8Array(core.memory.buffer).copyWithin(dst, src, src + inBytes)
    return
  }
  core.exports.convertKernel(dtypeIndex(from), dtypeIndex(to), src, dst, count)
}

/** The bytes of `data`: a Uint8Array as is, or the natural TypedArray of `dtype` viewed as bytes. */
export function bytesOf(data: Uint8Array | TypedArray, dtype: DType): Uint8Array {
  const natural = DTYPE_INFO[dtype].array
  if (!(data instanceof Uint8Array) && !(data instanceof natural)) {
    throw new TypeError(`${dtype} data must be a Uint8Array of raw little-endian bytes or a ${natural.name}, got ${Object.prototype.toString.call(data)}`)
  }
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
}

/** Maximum bytes a dedicated instance holds above its static data (a wasm memory is at most 4 GiB). */
const MAX_DEDICATED_BYTES = 2 ** 32 - 2 * 65536

/**
 * Whether a conversion result gets a dedicated instance (docs/memory.md): only large widening ones,
 * since a narrowing result would keep the whole input-sized memory alive behind it.
 */
export function wantsDedicatedCore(inBytes: number, outBytes: number): boolean {
  return outBytes >= DEDICATED_MIN_BYTES && outBytes >= inBytes && outBytes <= MAX_DEDICATED_BYTES
}

/**
 * Converts `data` (raw little-endian bytes, or the natural TypedArray of `from`) to the natural
 * TypedArray of `to`: Float32Array for F32, Uint16Array of bits for F16 and BF16. Identity returns a
 * copy. With `out` (the natural array of `to`, exactly as long as the result, not overlapping `data`),
 * the result is written there. Large widening results without `out` are views over a wasm memory of
 * their own that never grows (docs/memory.md). Every float dtype converts to F32, F16 and BF16 in one
 * rounding to nearest even; every other dtype but C64 to F32 (docs/conversion.md says which bits each gives).
 * @throws {@link SafetensorsError} `UnsupportedConversion` for an unknown dtype or a pair that does not
 * convert; `TensorInvalidInfo` when `data`'s byte length holds no whole number of `from` elements.
 * @throws RangeError for an `out` that is not the natural array of `to` of the result's length.
 */
export function convert(data: Uint8Array | TypedArray, from: DType, to: 'F32', out?: Float32Array): Float32Array
export function convert(data: Uint8Array | TypedArray, from: DType, to: 'F16' | 'BF16', out?: Uint16Array): Uint16Array
export function convert(data: Uint8Array | TypedArray, from: DType, to: DType, out?: TypedArray): TypedArray
export function convert(data: Uint8Array | TypedArray, from: DType, to: DType, out?: TypedArray): TypedArray {
  checkDType(from, 'source')
  checkDType(to, 'target')
  const input = bytesOf(data, from)
  const count = elementCountOf(from, input.byteLength)
  checkConversion(from, to)
  const outBytes = byteLengthOf(to, count)
  const natural = DTYPE_INFO[to].array
  const outLength = outBytes / natural.BYTES_PER_ELEMENT
  if (out !== undefined && (!(out instanceof natural) || out.length !== outLength)) {
    throw new RangeError(
      `out must be a ${natural.name} of ${outLength} elements for ${count} ${to} elements, got ${Object.prototype.toString.call(out)} of ${out.length}`,
    )
  }
  if (from === to) {
    const copy = out ?? new natural(outLength)
    new Uint8Array(copy.buffer, copy.byteOffset, outBytes).set(input)
    return copy
  }
  if (out === undefined && wantsDedicatedCore(input.byteLength, outBytes)) {
    // Sized once and never grown, so the view handed out is never detached.
    const core = instantiate(outBytes, false)
    convertInPlace(core, input, from, to, count, outBytes)
    return new natural(core.memory.buffer, core.heapBase, outLength)
  }
  const result = out ?? new natural(outLength)
  convertInChunks(input, from, to, count, new Uint8Array(result.buffer, result.byteOffset, outBytes))
  return result
}

/** Copies `input` into `core` where the in-place contract wants it and converts; the output is at heapBase. */
function convertInPlace(core: Core, input: Uint8Array, from: DType, to: DType, count: number, outBytes: number): void {
  const dst = core.heapBase
  const src = dst + Math.max(0, outBytes - input.byteLength)
  new Uint8Array(core.memory.buffer).set(input, src)
  convertInto(core, src, dst, count, from, to)
}

/**
 * Elements per round trip through the shared core: small enough that the copy in, the kernel and the
 * copy out all stay in cache (a whole-array copy in and out would each cost a pass over memory), and a
 * multiple of 4 so that F4 and F6 chunks are whole bytes.
 */
export const ROUND_TRIP_ELEMENTS = 1 << 15

/**
 * Converts `input` (little-endian `from`) into `output` (exactly its size as `to`), which may hold the
 * input at its end, as a wider output does in place (docs/memory.md, "Converting in place"): chunks go front
 * to back, each copied into the core before its output is written.
 */
export function convertOverlapping(input: Uint8Array, from: DType, to: DType, output: Uint8Array): void {
  convertInChunks(input, from, to, elementCountOf(from, input.byteLength), output)
}

function convertInChunks(input: Uint8Array, from: DType, to: DType, count: number, output: Uint8Array): void {
  const core = kernelModule.shared()
  const chunk = Math.min(count, ROUND_TRIP_ELEMENTS)
  reserveMemory(core, core.heapBase + Math.max(byteLengthOf(from, chunk), byteLengthOf(to, chunk)))
  for (let first = 0; first < count; first += chunk) {
    const n = Math.min(chunk, count - first)
    const outBytes = byteLengthOf(to, n)
    convertInPlace(core, input.subarray(byteLengthOf(from, first), byteLengthOf(from, first + n)), from, to, n, outBytes)
    output.set(new Uint8Array(core.memory.buffer, core.heapBase, outBytes), byteLengthOf(to, first))
  }
}

/** Bytes swapped per kernel call: bounds the shared core's growth on huge inputs. */
const SWAP_CHUNK = 1 << 20

/**
 * Reverses the byte order of every `elementBytes`-byte element of `bytes`, in place.
 * @throws {@link SafetensorsError} `TensorInvalidInfo` when the length is not a multiple of `elementBytes`.
 * @throws RangeError for an `elementBytes` other than 2, 4 or 8.
 */
export function byteSwap(bytes: Uint8Array, elementBytes: 2 | 4 | 8): void {
  if (elementBytes !== 2 && elementBytes !== 4 && elementBytes !== 8) {
    throw new RangeError(`elementBytes must be 2, 4 or 8, got ${elementBytes}`)
  }
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (view.length % elementBytes !== 0) {
    throw new SafetensorsError('TensorInvalidInfo', `${view.length} bytes are not whole ${elementBytes}-byte elements`)
  }
  const core = kernelModule.shared()
  reserveMemory(core, core.heapBase + Math.min(SWAP_CHUNK, view.length))
  for (let offset = 0; offset < view.length; offset += SWAP_CHUNK) {
    const chunk = view.subarray(offset, offset + SWAP_CHUNK)
    const scratch = new Uint8Array(core.memory.buffer, core.heapBase, chunk.length)
    scratch.set(chunk)
    swapInCore(core, core.heapBase, chunk.length, elementBytes)
    chunk.set(scratch)
  }
}

/** Swaps the `byteLength` bytes at `ptr` of `core`'s memory as `elementBytes`-byte elements, in place. */
function swapInCore(core: Core, ptr: number, byteLength: number, elementBytes: 2 | 4 | 8): void {
  const swap = elementBytes === 2 ? core.exports.byteSwap16 : elementBytes === 4 ? core.exports.byteSwap32 : core.exports.byteSwap64
  swap(ptr, byteLength / elementBytes)
}

/** Reverses the bytes of each element of `dtype` in place (C64: of each F32 half); 1-byte dtypes stay as they are. */
export function swapElements(bytes: Uint8Array, dtype: DType): void {
  const unit = DTYPE_INFO[dtype].array.BYTES_PER_ELEMENT
  if (unit > 1) byteSwap(bytes, unit as 2 | 4 | 8)
}

/** swapElements on `byteLength` bytes at `ptr` of `core`'s memory. */
export function swapElementsInCore(core: Core, ptr: number, byteLength: number, dtype: DType): void {
  const unit = DTYPE_INFO[dtype].array.BYTES_PER_ELEMENT
  if (unit > 1) swapInCore(core, ptr, byteLength, unit as 2 | 4 | 8)
}
