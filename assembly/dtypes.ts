// The dtype table is written by JS at load time from src/core/dtypes.ts, the one place dtype facts live.
// Entry i (16 bytes): name length, bits per element, two unused bytes, the name (up to 12 bytes).

const TABLE = memory.data(32 * 16, 8);
let count: u32 = 0;

export function dtypeTable(entries: u32): usize {
  count = entries;
  return TABLE;
}

export function matchDtype(text: usize, length: u32): i32 {
  for (let i: u32 = 0; i < count; i++) {
    let entry = TABLE + (<usize>i << 4);
    if (load<u8>(entry) == length && memory.compare(entry + 4, text, length) == 0) return <i32>i;
  }
  return -1;
}

@inline export function dtypeBits(index: u32): u32 {
  return load<u8>(TABLE + (<usize>index << 4), 1);
}

// Indices in DTYPES (src/core/dtypes.ts): the scanner reports them and the kernels are keyed by them.
// test/boundary.test.ts checks them against DTYPES through convertKernel.
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
export const F64: u32 = 19;
export const I64: u32 = 20;
export const U64: u32 = 21;
