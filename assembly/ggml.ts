// ggml's tensor types to F32, F16 or BF16, bit for bit as ggml's own dequantize_row_<type> gives F32 (the kernels of
// ggml-legacy.ts, ggml-kquants.ts and ggml-iquants.ts say how), F16 and BF16 being that F32 rounded once to nearest
// even by the conversion kernels' encoders (convert.ts). The plain types ggml has no dequantizer for read as ggml
// casts them: F64 and the integers rounded to the nearest F32 (ties to even), so that F16 and BF16 from them are
// two roundings, F64 -> F32 -> F16, by that definition.
//
// One export, dequantize(descriptor): the descriptor, its constants and the statuses are assembly/boundary/ggml.ts.
// The blocks and the output must not overlap. Big-endian blocks (a GGUF written for a big-endian host, where every
// multi-byte field of a block is in that host's order) are swapped to little-endian in place first, for the types
// whose big-endian layout is defined: the plain types, and the blocks whose multi-byte fields ggml reads as the F16,
// F32 or u16 they are declared as. Q5_0, Q5_1, Q3_K, IQ2_XXS, IQ3_XXS and IQ1_M are refused: ggml reads bytes of
// theirs as wider words (a u32 of four bytes, scales through u32s or u16s), which a big-endian host reads otherwise,
// and gguf-py's gguf_convert_endian refuses them too.

import {
  DEQUANT_COUNT, DEQUANT_DST, DEQUANT_ORDER, DEQUANT_SRC, DEQUANT_TO, DEQUANT_TYPE, ORDER_BIG, STATUS_NO_BIG_ENDIAN,
  STATUS_OK, STATUS_UNKNOWN_TYPE, TO_BF16, TO_F16, TO_F32, TYPE_BF16, TYPE_F16, TYPE_F32, TYPE_F64, TYPE_I16, TYPE_I32,
  TYPE_I64, TYPE_I8, TYPE_IQ1_M, TYPE_IQ1_S, TYPE_IQ2_S, TYPE_IQ2_XS, TYPE_IQ2_XXS, TYPE_IQ3_S, TYPE_IQ3_XXS,
  TYPE_IQ4_NL, TYPE_IQ4_XS, TYPE_MXFP4, TYPE_NVFP4, TYPE_Q1_0, TYPE_Q2_0, TYPE_Q2_K, TYPE_Q3_K, TYPE_Q4_0, TYPE_Q4_1,
  TYPE_Q4_K, TYPE_Q5_0, TYPE_Q5_1, TYPE_Q5_K, TYPE_Q6_K, TYPE_Q8_0, TYPE_Q8_K, TYPE_TQ1_0, TYPE_TQ2_0,
} from './boundary/ggml';
import { byteSwap16, byteSwap32, byteSwap64, byteCodesTo, ieeeTo, int16ToF32, int32ToF32, int64ToF32 } from './convert';
import { BF16, F16, F32, F64, I8 } from './boundary/dtypes';
import { iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs } from './ggml-iquants';
import { iq4_xs, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K, tq1_0, tq2_0 } from './ggml-kquants';
import { iq4_nl, mxfp4, nvfp4, q1_0, q2_0, q4_0, q4_1, q5_0, q5_1, q8_0 } from './ggml-legacy';

// What decode returns for a type it does not read.
const UNKNOWN: usize = <usize>-1;

// Dequantizes `count` values of `type` (whole blocks) at `src` to F32 at `dst`; returns the end of the blocks read.
function decode(type: u32, src: usize, dst: usize, count: usize): usize {
  switch (type) {
    case TYPE_F32: {
      memory.copy(dst, src, count << 2);
      return src + (count << 2);
    }
    case TYPE_F16: {
      ieeeTo(F16, F32, src, dst, count);
      return src + (count << 1);
    }
    case TYPE_BF16: {
      ieeeTo(BF16, F32, src, dst, count);
      return src + (count << 1);
    }
    case TYPE_F64: {
      ieeeTo(F64, F32, src, dst, count);
      return src + (count << 3);
    }
    case TYPE_I8: {
      byteCodesTo(I8, F32, src, dst, count);
      return src + count;
    }
    case TYPE_I16: {
      int16ToF32(true, src, dst, count);
      return src + (count << 1);
    }
    case TYPE_I32: {
      int32ToF32(true, src, dst, count);
      return src + (count << 2);
    }
    case TYPE_I64: {
      int64ToF32(true, src, dst, count);
      return src + (count << 3);
    }
    case TYPE_Q4_0: return q4_0(src, dst, count);
    case TYPE_Q4_1: return q4_1(src, dst, count);
    case TYPE_Q5_0: return q5_0(src, dst, count);
    case TYPE_Q5_1: return q5_1(src, dst, count);
    case TYPE_Q8_0: return q8_0(src, dst, count);
    case TYPE_Q2_K: return q2_K(src, dst, count);
    case TYPE_Q3_K: return q3_K(src, dst, count);
    case TYPE_Q4_K: return q4_K(src, dst, count);
    case TYPE_Q5_K: return q5_K(src, dst, count);
    case TYPE_Q6_K: return q6_K(src, dst, count);
    case TYPE_Q8_K: return q8_K(src, dst, count);
    case TYPE_IQ2_XXS: return iq2_xxs(src, dst, count);
    case TYPE_IQ2_XS: return iq2_xs(src, dst, count);
    case TYPE_IQ3_XXS: return iq3_xxs(src, dst, count);
    case TYPE_IQ1_S: return iq1_s(src, dst, count);
    case TYPE_IQ4_NL: return iq4_nl(src, dst, count);
    case TYPE_IQ3_S: return iq3_s(src, dst, count);
    case TYPE_IQ2_S: return iq2_s(src, dst, count);
    case TYPE_IQ4_XS: return iq4_xs(src, dst, count);
    case TYPE_IQ1_M: return iq1_m(src, dst, count);
    case TYPE_TQ1_0: return tq1_0(src, dst, count);
    case TYPE_TQ2_0: return tq2_0(src, dst, count);
    case TYPE_MXFP4: return mxfp4(src, dst, count);
    case TYPE_NVFP4: return nvfp4(src, dst, count);
    case TYPE_Q1_0: return q1_0(src, dst, count);
    case TYPE_Q2_0: return q2_0(src, dst, count);
  }
  return UNKNOWN;
}

