// ggml's first quantization types, blocks of 32 values with one F16 scale (Q4_0, Q5_0) or a scale and a minimum
// (Q4_1, Q5_1): quantize_row_<type>_ref, which ggml_quantize_chunk runs for them with no importance matrix. Each
// function quantizes the block of 32 finite F32 at `x` into the block at `y`. The codes are C's float to int
// conversions, which x86-64 makes with cvttss2si and the low byte (truncInt); they only leave the code's range
// where the scale is not finite or its inverse overflows.

import { halfBits, truncInt } from './ggml-quant-math';

const F32_MAX: f32 = 3.4028234663852886e38;

/** The value of largest magnitude, the first of them on a tie (ggml's `amax < fabsf(v)` scan). */
@inline function signedMax(x: usize): f32 {
  let amax: f32 = 0;
  let max: f32 = 0;
  for (let j: usize = 0; j < 32; j++) {
    let v = load<f32>(x + (j << 2));
    if (amax < abs(v)) {
      amax = abs(v);
      max = v;
    }
  }
  return max;
}

// The smallest and largest value of a block (Q4_1, Q5_1), set by spanOf.
let spanMin: f32 = 0;
let spanMax: f32 = 0;

@inline function spanOf(x: usize): void {
  let min = F32_MAX;
  let max = -F32_MAX;
  for (let j: usize = 0; j < 32; j++) {
    let v = load<f32>(x + (j << 2));
    if (v < min) min = v;
    if (v > max) max = v;
  }
  spanMin = min;
  spanMax = max;
}

/** C's `(int8_t)f` then `MIN(limit, ·)` stored in a uint8_t. */
@inline function clampedCode(f: f32, limit: i32): u32 {
  return <u32>min(limit, <i32><i8>truncInt(f)) & 0xff;
}

export function quantizeQ4_0Block(x: usize, y: usize): void {
  let d = signedMax(x) / <f32>-8;
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y, halfBits(d));
  for (let j: usize = 0; j < 16; j++) {
    let x0 = load<f32>(x + (j << 2)) * id;
    let x1 = load<f32>(x + ((j + 16) << 2)) * id;
    let low = clampedCode(x0 + <f32>8.5, 15);
    let high = clampedCode(x1 + <f32>8.5, 15);
    store<u8>(y + 2 + j, <u8>(low | (high << 4)));
  }
}

export function quantizeQ4_1Block(x: usize, y: usize): void {
  spanOf(x);
  let min = spanMin;
  let d = (spanMax - min) / <f32>15;
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y, halfBits(d));
  store<u16>(y + 2, halfBits(min));
  for (let j: usize = 0; j < 16; j++) {
    let x0 = (load<f32>(x + (j << 2)) - min) * id;
    let x1 = (load<f32>(x + ((j + 16) << 2)) - min) * id;
    let low = clampedCode(x0 + <f32>0.5, 15);
    let high = clampedCode(x1 + <f32>0.5, 15);
    store<u8>(y + 4 + j, <u8>(low | (high << 4)));
  }
}

export function quantizeQ5_0Block(x: usize, y: usize): void {
  let d = signedMax(x) / <f32>-16;
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y, halfBits(d));
  let qh: u32 = 0;
  for (let j: u32 = 0; j < 16; j++) {
    let x0 = load<f32>(x + (<usize>j << 2)) * id;
    let x1 = load<f32>(x + (<usize>(j + 16) << 2)) * id;
    let low = clampedCode(x0 + <f32>16.5, 31);
    let high = clampedCode(x1 + <f32>16.5, 31);
    store<u8>(y + 6 + j, <u8>((low & 0xf) | ((high & 0xf) << 4)));
    qh |= ((low & 0x10) >> 4) << j;
    qh |= ((high & 0x10) >> 4) << (j + 16);
  }
  store<u32>(y + 2, qh);
}

export function quantizeQ5_1Block(x: usize, y: usize): void {
  spanOf(x);
  let min = spanMin;
  let d = (spanMax - min) / <f32>31;
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y, halfBits(d));
  store<u16>(y + 2, halfBits(min));
  let qh: u32 = 0;
  for (let j: u32 = 0; j < 16; j++) {
    let x0 = (load<f32>(x + (<usize>j << 2)) - min) * id;
    let x1 = (load<f32>(x + (<usize>(j + 16) << 2)) - min) * id;
    // (uint8_t)f: no clamp here.
    let low = <u32>truncInt(x0 + <f32>0.5) & 0xff;
    let high = <u32>truncInt(x1 + <f32>0.5) & 0xff;
    store<u8>(y + 8 + j, <u8>((low & 0xf) | ((high & 0xf) << 4)));
    qh |= ((low & 0x10) >> 4) << j;
    qh |= ((high & 0x10) >> 4) << (j + 16);
  }
  store<u32>(y + 4, qh);
}
