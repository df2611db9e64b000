// ggml's 4-bit non-linear types: IQ4_NL (blocks of 32, an F16 scale) and IQ4_XS (super-blocks of 256: an F16 scale
// and 6-bit scales of eight sub-blocks of 32), each value the index of the nearest of 16 fixed levels
// (kvalues_iq4nl) times the scale. What ggml_quantize_chunk runs for both with no importance matrix is
// quantize_iq4_nl / quantize_iq4_xs, that is quantize_row_iq4_nl_impl with ntry = 7 and weights x² (not
// quantize_row_iq4_nl_ref, whose ntry is -1).

import { GROUP_MAX_EPS, halfBits, nearestInt } from './ggml-quant-math';
import { amaxX4, choose, peaksOf, peakX4, row, transposeIn } from './ggml-quant-lanes';

// kvalues_iq4nl, as bytes (a table for i8x16.swizzle) and as F32 splats (LEVEL_SPLATS + 16 k: level k four times).
const LEVELS = memory.data<i8>([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);
const LEVEL_SPLATS = memory.data<f32>([
  -127, -127, -127, -127, -104, -104, -104, -104, -83, -83, -83, -83, -65, -65, -65, -65, -49, -49, -49, -49, -35, -35,
  -35, -35, -22, -22, -22, -22, -10, -10, -10, -10, 1, 1, 1, 1, 13, 13, 13, 13, 25, 25, 25, 25, 38, 38, 38, 38, 53, 53,
  53, 53, 69, 69, 69, 69, 89, 89, 89, 89, 113, 113, 113, 113,
]);
const NTRY = 7;

const CODES = memory.data(256, 16);

/** The level of index `index` (0..15) in each lane, as F32. */
@inline function levelX4(index: v128): v128 {
  // The level's byte lands in each lane's top byte (the other index bytes are out of range: zeros), then its sign
  // is extended.
  let bytes = i8x16.swizzle(v128.load(LEVELS), v128.or(i32x4.shl(index, 24), i32x4.splat(0x00808080)));
  return f32x4.convert_i32x4_s(i32x4.shr_s(bytes, 24));
}

/** The index nearestLevelX4 chose, beside the level it returns. */
let levelIndex = i32x4.splat(0);

/**
 * ggml's best_index_int8 in each lane: the index of the level nearest `x` (the upper one on a tie; 15 for NaN),
 * into levelIndex, and that level. Bisection's result is the count of levels up to x (the upper neighbour), which
 * is counted here without branches.
 */
@inline function nearestLevelX4(x: v128): v128 {
  let upper = i32x4.splat(1);
  for (let k: usize = 1; k < 15; k++) upper = i32x4.sub(upper, f32x4.le(v128.load(LEVEL_SPLATS + (k << 4)), x));
  let lower = i32x4.sub(upper, i32x4.splat(1));
  let below = levelX4(lower);
  let above = levelX4(upper);
  let nearerBelow = f32x4.lt(f32x4.sub(x, below), f32x4.sub(above, x));
  levelIndex = choose(f32x4.ne(x, x), i32x4.splat(15), choose(nearerBelow, lower, upper));
  return choose(nearerBelow, below, above);
}

// The weighted sums of the codes a trial scale gives (levelSums): Σ x² q x and Σ x² q q.
let sumQX = f32x4.splat(0);
let sumQ2 = f32x4.splat(0);

/** The sums of ROWS' four groups of 32 for the inverse scales `id`, each value's code its nearest level to x * id. */
function levelSums(id: v128): void {
  let qx = f32x4.splat(0);
  let q2 = qx;
  for (let j: usize = 0; j < 32; j++) {
    let v = row(j);
    let q = nearestLevelX4(f32x4.mul(id, v));
    let wq = f32x4.mul(f32x4.mul(v, v), q);
    qx = f32x4.add(qx, f32x4.mul(wq, v));
    q2 = f32x4.add(q2, f32x4.mul(wq, q));
  }
  sumQX = qx;
  sumQ2 = q2;
}

/**
 * The scales of four groups of 32 values at once (ROWS, one a lane) into `scales`: each the best of 15 trial scales
 * weighted by x², 0 for a group whose values are all below GROUP_MAX_EPS (the codes of this search are not kept:
 * both types recompute them from the scale).
 */
function levelScalesX4(scales: usize): void {
  let zero = f32x4.splat(0);
  peaksOf(32);
  let peak = peakX4;
  let first = <f32>load<i8>(LEVELS);
  levelSums(f32x4.div(f32x4.splat(1), f32x4.div(f32x4.neg(peak), f32x4.splat(first))));
  let d = choose(f32x4.gt(sumQ2, zero), f32x4.div(sumQX, sumQ2), zero);
  let best = f32x4.mul(d, sumQX);
  for (let attempt = -NTRY; attempt <= NTRY; attempt++) {
    levelSums(f32x4.div(f32x4.splat(<f32>(attempt + <i32>load<i8>(LEVELS))), peak));
    let better = v128.and(f32x4.gt(sumQ2, zero), f32x4.gt(f32x4.mul(sumQX, sumQX), f32x4.mul(best, sumQ2)));
    let newD = f32x4.div(sumQX, sumQ2);
    d = choose(better, newD, d);
    best = choose(better, f32x4.mul(newD, sumQX), best);
  }
  v128.store(scales, v128.andnot(d, f32x4.lt(amaxX4, f32x4.splat(GROUP_MAX_EPS))));
}

/** The codes of the 32 values at `x` for the inverse scale `id`, into `codes`. */
function codesOf(x: usize, id: f32, codes: usize): void {
  let factor = f32x4.splat(id);
  for (let j: usize = 0; j < 32; j += 4) {
    nearestLevelX4(f32x4.mul(factor, v128.load(x + (j << 2))));
    store<u32>(codes + j, i32x4.extract_lane(i8x16.shuffle(levelIndex, levelIndex, 0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0));
  }
}

/** Codes 0..15 of 32 values, two to a byte: value j in the low nibble of byte j, value 16 + j in its high one. */
@inline function packNibbles(codes: usize, q: usize): void {
  for (let j: usize = 0; j < 16; j++) store<u8>(q + j, load<u8>(codes + j) | (load<u8>(codes + 16 + j) << 4));
}

const NL_SCALES = memory.data(4 << 2, 16);

/** IQ4_NL: four blocks of 32 at `x` (searched at once, one a lane) into four blocks at `y`. */
export function quantizeIQ4_NLBlocks(x: usize, y: usize): void {
  transposeIn(x, 128, 32);
  levelScalesX4(NL_SCALES);
  for (let b: usize = 0; b < 4; b++) {
    let scale = load<f32>(NL_SCALES + (b << 2));
    store<u16>(y + b * 18, halfBits(scale));
    codesOf(x + (b << 7), scale != 0 ? <f32>1 / scale : 0, CODES);
    packNibbles(CODES, y + b * 18 + 2);
  }
}

const XS_SCALES = memory.data(8 << 2, 16);

export function quantizeIQ4_XSBlock(x: usize, y: usize): void {
  for (let ib: usize = 0; ib < 8; ib += 4) {
    transposeIn(x + (ib << 7), 128, 32);
    levelScalesX4(XS_SCALES + (ib << 2));
  }
  let maxScale: f32 = 0;
  let amaxScale: f32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    let scale = load<f32>(XS_SCALES + (ib << 2));
    if (abs(scale) > amaxScale) {
      amaxScale = abs(scale);
      maxScale = scale;
    }
  }
  let d = -maxScale / <f32>32;
  store<u16>(y, halfBits(d));
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  let scalesHigh: u32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    let l = max(-32, min(31, nearestInt(id * load<f32>(XS_SCALES + (ib << 2)))));
    let dl = d * <f32>l;
    codesOf(x + (ib << 7), dl != 0 ? <f32>1 / dl : 0, CODES + (ib << 5));
    l += 32;
    let scalesLow = y + 4 + (ib >> 1);
    if ((ib & 1) == 0) store<u8>(scalesLow, <u8>(l & 0xf));
    else store<u8>(scalesLow, load<u8>(scalesLow) | <u8>((l & 0xf) << 4));
    scalesHigh |= <u32>(l >> 4) << (2 * <u32>ib);
  }
  store<u16>(y + 2, <u16>scalesHigh);
  for (let i: usize = 0; i < 8; i++) packNibbles(CODES + (i << 5), y + 8 + (i << 4));
}
