// ggml's K-quants, super-blocks of 256 values in sub-blocks of 16 or 32, each sub-block's scale (and minimum)
// quantized again against the super-block's F16 scale: quantize_row_<type>_ref, which ggml_quantize_chunk runs for
// Q2_K to Q6_K when there is no importance matrix (with one it runs quantize_row_<type>_impl, other searches).
// Each function quantizes the 256 finite F32 at `x` into the block at `y`, step for step as ggml does in F32:
// the same searches (make_qkx2_quants, make_q3_quants, make_qx_quants), the same order of every sum, the same
// nearest_int.

import { GROUP_MAX_EPS, halfBits, halfValue, nearestInt } from './ggml-quant-math';

// Scratch: the codes of a super-block, a search's trial codes and weights, the sub-blocks' scales and minimums.
const L = memory.data(256, 16);
const L_TRIAL = memory.data(32, 16);
const WEIGHTS = memory.data(32 << 2, 16);
const SCALES = memory.data(16 << 2, 16);
const MINS = memory.data(16 << 2, 16);
// The packed 6-bit scales of Q4_K and Q5_K, and Q3_K's, built before they are stored.
const PACKED = memory.data(16, 16);

const RDELTA: f32 = 0.1;

@inline function at(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize>i << 2));
}

// ---- make_qkx2_quants: codes 0..nmax and a scale and minimum for n weighted values ----

/** The minimum make_qkx2_quants gives with its scale (as ggml's the_min: the negated offset). */
let searchedMin: f32 = 0;

/**
 * ggml's make_qkx2_quants: the codes of the `n` values at `x` in [0, nmax] into `codes`, and the scale (returned)
 * and minimum (searchedMin) that fit them best under `weights`, trying nstep + 1 rescalings from rmin in steps of
 * RDELTA, the error summed as absolute (mad) or squared differences.
 */
function affineSearch(n: i32, nmax: i32, x: usize, weights: usize, codes: usize, rmin: f32, nstep: i32, mad: bool): f32 {
  let lowest = at(x, 0);
  let highest = lowest;
  let sumW = at(weights, 0);
  let sumX = sumW * lowest;
  for (let i = 1; i < n; i++) {
    let v = at(x, i);
    if (v < lowest) lowest = v;
    if (v > highest) highest = v;
    let w = at(weights, i);
    sumW += w;
    sumX += w * v;
  }
  if (lowest > 0) lowest = 0;
  if (highest == lowest) {
    memory.fill(codes, 0, n);
    searchedMin = -lowest;
    return 0;
  }
  let top = <f32>nmax;
  let iscale = top / (highest - lowest);
  let scale = <f32>1 / iscale;
  let bestError: f32 = 0;
  for (let i = 0; i < n; i++) {
    let v = at(x, i);
    let l = max(0, min(nmax, nearestInt(iscale * (v - lowest))));
    store<u8>(codes + i, <u8>l);
    let diff = scale * <f32>l + lowest - v;
    diff = mad ? abs(diff) : diff * diff;
    bestError += at(weights, i) * diff;
  }
  for (let step = 0; step <= nstep; step++) {
    iscale = (rmin + RDELTA * <f32>step + top) / (highest - lowest);
    let sumL: f32 = 0;
    let sumL2: f32 = 0;
    let sumXL: f32 = 0;
    for (let i = 0; i < n; i++) {
      let v = at(x, i);
      let l = max(0, min(nmax, nearestInt(iscale * (v - lowest))));
      store<u8>(L_TRIAL + i, <u8>l);
      let w = at(weights, i);
      let fl = <f32>l;
      sumL += w * fl;
      sumL2 += w * fl * fl;
      sumXL += w * fl * v;
    }
    let D = sumW * sumL2 - sumL * sumL;
    if (D > 0) {
      let thisScale = (sumW * sumXL - sumX * sumL) / D;
      let thisMin = (sumL2 * sumX - sumL * sumXL) / D;
      if (thisMin > 0) {
        thisMin = 0;
        thisScale = sumXL / sumL2;
      }
      let error: f32 = 0;
      for (let i = 0; i < n; i++) {
        let diff = thisScale * <f32>load<u8>(L_TRIAL + i) + thisMin - at(x, i);
        diff = mad ? abs(diff) : diff * diff;
        error += at(weights, i) * diff;
      }
      if (error < bestError) {
        memory.copy(codes, L_TRIAL, n);
        bestError = error;
        scale = thisScale;
        lowest = thisMin;
      }
    }
  }
  searchedMin = -lowest;
  return scale;
}

