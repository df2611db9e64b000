// XXH64 (xxHash, 64-bit): the checksum of every range the persistent cache stores (src/cache/cache.ts), and of
// the cache's entry names. One export, xxh64(ptr, len, seed), over bytes in linear memory.
//
// No vector loop, because none is faster here (Node 20, x86-64, 16 MiB input):
//   XXH32 scalar 4.9 GB/s; XXH32 with its four lanes in one i32x4: 3.1 GB/s (each stripe waits for the
//   last one's i32x4.mul, a slow instruction on x86, so the single vector chain is latency-bound);
//   XXH64 scalar 6.3 GB/s, and i64x2.mul has no x86 instruction to map to.
// XXH64 is therefore both the fastest choice and the stronger check (64 bits).

const P1: u64 = 0x9e3779b185ebca87;
const P2: u64 = 0xc2b2ae3d27d4eb4f;
const P3: u64 = 0x165667b19e3779f9;
const P4: u64 = 0x85ebca77c2b2ae63;
const P5: u64 = 0x27d4eb2f165667c5;

@inline function round(acc: u64, lane: u64): u64 {
  return rotl<u64>(acc + lane * P2, 31) * P1;
}

@inline function merge(h: u64, acc: u64): u64 {
  return (h ^ round(0, acc)) * P1 + P4;
}

export function xxh64(ptr: usize, len: usize, seed: u64): u64 {
  let p = ptr;
  let end = ptr + len;
  let h: u64;
  if (len >= 32) {
    // Four independent lanes over 32-byte stripes: the CPU overlaps their multiplies.
    let v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    for (; p + 32 <= end; p += 32) {
      v1 = round(v1, load<u64>(p));
      v2 = round(v2, load<u64>(p, 8));
      v3 = round(v3, load<u64>(p, 16));
      v4 = round(v4, load<u64>(p, 24));
    }
    h = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18);
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = seed + P5;
  }
  h += <u64>len;
  for (; p + 8 <= end; p += 8) h = rotl<u64>(h ^ round(0, load<u64>(p)), 27) * P1 + P4;
  if (p + 4 <= end) {
    h = rotl<u64>(h ^ (<u64>load<u32>(p) * P1), 23) * P2 + P3;
    p += 4;
  }
  for (; p < end; p++) h = rotl<u64>(h ^ (<u64>load<u8>(p) * P5), 11) * P1;
  // Avalanche: every input bit reaches every output bit.
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  return h ^ (h >> 32);
}
