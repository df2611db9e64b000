// llama.cpp's file types (llama.h's enum llama_ftype), by llama-quantize's names: what a GGUF's dtype takes, and each
// file type's number and base type. A file type is a mixture: the type of each tensor is mixtures.ts's, loaded on
// demand with the quantizers.
import type { GgmlType } from './ggml-types.ts'

/** Each file type: its number (general.file_type) and the type of the tensors the mixture leaves as they are. */
export const FILE_TYPES = {
  Q4_0: { id: 2, base: 'Q4_0' },
  Q4_1: { id: 3, base: 'Q4_1' },
  Q8_0: { id: 7, base: 'Q8_0' },
  Q5_0: { id: 8, base: 'Q5_0' },
  Q5_1: { id: 9, base: 'Q5_1' },
  Q2_K: { id: 10, base: 'Q2_K' },
  Q3_K_S: { id: 11, base: 'Q3_K' },
  Q3_K_M: { id: 12, base: 'Q3_K' },
  Q3_K_L: { id: 13, base: 'Q3_K' },
  Q4_K_S: { id: 14, base: 'Q4_K' },
  Q4_K_M: { id: 15, base: 'Q4_K' },
  Q5_K_S: { id: 16, base: 'Q5_K' },
  Q5_K_M: { id: 17, base: 'Q5_K' },
  Q6_K: { id: 18, base: 'Q6_K' },
  IQ4_NL: { id: 25, base: 'IQ4_NL' },
  IQ4_XS: { id: 30, base: 'IQ4_XS' },
  TQ1_0: { id: 36, base: 'TQ1_0' },
  TQ2_0: { id: 37, base: 'TQ2_0' },
} as const satisfies Partial<Record<GgufDtype, { id: number; base: GgmlType }>>

/** A file type's name, as llama-quantize spells it. */
export type FileType = keyof typeof FILE_TYPES

/**
 * What {@link ggufStream}'s `dtype` takes (in any case): F32, F16 or BF16 as llama.cpp's converter writes them,
 * or one of llama-quantize's file types (its aliases Q3_K, Q4_K and Q5_K included), as llama.cpp's quantizer
 * makes it.
 */
export type GgufDtype =
  | 'F32'
  | 'F16'
  | 'BF16'
  | 'Q4_0'
  | 'Q4_1'
  | 'Q5_0'
  | 'Q5_1'
  | 'Q8_0'
  | 'Q2_K'
  | 'Q3_K_S'
  | 'Q3_K_M'
  | 'Q3_K_L'
  | 'Q4_K_S'
  | 'Q4_K_M'
  | 'Q5_K_S'
  | 'Q5_K_M'
  | 'Q6_K'
  | 'TQ1_0'
  | 'TQ2_0'
  | 'IQ4_NL'
  | 'IQ4_XS'
  | 'Q3_K'
  | 'Q4_K'
  | 'Q5_K'

/** llama-quantize's other names for the _M mixtures. */
const ALIASES: Readonly<Partial<Record<GgufDtype, FileType>>> = { Q3_K: 'Q3_K_M', Q4_K: 'Q4_K_M', Q5_K: 'Q5_K_M' }

/** The float types, which llama.cpp's converter writes (F32 for the tensors it never converts). */
const FLOATS = ['F32', 'F16', 'BF16'] as const

/** Every name a GGUF's dtype takes: the float types, the file types, then the aliases. */
export const GGUF_DTYPE_NAMES: readonly string[] = [...FLOATS, ...Object.keys(FILE_TYPES), ...Object.keys(ALIASES)]

/** The dtype `name` names (in any case), the aliases resolved, or undefined for none. */
export function ggufDtypeOf(name: unknown): GgufDtype | undefined {
  if (typeof name !== 'string') return undefined
  const upper = name.toUpperCase()
  if ((FLOATS as readonly string[]).includes(upper) || Object.hasOwn(FILE_TYPES, upper)) return upper as GgufDtype
  return Object.hasOwn(ALIASES, upper) ? ALIASES[upper as GgufDtype] : undefined
}

/** The file type of a resolved dtype (ggufDtypeOf's), or undefined for a float type. */
export const fileTypeOf = (dtype: GgufDtype): FileType | undefined => (Object.hasOwn(FILE_TYPES, dtype) ? (dtype as FileType) : undefined)