/** ggml's get_scale_min_k4: sub-block j's 6-bit scale (low 8 bits of the result) and minimum (high 8 bits). */
@inline function scaleMinK4(j: usize, q: usize): u32 {
  if (j < 4) return (<u32>load<u8>(q + j) & 63) | ((<u32>load<u8>(q + j + 4) & 63) << 8);
  let d = (<u32>load<u8>(q + j + 4) & 0xf) | ((<u32>load<u8>(q + j - 4) >> 6) << 4);
  let m = (<u32>load<u8>(q + j + 4) >> 4) | ((<u32>load<u8>(q + j) >> 6) << 4);
  return d | (m << 8);
}

/**
 * Q4_K and Q5_K: eight sub-blocks of 32, each searched with weights av_x + |x| (av_x the sub-block's RMS), their
 * scales and minimums quantized to 6 bits into PACKED against F16 super-block scales stored at y and y + 2, the
 * codes then recomputed from those into L.
 */
function affineSuperBlock(x: usize, y: usize, nmax: i32, rmin: f32, nstep: i32): void {
  let maxScale: f32 = 0;
  let maxMin: f32 = 0;
  for (let j: usize = 0; j < 8; j++) {
    let xb = x + (j << 7);
    let sumX2: f32 = 0;
    for (let l = 0; l < 32; l++) sumX2 += at(xb, l) * at(xb, l);
    let avX = sqrt<f32>(sumX2 / <f32>32);
    for (let l = 0; l < 32; l++) store<f32>(WEIGHTS + (<usize>l << 2), avX + abs(at(xb, l)));
    let scale = affineSearch(32, nmax, xb, WEIGHTS, L + (j << 5), rmin, nstep, false);
    store<f32>(SCALES + (j << 2), scale);
    store<f32>(MINS + (j << 2), searchedMin);
    if (scale > maxScale) maxScale = scale;
    if (searchedMin > maxMin) maxMin = searchedMin;
  }
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
    let xb = x + (j << 7);
    for (let i = 0; i < 32; i++) {
      store<u8>(L + (j << 5) + i, <u8>max(0, min(nmax, nearestInt((at(xb, i) + mj) / dj))));
    }
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
  let maxScale: f32 = 0;
  let maxMin: f32 = 0;
  for (let j: usize = 0; j < 16; j++) {
    let xb = x + (j << 6);
    for (let l = 0; l < 16; l++) store<f32>(WEIGHTS + (<usize>l << 2), abs(at(xb, l)));
    let scale = affineSearch(16, 3, xb, WEIGHTS, L + (j << 4), -0.5, 15, true);
    store<f32>(SCALES + (j << 2), scale);
    store<f32>(MINS + (j << 2), searchedMin);
    if (scale > maxScale) maxScale = scale;
    if (searchedMin > maxMin) maxMin = searchedMin;
  }
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
    let xb = x + (j << 6);
    for (let i = 0; i < 16; i++) store<u8>(L + (j << 4) + i, <u8>max(0, min(3, nearestInt((at(xb, i) + mj) / dj))));
  }
  packTwoBits(y + 16);
}

// ---- make_q3_quants: signed codes and a scale, refined by coordinate descent ----

/**
 * ggml's make_q3_quants with do_rmse: the codes of the `n` values at `x` in [-nmax, nmax - 1], stored offset by
 * nmax as int8 at `codes` (0 where the group is all zero), and their scale, weighted by x².
 */
