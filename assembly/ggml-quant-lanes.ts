// Four groups of values at once, one a lane: what keeps ggml's searches exact with vectors. Each search sums over a
// group's values in order (sumlx += ...), so a group's values cannot share a vector; four groups can, each lane
// doing what ggml does for one group, in the same order, a branch becoming a choice of lanes (bitselect). The
// groups are laid out transposed in ROWS: vector i holds value i of each group.

/** Transposed values: up to 32 vectors, value i of four groups in vector i. */
export const ROWS = memory.data(32 << 4, 16);

// Vector constants, read from memory: V8 rebuilds a v128 constant at every use in a loop (three instructions), and
// binaryen folds constants kept in locals back into their uses; a load is one instruction, often folded into its
// operation (as in convert.ts).
const MAGIC = memory.data<f32>([12582912, 12582912, 12582912, 12582912]);
const MANTISSA = memory.data<i32>([0x7fffff, 0x7fffff, 0x7fffff, 0x7fffff]);
const OFFSET = memory.data<i32>([0x400000, 0x400000, 0x400000, 0x400000]);

/** ggml's nearest_int in each lane (see nearestInt). */
@inline export function nearestIntX4(v: v128): v128 {
  return i32x4.sub(v128.and(f32x4.add(v, v128.load(MAGIC)), v128.load(MANTISSA)), v128.load(OFFSET));
}

/** Each lane of `v` clamped to [low, high], splats of integers. */
@inline export function clampX4(v: v128, low: v128, high: v128): v128 {
  return i32x4.min_s(i32x4.max_s(v, low), high);
}

/** `a` where `mask` is set, else `b`: C's `if (condition) b = a`, lane by lane. */
@inline export function choose(mask: v128, a: v128, b: v128): v128 {
  return v128.bitselect(a, b, mask);
}

/** Vector i of the transposed vectors at `p`. */
@inline export function rowAt(p: usize, i: usize): v128 {
  return v128.load(p + (i << 4));
}

/** Vector i of ROWS. */
@inline export function row(i: usize): v128 {
  return rowAt(ROWS, i);
}

/**
 * Loads four groups of `n` F32 (n a multiple of 4), the group of lane j at x + j * stride bytes, transposed into
 * ROWS.
 */
export function transposeIn(x: usize, stride: usize, n: usize): void {
  for (let i: usize = 0; i < n; i += 4) {
    let a = v128.load(x + (i << 2));
    let b = v128.load(x + stride + (i << 2));
    let c = v128.load(x + 2 * stride + (i << 2));
    let d = v128.load(x + 3 * stride + (i << 2));
    let abLow = i32x4.shuffle(a, b, 0, 4, 1, 5);
    let abHigh = i32x4.shuffle(a, b, 2, 6, 3, 7);
    let cdLow = i32x4.shuffle(c, d, 0, 4, 1, 5);
    let cdHigh = i32x4.shuffle(c, d, 2, 6, 3, 7);
    v128.store(ROWS + (i << 4), i32x4.shuffle(abLow, cdLow, 0, 1, 4, 5));
    v128.store(ROWS + (i << 4), i32x4.shuffle(abLow, cdLow, 2, 3, 6, 7), 16);
    v128.store(ROWS + (i << 4), i32x4.shuffle(abHigh, cdHigh, 0, 1, 4, 5), 32);
    v128.store(ROWS + (i << 4), i32x4.shuffle(abHigh, cdHigh, 2, 3, 6, 7), 48);
  }
}

/**
 * The low bytes of `n` transposed i32 vectors at `codes` (n a multiple of 4) stored back by group: the n bytes of
 * lane j's group at out + j * stride.
 */
export function transposeCodesOut(codes: usize, n: usize, out: usize, stride: usize): void {
  for (let i: usize = 0; i < n; i += 4) {
    // Byte 4k of vector i + m is code i + m of group k: gather the bytes of each group.
    let a = v128.load(codes + (i << 4));
    let b = v128.load(codes + (i << 4), 16);
    let c = v128.load(codes + (i << 4), 32);
    let d = v128.load(codes + (i << 4), 48);
    let ab = i8x16.shuffle(a, b, 0, 16, 4, 20, 8, 24, 12, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    let cd = i8x16.shuffle(c, d, 0, 16, 4, 20, 8, 24, 12, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    // ab: a0 b0 a1 b1 a2 b2 a3 b3, cd: c0 d0 ...; lane j's four codes are bytes j of a, b, c, d.
    let all = i8x16.shuffle(ab, cd, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    store<u32>(out + i, i32x4.extract_lane(all, 0));
    store<u32>(out + stride + i, i32x4.extract_lane(all, 1));
    store<u32>(out + 2 * stride + i, i32x4.extract_lane(all, 2));
    store<u32>(out + 3 * stride + i, i32x4.extract_lane(all, 3));
  }
}

/** The signed value of largest magnitude of each lane's group (the first of them on a tie), and that magnitude. */
export let peakX4 = i32x4.splat(0);
export let amaxX4 = i32x4.splat(0);

/** ggml's `if (ax > amax) { amax = ax; max = x[i]; }` scan of the first `n` vectors of ROWS, into peakX4 and amaxX4. */
export function peaksOf(n: usize): void {
  let amax = f32x4.splat(0);
  let peak = f32x4.splat(0);
  for (let i: usize = 0; i < n; i++) {
    let v = row(i);
    let larger = f32x4.gt(f32x4.abs(v), amax);
    amax = choose(larger, f32x4.abs(v), amax);
    peak = choose(larger, v, peak);
  }
  peakX4 = peak;
  amaxX4 = amax;
}
