// Q8_0 (ggml's block_q8_0) over the wasm kernel in assembly/q8_0.ts, which says which definition it follows.
import { CHUNK_ELEMENTS, convert } from '../convert.ts'
import { DTYPE_INFO, dtypeIndex } from '../dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { type Core, reserveMemory, sharedCore } from '../wasm.ts'

/** Values per Q8_0 block. */
export const Q8_0_BLOCK = 32
/** Bytes per Q8_0 block: an F16 scale, then 32 int8. */
export const Q8_0_BLOCK_BYTES = 34

/** The dtypes the kernel quantizes from. */
export type Q8_0Source = 'F32' | 'F16' | 'BF16'

/** The Q8_0 byte length of `count` values. @throws RangeError when `count` is not a multiple of 32. */
export function q8_0ByteLength(count: number): number {
  if (!Number.isSafeInteger(count) || count < 0 || count % Q8_0_BLOCK !== 0) {
    throw new RangeError(`Q8_0 quantizes whole blocks of ${Q8_0_BLOCK} values, got ${count} values`)
  }
  return (count / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES
}

/**
 * Quantizes `count` values of `from` at `src` in `core`'s memory to Q8_0 at `dst`, which may equal `src` (the
 * output is narrower); both regions must be addressable. `name` and `first` (the index of the value at `src`
 * in the tensor) only go into the error.
 * @throws {@link SafetensorsError} `UnsupportedConversion` for a NaN or infinite value, which Q8_0 cannot hold;
 * the blocks before its block are written then, the rest not.
 * @throws RangeError when `count` is not a multiple of 32.
 * @throws TypeError for a `from` other than F32, F16 or BF16.
 */
export function quantizeQ8_0Into(core: Core, src: number, dst: number, count: number, from: Q8_0Source, name = 'values', first = 0): void {
  const bad = core.exports.quantizeQ8_0(dtypeIndex(from), src, dst, q8_0ByteLength(count) / Q8_0_BLOCK_BYTES)
  if (bad === -2) throw new TypeError(`Q8_0 quantizes F32, F16 or BF16, got ${from}`)
  if (bad >= 0) {
    // Intact: the blocks written before it end below it.
    const size = DTYPE_INFO[from].bits / 8
    const value = convert(new Uint8Array(core.memory.buffer, src + bad * size, size).slice(), from, 'F32')[0]
    throw new SafetensorsError('UnsupportedConversion', `cannot quantize ${name} to Q8_0: element ${first + bad} is ${value}, which Q8_0 cannot hold`)
  }
}

/**
 * Quantizes F32 values to Q8_0 as llama.cpp's converter (gguf-py's `quants.quantize`) does, byte for byte:
 * per block of 32 values an F16 scale d = max|x| / 127 (little-endian, rounded to nearest even), then each
 * value times 1 / d (both in F32, as gguf-py computes them) rounded half away from zero, as int8.
 * @param values - the values; their count must be a multiple of 32
 * @param out - where to write the result: a Uint8Array of at least `values.length / 32 * 34` bytes, of
 * which the result is a view; its bytes are unspecified after an error
 * @returns the Q8_0 blocks, `values.length / 32 * 34` bytes
 * @throws {@link SafetensorsError} `UnsupportedConversion` for a NaN or infinite value, naming its index.
 * @throws RangeError when `values.length` is not a multiple of 32 or `out` is too short.
 * @throws TypeError when `values` is not a Float32Array or `out` not a Uint8Array.
 */
export function quantizeQ8_0(values: Float32Array, out?: Uint8Array): Uint8Array {
  if (!(values instanceof Float32Array)) throw new TypeError(`values must be a Float32Array, got ${Object.prototype.toString.call(values)}`)
  if (out !== undefined && !(out instanceof Uint8Array)) throw new TypeError(`out must be a Uint8Array, got ${Object.prototype.toString.call(out)}`)
  const bytes = q8_0ByteLength(values.length)
  if (out !== undefined && out.length < bytes) {
    throw new RangeError(`out must hold ${bytes} bytes for ${values.length} values, got ${out.length}`)
  }
  const result = out?.subarray(0, bytes) ?? new Uint8Array(bytes)
  const core = sharedCore()
  const chunk = Math.min(values.length, CHUNK_ELEMENTS)
  reserveMemory(core, core.heapBase + chunk * 4)
  for (let first = 0; first < values.length; first += chunk) {
    const count = Math.min(chunk, values.length - first)
    new Float32Array(core.memory.buffer, core.heapBase, count).set(values.subarray(first, first + count))
    quantizeQ8_0Into(core, core.heapBase, core.heapBase, count, 'F32', 'values', first)
    result.set(new Uint8Array(core.memory.buffer, core.heapBase, q8_0ByteLength(count)), q8_0ByteLength(first))
  }
  return result
}
