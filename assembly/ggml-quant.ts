// ggml's quantization types, byte for byte what ggml_quantize_chunk writes with no importance matrix (llama.cpp's
// release that node-llama-cpp 3.21.1 ships): one export, quantizeRows, over the descriptor of
// assembly/boundary/ggml-quant.ts. Each type's block function is in the file of its family: ggml-quant-legacy.ts
// (Q4_0, Q4_1, Q5_0, Q5_1), q8_0.ts, ggml-quant-k.ts (Q2_K to Q6_K), ggml-quant-ternary.ts (TQ1_0, TQ2_0),
// ggml-quant-iq4.ts (IQ4_NL, IQ4_XS). Blocks never straddle rows (a row is whole blocks), so rows are quantized as
// one run of blocks, as ggml's reference functions do.
//
// The values of each call of a type's function (a block, or four blocks of IQ4_NL, which searches four at once) are
// copied to VALUES first, and checked there: the functions read their input more than once and write their output
// as they go, so in place (dst == src) they would read their own output. A last group of fewer blocks is padded
// with zeros and written to OUT, then copied: the lanes of a group are independent, so padding changes nothing.

import {
  TYPE_IQ4_NL, TYPE_IQ4_XS, TYPE_Q2_K, TYPE_Q3_K, TYPE_Q4_0, TYPE_Q4_1, TYPE_Q4_K, TYPE_Q5_0, TYPE_Q5_1,
  TYPE_Q5_K, TYPE_Q6_K, TYPE_Q8_0, TYPE_TQ1_0, TYPE_TQ2_0,
} from './boundary/ggml';
import {
  QUANTIZE_BAD, QUANTIZE_DST, QUANTIZE_PER_ROW, QUANTIZE_ROWS, QUANTIZE_SIZE, QUANTIZE_SRC, QUANTIZE_TYPE,
  STATUS_BAD_CALL, STATUS_NOT_FINITE, STATUS_OK, STATUS_SCALE_OVERFLOW,
} from './boundary/ggml-quant';
import { quantizeIQ4_NLBlocks, quantizeIQ4_XSBlock } from './ggml-quant-iq4';
import { quantizeQ2_KBlock, quantizeQ3_KBlock, quantizeQ4_KBlock, quantizeQ5_KBlock, quantizeQ6_KBlock } from './ggml-quant-k';
import { quantizeQ4_0Block, quantizeQ4_1Block, quantizeQ5_0Block, quantizeQ5_1Block } from './ggml-quant-legacy';
import { quantizeTQ1_0Block, quantizeTQ2_0Block } from './ggml-quant-ternary';
import { quantizeQ8_0 } from './q8_0';

const VALUES = memory.data(256 << 2, 16);
const OUT = memory.data(256, 16);
const CALL = memory.data(<i32>QUANTIZE_SIZE, 16);

/** Where a caller may put quantizeRows' descriptor: static memory of its own, below heapBase. */
export function descriptor(): usize {
  return CALL;
}
const EXPONENT = i32x4.splat(0x7f800000);

/** Copies `count` F32 (a multiple of 16) from `at` to VALUES; -1, or the index of the first NaN or infinity. */
function copyFinite(at: usize, count: usize): i32 {
  let special = i32x4.splat(0);
  for (let i: usize = 0; i < count << 2; i += 16) {
    let v = v128.load(at + i);
    v128.store(VALUES + i, v);
    special = v128.or(special, i32x4.eq(v128.and(v, EXPONENT), EXPONENT));
  }
  if (!v128.any_true(special)) return -1;
  let i = 0;
  while ((load<u32>(at + (<usize>i << 2)) & 0x7f800000) != 0x7f800000) i++;
  return i;
}

/**
 * STATUS_OK, or STATUS_SCALE_OVERFLOW with the index of the first value of the first block whose F16 scale (at
 * `scale` in the block) or minimum (at `minimum`; the scale again for types without one) is infinite or NaN.
 */
function checkScales(call: usize, dst: usize, blocks: usize, block: usize, bytes: usize, scale: usize, minimum: usize): i32 {
  for (let b: usize = 0; b < blocks; b++) {
    let at = dst + b * bytes;
    if ((load<u16>(at + scale) & 0x7c00) == 0x7c00 || (load<u16>(at + minimum) & 0x7c00) == 0x7c00) {
      store<u32>(call + QUANTIZE_BAD, <u32>(b * block));
      return STATUS_SCALE_OVERFLOW;
    }
  }
  return STATUS_OK;
}

