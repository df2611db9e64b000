// F32 rows to ggml's quantized types (src/gguf/ggml-quantizers.ts over the library's functions), for the code that
// quantizes outside the GGUF export, which loads the quantizers on demand (src/gguf/kernels.ts).
import { ggmlQuantizers, type QuantizedType, type QuantizeOrigin } from './ggml-quantizers.ts'
import { GGML_RUNTIME } from './kernels.ts'

export { QUANTIZED_TYPES, type QuantizedType, type QuantizeOrigin } from './ggml-quantizers.ts'

const quantizers = /* @__PURE__ */ ggmlQuantizers(GGML_RUNTIME)

/** The quantizers' wasm module (assembly/modules/ggml-quant.ts). */
export const ggmlQuantModule = quantizers.ggmlQuantModule

/**
 * The bytes of `rows` rows of `perRow` values quantized to `type`.
 * @throws RangeError when a row is not whole blocks of the type (32 values, or 256 for the K, TQ and IQ4_XS types).
 */
export const quantizedByteLength: (type: QuantizedType, rows: number, perRow: number) => number = quantizers.quantizedByteLength

/**
 * Quantizes `rows` rows of `perRow` F32 at byte `src` of the module's instance `core` into blocks at `dst`, which
 * may be `src` (in place) or memory that does not overlap it.
 * @throws {@link SafetensorsError} `UnsupportedConversion` for a NaN or infinite value or a block whose F16 scale
 * overflows (see {@link quantize}).
 * @throws RangeError when a row is not whole blocks of the type.
 */
export const quantizeInWasm = quantizers.quantizeInWasm

/**
 * Quantizes rows of F32 values to a ggml type, byte for byte as ggml's `ggml_quantize_chunk` does with no
 * importance matrix (what llama.cpp's `llama-quantize` writes without `--imatrix`); see ggml-quantizers.ts.
 * @throws {@link SafetensorsError} `UnsupportedConversion` for a NaN or infinite value, naming its index, or for
 * values so large that a block's F16 scale overflows, which llama.cpp's quantizer refuses.
 * @throws RangeError when `values` are not whole rows of whole blocks, or `out` is too short.
 * @throws TypeError when `values` is not a Float32Array or `out` not a Uint8Array.
 */
export const quantize: (type: QuantizedType, values: Float32Array, perRow: number, out?: Uint8Array, origin?: QuantizeOrigin) => Uint8Array =
  quantizers.quantize
