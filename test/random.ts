// The tests' one seeded PRNG (mulberry32): small, fast, and reproducible from a printed seed.
// No imports, so it runs in Node, Chromium and workerd alike.

/** Uniform 32-bit unsigned integers. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (t ^ (t >>> 14)) >>> 0
  }
}

/** Uniform floats in [0, 1). */
export function prng(seed: number): () => number {
  const next = mulberry32(seed)
  return () => next() / 4294967296
}