// Swaps `fields` consecutive u16 (or u32, u64 with `width` 4, 8) at `offset` of each block of `values` values and
// `bytes` bytes, of `count` values at `src`.
function swapFields(src: usize, count: usize, values: usize, bytes: usize, offset: usize, width: usize, fields: usize): void {
  for (let at = src + offset, end = src + (count / values) * bytes; at < end; at += bytes) {
    if (width == 2) byteSwap16(at, fields);
    else if (width == 4) byteSwap32(at, fields);
    else byteSwap64(at, fields);
  }
}

// Swaps big-endian blocks of `type` to little-endian in place; false, touching nothing, where the big-endian layout
// of the type is not defined (see the top).
function swapToLittle(type: u32, src: usize, count: usize): bool {
  switch (type) {
    case TYPE_I8:
    case TYPE_MXFP4:
    case TYPE_NVFP4: break;
    case TYPE_F16:
    case TYPE_BF16:
    case TYPE_I16: byteSwap16(src, count); break;
    case TYPE_F32:
    case TYPE_I32: byteSwap32(src, count); break;
    case TYPE_F64:
    case TYPE_I64: byteSwap64(src, count); break;
    // d (F16) at 0
    case TYPE_Q4_0:
    case TYPE_IQ4_NL: swapFields(src, count, 32, 18, 0, 2, 1); break;
    case TYPE_Q8_0: swapFields(src, count, 32, 34, 0, 2, 1); break;
    case TYPE_Q1_0: swapFields(src, count, 128, 18, 0, 2, 1); break;
    case TYPE_Q2_0: swapFields(src, count, 64, 18, 0, 2, 1); break;
    case TYPE_IQ2_S: swapFields(src, count, 256, 82, 0, 2, 1); break;
    case TYPE_IQ3_S: swapFields(src, count, 256, 110, 0, 2, 1); break;
    // d and m, d and dmin, d and scales_h (u16) at 0
    case TYPE_Q4_1: swapFields(src, count, 32, 20, 0, 2, 2); break;
    case TYPE_Q4_K: swapFields(src, count, 256, 144, 0, 2, 2); break;
    case TYPE_Q5_K: swapFields(src, count, 256, 176, 0, 2, 2); break;
    case TYPE_IQ4_XS: swapFields(src, count, 256, 136, 0, 2, 2); break;
    // d at the end
    case TYPE_Q2_K: swapFields(src, count, 256, 84, 80, 2, 2); break;
    case TYPE_Q6_K: swapFields(src, count, 256, 210, 208, 2, 1); break;
    case TYPE_TQ1_0: swapFields(src, count, 256, 54, 52, 2, 1); break;
    case TYPE_TQ2_0: swapFields(src, count, 256, 66, 64, 2, 1); break;
    // d and 32 u16 codes
    case TYPE_IQ2_XS: swapFields(src, count, 256, 74, 0, 2, 33); break;
    // d, and 8 u16 at 34
    case TYPE_IQ1_S: {
      swapFields(src, count, 256, 50, 0, 2, 1);
      swapFields(src, count, 256, 50, 34, 2, 8);
      break;
    }
    // d (F32) at 0, 16 i16 sums at 260
    case TYPE_Q8_K: {
      swapFields(src, count, 256, 292, 0, 4, 1);
      swapFields(src, count, 256, 292, 260, 2, 16);
      break;
    }
    default: return false;
  }
  return true;
}

// Values dequantized a pass on the way to F16 or BF16: a multiple of every block size, and small enough (16 KiB
// of F32) that the F32 stays in cache for its rounding.
const CHUNK: usize = 4096;
const SCRATCH = memory.data(<i32>CHUNK << 2, 16);

/** Dequantizes as the descriptor at `descriptor` says (assembly/boundary/ggml.ts); returns a STATUS_. */
export function dequantize(descriptor: usize): i32 {
  let src = <usize>load<u32>(descriptor, DEQUANT_SRC);
  let dst = <usize>load<u32>(descriptor, DEQUANT_DST);
  let count = <usize>load<u32>(descriptor, DEQUANT_COUNT);
  let type = load<u32>(descriptor, DEQUANT_TYPE);
  let to = load<u32>(descriptor, DEQUANT_TO);
  if (decode(type, 0, 0, 0) == UNKNOWN) return STATUS_UNKNOWN_TYPE;
  if (load<u32>(descriptor, DEQUANT_ORDER) == ORDER_BIG && !swapToLittle(type, src, count)) return STATUS_NO_BIG_ENDIAN;
  if (to == TO_F32) {
    decode(type, src, dst, count);
  } else if ((type == TYPE_F16 && to == TO_F16) || (type == TYPE_BF16 && to == TO_BF16)) {
    memory.copy(dst, src, count << 1);
  } else {
    for (let first: usize = 0; first < count; first += CHUNK) {
      let n = min(CHUNK, count - first);
      src = decode(type, src, SCRATCH, n);
      if (to == TO_F16) ieeeTo(F32, F16, SCRATCH, dst + (first << 1), n);
      else ieeeTo(F32, BF16, SCRATCH, dst + (first << 1), n);
    }
  }
  return STATUS_OK;
}
