// Q8_0 (ggml's block_q8_0) over the wasm kernel in assembly/q8_0.ts, which says which definition it follows. The
// kernel is a module of its own (build/q8_0.wasm), so that only the bundles that quantize carry it.
import { ROUND_TRIP_ELEMENTS } from '../core/convert.ts'
import { reserveMemory, WasmModule } from '../core/wasm.ts'
import { q8Wasm } from '../core/wasm-code.ts'
import { SafetensorsError } from '../errors.ts'
import { GGML_TYPES, ggmlByteLength } from './ggml-types.ts'

/** The Q8_0 module's functions (assembly/modules/q8_0.ts). */
export interface Q8_0Exports {
  heapBase(): number
  /** Quantizes `blocks` blocks of 32 F32 at `src` to Q8_0 at `dst` (src == dst allowed); -1, or the index of the first NaN or infinity. */
  quantizeQ8_0(src: number, dst: number, blocks: number): number
}

export const q8Module = /* @__PURE__ */ new WasmModule<Q8_0Exports>(q8Wasm)

/** Values per Q8_0 block (each block is an F16 scale, then 32 int8). */
export const Q8_0_BLOCK = GGML_TYPES.Q8_0.block

/** The Q8_0 byte length of `count` values. @throws RangeError when `count` is not a multiple of 32. */
export function q8_0ByteLength(count: number): number {
  if (!Number.isSafeInteger(count) || count < 0 || count % Q8_0_BLOCK !== 0) {
    throw new RangeError(`Q8_0 quantizes whole blocks of ${Q8_0_BLOCK} values, got ${count} values`)
  }
  return ggmlByteLength('Q8_0', count)
}

/** What a refused value's error names: the tensor, and the index in it of `values[0]`. */
export interface Q8_0Origin {
  name: string
  first: number
}

/**
 * Quantizes F32 values to Q8_0 as llama.cpp's converter (gguf-py's `quants.quantize`) does, byte for byte:
 * per block of 32 values an F16 scale d = max|x| / 127 (little-endian, rounded to nearest even), then each
 * value times 1 / d (both in F32, as gguf-py computes them) rounded half away from zero, as int8.
 * @param values - the values; their count must be a multiple of 32
 * @param out - where to write the result: a Uint8Array of at least `values.length / 32 * 34` bytes, of
 * which the result is a view; its bytes are unspecified after an error
 * @param origin - what an error names (the converter's tensor); by default "values" from index 0
 * @returns the Q8_0 blocks, `values.length / 32 * 34` bytes
 * @throws {@link SafetensorsError} `UnsupportedConversion` for a NaN or infinite value, which Q8_0 cannot
 * hold, naming its index.
 * @throws RangeError when `values.length` is not a multiple of 32 or `out` is too short.
 * @throws TypeError when `values` is not a Float32Array or `out` not a Uint8Array.
 */
export function quantizeQ8_0(values: Float32Array, out?: Uint8Array, origin: Q8_0Origin = { name: 'values', first: 0 }): Uint8Array {
  if (!(values instanceof Float32Array)) throw new TypeError(`values must be a Float32Array, got ${Object.prototype.toString.call(values)}`)
  if (out !== undefined && !(out instanceof Uint8Array)) throw new TypeError(`out must be a Uint8Array, got ${Object.prototype.toString.call(out)}`)
  const bytes = q8_0ByteLength(values.length)
  if (out !== undefined && out.length < bytes) {
    throw new RangeError(`out must hold ${bytes} bytes for ${values.length} values, got ${out.length}`)
  }
  const result = out?.subarray(0, bytes) ?? new Uint8Array(bytes)
  const core = q8Module.shared()
  const chunk = Math.min(values.length, ROUND_TRIP_ELEMENTS)
  reserveMemory(core, core.heapBase + chunk * 4)
  for (let first = 0; first < values.length; first += chunk) {
    const count = Math.min(chunk, values.length - first)
    new Float32Array(core.memory.buffer, core.heapBase, count).set(values.subarray(first, first + count))
    const bad = core.exports.quantizeQ8_0(core.heapBase, core.heapBase, count / Q8_0_BLOCK)
    if (bad >= 0) {
      const at = origin.first + first + bad
      throw new SafetensorsError(
        'UnsupportedConversion',
        `cannot quantize ${origin.name} to Q8_0: element ${at} is ${values[first + bad]}, which Q8_0 cannot hold`,
      )
    }
    result.set(new Uint8Array(core.memory.buffer, core.heapBase, q8_0ByteLength(count)), q8_0ByteLength(first))
  }
  return result
}
