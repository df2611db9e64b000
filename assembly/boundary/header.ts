// What the header and index scanners hand to JS, defined once: the status and reason codes they return
// and the byte offsets of the result table and of the entries of their log. src/format/header.ts imports this
// file's constants by name as `boundary.ts?constants`, a module the builds make of it (scripts/inline-wasm.js),
// so that they cost the wasm no exports (test/integration/boundary.test.ts checks that both sides know the same names).
// Each is one line `export const NAME: type = literal;`, the form that module reads.

// Status codes (scanHeader's and scanIndex's return value and RESULT_STATUS).
export const STATUS_OK: i32 = 0;
export const STATUS_INVALID_HEADER: i32 = 1;
export const STATUS_INVALID_HEADER_DESERIALIZATION: i32 = 2;
export const STATUS_INVALID_OFFSET: i32 = 3;
export const STATUS_VALIDATION_OVERFLOW: i32 = 4;
export const STATUS_MISALIGNED_SLICE: i32 = 5;
export const STATUS_TENSOR_INVALID_INFO: i32 = 6;
export const STATUS_METADATA_INCOMPLETE_BUFFER: i32 = 7;
export const STATUS_OUT_OF_MEMORY: i32 = 8;

// Reasons for InvalidHeaderDeserialization, InvalidHeader and ValidationOverflow (RESULT_REASON).
export const R_EXPECTED_OBJECT: i32 = 1;
export const R_EXPECTED_KEY: i32 = 2;
export const R_EXPECTED_COLON: i32 = 3;
export const R_EXPECTED_COMMA_OR_BRACE: i32 = 4;
export const R_EXPECTED_COMMA_OR_BRACKET: i32 = 5;
export const R_TRAILING: i32 = 6;
export const R_CONTROL_CHAR: i32 = 7;
export const R_BAD_ESCAPE: i32 = 8;
export const R_LONE_SURROGATE: i32 = 9;
export const R_BAD_VALUE: i32 = 10;
export const R_EXPECTED_UINT: i32 = 11;
export const R_NOT_PLAIN_INT: i32 = 12;
export const R_INT_TOO_LARGE: i32 = 13;
export const R_TOO_DEEP: i32 = 14;
export const R_METADATA_NOT_OBJECT: i32 = 15;
export const R_METADATA_VALUE_NOT_STRING: i32 = 16;
export const R_TENSOR_NOT_OBJECT: i32 = 17;
export const R_DTYPE_NOT_STRING: i32 = 18;
export const R_UNKNOWN_DTYPE: i32 = 19;
export const R_SHAPE_NOT_ARRAY: i32 = 20;
export const R_OFFSETS_NOT_ARRAY: i32 = 21;
export const R_OFFSETS_NOT_TWO: i32 = 22;
export const R_MISSING_FIELD: i32 = 23;
export const R_DUPLICATE_KEY: i32 = 24;
export const R_INVALID_UTF8: i32 = 25;
export const R_SHAPE_PRODUCT: i32 = 26;
export const R_BIT_COUNT: i32 = 27;
export const R_NOT_SAFE_INTEGER: i32 = 28;
// Reasons of the index scanner (scanIndex) alone.
export const R_INDEX_NOT_OBJECT: i32 = 29;
export const R_WEIGHT_MAP_MISSING: i32 = 30;
export const R_WEIGHT_MAP_NOT_OBJECT: i32 = 31;
export const R_SHARD_NOT_STRING: i32 = 32;
export const R_INDEX_METADATA_NOT_OBJECT: i32 = 33;
export const R_NUMBER_OUT_OF_RANGE: i32 = 34;

// The result table (at resultPtr()): byte offsets.
export const RESULT_STATUS: usize = 0; // i32
export const RESULT_REASON: usize = 4; // i32
export const RESULT_AT: usize = 8; // u32 byte position of the error in the header
export const RESULT_TENSOR: usize = 12; // u32 pointer to the failing tensor's entry
export const RESULT_TENSOR_COUNT: usize = 16; // u32
export const RESULT_ORDER: usize = 20; // u32 pointer to the tensor entry pointers in data order
export const RESULT_METADATA_START: usize = 24; // u32 byte position of the metadata object, or 0xffffffff
export const RESULT_METADATA_END: usize = 28; // u32
export const RESULT_METADATA_START16: usize = 32; // u32, in UTF-16 code units
export const RESULT_METADATA_END16: usize = 36; // u32, in UTF-16 code units
export const RESULT_WEIGHTS: usize = 40; // u32 pointer to the first weight_map entry (scanIndex)
export const RESULT_A: usize = 48; // u64 details of the error, by status
export const RESULT_B: usize = 56; // u64
export const RESULT_C: usize = 64; // u64
export const RESULT_SIZE: i32 = 96;

// Entries of the log (tensor and key entries start alike): byte offsets.
export const ENTRY_TAG: usize = 0; // u32
export const ENTRY_OBJECT: usize = 4; // u32 the object the key is in
export const ENTRY_KEY_START: usize = 8; // u32 byte position of the key's text
export const ENTRY_KEY_END: usize = 12; // u32, with ESCAPED set if the key holds escapes
export const KEY_SIZE: usize = 16;
export const TENSOR_KEY16_START: usize = 16; // u32, in UTF-16 code units
export const TENSOR_KEY16_END: usize = 20; // u32
export const TENSOR_DTYPE: usize = 24; // u32 index in DTYPES
export const TENSOR_DIMS: usize = 28; // u32 pointer to the dims entry
export const TENSOR_BEGIN: usize = 32; // u64 while scanning, f64 once valid
export const TENSOR_END: usize = 40; // u64, then f64
export const TENSOR_SIZE: usize = 48;
// A weight_map entry (scanIndex): its key, the tensor's name, starts like the others.
export const WEIGHT_KEY16_START: usize = 16; // u32, in UTF-16 code units
export const WEIGHT_KEY16_END: usize = 20; // u32, with ESCAPED set if the name holds escapes
export const WEIGHT_SHARD16_START: usize = 24; // u32, in UTF-16 code units
export const WEIGHT_SHARD16_END: usize = 28; // u32, with ESCAPED set if the shard name holds escapes
export const WEIGHT_NEW_SHARD: usize = 32; // u32 1 when the shard name's text differs from the entry before's
export const WEIGHT_SIZE: usize = 36;
export const DIMS_COUNT: usize = 4; // u32 number of dims
export const DIMS_VALUES: usize = 8; // u64 each while scanning, f64 once valid
export const ESCAPED: u32 = 0x80000000;