/** Quantizes the rows the descriptor at `call` names; a status (STATUS_). */
export function quantizeRows(call: usize): i32 {
  let type = load<u32>(call + QUANTIZE_TYPE);
  let src = <usize>load<u32>(call + QUANTIZE_SRC);
  let dst = <usize>load<u32>(call + QUANTIZE_DST);
  let perRow = <usize>load<u32>(call + QUANTIZE_PER_ROW);
  let count = perRow * <usize>load<u32>(call + QUANTIZE_ROWS);
  // Q8_0 has a loop of its own, with vectors (its blocks are cheap: a loop over blocks would cost as much).
  if (type == TYPE_Q8_0) {
    if (perRow % 32 != 0) return STATUS_BAD_CALL;
    let bad = quantizeQ8_0(src, dst, count / 32);
    if (bad < 0) return checkScales(call, dst, count / 32, 32, 34, 0, 0);
    store<u32>(call + QUANTIZE_BAD, bad);
    return STATUS_NOT_FINITE;
  }
  let block: usize = 256;
  // Blocks a call of quantizeGroup takes.
  let group: usize = 1;
  let bytes: usize;
  // Where the block's F16 scale is, and its minimum for the types that have one.
  let scale: usize = 0;
  let minimum: usize = 0;
  let quantizeGroup: (x: usize, y: usize) => void;
  switch (type) {
    case TYPE_Q4_0: block = 32; bytes = 18; quantizeGroup = quantizeQ4_0Block; break;
    case TYPE_Q4_1: block = 32; bytes = 20; minimum = 2; quantizeGroup = quantizeQ4_1Block; break;
    case TYPE_Q5_0: block = 32; bytes = 22; quantizeGroup = quantizeQ5_0Block; break;
    case TYPE_Q5_1: block = 32; bytes = 24; minimum = 2; quantizeGroup = quantizeQ5_1Block; break;
    case TYPE_IQ4_NL: block = 32; group = 4; bytes = 18; quantizeGroup = quantizeIQ4_NLBlocks; break;
    case TYPE_Q2_K: bytes = 84; scale = 80; minimum = 82; quantizeGroup = quantizeQ2_KBlock; break;
    case TYPE_Q3_K: bytes = 110; scale = minimum = 108; quantizeGroup = quantizeQ3_KBlock; break;
    case TYPE_Q4_K: bytes = 144; minimum = 2; quantizeGroup = quantizeQ4_KBlock; break;
    case TYPE_Q5_K: bytes = 176; minimum = 2; quantizeGroup = quantizeQ5_KBlock; break;
    case TYPE_Q6_K: bytes = 210; scale = minimum = 208; quantizeGroup = quantizeQ6_KBlock; break;
    case TYPE_IQ4_XS: bytes = 136; quantizeGroup = quantizeIQ4_XSBlock; break;
    case TYPE_TQ1_0: bytes = 54; scale = minimum = 52; quantizeGroup = quantizeTQ1_0Block; break;
    case TYPE_TQ2_0: bytes = 66; scale = minimum = 64; quantizeGroup = quantizeTQ2_0Block; break;
    default: return STATUS_BAD_CALL;
  }
  if (perRow % block != 0) return STATUS_BAD_CALL;
  let blocks = count / block;
  for (let b: usize = 0; b < blocks; b += group) {
    let whole = min(group, blocks - b);
    let bad = copyFinite(src + b * (block << 2), whole * block);
    // The blocks before a bad value are written.
    let good = bad < 0 ? whole : <usize>bad / block;
    if (good == group) {
      quantizeGroup(VALUES, dst + b * bytes);
    } else if (good > 0) {
      memory.fill(VALUES + good * (block << 2), 0, (group - good) * (block << 2));
      quantizeGroup(VALUES, OUT);
      memory.copy(dst + b * bytes, OUT, good * bytes);
    }
    if (bad >= 0) {
      store<u32>(call + QUANTIZE_BAD, <u32>(b * block) + bad);
      return STATUS_NOT_FINITE;
    }
  }
  return checkScales(call, dst, blocks, block, bytes, scale, minimum);
}
