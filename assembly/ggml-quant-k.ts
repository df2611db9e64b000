// ggml's K-quants, super-blocks of 256 values in sub-blocks of 16 or 32, each sub-block's scale (and minimum)
// quantized again against the super-block's F16 scale: quantize_row_<type>_ref, which ggml_quantize_chunk runs for
// Q2_K to Q6_K when there is no importance matrix (with one it runs quantize_row_<type>_impl, other searches).
// Each function quantizes the 256 finite F32 at `x` into the block at `y`, step for step as ggml does in F32:
// the same searches (make_qkx2_quants, make_q3_quants, make_qx_quants), the same order of every sum, the same
// nearest_int. The searches run on four sub-blocks at once, one a lane (ggml-quant-lanes.ts).

import { GROUP_MAX_EPS, halfBits, halfValue, nearestInt } from './ggml-quant-math';
import { amaxX4, choose, clampX4, nearestIntX4, peaksOf, peakX4, row, rowAt, transposeCodesOut, transposeIn } from './ggml-quant-lanes';

// Scratch: the codes of a super-block, the sub-blocks' scales and minimums, and the transposed weights, codes and
// trial codes of four sub-blocks (ggml-quant-lanes.ts).
const L = memory.data(256, 16);
const SCALES = memory.data(16 << 2, 16);
const MINS = memory.data(16 << 2, 16);
const WEIGHT_ROWS = memory.data(32 << 4, 16);
const CODE_ROWS = memory.data(32 << 4, 16);
const TRIAL_ROWS = memory.data(32 << 4, 16);
// The packed 6-bit scales of Q4_K and Q5_K, and Q3_K's, built before they are stored.
const PACKED = memory.data(16, 16);

const RDELTA: f32 = 0.1;

// ---- make_qkx2_quants: codes 0..nmax and a scale and minimum for n weighted values ----

/**
 * ggml's make_qkx2_quants on four sub-blocks of `n` values at once (ROWS, weights in WEIGHT_ROWS, one a lane): the
 * codes in [0, nmax] into CODE_ROWS, and the scales (at `scales`) and minimums (at `mins`, as ggml's the_min: the
 * negated offset) that fit them best, trying nstep + 1 rescalings from rmin in steps of RDELTA, the error summed
 * as absolute (mad) or squared differences.
 */
