// ggml's ternary types (BitNet b1.58, TriLMs), blocks of 256 values -1, 0, 1 times an F16 scale d = max|x|:
// quantize_row_tq1_0_ref and quantize_row_tq2_0_ref, which ggml_quantize_chunk runs for them with or without an
// importance matrix. Each trit is lroundf(x / d) + 1 (glibc's lroundf: half away from zero; lroundLow).

import { halfBits, lroundLow } from './ggml-quant-math';

/** max|x| over the block at `x` (ggml's MAX(amax, fabsf(v))). */
@inline function absMax(x: usize): f32 {
  let amax: f32 = 0;
  for (let j: usize = 0; j < 256; j++) {
    let a = abs(load<f32>(x + (j << 2)));
    amax = amax > a ? amax : a;
  }
  return amax;
}

@inline function trit(x: usize, j: usize, id: f32): u32 {
  return <u32>(lroundLow(load<f32>(x + (j << 2)) * id) + 1);
}

/** Five trits (the first the most significant) to the byte ggml stores: 256 * q / 243 rounded up. */
@inline function tritsByte(q: u32): u8 {
  return <u8>(((q & 0xff) * 256 + 242) / 243);
}

export function quantizeTQ1_0Block(x: usize, y: usize): void {
  let d = absMax(x);
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y + 52, halfBits(d));
  // qs[0..31]: five values 32 apart each; qs[32..47]: five values 16 apart from 160; qh[0..3]: four values 4
  // apart from 240, times 3 so that their first trit is the most significant as well.
  for (let m: usize = 0; m < 32; m++) {
    let q: u32 = 0;
    for (let n: usize = 0; n < 5; n++) q = (q * 3 + trit(x, m + n * 32, id)) & 0xff;
    store<u8>(y + m, tritsByte(q));
  }
  for (let m: usize = 0; m < 16; m++) {
    let q: u32 = 0;
    for (let n: usize = 0; n < 5; n++) q = (q * 3 + trit(x, 160 + m + n * 16, id)) & 0xff;
    store<u8>(y + 32 + m, tritsByte(q));
  }
  for (let j: usize = 0; j < 4; j++) {
    let q: u32 = 0;
    for (let m: usize = 0; m < 4; m++) q = (q * 3 + trit(x, 240 + j + m * 4, id)) & 0xff;
    store<u8>(y + 48 + j, tritsByte(q * 3));
  }
}

export function quantizeTQ2_0Block(x: usize, y: usize): void {
  let d = absMax(x);
  let id: f32 = d != 0 ? <f32>1 / d : 0;
  store<u16>(y + 64, halfBits(d));
  for (let j: usize = 0; j < 64; j += 32) {
    for (let m: usize = 0; m < 32; m++) {
      let q: u32 = 0;
      for (let n: usize = 0; n < 4; n++) q += (trit(x, j * 4 + m + n * 32, id) & 3) << (2 * <u32>n);
      store<u8>(y + j + m, <u8>q);
    }
  }
}
