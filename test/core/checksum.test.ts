// The cache's checksum kernel (XXH64, assembly/hash.ts) against xxHash's published test vectors.
import { describe, expect, test } from 'vitest'
import { xxh64 } from '../../src/core/checksum.ts'

const PRIME32 = 2654435761n
const PRIME64 = 11400714785074694797n

/** xxhsum's sanity buffer (BMK_fillTestBuffer in xxHash's cli/xsum_sanity_check.c): each byte the top byte of a running product. */
function sanityBuffer(length: number): Uint8Array {
  const out = new Uint8Array(length)
  let gen = PRIME32
  for (let i = 0; i < length; i++) {
    out[i] = Number(gen >> 56n)
    gen = (gen * PRIME64) & 0xffffffffffffffffn
  }
  return out
}

// xxHash's own sanity check (BMK_testXXH64 in xxhsum): length of the sanity buffer, seed, XXH64. The
// lengths reach every path: empty, the 1-byte, 4-byte and 8-byte tails, and the 32-byte stripes (222).
const SANITY: Array<[number, bigint, bigint]> = [
  [0, 0n, 0xef46db3751d8e999n],
  [0, PRIME32, 0xac75fda2929b17efn],
  [1, 0n, 0xe934a84adb052768n],
  [1, PRIME32, 0x5014607643a9b4c3n],
  [4, 0n, 0x9136a0dca57457een],
  [14, 0n, 0x8282dcc4994e35c8n],
  [14, PRIME32, 0xc3bd6bf63deb6df0n],
  [222, 0n, 0xb641ae8cb691c174n],
  [222, PRIME32, 0x20cb8ab7ae10c14an],
]

// Strings with the XXH64 that python-xxhash's README publishes (seeds as given there; the README's
// seed 2**64 + 1 is 1 once reduced to 64 bits, as XXH64 takes it).
const TEXTS: Array<[string, bigint, bigint]> = [
  ['xxhash', 0n, 0x32dd38952c4bc720n],
  ['xxhash', 20141025n, 0xb559b98d844e0635n],
  ['I want an unsigned 64-bit seed!', 0n, 0xd4cb0a70a2b8c7c1n],
  ['I want an unsigned 64-bit seed!', 1n, 0xce5087f12470d961n],
]

describe('XXH64', () => {
  test.each(SANITY)('xxhsum sanity vector: %i bytes, seed %s', (length, seed, expected) => {
    expect(xxh64(sanityBuffer(length), seed).toString(16)).toBe(expected.toString(16))
  })

  test.each(TEXTS)('%j, seed %s', (text, seed, expected) => {
    expect(xxh64(new TextEncoder().encode(text), seed).toString(16)).toBe(expected.toString(16))
  })

  test('a view into a larger buffer hashes only its own bytes, wherever it starts', () => {
    const buffer = new Uint8Array(300)
    buffer.set(sanityBuffer(222), 5)
    buffer.fill(0xff, 0, 5)
    buffer.fill(0xff, 227)
    expect(xxh64(buffer.subarray(5, 227)).toString(16)).toBe('b641ae8cb691c174')
  })

  test('one flipped bit changes the hash', () => {
    const bytes = sanityBuffer(222)
    bytes[100] ^= 1
    expect(xxh64(bytes)).not.toBe(0xb641ae8cb691c174n)
  })
})