function affineSearchX4(n: usize, nmax: i32, rmin: f32, nstep: i32, mad: bool, scales: usize, mins: usize): void {
  let zero = f32x4.splat(0);
  let lowest = row(0);
  let highest = lowest;
  let sumW = rowAt(WEIGHT_ROWS, 0);
  let sumX = f32x4.mul(sumW, lowest);
  for (let i: usize = 1; i < n; i++) {
    let v = row(i);
    lowest = choose(f32x4.lt(v, lowest), v, lowest);
    highest = choose(f32x4.gt(v, highest), v, highest);
    let w = rowAt(WEIGHT_ROWS, i);
    sumW = f32x4.add(sumW, w);
    sumX = f32x4.add(sumX, f32x4.mul(w, v));
  }
  lowest = choose(f32x4.gt(lowest, zero), zero, lowest);
  // Sub-blocks whose values are all one (once the minimum is at most 0): codes 0, scale 0, in ggml.
  let flat = f32x4.eq(highest, lowest);
  let flatMin = lowest;
  let codeMax = i32x4.splat(nmax);
  let top = f32x4.splat(<f32>nmax);
  let iscale = f32x4.div(top, f32x4.sub(highest, lowest));
  let scale = f32x4.div(f32x4.splat(1), iscale);
  let bestError = zero;
  for (let i: usize = 0; i < n; i++) {
    let v = row(i);
    let l = clampX4(nearestIntX4(f32x4.mul(iscale, f32x4.sub(v, lowest))), zero, codeMax);
    v128.store(CODE_ROWS + (i << 4), l);
    let diff = f32x4.sub(f32x4.add(f32x4.mul(scale, f32x4.convert_i32x4_s(l)), lowest), v);
    diff = mad ? f32x4.abs(diff) : f32x4.mul(diff, diff);
    bestError = f32x4.add(bestError, f32x4.mul(rowAt(WEIGHT_ROWS, i), diff));
  }
  for (let step = 0; step <= nstep; step++) {
    iscale = f32x4.div(f32x4.splat(rmin + RDELTA * <f32>step + <f32>nmax), f32x4.sub(highest, lowest));
    let sumL = zero;
    let sumL2 = zero;
    let sumXL = zero;
    for (let i: usize = 0; i < n; i++) {
      let v = row(i);
      let l = clampX4(nearestIntX4(f32x4.mul(iscale, f32x4.sub(v, lowest))), zero, codeMax);
      v128.store(TRIAL_ROWS + (i << 4), l);
      let fl = f32x4.convert_i32x4_s(l);
      let wl = f32x4.mul(rowAt(WEIGHT_ROWS, i), fl);
      sumL = f32x4.add(sumL, wl);
      sumL2 = f32x4.add(sumL2, f32x4.mul(wl, fl));
      sumXL = f32x4.add(sumXL, f32x4.mul(wl, v));
    }
    let D = f32x4.sub(f32x4.mul(sumW, sumL2), f32x4.mul(sumL, sumL));
    let solvable = f32x4.gt(D, zero);
    if (!v128.any_true(solvable)) continue;
    let thisScale = f32x4.div(f32x4.sub(f32x4.mul(sumW, sumXL), f32x4.mul(sumX, sumL)), D);
    let thisMin = f32x4.div(f32x4.sub(f32x4.mul(sumL2, sumX), f32x4.mul(sumL, sumXL)), D);
    let positive = f32x4.gt(thisMin, zero);
    thisMin = choose(positive, zero, thisMin);
    thisScale = choose(positive, f32x4.div(sumXL, sumL2), thisScale);
    let error = zero;
    for (let i: usize = 0; i < n; i++) {
      let fl = f32x4.convert_i32x4_s(rowAt(TRIAL_ROWS, i));
      let diff = f32x4.sub(f32x4.add(f32x4.mul(thisScale, fl), thisMin), row(i));
      diff = mad ? f32x4.abs(diff) : f32x4.mul(diff, diff);
      error = f32x4.add(error, f32x4.mul(rowAt(WEIGHT_ROWS, i), diff));
    }
    let better = v128.and(solvable, f32x4.lt(error, bestError));
    if (!v128.any_true(better)) continue;
    for (let i: usize = 0; i < n; i++) v128.store(CODE_ROWS + (i << 4), choose(better, rowAt(TRIAL_ROWS, i), rowAt(CODE_ROWS, i)));
    bestError = choose(better, error, bestError);
    scale = choose(better, thisScale, scale);
    lowest = choose(better, thisMin, lowest);
  }
  if (v128.any_true(flat)) {
    for (let i: usize = 0; i < n; i++) v128.store(CODE_ROWS + (i << 4), v128.andnot(rowAt(CODE_ROWS, i), flat));
    scale = choose(flat, zero, scale);
    lowest = choose(flat, flatMin, lowest);
  }
  v128.store(scales, scale);
  v128.store(mins, f32x4.neg(lowest));
}

/**
 * The codes of a sub-block from its quantized scale: nearest_int((x + offset) / d) for the `n` values at `x`,
 * clamped to [low, high] and moved up by `shift`, as bytes at `codes`. (ggml's x / d for the signed types is
 * (x + 0) / d here: adding 0 turns only -0 into 0, which rounds to the same code.)
 */
