// The dtype numbers the wasm modules take and report: each dtype's index in DTYPES (src/core/dtypes.ts, the
// format's order). The scanner reports them, the conversion and dequantization kernels are keyed by them;
// test/integration/boundary.test.ts holds them to DTYPES.
export const BOOL: u32 = 0;
export const F4: u32 = 1;
export const F6_E2M3: u32 = 2;
export const F6_E3M2: u32 = 3;
export const U8: u32 = 4;
export const I8: u32 = 5;
export const F8_E5M2: u32 = 6;
export const F8_E4M3: u32 = 7;
export const F8_E8M0: u32 = 8;
export const F8_E4M3FNUZ: u32 = 9;
export const F8_E5M2FNUZ: u32 = 10;
export const I16: u32 = 11;
export const U16: u32 = 12;
export const F16: u32 = 13;
export const BF16: u32 = 14;
export const I32: u32 = 15;
export const U32: u32 = 16;
export const F32: u32 = 17;
export const C64: u32 = 18;
export const F64: u32 = 19;
export const I64: u32 = 20;
export const U64: u32 = 21;
