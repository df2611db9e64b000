// ggml's tensor types read as F32, F16 or BF16, for callers that have the blocks at hand: dequantizeGgml (exported by
// safetensors-wasm/gguf) and GgmlDequantizer, for a reader that puts a file's bytes straight into wasm memory. The
// kernels (src/gguf/ggml-kernels.ts) come with this module; openGguf's reads load them on demand instead.
import type { ConvertTarget } from '../core/convert.ts'
import { type DequantizeOptions, ggmlKernels } from './ggml-kernels.ts'
import type { GgmlType } from './ggml-types.ts'
import { GGML_RUNTIME } from './kernels.ts'

export type { DequantizeOptions } from './ggml-kernels.ts'

const kernels = /* @__PURE__ */ ggmlKernels(GGML_RUNTIME)

/**
 * A wasm memory of its own, sized once, for a reader that puts a file's bytes straight into it: fill `input()`,
 * then `run()` dequantizes them and gives a view of the result. Views stay valid until the next call, as the memory
 * never grows.
 */
export const GgmlDequantizer = kernels.GgmlDequantizer

/**
 * Dequantizes `count` values of ggml type `type` from `blocks` (whole blocks, as a GGUF file holds them) to F32
 * (a Float32Array) or to F16 or BF16 (a Uint16Array of bits), little-endian. F32 is bit for bit what ggml's own
 * dequantize_row_<type> gives; F16 and BF16 are that F32 rounded once to nearest even. F64 and the integer types
 * are rounded to the nearest F32. `blocks` is not changed, big-endian or not.
 * @throws {@link index!SafetensorsError} `UnsupportedQuantization` for a type ggml does not dequantize (Q8_1) or one
 * whose big-endian layout is not defined (Q5_0, Q5_1, Q3_K, IQ2_XXS, IQ3_XXS, IQ1_M), naming those read.
 * @throws RangeError when `count` is not whole blocks, `blocks` is shorter than they are, or `out` is not the
 * result's array of `count` elements; TypeError for a `blocks` that is not a Uint8Array, or a `type`, `to` or
 * `byteOrder` that is none.
 */
export function dequantizeGgml(type: GgmlType, blocks: Uint8Array, count: number, to?: 'F32', options?: DequantizeOptions<Float32Array>): Float32Array
export function dequantizeGgml(type: GgmlType, blocks: Uint8Array, count: number, to: 'F16' | 'BF16', options?: DequantizeOptions<Uint16Array>): Uint16Array
export function dequantizeGgml(
  type: GgmlType,
  blocks: Uint8Array,
  count: number,
  to?: ConvertTarget,
  options?: DequantizeOptions<Float32Array | Uint16Array>,
): Float32Array | Uint16Array
export function dequantizeGgml(
  type: GgmlType,
  blocks: Uint8Array,
  count: number,
  to?: ConvertTarget,
  options?: DequantizeOptions<Float32Array | Uint16Array>,
): Float32Array | Uint16Array {
  return kernels.dequantizeGgml(type, blocks, count, to, options)
}