function requantize(x: usize, n: usize, offset: f32, d: f32, low: i32, high: i32, shift: i32, codes: usize): void {
  let offsets = f32x4.splat(offset);
  let divisor = f32x4.splat(d);
  let lows = i32x4.splat(low);
  let highs = i32x4.splat(high);
  let shifts = i32x4.splat(shift);
  for (let i: usize = 0; i < n; i += 4) {
    let l = i32x4.add(clampX4(nearestIntX4(f32x4.div(f32x4.add(v128.load(x + (i << 2)), offsets), divisor)), lows, highs), shifts);
    store<u32>(codes + i, i32x4.extract_lane(i8x16.shuffle(l, l, 0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 0));
  }
}

/** ggml's get_scale_min_k4: sub-block j's 6-bit scale (low 8 bits of the result) and minimum (high 8 bits). */
@inline function scaleMinK4(j: usize, q: usize): u32 {
  if (j < 4) return (<u32>load<u8>(q + j) & 63) | ((<u32>load<u8>(q + j + 4) & 63) << 8);
  let d = (<u32>load<u8>(q + j + 4) & 0xf) | ((<u32>load<u8>(q + j - 4) >> 6) << 4);
  let m = (<u32>load<u8>(q + j + 4) >> 4) | ((<u32>load<u8>(q + j) >> 6) << 4);
  return d | (m << 8);
}

// The largest of the sub-blocks' scales and of their minimums (ggml's `if (scale > max_scale)` scans), set by
// largestScaleAndMin (maxScale also by signedLargestScale).
let maxScale: f32 = 0;
let maxMin: f32 = 0;

function largestScaleAndMin(count: usize): void {
  maxScale = 0;
  maxMin = 0;
  for (let j: usize = 0; j < count; j++) {
    let scale = load<f32>(SCALES + (j << 2));
    let min = load<f32>(MINS + (j << 2));
    if (scale > maxScale) maxScale = scale;
    if (min > maxMin) maxMin = min;
  }
}

/**
 * Q4_K and Q5_K: eight sub-blocks of 32, each searched with weights av_x + |x| (av_x the sub-block's RMS), their
 * scales and minimums quantized to 6 bits into PACKED against F16 super-block scales stored at y and y + 2, the
 * codes then recomputed from those into L.
 */
function affineSuperBlock(x: usize, y: usize, nmax: i32, rmin: f32, nstep: i32): void {
  for (let j: usize = 0; j < 8; j += 4) {
    transposeIn(x + (j << 7), 128, 32);
    let sumX2 = f32x4.splat(0);
    for (let l: usize = 0; l < 32; l++) sumX2 = f32x4.add(sumX2, f32x4.mul(row(l), row(l)));
    let avX = f32x4.sqrt(f32x4.div(sumX2, f32x4.splat(32)));
    for (let l: usize = 0; l < 32; l++) v128.store(WEIGHT_ROWS + (l << 4), f32x4.add(avX, f32x4.abs(row(l))));
    affineSearchX4(32, nmax, rmin, nstep, false, SCALES + (j << 2), MINS + (j << 2));
    transposeCodesOut(CODE_ROWS, 32, L + (j << 5), 32);
  }
  largestScaleAndMin(8);
  let invScale: f32 = maxScale > 0 ? <f32>63 / maxScale : 0;
  let invMin: f32 = maxMin > 0 ? <f32>63 / maxMin : 0;
  for (let j: usize = 0; j < 8; j++) {
    let ls = min<u32>(63, <u32>nearestInt(invScale * load<f32>(SCALES + (j << 2))) & 0xff);
    let lm = min<u32>(63, <u32>nearestInt(invMin * load<f32>(MINS + (j << 2))) & 0xff);
    if (j < 4) {
      store<u8>(PACKED + j, <u8>ls);
      store<u8>(PACKED + j + 4, <u8>lm);
    } else {
      store<u8>(PACKED + j + 4, <u8>((ls & 0xf) | ((lm & 0xf) << 4)));
      store<u8>(PACKED + j - 4, load<u8>(PACKED + j - 4) | <u8>((ls >> 4) << 6));
      store<u8>(PACKED + j, load<u8>(PACKED + j) | <u8>((lm >> 4) << 6));
    }
  }
  store<u16>(y, halfBits(maxScale / <f32>63));
  store<u16>(y + 2, halfBits(maxMin / <f32>63));
  let d = halfValue(load<u16>(y));
  let dmin = halfValue(load<u16>(y + 2));
  for (let j: usize = 0; j < 8; j++) {
    let sm = scaleMinK4(j, PACKED);
    let dj = d * <f32>(sm & 0xff);
    if (dj == 0) continue;
    let mj = dmin * <f32>(sm >> 8);
    requantize(x + (j << 7), 32, mj, dj, 0, nmax, 0, L + (j << 5));
  }
  memory.copy(y + 4, PACKED, 12);
}

export function quantizeQ4_KBlock(x: usize, y: usize): void {
  affineSuperBlock(x, y, 15, -1, 20);
  let q = y + 16;
  for (let j: usize = 0; j < 256; j += 64) {
    for (let l: usize = 0; l < 32; l++) store<u8>(q + l, load<u8>(L + j + l) | (load<u8>(L + j + l + 32) << 4));
    q += 32;
  }
}

export function quantizeQ5_KBlock(x: usize, y: usize): void {
  affineSuperBlock(x, y, 31, -0.5, 15);
  let qh = y + 16;
  let ql = y + 48;
  memory.fill(qh, 0, 32);
  let m1: u8 = 1;
  let m2: u8 = 2;
  for (let n: usize = 0; n < 256; n += 64) {
    for (let j: usize = 0; j < 32; j++) {
      let l1 = load<u8>(L + n + j);
      if (l1 > 15) {
        l1 -= 16;
        store<u8>(qh + j, load<u8>(qh + j) | m1);
      }
      let l2 = load<u8>(L + n + j + 32);
      if (l2 > 15) {
        l2 -= 16;
        store<u8>(qh + j, load<u8>(qh + j) | m2);
      }
      store<u8>(ql + j, l1 | (l2 << 4));
    }
    m1 <<= 2;
    m2 <<= 2;
    ql += 32;
  }
}

/** The 2-bit codes of L packed as Q2_K and Q3_K store them: four sub-blocks of 32 per byte, at `q`. */
function packTwoBits(q: usize): void {
  for (let j: usize = 0; j < 256; j += 128) {
    for (let l: usize = 0; l < 32; l++) {
      let b = load<u8>(L + j + l) | (load<u8>(L + j + l + 32) << 2) | (load<u8>(L + j + l + 64) << 4) | (load<u8>(L + j + l + 96) << 6);
      store<u8>(q + (j >> 2) + l, b);
    }
  }
}

export function quantizeQ2_KBlock(x: usize, y: usize): void {
  for (let j: usize = 0; j < 16; j += 4) {
    transposeIn(x + (j << 6), 64, 16);
    for (let l: usize = 0; l < 16; l++) v128.store(WEIGHT_ROWS + (l << 4), f32x4.abs(row(l)));
    affineSearchX4(16, 3, -0.5, 15, true, SCALES + (j << 2), MINS + (j << 2));
    transposeCodesOut(CODE_ROWS, 16, L + (j << 4), 16);
  }
  largestScaleAndMin(16);
  let scales = y;
  if (maxScale > 0) {
    let iscale = <f32>15 / maxScale;
    for (let j: usize = 0; j < 16; j++) store<u8>(scales + j, <u8>nearestInt(iscale * load<f32>(SCALES + (j << 2))));
    store<u16>(y + 80, halfBits(maxScale / <f32>15));
  } else {
    memory.fill(scales, 0, 16);
    store<u16>(y + 80, halfBits(0));
  }
  if (maxMin > 0) {
    let iscale = <f32>15 / maxMin;
    for (let j: usize = 0; j < 16; j++) {
      store<u8>(scales + j, load<u8>(scales + j) | <u8>(nearestInt(iscale * load<f32>(MINS + (j << 2))) << 4));
    }
    store<u16>(y + 82, halfBits(maxMin / <f32>15));
  } else {
    store<u16>(y + 82, halfBits(0));
  }
  let d = halfValue(load<u16>(y + 80));
  let dmin = halfValue(load<u16>(y + 82));
  for (let j: usize = 0; j < 16; j++) {
    let sc = <u32>load<u8>(scales + j);
    let dj = d * <f32>(sc & 0xf);
    if (dj == 0) continue;
    let mj = dmin * <f32>(sc >> 4);
    requantize(x + (j << 6), 16, mj, dj, 0, 3, 0, L + (j << 4));
  }
  packTwoBits(y + 16);
}

// ---- make_q3_quants and make_qx_quants: signed codes and a scale, weighted by x² ----

// The x²-weighted sums of a trial's signed codes (signedSums): Σ x² x l and Σ x² l l.
let sumLXX4 = f32x4.splat(0);
let sumL2X4 = f32x4.splat(0);

/**
 * The codes nearest_int(iscale * x) of ROWS' first `n` vectors, clamped to [low, high], stored plus `offset` at
 * `codes`, and their sums into sumLXX4 and sumL2X4 (the part make_q3_quants and make_qx_quants share).
 */
function signedSums(n: usize, iscale: v128, low: v128, high: v128, offset: v128, codes: usize): void {
  let sumLX = f32x4.splat(0);
  let sumL2 = sumLX;
  for (let i: usize = 0; i < n; i++) {
    let v = row(i);
    let l = clampX4(nearestIntX4(f32x4.mul(iscale, v)), low, high);
    v128.store(codes + (i << 4), i32x4.add(l, offset));
    let w = f32x4.mul(v, v);
    let fl = f32x4.convert_i32x4_s(l);
    sumLX = f32x4.add(sumLX, f32x4.mul(f32x4.mul(w, v), fl));
    sumL2 = f32x4.add(sumL2, f32x4.mul(f32x4.mul(w, fl), fl));
  }
  sumLXX4 = sumLX;
  sumL2X4 = sumL2;
}

/**
 * ggml's make_q3_quants with do_rmse on four groups of `n` values at once (ROWS, one a lane): their codes in
 * [-nmax, nmax - 1], stored offset by nmax in CODE_ROWS (0 where a group is all zero), and their scales at `scales`,
 * refined by up to five rounds of coordinate descent. A lane whose round changed nothing would change nothing in
 * the next one either (its state is the same), so rounds go on while any lane changes, as ggml's loop does for each.
 */
function signedDescentX4(n: usize, nmax: i32, scales: usize): void {
  let zero = f32x4.splat(0);
  peaksOf(n);
  let allZero = f32x4.lt(amaxX4, f32x4.splat(GROUP_MAX_EPS));
  let low = i32x4.splat(-nmax);
  let high = i32x4.splat(nmax - 1);
  signedSums(n, f32x4.div(f32x4.splat(<f32>-nmax), peakX4), low, high, zero, CODE_ROWS);
  let sumLX = sumLXX4;
  let sumL2 = sumL2X4;
  for (let attempt = 0; attempt < 5; attempt++) {
    let changed = zero;
    for (let i: usize = 0; i < n; i++) {
      let v = row(i);
      let w = f32x4.mul(v, v);
      let wv = f32x4.mul(w, v);
      let li = rowAt(CODE_ROWS, i);
      let fli = f32x4.convert_i32x4_s(li);
      let slx = f32x4.sub(sumLX, f32x4.mul(wv, fli));
      let sl2 = f32x4.sub(sumL2, f32x4.mul(f32x4.mul(w, fli), fli));
      let newL = clampX4(nearestIntX4(f32x4.div(f32x4.mul(v, sl2), slx)), low, high);
      let fnew = f32x4.convert_i32x4_s(newL);
      let slxNew = f32x4.add(slx, f32x4.mul(wv, fnew));
      let sl2New = f32x4.add(sl2, f32x4.mul(f32x4.mul(w, fnew), fnew));
      let improves = f32x4.gt(f32x4.mul(f32x4.mul(slxNew, slxNew), sumL2), f32x4.mul(f32x4.mul(sumLX, sumLX), sl2New));
      let update = v128.and(v128.and(f32x4.gt(slx, zero), i32x4.ne(newL, li)), v128.and(f32x4.gt(sl2New, zero), improves));
      // A branch, not a choice: updates are rare, and the sums the next value reads then do not wait on this one.
      if (!v128.any_true(update)) continue;
      v128.store(CODE_ROWS + (i << 4), choose(update, newL, li));
      sumLX = choose(update, slxNew, sumLX);
      sumL2 = choose(update, sl2New, sumL2);
      changed = v128.or(changed, update);
    }
    if (!v128.any_true(changed)) break;
  }
  let offset = i32x4.splat(nmax);
  for (let i: usize = 0; i < n; i++) v128.store(CODE_ROWS + (i << 4), v128.andnot(i32x4.add(rowAt(CODE_ROWS, i), offset), allZero));
  let scale = choose(f32x4.gt(sumL2, zero), f32x4.div(sumLX, sumL2), zero);
  v128.store(scales, v128.andnot(scale, allZero));
}

/**
 * ggml's make_qx_quants with rmse_type 1 and no weights on four groups of `n` values at once (ROWS, one a lane):
 * their codes in [-nmax, nmax - 1], stored offset by nmax in CODE_ROWS (0 where a group is all zero), and their
 * scales at `scales`, the best of 19 trial scales.
 */
function signedSearchX4(n: usize, nmax: i32, scales: usize): void {
  let zero = f32x4.splat(0);
  peaksOf(n);
  let peak = peakX4;
  let allZero = f32x4.lt(amaxX4, f32x4.splat(GROUP_MAX_EPS));
  let low = i32x4.splat(-nmax);
  let high = i32x4.splat(nmax - 1);
  let offset = i32x4.splat(nmax);
  signedSums(n, f32x4.div(f32x4.splat(<f32>-nmax), peak), low, high, offset, CODE_ROWS);
  let scale = choose(f32x4.ne(sumL2X4, zero), f32x4.div(sumLXX4, sumL2X4), zero);
  let best = f32x4.mul(scale, sumLXX4);
  for (let step = -9; step <= 9; step++) {
    if (step == 0) continue;
    signedSums(n, f32x4.div(f32x4.splat(-(<f32>nmax + RDELTA * <f32>step)), peak), low, high, offset, TRIAL_ROWS);
    let sumLX = sumLXX4;
    let sumL2 = sumL2X4;
    let better = v128.and(f32x4.gt(sumL2, zero), f32x4.gt(f32x4.mul(sumLX, sumLX), f32x4.mul(best, sumL2)));
    if (!v128.any_true(better)) continue;
    for (let i: usize = 0; i < n; i++) v128.store(CODE_ROWS + (i << 4), choose(better, rowAt(TRIAL_ROWS, i), rowAt(CODE_ROWS, i)));
    let newScale = f32x4.div(sumLX, sumL2);
    scale = choose(better, newScale, scale);
    best = choose(better, f32x4.mul(newScale, sumLX), best);
  }
  for (let i: usize = 0; i < n; i++) v128.store(CODE_ROWS + (i << 4), v128.andnot(rowAt(CODE_ROWS, i), allZero));
  v128.store(scales, v128.andnot(scale, allZero));
}

/** Four sub-blocks of 16 at a time: `search` their scales into SCALES and their codes into L. */
@inline function searchSixteens(x: usize, search: (n: usize, nmax: i32, scales: usize) => void, nmax: i32): void {
  for (let j: usize = 0; j < 16; j += 4) {
    transposeIn(x + (j << 6), 64, 16);
    search(16, nmax, SCALES + (j << 2));
    transposeCodesOut(CODE_ROWS, 16, L + (j << 4), 16);
  }
}

/** The sixteen scales' value of largest magnitude (the first of them on a tie) into maxScale, its magnitude into maxAbsScale. */
let maxAbsScale: f32 = 0;

function signedLargestScale(): void {
  maxScale = 0;
  maxAbsScale = 0;
  for (let j: usize = 0; j < 16; j++) {
    let scale = load<f32>(SCALES + (j << 2));
    if (abs(scale) > maxAbsScale) {
      maxAbsScale = abs(scale);
      maxScale = scale;
    }
  }
}

export function quantizeQ3_KBlock(x: usize, y: usize): void {
  searchSixteens(x, signedDescentX4, 4);
  signedLargestScale();
  let scales = y + 96;
  memory.fill(scales, 0, 12);
  if (maxScale != 0) {
    let iscale = <f32>-32 / maxScale;
    for (let j: usize = 0; j < 16; j++) {
      // int8_t l = nearest_int(...): the low byte, then clamped.
      let l = max(-32, min(31, <i32><i8>nearestInt(iscale * load<f32>(SCALES + (j << 2))))) + 32;
      if (j < 8) store<u8>(scales + j, <u8>(l & 0xf));
      else store<u8>(scales + j - 8, load<u8>(scales + j - 8) | <u8>((l & 0xf) << 4));
      l >>= 4;
      store<u8>(scales + (j & 3) + 8, load<u8>(scales + (j & 3) + 8) | <u8>(l << (2 * <i32>(j >> 2))));
    }
    store<u16>(y + 108, halfBits(<f32>1 / iscale));
  } else {
    store<u16>(y + 108, halfBits(0));
  }
  let d = halfValue(load<u16>(y + 108));
  for (let j: usize = 0; j < 16; j++) {
    let sc = j < 8 ? <i32>load<u8>(scales + j) & 0xf : <i32>load<u8>(scales + j - 8) >> 4;
    sc = <i32><i8>((sc | (((<i32>load<u8>(scales + 8 + (j & 3)) >> (2 * <i32>(j >> 2))) & 3) << 4)) - 32);
    let dj = d * <f32>sc;
    if (dj == 0) continue;
    requantize(x + (j << 6), 16, 0, dj, -4, 3, 4, L + (j << 4));
  }
  let hmask = y;
  memory.fill(hmask, 0, 32);
  let m: usize = 0;
  let hm: u8 = 1;
  for (let j: usize = 0; j < 256; j++) {
    if (load<i8>(L + j) > 3) {
      store<u8>(hmask + m, load<u8>(hmask + m) | hm);
      store<i8>(L + j, load<i8>(L + j) - 4);
    }
    if (++m == 32) {
      m = 0;
      hm <<= 1;
    }
  }
  packTwoBits(y + 32);
}

export function quantizeQ6_KBlock(x: usize, y: usize): void {
  searchSixteens(x, signedSearchX4, 32);
  signedLargestScale();
  if (maxAbsScale < GROUP_MAX_EPS) {
    memory.fill(y, 0, 210);
    return;
  }
  let iscale = <f32>-128 / maxScale;
  store<u16>(y + 208, halfBits(<f32>1 / iscale));
  let scales = y + 192;
  for (let j: usize = 0; j < 16; j++) store<i8>(scales + j, <i8>min(127, nearestInt(iscale * load<f32>(SCALES + (j << 2)))));
  let d = halfValue(load<u16>(y + 208));
  for (let j: usize = 0; j < 16; j++) {
    let dj = d * <f32>load<i8>(scales + j);
    if (dj == 0) continue;
    requantize(x + (j << 6), 16, 0, dj, -32, 31, 32, L + (j << 4));
  }
  let ql = y;
  let qh = y + 128;
  for (let j: usize = 0; j < 256; j += 128) {
    for (let l: usize = 0; l < 32; l++) {
      let q1 = load<u8>(L + j + l);
      let q2 = load<u8>(L + j + l + 32);
      let q3 = load<u8>(L + j + l + 64);
      let q4 = load<u8>(L + j + l + 96);
      store<u8>(ql + l, (q1 & 0xf) | ((q3 & 0xf) << 4));
      store<u8>(ql + l + 32, (q2 & 0xf) | ((q4 & 0xf) << 4));
      store<u8>(qh + l, (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}