function signedDescent(n: i32, nmax: i32, x: usize, codes: usize): f32 {
  let peak: f32 = 0;
  let amax: f32 = 0;
  for (let i = 0; i < n; i++) {
    let ax = abs(at(x, i));
    if (ax > amax) {
      amax = ax;
      peak = at(x, i);
    }
  }
  if (amax < GROUP_MAX_EPS) {
    memory.fill(codes, 0, n);
    return 0;
  }
  let iscale = <f32>-nmax / peak;
  let sumLX: f32 = 0;
  let sumL2: f32 = 0;
  for (let i = 0; i < n; i++) {
    let v = at(x, i);
    let l = max(-nmax, min(nmax - 1, nearestInt(iscale * v)));
    store<i8>(codes + i, <i8>l);
    let w = v * v;
    let fl = <f32>l;
    sumLX += w * v * fl;
    sumL2 += w * fl * fl;
  }
  for (let attempt = 0; attempt < 5; attempt++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      let v = at(x, i);
      let w = v * v;
      let li = <f32>load<i8>(codes + i);
      let slx = sumLX - w * v * li;
      if (slx > 0) {
        let sl2 = sumL2 - w * li * li;
        let newL = max(-nmax, min(nmax - 1, nearestInt((v * sl2) / slx)));
        if (newL != <i32>load<i8>(codes + i)) {
          let fl = <f32>newL;
          slx += w * v * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * sumL2 > sumLX * sumLX * sl2) {
            store<i8>(codes + i, <i8>newL);
            sumLX = slx;
            sumL2 = sl2;
            changed++;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (let i = 0; i < n; i++) store<i8>(codes + i, load<i8>(codes + i) + <i8>nmax);
  return sumL2 > 0 ? sumLX / sumL2 : 0;
}

export function quantizeQ3_KBlock(x: usize, y: usize): void {
  let maxScale: f32 = 0;
  let amax: f32 = 0;
  for (let j: usize = 0; j < 16; j++) {
    let scale = signedDescent(16, 4, x + (j << 6), L + (j << 4));
    store<f32>(SCALES + (j << 2), scale);
    if (abs(scale) > amax) {
      amax = abs(scale);
      maxScale = scale;
    }
  }
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
    let xb = x + (j << 6);
    for (let i = 0; i < 16; i++) store<i8>(L + (j << 4) + i, <i8>(max(-4, min(3, nearestInt(at(xb, i) / dj))) + 4));
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

// ---- make_qx_quants: signed codes and a scale, from 19 trial scales ----

/**
 * ggml's make_qx_quants with rmse_type 1 and no weights: the codes of the `n` values at `x` in [-nmax, nmax - 1],
 * stored offset by nmax at `codes`, and their scale, weighted by x², the best of 19 trial scales.
 */
function signedSearch(n: i32, nmax: i32, x: usize, codes: usize): f32 {
  let peak: f32 = 0;
  let amax: f32 = 0;
  for (let i = 0; i < n; i++) {
    let ax = abs(at(x, i));
    if (ax > amax) {
      amax = ax;
      peak = at(x, i);
    }
  }
  if (amax < GROUP_MAX_EPS) {
    memory.fill(codes, 0, n);
    return 0;
  }
  let top = <f32>nmax;
  let iscale = <f32>-nmax / peak;
  let sumLX: f32 = 0;
  let sumL2: f32 = 0;
  for (let i = 0; i < n; i++) {
    let v = at(x, i);
    let l = max(-nmax, min(nmax - 1, nearestInt(iscale * v)));
    store<u8>(codes + i, <u8>(l + nmax));
    let w = v * v;
    let fl = <f32>l;
    sumLX += w * v * fl;
    sumL2 += w * fl * fl;
  }
  let scale: f32 = sumL2 != 0 ? sumLX / sumL2 : 0;
  let best = scale * sumLX;
  for (let step = -9; step <= 9; step++) {
    if (step == 0) continue;
    iscale = -(top + RDELTA * <f32>step) / peak;
    sumLX = 0;
    sumL2 = 0;
    for (let i = 0; i < n; i++) {
      let v = at(x, i);
      let fl = <f32>max(-nmax, min(nmax - 1, nearestInt(iscale * v)));
      let w = v * v;
      sumLX += w * v * fl;
      sumL2 += w * fl * fl;
    }
    if (sumL2 > 0 && sumLX * sumLX > best * sumL2) {
      for (let i = 0; i < n; i++) store<u8>(codes + i, <u8>(nmax + max(-nmax, min(nmax - 1, nearestInt(iscale * at(x, i))))));
      scale = sumLX / sumL2;
      best = scale * sumLX;
    }
  }
  return scale;
}

export function quantizeQ6_KBlock(x: usize, y: usize): void {
  let maxScale: f32 = 0;
  let maxAbsScale: f32 = 0;
  for (let j: usize = 0; j < 16; j++) {
    let scale = signedSearch(16, 32, x + (j << 6), L + (j << 4));
    store<f32>(SCALES + (j << 2), scale);
    if (abs(scale) > maxAbsScale) {
      maxAbsScale = abs(scale);
      maxScale = scale;
    }
  }
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
    let xb = x + (j << 6);
    for (let i = 0; i < 16; i++) store<u8>(L + (j << 4) + i, <u8>(max(-32, min(31, nearestInt(at(xb, i) / dj))) + 32));
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
