// The contract of the ggml quantization module (build/ggml-quant.wasm, assembly/ggml-quant.ts), defined once: the
// statuses quantizeRows returns and the descriptor it reads; the types it quantizes are ggml's numbers, declared
// once for both ggml modules in assembly/boundary/ggml.ts. src/gguf/ggml-quantizers.ts imports these constants as
// `ggml-quant.ts?constants` (scripts/inline-wasm.js), test/integration/boundary.test.ts checks the struct.
// Each is one line `export const NAME: type = literal;`, the form that module reads.

// quantizeRows' statuses.
export const STATUS_OK: i32 = 0;
// A NaN or an infinity: its index from QUANTIZE_SRC is in QUANTIZE_BAD; the blocks before its block are written,
// its block and those after it untouched.
export const STATUS_NOT_FINITE: i32 = 1;
// A type not listed above, or rows that are not whole blocks of the type: nothing written.
export const STATUS_BAD_CALL: i32 = 2;
// Every block written, ggml's bytes, but one whose F16 scale (or minimum) is infinite or NaN: the values are too
// large for the type (a scale beyond 65504). The index of that block's first value is in QUANTIZE_BAD. llama.cpp's
// quantizer refuses such blocks (ggml_validate_row_data after ggml_quantize_chunk).
export const STATUS_SCALE_OVERFLOW: i32 = 3;

// The descriptor quantizeRows reads: `rows` rows of `perRow` F32 at src, quantized to `rows` rows of blocks at dst.
// dst == src quantizes in place (the blocks are narrower than their values); other overlaps are not allowed.
export const QUANTIZE_TYPE: usize = 0; // u32 a TYPE_ number of assembly/boundary/ggml.ts
export const QUANTIZE_SRC: usize = 4; // u32 pointer to the F32 values
export const QUANTIZE_DST: usize = 8; // u32 pointer to the blocks
export const QUANTIZE_ROWS: usize = 12; // u32
export const QUANTIZE_PER_ROW: usize = 16; // u32 values per row, a multiple of the type's block
export const QUANTIZE_BAD: usize = 20; // u32 out: the index of the first non-finite value (STATUS_NOT_FINITE)
export const QUANTIZE_SIZE: usize = 24;
