// The tensor types of ggml (ggml.h's enum ggml_type, in the llama.cpp that node-llama-cpp 3.21.1 ships), by the
// names gguf-py gives them: the one table of their facts. test/gguf/ggml-types.test.ts holds it to ggml's own
// ggml_blck_size and ggml_type_size.

/** A ggml tensor type's name, as gguf-py's GGMLQuantizationType spells it. */
export type GgmlType = keyof typeof GGML_TYPES

/** Each type's id in ggml, values per block and bytes per block. */
export const GGML_TYPES = {
  F32: { id: 0, block: 1, bytes: 4 },
  F16: { id: 1, block: 1, bytes: 2 },
  Q4_0: { id: 2, block: 32, bytes: 18 },
  Q4_1: { id: 3, block: 32, bytes: 20 },
  Q5_0: { id: 6, block: 32, bytes: 22 },
  Q5_1: { id: 7, block: 32, bytes: 24 },
  Q8_0: { id: 8, block: 32, bytes: 34 },
  Q8_1: { id: 9, block: 32, bytes: 36 },
  Q2_K: { id: 10, block: 256, bytes: 84 },
  Q3_K: { id: 11, block: 256, bytes: 110 },
  Q4_K: { id: 12, block: 256, bytes: 144 },
  Q5_K: { id: 13, block: 256, bytes: 176 },
  Q6_K: { id: 14, block: 256, bytes: 210 },
  Q8_K: { id: 15, block: 256, bytes: 292 },
  IQ2_XXS: { id: 16, block: 256, bytes: 66 },
  IQ2_XS: { id: 17, block: 256, bytes: 74 },
  IQ3_XXS: { id: 18, block: 256, bytes: 98 },
  IQ1_S: { id: 19, block: 256, bytes: 50 },
  IQ4_NL: { id: 20, block: 32, bytes: 18 },
  IQ3_S: { id: 21, block: 256, bytes: 110 },
  IQ2_S: { id: 22, block: 256, bytes: 82 },
  IQ4_XS: { id: 23, block: 256, bytes: 136 },
  I8: { id: 24, block: 1, bytes: 1 },
  I16: { id: 25, block: 1, bytes: 2 },
  I32: { id: 26, block: 1, bytes: 4 },
  I64: { id: 27, block: 1, bytes: 8 },
  F64: { id: 28, block: 1, bytes: 8 },
  IQ1_M: { id: 29, block: 256, bytes: 56 },
  BF16: { id: 30, block: 1, bytes: 2 },
  TQ1_0: { id: 34, block: 256, bytes: 54 },
  TQ2_0: { id: 35, block: 256, bytes: 66 },
  MXFP4: { id: 39, block: 32, bytes: 17 },
  NVFP4: { id: 40, block: 64, bytes: 36 },
  Q1_0: { id: 41, block: 128, bytes: 18 },
  Q2_0: { id: 42, block: 64, bytes: 18 },
} as const satisfies Record<string, { id: number; block: number; bytes: number }>

/** The bytes of `count` values of `type`, which must be whole blocks. */
export function ggmlByteLength(type: GgmlType, count: number): number {
  const { block, bytes } = GGML_TYPES[type]
  return (count / block) * bytes
}
