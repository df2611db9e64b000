// The contract of the ggml dequantization module (assembly/ggml.ts, build/ggml.wasm), used by src/gguf/dequantize.ts:
// one call, dequantize(descriptor), reads a descriptor laid out as below and returns a status. Each line is one
// `export const NAME: type = literal;`, the form scripts/inline-wasm.js reads into the `?constants` module.

// The types it reads, by ggml's own numbers (ggml.h's enum ggml_type; src/gguf/ggml-types.ts, which
// test/gguf/dequantize.test.ts holds these to).
export const TYPE_F32: u32 = 0;
export const TYPE_F16: u32 = 1;
export const TYPE_Q4_0: u32 = 2;
export const TYPE_Q4_1: u32 = 3;
export const TYPE_Q5_0: u32 = 6;
export const TYPE_Q5_1: u32 = 7;
export const TYPE_Q8_0: u32 = 8;
export const TYPE_Q2_K: u32 = 10;
export const TYPE_Q3_K: u32 = 11;
export const TYPE_Q4_K: u32 = 12;
export const TYPE_Q5_K: u32 = 13;
export const TYPE_Q6_K: u32 = 14;
export const TYPE_Q8_K: u32 = 15;
export const TYPE_IQ2_XXS: u32 = 16;
export const TYPE_IQ2_XS: u32 = 17;
export const TYPE_IQ3_XXS: u32 = 18;
export const TYPE_IQ1_S: u32 = 19;
export const TYPE_IQ4_NL: u32 = 20;
export const TYPE_IQ3_S: u32 = 21;
export const TYPE_IQ2_S: u32 = 22;
export const TYPE_IQ4_XS: u32 = 23;
export const TYPE_I8: u32 = 24;
export const TYPE_I16: u32 = 25;
export const TYPE_I32: u32 = 26;
export const TYPE_I64: u32 = 27;
export const TYPE_F64: u32 = 28;
export const TYPE_IQ1_M: u32 = 29;
export const TYPE_BF16: u32 = 30;
export const TYPE_TQ1_0: u32 = 34;
export const TYPE_TQ2_0: u32 = 35;
export const TYPE_MXFP4: u32 = 39;
export const TYPE_NVFP4: u32 = 40;
export const TYPE_Q1_0: u32 = 41;
export const TYPE_Q2_0: u32 = 42;

// The output dtypes (DEQUANT_TO).
export const TO_F32: u32 = 0;
export const TO_F16: u32 = 1;
export const TO_BF16: u32 = 2;

// The byte orders of the blocks (DEQUANT_ORDER). Big-endian blocks are swapped to little-endian in place first.
export const ORDER_LITTLE: u32 = 0;
export const ORDER_BIG: u32 = 1;

// dequantize's return value.
export const STATUS_OK: i32 = 0;
// A type it does not read: nothing is touched.
export const STATUS_UNKNOWN_TYPE: i32 = 1;
// Big-endian blocks of a type whose big-endian layout is not defined (assembly/ggml.ts says which): nothing is touched.
export const STATUS_NO_BIG_ENDIAN: i32 = 2;

// The descriptor of a call: byte offsets.
export const DEQUANT_SRC: usize = 0; // u32 pointer to the blocks
export const DEQUANT_DST: usize = 4; // u32 pointer to the output, apart from the blocks
export const DEQUANT_COUNT: usize = 8; // u32 values, whole blocks
export const DEQUANT_TYPE: usize = 12; // u32 a TYPE_ number
export const DEQUANT_TO: usize = 16; // u32 a TO_ number
export const DEQUANT_ORDER: usize = 20; // u32 an ORDER_ number
export const DEQUANT_SIZE: usize = 24;
