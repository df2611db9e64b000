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
