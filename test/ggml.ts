// ggml's own C code as a judge: node-llama-cpp's prebuilt libggml-base.so (installed by test/llama.ts), called
// through koffi. Its quantize and dequantize functions are llama.cpp's reference implementations, the ones the
// GGUF types of this library must match bit for bit; libllama's llama_model_quantize judges the file types.

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

/**
 * llama.cpp's quantizer: llama_model_quantize of libllama.v0.4.0.so, with llama-quantize's default parameters (no
 * importance matrix) but the file type (llama.h's llama_ftype) and the threads. llama.cpp's log is silenced while it
 * quantizes (a line a tensor), then handed back to whoever had it.
 */
export type LlamaQuantize = (input: string, output: string, ftype: number, threads: number) => void

let llamaQuantize: LlamaQuantize | undefined

/** llama.cpp's quantizer, loaded once per process. */
export function loadLlamaQuantize(): LlamaQuantize {
  if (llamaQuantize) return llamaQuantize
  const library = koffi.load(loadGgml().library('libllama.v0.4.0.so'))
  // llama.h's llama_model_quantize_params at that release.
  const Params = koffi.struct('llama_model_quantize_params', {
    nthread: 'int32_t',
    ftype: 'int32_t',
    output_tensor_type: 'int32_t',
    token_embedding_type: 'int32_t',
    allow_requantize: 'bool',
    quantize_output_tensor: 'bool',
    only_copy: 'bool',
    pure: 'bool',
    keep_split: 'bool',
    dry_run: 'bool',
    imatrix: 'void *',
    kv_overrides: 'void *',
    tt_overrides: 'void *',
    prune_layers: 'void *',
    max_buf_size: 'size_t',
  })
  const defaults = library.func('llama_model_quantize_default_params', Params, [])
  const Log = koffi.proto('void llama_quantize_test_log(int level, const char *text, void *user_data)')
  const silent = koffi.register(() => {}, koffi.pointer(Log))
  const logGet = library.func('void llama_log_get(_Out_ void **callback, _Out_ void **user_data)')
  const logSet = library.func('void llama_log_set(void *callback, void *user_data)')
  const quantize = library.func('llama_model_quantize', 'uint32_t', ['const char *', 'const char *', koffi.pointer(Params)])
  llamaQuantize = (input, output, ftype, threads) => {
    const params = { ...defaults(), nthread: threads, ftype }
    const [callback, userData] = [[null], [null]]
    logGet(callback, userData)
    logSet(silent, null)
    let status: number
    try {
      status = quantize(input, output, params)
    } finally {
      logSet(callback[0], userData[0])
    }
    if (status !== 0) throw new Error(`llama_model_quantize ${input} (ftype ${ftype}) failed: ${status}`)
  }
  return llamaQuantize
}
