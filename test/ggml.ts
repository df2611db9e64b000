// ggml's own C code as a judge: node-llama-cpp's prebuilt libggml-base.so (installed by test/llama.ts), called
// through koffi. Its quantize and dequantize functions are llama.cpp's reference implementations, the ones the
// GGUF types of this library must match bit for bit.

import { join } from 'node:path'
import koffi from 'koffi'
import { installLlamaCpp, LLAMA_LIBRARIES } from './llama.ts'

export { llamaUnsupported as ggmlUnsupported } from './llama.ts'

/** ggml_type's numbers (ggml.h; gguf-py's GGMLQuantizationType), by the names gguf-py gives them. */
export const GGML_TYPES = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q8_1: 9,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  Q8_K: 15,
  IQ2_XXS: 16,
  IQ2_XS: 17,
  IQ3_XXS: 18,
  IQ1_S: 19,
  IQ4_NL: 20,
  IQ3_S: 21,
  IQ2_S: 22,
  IQ4_XS: 23,
  I8: 24,
  I16: 25,
  I32: 26,
  I64: 27,
  F64: 28,
  IQ1_M: 29,
  BF16: 30,
  TQ1_0: 34,
  TQ2_0: 35,
  MXFP4: 39,
  NVFP4: 40,
  Q1_0: 41,
  Q2_0: 42,
} as const
export type GgmlTypeName = keyof typeof GGML_TYPES

export interface Ggml {
  /** Elements per block and bytes per block of a type (ggml_blck_size, ggml_type_size). */
  blockSize(type: GgmlTypeName): number
  typeSize(type: GgmlTypeName): number
  /**
   * ggml_quantize_chunk of `rows` rows of `perRow` values, with the importance matrix given (one weight per column;
   * none by default): the blocks, as ggml writes them.
   */
  quantize(type: GgmlTypeName, values: Float32Array, rows: number, perRow: number, imatrix?: Float32Array): Uint8Array
  /** Whether ggml_quantize_chunk needs an importance matrix for `type` (ggml_quantize_requires_imatrix). */
  requiresImatrix(type: GgmlTypeName): boolean
  /**
   * dequantize_row_<type> of `count` values (whole blocks): ggml's own F32 values; for F16 and BF16, which have
   * none, ggml_fp16_to_fp32_row and ggml_bf16_to_fp32_row.
   */
  dequantize(type: GgmlTypeName, blocks: Uint8Array, count: number): Float32Array
  /** The path of a library beside libggml-base.so (libllama.v0.4.0.so), for a test that binds more of it. */
  library(name: string): string
}

let ggml: Ggml | undefined

/** ggml, loaded once per process (installs node-llama-cpp the first time: call it from a beforeAll with a long timeout). */
export function loadGgml(): Ggml {
  if (ggml) return ggml
  installLlamaCpp()
  const base = koffi.load(join(LLAMA_LIBRARIES, 'libggml-base.so'))
  const blockSize = base.func('int64_t ggml_blck_size(int type)')
  const typeSize = base.func('size_t ggml_type_size(int type)')
  const init = base.func('void ggml_quantize_init(int type)')
  const chunk = base.func(
    'size_t ggml_quantize_chunk(int type, const float *src, _Out_ uint8_t *dst, int64_t start, int64_t nrows, int64_t n_per_row, const float *imatrix)',
  )
  const rowSize = base.func('size_t ggml_row_size(int type, int64_t ne)')
  const requiresImatrix = base.func('bool ggml_quantize_requires_imatrix(int type)')
  const rowFunction = (type: GgmlTypeName) =>
    type === 'F16' ? 'ggml_fp16_to_fp32_row' : type === 'BF16' ? 'ggml_bf16_to_fp32_row' : `dequantize_row_${type.toLowerCase().replace(/_k$/, '_K')}`
  const dequantizers = new Map<GgmlTypeName, (blocks: Uint8Array, out: Float32Array, count: number) => void>()
  const dequantizer = (type: GgmlTypeName) => {
    let f = dequantizers.get(type)
    if (!f) {
      f = base.func(`void ${rowFunction(type)}(const uint8_t *x, _Out_ float *y, int64_t k)`) as (blocks: Uint8Array, out: Float32Array, count: number) => void
      dequantizers.set(type, f)
    }
    return f
  }
  ggml = {
    blockSize: (type) => Number(blockSize(GGML_TYPES[type])),
    typeSize: (type) => Number(typeSize(GGML_TYPES[type])),
    requiresImatrix: (type) => Boolean(requiresImatrix(GGML_TYPES[type])),
    quantize(type, values, rows, perRow, imatrix) {
      if (values.length !== rows * perRow) throw new RangeError(`${values.length} values are not ${rows} rows of ${perRow}`)
      init(GGML_TYPES[type])
      const out = new Uint8Array(rows * Number(rowSize(GGML_TYPES[type], perRow)))
      if (imatrix !== undefined && imatrix.length !== perRow) throw new RangeError(`an importance matrix of ${imatrix.length} weights for rows of ${perRow}`)
      const written = Number(chunk(GGML_TYPES[type], values, out, 0, rows, perRow, imatrix ?? null))
      if (written !== out.length) throw new Error(`ggml_quantize_chunk wrote ${written} bytes, expected ${out.length}`)
      return out
    },
    dequantize(type, blocks, count) {
      const out = new Float32Array(count)
      dequantizer(type)(blocks, out, count)
      return out
    },
    library: (name) => join(LLAMA_LIBRARIES, name),
  }
  return ggml
}
