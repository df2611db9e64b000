// ggml's 4-bit non-linear types: IQ4_NL (blocks of 32, an F16 scale) and IQ4_XS (super-blocks of 256: an F16 scale
// and 6-bit scales of eight sub-blocks of 32), each value the index of the nearest of 16 fixed levels
// (kvalues_iq4nl) times the scale. What ggml_quantize_chunk runs for both with no importance matrix is
// quantize_iq4_nl / quantize_iq4_xs, that is quantize_row_iq4_nl_impl with ntry = 7 and weights x² (not
// quantize_row_iq4_nl_ref, whose ntry is -1).

import { GROUP_MAX_EPS, halfBits, nearestInt } from './ggml-quant-math';

// kvalues_iq4nl.
const LEVELS = memory.data<i8>([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);
const NTRY = 7;

const CODES = memory.data(256, 16);
const WEIGHTS = memory.data(32 << 2, 16);
const SCALES = memory.data(8 << 2, 16);

@inline function level(i: i32): f32 {
  return <f32>load<i8>(LEVELS + <usize>i);
}

/** ggml's best_index_int8: the index of the level nearest `x` (the upper one on a tie), by bisection. */
@inline function nearestLevel(x: f32): i32 {
  if (x <= level(0)) return 0;
  if (x >= level(15)) return 15;
  let lo = 0;
  let hi = 15;
  while (hi - lo > 1) {
    let mid = (lo + hi) >> 1;
    if (x < level(mid)) hi = mid;
    else lo = mid;
  }
  return x - level(hi - 1) < level(hi) - x ? hi - 1 : hi;
}

@inline function at(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize>i << 2));
}

/**
 * The scale of the 32 values at `x` (0 when they are all below GROUP_MAX_EPS, leaving `codes` as they were),
 * the best of 15 trial scales weighted by x², with its codes at `codes`.
 */
function subBlockScale(x: usize, codes: usize): f32 {
  let amax: f32 = 0;
  let max: f32 = 0;
  for (let j = 0; j < 32; j++) {
    let v = at(x, j);
    store<f32>(WEIGHTS + (<usize>j << 2), v * v);
    if (abs(v) > amax) {
      amax = abs(v);
      max = v;
    }
  }
  if (amax < GROUP_MAX_EPS) return 0;
  let d = -max / level(0);
  let id = <f32>1 / d;
  let sumQX: f32 = 0;
  let sumQ2: f32 = 0;
  for (let j = 0; j < 32; j++) {
    let v = at(x, j);
    let l = nearestLevel(id * v);
    store<u8>(codes + <usize>j, <u8>l);
    let q = level(l);
    let w = at(WEIGHTS, j);
    sumQX += w * q * v;
    sumQ2 += w * q * q;
  }
  d = sumQ2 > 0 ? sumQX / sumQ2 : 0;
  let best = d * sumQX;
  for (let attempt = -NTRY; attempt <= NTRY; attempt++) {
    id = <f32>(attempt + <i32>load<i8>(LEVELS)) / max;
    sumQX = 0;
    sumQ2 = 0;
    for (let j = 0; j < 32; j++) {
      let v = at(x, j);
      let q = level(nearestLevel(id * v));
      let w = at(WEIGHTS, j);
      sumQX += w * q * v;
      sumQ2 += w * q * q;
    }
    if (sumQ2 > 0 && sumQX * sumQX > best * sumQ2) {
      d = sumQX / sumQ2;
      best = d * sumQX;
    }
  }
  return d;
}

/** Codes 0..15 of 32 values, two to a byte: value j in the low nibble of byte j, value 16 + j in its high one. */
@inline function packNibbles(codes: usize, q: usize): void {
  for (let j: usize = 0; j < 16; j++) store<u8>(q + j, load<u8>(codes + j) | (load<u8>(codes + 16 + j) << 4));
}

export function quantizeIQ4_NLBlock(x: usize, y: usize): void {
  let scale = subBlockScale(x, CODES);
  store<u16>(y, halfBits(scale));
  let id: f32 = scale != 0 ? <f32>1 / scale : 0;
  for (let j = 0; j < 32; j++) store<u8>(CODES + <usize>j, <u8>nearestLevel(id * at(x, j)));
  packNibbles(CODES, y + 2);
}

export function quantizeIQ4_XSBlock(x: usize, y: usize): void {
  let maxScale: f32 = 0;
  let amaxScale: f32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    let scale = subBlockScale(x + (ib << 7), CODES + (ib << 5));
    store<f32>(SCALES + (ib << 2), scale);
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
    let l = max(-32, min(31, nearestInt(id * load<f32>(SCALES + (ib << 2)))));
    let dl = d * <f32>l;
    let idl: f32 = dl != 0 ? <f32>1 / dl : 0;
    let xb = x + (ib << 7);
    for (let j = 0; j < 32; j++) store<u8>(CODES + (ib << 5) + <usize>j, <u8>nearestLevel(idl * at(xb, j)));
    l += 32;
    let scalesLow = y + 4 + (ib >> 1);
    if ((ib & 1) == 0) store<u8>(scalesLow, <u8>(l & 0xf));
    else store<u8>(scalesLow, load<u8>(scalesLow) | <u8>((l & 0xf) << 4));
    scalesHigh |= <u32>(l >> 4) << (2 * <u32>ib);
  }
  store<u16>(y + 2, <u16>scalesHigh);
  for (let i: usize = 0; i < 8; i++) packNibbles(CODES + (i << 5), y + 8 + (i << 4));
}
