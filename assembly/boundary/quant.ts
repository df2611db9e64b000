// The contract of the dequantization module (assembly/quant.ts, build/quant.wasm) with src/quant/kernels.ts: its
// modes and the two descriptors its exports read. A descriptor is a struct in linear memory that JS writes and the
// call reads; each field's comment starts with its type. Dtypes are the numbers of assembly/boundary/dtypes.ts.

// Code orders (a descriptor's ORDER): a dense LSB-first stream; AWQ's nibble order (column 8c + j is nibble
// [0, 4, 1, 5, 2, 6, 3, 7][j] of word c); bitsandbytes' even code in the high nibble of each byte.
export const ORDER_LSB_FIRST: u32 = 0;
export const ORDER_AWQ: u32 = 1;
export const ORDER_HIGH_NIBBLE_FIRST: u32 = 2;

// What one code is worth before its scale (DEQUANT_VALUE): itself, an entry of a 16-entry table, or the dtype
// number of F8 codes (F8_E4M3, F8_E5M2), which no other value equals.
export const VALUE_AFFINE: u32 = 0;
export const VALUE_TABLE: u32 = 1;

// DEQUANT_FLAGS: I8 codes read as unsigned ones offset by 128; a last factor (POST_MULTIPLIER); 4-bit codes that
// run down the columns of words (AWQ's qweight read as the logical tensor's rows).
export const FLAG_SIGNED_CODES: u32 = 1;
export const FLAG_POST_MULTIPLY: u32 = 2;
export const FLAG_COLUMN_CODES: u32 = 4;

// dequantRows(descriptor): a rectangle of `rows` rows of `cols` codes into OUT (row-major, dtype TO). Row r's codes
// start at CODES + r * CODE_ROW_BYTES, a stream of BITS-bit codes in ORDER, its 32-bit words WORD_STRIDE words
// apart; its columns are columns COL_OFFSET.. of the layout's rows, which is what groups count from. Its F32
// parameters (SCALES, and ZEROS and BIASES where not 0) are in parameter row PARAM_ROW_OF[r] (i32), PARAM_ROW_STRIDE
// entries apart, group g at entry g * GROUP_STRIDE of its row; a column's group is column / GROUP_SIZE, or
// GROUP_OF[column] (i32) with GROUP_SIZE 0. REF is the reference's compute dtype.
export const DEQUANT_CODES: usize = 0; // u32 pointer
export const DEQUANT_CODE_ROW_BYTES: usize = 4; // u32
export const DEQUANT_WORD_STRIDE: usize = 8; // u32 words
export const DEQUANT_BITS: usize = 12; // u32 1 to 8
export const DEQUANT_ORDER: usize = 16; // u32 an ORDER_
export const DEQUANT_ROWS: usize = 20; // u32
export const DEQUANT_COLS: usize = 24; // u32
export const DEQUANT_COL_OFFSET: usize = 28; // u32
export const DEQUANT_SCALES: usize = 32; // u32 pointer to F32
export const DEQUANT_ZEROS: usize = 36; // u32 pointer to F32, or 0
export const DEQUANT_BIASES: usize = 40; // u32 pointer to F32, or 0
export const DEQUANT_PARAM_ROW_OF: usize = 44; // u32 pointer to i32, one a row
export const DEQUANT_PARAM_ROW_STRIDE: usize = 48; // u32 entries
export const DEQUANT_GROUP_SIZE: usize = 52; // u32 columns, or 0 for GROUP_OF
export const DEQUANT_GROUP_OF: usize = 56; // u32 pointer to i32, one a column
export const DEQUANT_GROUP_STRIDE: usize = 60; // u32 entries
export const DEQUANT_VALUE: usize = 64; // u32 a VALUE_, or an F8 dtype number
export const DEQUANT_TABLE: usize = 68; // u32 pointer to 16 F32, for VALUE_TABLE
export const DEQUANT_FLAGS: usize = 72; // u32 FLAG_ bits
export const DEQUANT_POST_MULTIPLIER: usize = 76; // f32
export const DEQUANT_REF: usize = 80; // u32 dtype number: F32, F16 or BF16
export const DEQUANT_TO: usize = 84; // u32 dtype number: F32, F16 or BF16
export const DEQUANT_OUT: usize = 88; // u32 pointer
export const DEQUANT_SIZE: usize = 92;

// unpackCodes(descriptor): COUNT codes of the stream at WORDS (its words WORD_STRIDE words apart) to OUT, a byte
// each, in ORDER; SIGNED (8-bit codes) offsets each by 128.
export const UNPACK_WORDS: usize = 0; // u32 pointer
export const UNPACK_WORD_STRIDE: usize = 4; // u32 words
export const UNPACK_BITS: usize = 8; // u32 1 to 8
export const UNPACK_ORDER: usize = 12; // u32 an ORDER_
export const UNPACK_SIGNED: usize = 16; // u32 0 or 1
export const UNPACK_COUNT: usize = 20; // u32
export const UNPACK_OUT: usize = 24; // u32 pointer
export const UNPACK_SIZE: usize = 28;
