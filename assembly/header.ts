// Strict one-pass validators for the SafeTensors JSON header and a sharded model's index.
//
// JS copies the N header bytes to `input` and calls scanHeader. The scanner checks UTF-8, JSON and the
// schema while appending fixed-size entries to a log that grows behind the input, then dedupes every key
// with a hash table, sorts tensors by (begin, end) and runs the per-tensor checks. The log is the table JS
// reads; its layout, the result table's and the status and reason codes are in assembly/boundary/header.ts.
// scanIndex does the same for model.safetensors.index.json, whose weight_map (91,280 entries in the
// largest models) costs JSON.parse several times more: it logs one entry per tensor name and dedupes.
// Nothing here allocates through the AssemblyScript runtime: memory above the input belongs to this call.

import { matchDtype, dtypeBits } from './dtypes';
import {
  DIMS_COUNT, DIMS_VALUES, ENTRY_KEY_END, ENTRY_KEY_START, ENTRY_OBJECT, ENTRY_TAG, ESCAPED, KEY_SIZE, RESULT_A,
  RESULT_AT, RESULT_B, RESULT_C, RESULT_METADATA_END, RESULT_METADATA_END16, RESULT_METADATA_START, RESULT_METADATA_START16,
  RESULT_ORDER, RESULT_REASON, RESULT_SIZE, RESULT_STATUS, RESULT_TENSOR, RESULT_TENSOR_COUNT, TENSOR_BEGIN, TENSOR_DIMS,
  TENSOR_DTYPE, TENSOR_END, TENSOR_KEY16_END, TENSOR_KEY16_START, TENSOR_SIZE,
  STATUS_OK as OK, STATUS_INVALID_HEADER as INVALID_HEADER, STATUS_INVALID_HEADER_DESERIALIZATION as INVALID_HEADER_DESERIALIZATION,
  STATUS_INVALID_OFFSET as INVALID_OFFSET, STATUS_VALIDATION_OVERFLOW as VALIDATION_OVERFLOW, STATUS_MISALIGNED_SLICE as MISALIGNED_SLICE,
  STATUS_TENSOR_INVALID_INFO as TENSOR_INVALID_INFO, STATUS_METADATA_INCOMPLETE_BUFFER as METADATA_INCOMPLETE_BUFFER,
  STATUS_OUT_OF_MEMORY as OUT_OF_MEMORY,
  R_BAD_ESCAPE, R_BAD_VALUE, R_BIT_COUNT, R_CONTROL_CHAR, R_DTYPE_NOT_STRING, R_DUPLICATE_KEY, R_EXPECTED_COLON,
  R_EXPECTED_COMMA_OR_BRACE, R_EXPECTED_COMMA_OR_BRACKET, R_EXPECTED_KEY, R_EXPECTED_OBJECT, R_EXPECTED_UINT, R_INT_TOO_LARGE,
  R_INVALID_UTF8, R_LONE_SURROGATE, R_METADATA_NOT_OBJECT, R_METADATA_VALUE_NOT_STRING, R_MISSING_FIELD, R_NOT_PLAIN_INT,
  R_NOT_SAFE_INTEGER, R_OFFSETS_NOT_ARRAY, R_OFFSETS_NOT_TWO, R_SHAPE_NOT_ARRAY, R_SHAPE_PRODUCT, R_TENSOR_NOT_OBJECT,
  R_NUMBER_OUT_OF_RANGE, R_TOO_DEEP, R_TRAILING, R_UNKNOWN_DTYPE,
  R_INDEX_METADATA_NOT_OBJECT, R_INDEX_NOT_OBJECT, R_SHARD_NOT_STRING, R_WEIGHT_MAP_MISSING, R_WEIGHT_MAP_NOT_OBJECT,
  RESULT_WEIGHTS, WEIGHT_KEY16_END, WEIGHT_KEY16_START, WEIGHT_NEW_SHARD, WEIGHT_SHARD16_END, WEIGHT_SHARD16_START, WEIGHT_SIZE,
} from './boundary/header';

const RESULT = memory.data(RESULT_SIZE, 8);

// Log entry tags. A tensor entry is followed later in the log by its dims entry.
const TAG_TENSOR: u32 = 1;
const TAG_KEY: u32 = 2;
const TAG_DIMS: u32 = 3;
const TAG_WEIGHT: u32 = 4;

const TOP_OBJECT: u32 = 1;
const MAX_DEPTH: i32 = 64;
const SENTINEL: usize = 64;
const SAFE_MAX: u64 = 9007199254740991;
const I32_MAX: i64 = 2147483647;

// Field bits of a tensor object.
const F_DTYPE: u32 = 1;
const F_SHAPE: u32 = 2;
const F_OFFSETS: u32 = 4;

const STACK = memory.data(MAX_DEPTH * 4, 4);
const LIT_DTYPE = memory.data<u8>([0x64, 0x74, 0x79, 0x70, 0x65]);
const LIT_SHAPE = memory.data<u8>([0x73, 0x68, 0x61, 0x70, 0x65]);
const LIT_OFFSETS = memory.data<u8>([0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73]);
const LIT_METADATA = memory.data<u8>([0x5f, 0x5f, 0x6d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x5f]);
const LIT_WEIGHT_MAP = memory.data<u8>([0x77, 0x65, 0x69, 0x67, 0x68, 0x74, 0x5f, 0x6d, 0x61, 0x70]);
const LIT_INDEX_METADATA = LIT_METADATA + 2; // "metadata", inside "__metadata__"

let base: usize = 0; // first header byte
let n: u32 = 0; // header length
let pos: u32 = 0; // current byte offset into the header
let delta: u32 = 0; // bytes minus UTF-16 code units before pos: lets JS slice its decoded string
let top: usize = 0; // end of the log
let limit: usize = 0; // end of linear memory
let status: i32 = OK;
let reason: i32 = 0;
let errPos: u32 = 0;
let objects: u32 = TOP_OBJECT;
let tensorCount: u32 = 0;
let keyCount: u32 = 0;
// The last string scanned.
let strStart: u32 = 0;
let strEnd: u32 = 0;
let strEscaped: bool = false;

export function resultPtr(): usize {
  return RESULT;
}

@inline function byte(p: u32): u32 {
  return load<u8>(base + p);
}

function fail(code: i32, why: i32, at: u32): bool {
  status = code;
  reason = why;
  errPos = at;
  return false;
}

@inline function syntax(why: i32): bool {
  return fail(INVALID_HEADER_DESERIALIZATION, why, pos);
}

// Makes [top, top + size) addressable.
function reserve(size: usize): bool {
  let end = top + size;
  if (end <= limit) return true;
  let have = <usize>memory.size() << 16;
  let want = max(end, have + (have >> 1));
  if (memory.grow(<i32>((want - have + 0xffff) >> 16)) < 0 && memory.grow(<i32>((end - have + 0xffff) >> 16)) < 0) {
    return fail(OUT_OF_MEMORY, 0, <u32>size);
  }
  limit = <usize>memory.size() << 16;
  return true;
}

// JSON's whitespace (space, tab, LF, CR) is all at or below 0x20: the test inlined at each of the many
// places that skip it keeps the usual case (none) free of a call, and the loop is in one function.
@inline function skipWs(): void {
  if (byte(pos) <= 0x20) skipWhitespace();
}

function skipWhitespace(): void {
  let c = byte(pos);
  while (c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09) c = byte(++pos);
}

// Length of the strict UTF-8 sequence at p (no overlongs, surrogates or code points past U+10FFFF), or 0.
function utf8Length(p: usize): u32 {
  let c = <u32>load<u8>(p);
  if (c < 0xc2) return 0;
  let c1 = <u32>load<u8>(p, 1);
  if ((c1 & 0xc0) != 0x80) return 0;
  if (c < 0xe0) return 2;
  let c2 = <u32>load<u8>(p, 2);
  if ((c2 & 0xc0) != 0x80) return 0;
  if (c < 0xf0) {
    if (c == 0xe0 && c1 < 0xa0) return 0;
    if (c == 0xed && c1 >= 0xa0) return 0;
    return 3;
  }
  let c3 = <u32>load<u8>(p, 3);
  if ((c3 & 0xc0) != 0x80 || c > 0xf4) return 0;
  if (c == 0xf0 && c1 < 0x90) return 0;
  if (c == 0xf4 && c1 >= 0x90) return 0;
  return 4;
}

// Offset of the first byte of [from, n) that is not valid UTF-8, or -1.
function firstInvalidUtf8(from: u32): i32 {
  let p = from;
  while (p < n) {
    if (byte(p) < 0x80) {
      p++;
      continue;
    }
    let len = utf8Length(base + p);
    if (len == 0 || p + len > n) return <i32>p;
    p += len;
  }
  return -1;
}

@inline function hexDigit(c: u32): i32 {
  if (c - 0x30 < 10) return <i32>(c - 0x30);
  let l = c | 0x20;
  if (l - 0x61 < 6) return <i32>(l - 0x61 + 10);
  return -1;
}

// The code unit of the \uXXXX escape whose 'u' is at p, or -1.
function hex4(p: u32): i32 {
  let a = hexDigit(byte(p + 1)), b = hexDigit(byte(p + 2)), c = hexDigit(byte(p + 3)), d = hexDigit(byte(p + 4));
  if ((a | b | c | d) < 0) return -1;
  return (a << 12) | (b << 8) | (c << 4) | d;
}

// Scans the string whose opening quote is at pos; leaves pos after the closing quote.
function scanString(): bool {
  let p = pos + 1;
  strStart = p;
  strEscaped = false;
  while (true) {
    // Skip 16 plain bytes at a time; lt_s catches both control characters and bytes >= 0x80.
    while (true) {
      let v = v128.load(base + p);
      let special = v128.or(
        v128.or(i8x16.eq(v, i8x16.splat(0x22)), i8x16.eq(v, i8x16.splat(0x5c))),
        i8x16.lt_s(v, i8x16.splat(0x20)),
      );
      let bits = i8x16.bitmask(special);
      if (bits != 0) {
        p += ctz(bits);
        break;
      }
      p += 16;
    }
    let c = byte(p);
    if (c == 0x22) break;
    if (c == 0x5c) {
      strEscaped = true;
      let e = byte(p + 1);
      if (e == 0x75) {
        let unit = hex4(p + 1);
        if (unit < 0) return fail(INVALID_HEADER_DESERIALIZATION, R_BAD_ESCAPE, p);
        if (unit >= 0xdc00 && unit <= 0xdfff) return fail(INVALID_HEADER_DESERIALIZATION, R_LONE_SURROGATE, p);
        if (unit >= 0xd800 && unit <= 0xdbff) {
          let low = byte(p + 6) == 0x5c && byte(p + 7) == 0x75 ? hex4(p + 7) : -1;
          if (low < 0xdc00 || low > 0xdfff) return fail(INVALID_HEADER_DESERIALIZATION, R_LONE_SURROGATE, p);
          p += 6;
        }
        p += 6;
      } else if (e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
        p += 2;
      } else {
        return fail(INVALID_HEADER_DESERIALIZATION, R_BAD_ESCAPE, p);
      }
    } else if (c < 0x20) {
      return fail(INVALID_HEADER_DESERIALIZATION, R_CONTROL_CHAR, p);
    } else if (c >= 0x80) {
      let len = utf8Length(base + p);
      if (len == 0 || p + len > n) return fail(INVALID_HEADER, R_INVALID_UTF8, p);
      delta += len == 4 ? 2 : len - 1;
      p += len;
    } else {
      p++;
    }
  }
  strEnd = p;
  pos = p + 1;
  return true;
}

// Decodes the escaped JSON string [start, end) to UTF-8 at dst; returns the byte length.
function decodeString(start: u32, end: u32, dst: usize): u32 {
  let p = start, out = dst;
  while (p < end) {
    let c = byte(p);
    if (c != 0x5c) {
      store<u8>(out++, <u8>c);
      p++;
      continue;
    }
    let e = byte(p + 1);
    if (e != 0x75) {
      let v: u32 = e;
      if (e == 0x62) v = 0x08;
      else if (e == 0x66) v = 0x0c;
      else if (e == 0x6e) v = 0x0a;
      else if (e == 0x72) v = 0x0d;
      else if (e == 0x74) v = 0x09;
      store<u8>(out++, <u8>v);
      p += 2;
      continue;
    }
    let cp = <u32>hex4(p + 1);
    p += 6;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      cp = 0x10000 + ((cp - 0xd800) << 10) + (<u32>hex4(p + 1) - 0xdc00);
      p += 6;
    }
    if (cp < 0x80) {
      store<u8>(out++, <u8>cp);
    } else if (cp < 0x800) {
      store<u8>(out++, <u8>(0xc0 | (cp >> 6)));
      store<u8>(out++, <u8>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      store<u8>(out++, <u8>(0xe0 | (cp >> 12)));
      store<u8>(out++, <u8>(0x80 | ((cp >> 6) & 0x3f)));
      store<u8>(out++, <u8>(0x80 | (cp & 0x3f)));
    } else {
      store<u8>(out++, <u8>(0xf0 | (cp >> 18)));
      store<u8>(out++, <u8>(0x80 | ((cp >> 12) & 0x3f)));
      store<u8>(out++, <u8>(0x80 | ((cp >> 6) & 0x3f)));
      store<u8>(out++, <u8>(0x80 | (cp & 0x3f)));
    }
  }
  return <u32>(out - dst);
}

// Where the decoded text of the last string lives: in place when it has no escapes, else in scratch
// space past the end of the log (decoding never lengthens a string).
let textPtr: usize = 0;
let textLen: u32 = 0;
function decodedText(start: u32, end: u32, escaped: bool, scratch: usize): bool {
  if (!escaped) {
    textPtr = base + start;
    textLen = end - start;
    return true;
  }
  let saved = top;
  top = scratch;
  let ok = reserve(end - start + 8);
  top = saved;
  if (!ok) return false;
  textPtr = scratch;
  textLen = decodeString(start, end, scratch);
  return true;
}

@inline function lastStringIs(lit: usize, len: u32): bool {
  if (!strEscaped) return strEnd - strStart == len && memory.compare(base + strStart, lit, len) == 0;
  return decodedText(strStart, strEnd, true, top) && textLen == len && memory.compare(textPtr, lit, len) == 0;
}

function addKey(object: u32, start: u32, end: u32, escaped: bool): bool {
  if (!reserve(KEY_SIZE)) return false;
  store<u32>(top, TAG_KEY, ENTRY_TAG);
  store<u32>(top, object, ENTRY_OBJECT);
  store<u32>(top, start, ENTRY_KEY_START);
  store<u32>(top, end | (escaped ? ESCAPED : 0), ENTRY_KEY_END);
  top += KEY_SIZE;
  keyCount++;
  return true;
}

// A plain non-negative integer that fits in u64: no sign, fraction, exponent or leading zero.
let number: u64 = 0;
function parseUint(): bool {
  let c = byte(pos);
  let d = c - 0x30;
  if (d >= 10) return syntax(R_EXPECTED_UINT);
  let start = pos;
  let v: u64 = 0;
  while (d < 10) {
    if (v > 1844674407370955161 || (v == 1844674407370955161 && d > 5)) return fail(INVALID_HEADER_DESERIALIZATION, R_INT_TOO_LARGE, start);
    v = v * 10 + d;
    d = byte(++pos) - 0x30;
  }
  c = byte(pos);
  if ((byte(start) == 0x30 && pos - start > 1) || c == 0x2e || c == 0x65 || c == 0x45) {
    return fail(INVALID_HEADER_DESERIALIZATION, R_NOT_PLAIN_INT, start);
  }
  number = v;
  return true;
}

// The doubles nearest 10^289 .. 10^308: below 10^289 no u64 times the power overflows a double.
const POW10_FROM: i32 = 289;
const POW10 = memory.data<f64>([
  1e289, 1e290, 1e291, 1e292, 1e293, 1e294, 1e295, 1e296, 1e297, 1e298,
  1e299, 1e300, 1e301, 1e302, 1e303, 1e304, 1e305, 1e306, 1e307, 1e308,
]);

// Whether v * 10 + d fits in a u64.
@inline function fitsTimesTen(v: u64, d: u64): bool {
  return v < 1844674407370955161 || (v == 1844674407370955161 && d <= 5);
}

// Any JSON number, for values the schema ignores: checked as the reference's parser (serde_json, built
// without float_roundtrip) reads it, which refuses a number that overflows a double. It keeps the
// leading digits that fit in a u64 (later integer digits add one to the exponent each, later fraction
// digits are dropped), and multiplies them, as a double, by its table's double nearest 10^exponent: an
// infinite product is out of range. Not correct rounding: 1.797693134862315708e308, below the largest
// double, is out of range there, so here too.
function skipNumber(): bool {
  let start = pos;
  if (byte(pos) == 0x2d) pos++;
  let digits: u64 = 0;
  let exponent: i64 = 0;
  let d = <u64>(byte(pos) - 0x30);
  if (d == 0) pos++;
  else if (d < 10) {
    let full = false;
    for (; d < 10; d = <u64>(byte(++pos) - 0x30)) {
      if (!full && fitsTimesTen(digits, d)) digits = digits * 10 + d;
      else {
        full = true;
        exponent++;
      }
    }
  } else return syntax(R_BAD_VALUE);
  if (byte(pos) == 0x2e) {
    pos++;
    d = <u64>(byte(pos) - 0x30);
    if (d >= 10) return syntax(R_BAD_VALUE);
    let dropping = false;
    for (; d < 10; d = <u64>(byte(++pos) - 0x30)) {
      if (dropping || !fitsTimesTen(digits, d)) dropping = true;
      else {
        digits = digits * 10 + d;
        exponent--;
      }
    }
  }
  let c = byte(pos);
  if (c == 0x65 || c == 0x45) {
    c = byte(++pos);
    let negative = c == 0x2d;
    if (c == 0x2b || c == 0x2d) pos++;
    d = <u64>(byte(pos) - 0x30);
    if (d >= 10) return syntax(R_BAD_VALUE);
    let value: i64 = 0;
    for (; d < 10; d = <u64>(byte(++pos) - 0x30)) if (value <= I32_MAX) value = value * 10 + <i64>d;
    // An exponent past i32 is out of range at once, or zero (the reference's own shortcut).
    if (value > I32_MAX) return negative || digits == 0 ? true : fail(INVALID_HEADER_DESERIALIZATION, R_NUMBER_OUT_OF_RANGE, start);
    exponent += negative ? -value : value;
  }
  if (digits == 0 || exponent < POW10_FROM) return true;
  let overflows = exponent > 308 || !isFinite(<f64>digits * load<f64>(POW10 + (<usize>(exponent - POW10_FROM) << 3)));
  return !overflows || fail(INVALID_HEADER_DESERIALIZATION, R_NUMBER_OUT_OF_RANGE, start);
}

function skipLiteral(): bool {
  let c = byte(pos);
  let p = base + pos;
  // "true", "null" and "fals" + "e" compared as little-endian words.
  if ((c == 0x74 && load<u32>(p) == 0x65757274) || (c == 0x6e && load<u32>(p) == 0x6c6c756e)) {
    pos += 4;
    return true;
  }
  if (c == 0x66 && load<u32>(p) == 0x736c6166 && load<u8>(p, 4) == 0x65) {
    pos += 5;
    return true;
  }
  return syntax(R_BAD_VALUE);
}

// Starts an object member: expects a key, records it under `object`, and consumes the colon.
function objectKey(object: u32): bool {
  if (byte(pos) != 0x22) return syntax(R_EXPECTED_KEY);
  if (!scanString() || !addKey(object, strStart, strEnd, strEscaped)) return false;
  skipWs();
  if (byte(pos) != 0x3a) return syntax(R_EXPECTED_COLON);
  pos++;
  return true;
}

// Skips any JSON value (for fields the schema ignores), still checking it fully, keys included. `open`
// levels enclose it: the top object and, in a header, a tensor object.
function skipValue(open: i32): bool {
  let depth: i32 = 0;
  while (true) {
    // A value starts here.
    skipWs();
    let c = byte(pos);
    if (c == 0x7b || c == 0x5b) {
      if (depth + open == MAX_DEPTH) return syntax(R_TOO_DEEP);
      pos++;
      skipWs();
      if (byte(pos) != (c == 0x7b ? 0x7d : 0x5d)) {
        let object: u32 = c == 0x7b ? ++objects : 0;
        store<u32>(STACK + (<usize>depth << 2), object);
        depth++;
        if (object != 0 && !objectKey(object)) return false;
        continue;
      }
      pos++;
    } else if (c == 0x22) {
      if (!scanString()) return false;
    } else if (c == 0x2d || c - 0x30 < 10) {
      if (!skipNumber()) return false;
    } else if (!skipLiteral()) {
      return false;
    }
    // A value ended: close containers until one expects another value.
    while (true) {
      if (depth == 0) return true;
      let object = load<u32>(STACK + (<usize>(depth - 1) << 2));
      skipWs();
      let c = byte(pos);
      if (c == 0x2c) {
        pos++;
        if (object != 0) {
          skipWs();
          if (!objectKey(object)) return false;
        }
        break;
      }
      if (c != (object != 0 ? 0x7d : 0x5d)) return syntax(object != 0 ? R_EXPECTED_COMMA_OR_BRACE : R_EXPECTED_COMMA_OR_BRACKET);
      pos++;
      depth--;
    }
  }
}

// Starts an array whose elements the caller reads; leaves pos at the first element or after ']'.
// Returns true when the array is empty.
@inline function openArray(): bool {
  pos++;
  skipWs();
  if (byte(pos) != 0x5d) return false;
  pos++;
  return true;
}

// After an array element (close = ']') or object member (close = '}'): true to read another, false at
// the close (or on error, with status set).
function nextItem(close: u32): bool {
  skipWs();
  let c = byte(pos);
  if (c == 0x2c) {
    pos++;
    skipWs();
    return true;
  }
  if (c != close) syntax(close == 0x5d ? R_EXPECTED_COMMA_OR_BRACKET : R_EXPECTED_COMMA_OR_BRACE);
  else pos++;
  return false;
}

// Where the key of the member being read began: its opening quote, and its first UTF-16 code unit.
let keyAt: u32 = 0;
let key16At: u32 = 0;

// The objects parseMembers reads, each with its member function.
const MEMBERS_HEADER = 0;
const MEMBERS_TENSOR = 1;
const MEMBERS_METADATA = 2;
const MEMBERS_INDEX = 3;
const MEMBERS_WEIGHTS = 4;

// Reads the object whose '{' is at pos, one member at a time: scans its key (left in strStart, strEnd,
// strEscaped, with keyAt and key16At), consumes the colon, and calls the member function of `kind` with pos at the value,
// which it reads. Leaves pos after the '}'. Every object of a header or an index is read through here,
// but for the values the schema ignores (skipValue).
function parseMembers(kind: i32, object: u32): bool {
  pos++;
  skipWs();
  if (byte(pos) == 0x7d) {
    pos++;
    return true;
  }
  do {
    if (byte(pos) != 0x22) return syntax(R_EXPECTED_KEY);
    keyAt = pos;
    key16At = pos + 1 - delta;
    if (!scanString()) return false;
    skipWs();
    if (byte(pos) != 0x3a) return syntax(R_EXPECTED_COLON);
    pos++;
    skipWs();
    let ok = kind == MEMBERS_TENSOR ? tensorMember(object)
      : kind == MEMBERS_METADATA ? metadataMember(object)
      : kind == MEMBERS_HEADER ? headerMember(object)
      : kind == MEMBERS_WEIGHTS ? weightMember(object)
      : indexMember(object);
    if (!ok) return false;
  } while (nextItem(0x7d));
  return status == OK;
}

function parseShape(record: usize): bool {
  if (byte(pos) != 0x5b) return syntax(R_SHAPE_NOT_ARRAY);
  if (!reserve(8)) return false;
  let dims = top;
  top += 8;
  let ndim: u32 = 0;
  if (!openArray()) {
    do {
      if (!parseUint() || !reserve(8)) return false;
      store<u64>(top, number);
      top += 8;
      ndim++;
    } while (nextItem(0x5d));
    if (status != OK) return false;
  }
  store<u32>(dims, TAG_DIMS, ENTRY_TAG);
  store<u32>(dims, ndim, DIMS_COUNT);
  store<u32>(record, <u32>dims, TENSOR_DIMS);
  return true;
}

function parseOffsets(record: usize): bool {
  if (byte(pos) != 0x5b) return syntax(R_OFFSETS_NOT_ARRAY);
  let at = pos;
  if (openArray()) return fail(INVALID_HEADER_DESERIALIZATION, R_OFFSETS_NOT_TWO, at);
  if (!parseUint()) return false;
  store<u64>(record, number, TENSOR_BEGIN);
  if (!nextItem(0x5d)) return status == OK ? fail(INVALID_HEADER_DESERIALIZATION, R_OFFSETS_NOT_TWO, at) : false;
  if (!parseUint()) return false;
  store<u64>(record, number, TENSOR_END);
  if (nextItem(0x5d)) return fail(INVALID_HEADER_DESERIALIZATION, R_OFFSETS_NOT_TWO, at);
  return status == OK;
}

function parseDtype(record: usize): bool {
  if (byte(pos) != 0x22) return syntax(R_DTYPE_NOT_STRING);
  let at = pos;
  if (!scanString() || !decodedText(strStart, strEnd, strEscaped, top)) return false;
  let dtype = matchDtype(textPtr, textLen);
  if (dtype < 0) return fail(INVALID_HEADER_DESERIALIZATION, R_UNKNOWN_DTYPE, at);
  store<u32>(record, <u32>dtype, TENSOR_DTYPE);
  return true;
}

// The tensor whose object is being read, and the fields it has had so far.
let tensorRecord: usize = 0;
let tensorFields: u32 = 0;

// A member of a tensor object: "dtype", "shape", "data_offsets", or a field the schema ignores.
function tensorMember(object: u32): bool {
  let field: u32 = 0;
  if (lastStringIs(LIT_DTYPE, 5)) field = F_DTYPE;
  else if (lastStringIs(LIT_SHAPE, 5)) field = F_SHAPE;
  else if (lastStringIs(LIT_OFFSETS, 12)) field = F_OFFSETS;
  else if (status != OK || !addKey(object, strStart, strEnd, strEscaped)) return false;
  if (tensorFields & field) return fail(INVALID_HEADER_DESERIALIZATION, R_DUPLICATE_KEY, keyAt);
  tensorFields |= field;
  return field == F_DTYPE ? parseDtype(tensorRecord)
    : field == F_SHAPE ? parseShape(tensorRecord)
    : field == F_OFFSETS ? parseOffsets(tensorRecord)
    : skipValue(2);
}

// The value of a tensor key: {"dtype", "shape", "data_offsets", and fields ignored}.
function parseTensor(keyStart: u32, keyEnd: u32, keyEscaped: bool, key16Start: u32): bool {
  if (byte(pos) != 0x7b) return syntax(R_TENSOR_NOT_OBJECT);
  let objectAt = pos;
  if (!reserve(TENSOR_SIZE)) return false;
  let record = top;
  top += TENSOR_SIZE;
  store<u32>(record, TAG_TENSOR, ENTRY_TAG);
  store<u32>(record, TOP_OBJECT, ENTRY_OBJECT);
  store<u32>(record, keyStart, ENTRY_KEY_START);
  store<u32>(record, keyEnd | (keyEscaped ? ESCAPED : 0), ENTRY_KEY_END);
  store<u32>(record, key16Start, TENSOR_KEY16_START);
  store<u32>(record, keyEnd - delta, TENSOR_KEY16_END);
  tensorCount++;
  tensorRecord = record;
  tensorFields = 0;
  if (!parseMembers(MEMBERS_TENSOR, ++objects)) return false;
  if (tensorFields != (F_DTYPE | F_SHAPE | F_OFFSETS)) {
    store<u64>(RESULT, <u64>tensorFields, RESULT_A);
    return fail(INVALID_HEADER_DESERIALIZATION, R_MISSING_FIELD, objectAt);
  }
  return true;
}

// A member of __metadata__: a string value.
function metadataMember(object: u32): bool {
  if (!addKey(object, strStart, strEnd, strEscaped)) return false;
  if (byte(pos) != 0x22) return syntax(R_METADATA_VALUE_NOT_STRING);
  return scanString();
}

// `null` or an object of string values; JS parses the span itself once it is known to be valid.
function parseMetadata(): bool {
  let c = byte(pos);
  if (c == 0x6e && load<u32>(base + pos) == 0x6c6c756e) {
    pos += 4;
    return true;
  }
  if (c != 0x7b) return syntax(R_METADATA_NOT_OBJECT);
  store<u32>(RESULT, pos, RESULT_METADATA_START);
  store<u32>(RESULT, pos - delta, RESULT_METADATA_START16);
  if (!parseMembers(MEMBERS_METADATA, ++objects)) return false;
  store<u32>(RESULT, pos, RESULT_METADATA_END);
  store<u32>(RESULT, pos - delta, RESULT_METADATA_END16);
  return true;
}

// A member of the header: __metadata__, or a tensor.
function headerMember(object: u32): bool {
  let keyStart = strStart, keyEnd = strEnd, keyEscaped = strEscaped;
  let isMetadata = lastStringIs(LIT_METADATA, 12);
  if (status != OK) return false;
  if (isMetadata) return addKey(object, keyStart, keyEnd, keyEscaped) && parseMetadata();
  return parseTensor(keyStart, keyEnd, keyEscaped, key16At);
}

function parseDocument(): bool {
  skipWs();
  if (byte(pos) != 0x7b) return syntax(R_EXPECTED_OBJECT);
  if (!parseMembers(MEMBERS_HEADER, TOP_OBJECT)) return false;
  skipWs();
  if (pos != n) return syntax(R_TRAILING);
  return true;
}

function hashBytes(p: usize, len: u32, seed: u64): u64 {
  let h: u64 = seed ^ (<u64>len * 0x9e3779b97f4a7c15);
  let i: u32 = 0;
  while (i + 8 <= len) {
    h = (h ^ load<u64>(p + i)) * 0xff51afd7ed558ccd;
    h ^= h >> 32;
    i += 8;
  }
  if (i < len) {
    // Reading past the end is safe: keys sit before the sentinel or in scratch reserved with slack.
    let tail = load<u64>(p + i) & ((<u64>1 << ((<u64>(len - i)) << 3)) - 1);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccd;
  h ^= h >> 33;
  return h;
}

// The bytes of the log entry at `entry`.
function entrySize(entry: usize): usize {
  let tag = load<u32>(entry, ENTRY_TAG);
  if (tag == TAG_TENSOR) return TENSOR_SIZE;
  if (tag == TAG_WEIGHT) return WEIGHT_SIZE;
  if (tag == TAG_KEY) return KEY_SIZE;
  return DIMS_VALUES + (<usize>load<u32>(entry, DIMS_COUNT) << 3);
}

// Tensor, weight and key entries all hold the object id at +4 and the key span at +8/+12.
function sameKey(a: usize, b: usize, scratch: usize): bool {
  if (load<u32>(a, ENTRY_OBJECT) != load<u32>(b, ENTRY_OBJECT)) return false;
  let aEnd = load<u32>(a, ENTRY_KEY_END), bEnd = load<u32>(b, ENTRY_KEY_END);
  let aStart = load<u32>(a, ENTRY_KEY_START), bStart = load<u32>(b, ENTRY_KEY_START);
  if (((aEnd | bEnd) & ESCAPED) == 0) {
    let len = aEnd - aStart;
    return len == bEnd - bStart && memory.compare(base + aStart, base + bStart, len) == 0;
  }
  if (!decodedText(aStart, aEnd & ~ESCAPED, (aEnd & ESCAPED) != 0, scratch)) return false;
  let aPtr = textPtr, aLen = textLen;
  if (!decodedText(bStart, bEnd & ~ESCAPED, (bEnd & ESCAPED) != 0, scratch + aLen + 8)) return false;
  return aLen == textLen && memory.compare(aPtr, textPtr, aLen) == 0;
}

// Rejects any key repeated within one object, comparing decoded text.
function dedupe(logStart: usize, logEnd: usize): bool {
  let keys = keyCount + tensorCount;
  let slots: u32 = 16;
  while (slots < keys * 2) slots <<= 1;
  let mask = slots - 1;
  if (!reserve(<usize>slots << 3)) return false;
  let table = top;
  top += <usize>slots << 3;
  memory.fill(table, 0, <usize>slots << 3);
  let scratch = top;
  let entry = logStart;
  while (entry < logEnd) {
    let next = entry + entrySize(entry);
    if (load<u32>(entry, ENTRY_TAG) == TAG_DIMS) {
      entry = next;
      continue;
    }
    let start = load<u32>(entry, ENTRY_KEY_START), end = load<u32>(entry, ENTRY_KEY_END);
    let escaped = (end & ESCAPED) != 0;
    if (!decodedText(start, end & ~ESCAPED, escaped, scratch)) return false;
    let hash = <u32>hashBytes(textPtr, textLen, <u64>load<u32>(entry, ENTRY_OBJECT));
    let slot = hash & mask;
    while (true) {
      let at = table + (<usize>slot << 3);
      let other = <usize>load<u32>(at, 4);
      if (other == 0) {
        store<u32>(at, hash);
        store<u32>(at, <u32>entry, 4);
        break;
      }
      if (load<u32>(at) == hash && sameKey(other, entry, scratch)) {
        store<u64>(RESULT, start, RESULT_A);
        store<u64>(RESULT, end & ~ESCAPED, RESULT_B);
        return fail(INVALID_HEADER_DESERIALIZATION, R_DUPLICATE_KEY, start - 1);
      }
      if (status != OK) return false;
      slot = (slot + 1) & mask;
    }
    entry = next;
  }
  return true;
}

@inline function lessOffsets(a: usize, b: usize): bool {
  let ab = load<u64>(a, TENSOR_BEGIN), bb = load<u64>(b, TENSOR_BEGIN);
  return ab < bb || (ab == bb && load<u64>(a, TENSOR_END) < load<u64>(b, TENSOR_END));
}

// Stable bottom-up merge sort of tensor entry pointers by (begin, end); returns where the result is.
function sortByOffsets(list: usize, spare: usize, count: u32): usize {
  let sorted = true;
  for (let i: u32 = 1; i < count && sorted; i++) {
    sorted = !lessOffsets(load<u32>(list + (<usize>i << 2)), load<u32>(list + (<usize>(i - 1) << 2)));
  }
  if (sorted) return list;
  let src = list, dst = spare;
  for (let width: u32 = 1; width < count; width <<= 1) {
    for (let lo: u32 = 0; lo < count; lo += width << 1) {
      let mid = min(lo + width, count), hi = min(lo + (width << 1), count);
      let i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        let a = load<u32>(src + (<usize>i << 2)), b = load<u32>(src + (<usize>j << 2));
        if (lessOffsets(b, a)) {
          store<u32>(dst + (<usize>(k++) << 2), b);
          j++;
        } else {
          store<u32>(dst + (<usize>(k++) << 2), a);
          i++;
        }
      }
      while (i < mid) store<u32>(dst + (<usize>(k++) << 2), load<u32>(src + (<usize>(i++) << 2)));
      while (j < hi) store<u32>(dst + (<usize>(k++) << 2), load<u32>(src + (<usize>(j++) << 2)));
    }
    let t = src;
    src = dst;
    dst = t;
  }
  return src;
}

function tensorFail(code: i32, why: i32, record: usize, a: u64, b: u64, c: u64): bool {
  store<u32>(RESULT, <u32>record, RESULT_TENSOR);
  store<u64>(RESULT, a, RESULT_A);
  store<u64>(RESULT, b, RESULT_B);
  store<u64>(RESULT, c, RESULT_C);
  return fail(code, why, load<u32>(record, ENTRY_KEY_START) - 1);
}

// The per-tensor rules, in data order; then the file size. Numbers JS reads become f64 in place.
function validate(logStart: usize, logEnd: usize, fileSize: u64): bool {
  if (!reserve(<usize>tensorCount << 3)) return false;
  let list = top;
  let spare = list + (<usize>tensorCount << 2);
  top += <usize>tensorCount << 3;
  let k: u32 = 0;
  for (let entry = logStart; entry < logEnd; entry += entrySize(entry)) {
    if (load<u32>(entry, ENTRY_TAG) == TAG_TENSOR) store<u32>(list + (<usize>(k++) << 2), <u32>entry);
  }
  let order = sortByOffsets(list, spare, tensorCount);
  store<u32>(RESULT, <u32>order, RESULT_ORDER);
  let previousEnd: u64 = 0;
  for (let i: u32 = 0; i < tensorCount; i++) {
    let record = <usize>load<u32>(order + (<usize>i << 2));
    let begin = load<u64>(record, TENSOR_BEGIN), end = load<u64>(record, TENSOR_END);
    if (begin != previousEnd || end < begin) return tensorFail(INVALID_OFFSET, 0, record, begin, end, previousEnd);
    previousEnd = end;
    let dims = <usize>load<u32>(record, TENSOR_DIMS);
    let ndim = load<u32>(dims, DIMS_COUNT);
    let elements: u64 = 1;
    let largest: u64 = 0;
    for (let d: u32 = 0; d < ndim; d++) {
      let dim = load<u64>(dims + DIMS_VALUES + (<usize>d << 3));
      if (dim != 0 && elements > <u64>-1 / dim) return tensorFail(VALIDATION_OVERFLOW, R_SHAPE_PRODUCT, record, elements, dim, 0);
      elements *= dim;
      largest = max(largest, dim);
    }
    let bitsPer = <u64>dtypeBits(load<u32>(record, TENSOR_DTYPE));
    if (elements > <u64>-1 / bitsPer) return tensorFail(VALIDATION_OVERFLOW, R_BIT_COUNT, record, elements, bitsPer, 0);
    let bits = elements * bitsPer;
    let bytes = bits >> 3;
    let notSafe = end > SAFE_MAX ? end : largest > SAFE_MAX ? largest : elements > SAFE_MAX ? elements : bytes > SAFE_MAX ? bytes : 0;
    if (notSafe != 0) return tensorFail(VALIDATION_OVERFLOW, R_NOT_SAFE_INTEGER, record, notSafe, 0, 0);
    if ((bits & 7) != 0) return tensorFail(MISALIGNED_SLICE, 0, record, elements, bitsPer, 0);
    if (end - begin != bytes) return tensorFail(TENSOR_INVALID_INFO, 0, record, end - begin, bytes, elements);
    store<f64>(record, <f64>begin, TENSOR_BEGIN);
    store<f64>(record, <f64>end, TENSOR_END);
    for (let d: u32 = 0; d < ndim; d++) {
      let at = dims + DIMS_VALUES + (<usize>d << 3);
      store<f64>(at, <f64>load<u64>(at));
    }
  }
  let total = previousEnd + 8 + <u64>n;
  if (total != fileSize) {
    store<u64>(RESULT, total, RESULT_A);
    store<u64>(RESULT, fileSize, RESULT_B);
    return fail(METADATA_INCOMPLETE_BUFFER, 0, n);
  }
  return true;
}

// Starts a scan of the `length` bytes at input: resets the state and reserves the sentinel; returns
// where the log starts, or 0 when memory ran out.
function begin(input: usize, length: u32): usize {
  base = input;
  n = length;
  pos = 0;
  delta = 0;
  status = OK;
  reason = 0;
  errPos = 0;
  objects = TOP_OBJECT;
  tensorCount = 0;
  keyCount = 0;
  limit = <usize>memory.size() << 16;
  memory.fill(RESULT, 0, RESULT_SIZE);
  store<u32>(RESULT, <u32>-1, RESULT_METADATA_START);
  top = input + length;
  if (!reserve(SENTINEL + 8)) return 0;
  memory.fill(top, 0, SENTINEL);
  top = (top + SENTINEL + 7) & ~7;
  return top;
}

// A syntax error in text that is not UTF-8 is reported as the UTF-8 error.
function preferUtf8Error(): void {
  if (status != INVALID_HEADER_DESERIALIZATION) return;
  let bad = firstInvalidUtf8(0);
  if (bad >= 0) fail(INVALID_HEADER, R_INVALID_UTF8, <u32>bad);
}

// Ends a scan: the status and counts into the result table.
function finish(): i32 {
  store<i32>(RESULT, status, RESULT_STATUS);
  store<i32>(RESULT, reason, RESULT_REASON);
  store<u32>(RESULT, errPos, RESULT_AT);
  store<u32>(RESULT, tensorCount, RESULT_TENSOR_COUNT);
  return status;
}

// Validates the n header bytes at input for a file of fileSize bytes; returns the status.
// Memory from input + n on is this call's to use and grow.
export function scanHeader(input: usize, length: u32, fileSize: f64): i32 {
  let logStart = begin(input, length);
  if (logStart != 0) {
    let ok = parseDocument();
    if (!ok) preferUtf8Error();
    let logEnd = top;
    if (ok && dedupe(logStart, logEnd)) validate(logStart, logEnd, <u64>fileSize);
  }
  return finish();
}

// The shard name of the weight_map entry read last, and whether the index has had a weight_map.
let lastShardStart: u32 = 0;
let lastShardLength: u32 = 0;
let lastShardEscaped = false;
let hasWeightMap = false;

// A member of weight_map: a tensor name and its shard's file name.
function weightMember(object: u32): bool {
  let keyStart = strStart, keyEnd = strEnd, keyEscaped = strEscaped, key16End = (strEnd - delta) | (strEscaped ? ESCAPED : 0);
  if (byte(pos) != 0x22) {
    store<u64>(RESULT, keyStart, RESULT_A);
    store<u64>(RESULT, keyEnd, RESULT_B);
    return syntax(R_SHARD_NOT_STRING);
  }
  let shard16Start = pos + 1 - delta;
  if (!scanString() || !reserve(WEIGHT_SIZE)) return false;
  let length = strEnd - strStart;
  // Entries of one shard mostly come together: JS decodes a shard name once per run.
  let newShard = tensorCount == 0 || length != lastShardLength || strEscaped != lastShardEscaped || memory.compare(base + strStart, base + lastShardStart, length) != 0;
  lastShardStart = strStart;
  lastShardLength = length;
  lastShardEscaped = strEscaped;
  store<u32>(top, TAG_WEIGHT, ENTRY_TAG);
  store<u32>(top, object, ENTRY_OBJECT);
  store<u32>(top, keyStart, ENTRY_KEY_START);
  store<u32>(top, keyEnd | (keyEscaped ? ESCAPED : 0), ENTRY_KEY_END);
  store<u32>(top, key16At, WEIGHT_KEY16_START);
  store<u32>(top, key16End, WEIGHT_KEY16_END);
  store<u32>(top, shard16Start, WEIGHT_SHARD16_START);
  store<u32>(top, (strEnd - delta) | (strEscaped ? ESCAPED : 0), WEIGHT_SHARD16_END);
  store<u32>(top, newShard ? 1 : 0, WEIGHT_NEW_SHARD);
  top += WEIGHT_SIZE;
  tensorCount++;
  return true;
}

// The weight_map object: string keys (tensor names) to string values (shard file names), one log entry
// each, contiguous from RESULT_WEIGHTS; RESULT_TENSOR_COUNT counts them.
function parseWeightMap(): bool {
  if (byte(pos) != 0x7b) return syntax(R_WEIGHT_MAP_NOT_OBJECT);
  // A second weight_map is a repeated key, which dedupe reports: its entries count for the table's size.
  store<u32>(RESULT, <u32>top, RESULT_WEIGHTS);
  return parseMembers(MEMBERS_WEIGHTS, ++objects);
}

// A member of the index: weight_map, metadata (an object), or a key holding any JSON.
function indexMember(object: u32): bool {
  let isWeightMap = lastStringIs(LIT_WEIGHT_MAP, 10);
  let isMetadata = lastStringIs(LIT_INDEX_METADATA, 8);
  if (status != OK || !addKey(object, strStart, strEnd, strEscaped)) return false;
  if (isWeightMap) {
    hasWeightMap = true;
    return parseWeightMap();
  }
  if (!isMetadata) return skipValue(1);
  if (byte(pos) != 0x7b) return syntax(R_INDEX_METADATA_NOT_OBJECT);
  store<u32>(RESULT, pos, RESULT_METADATA_START);
  store<u32>(RESULT, pos - delta, RESULT_METADATA_START16);
  if (!skipValue(1)) return false;
  store<u32>(RESULT, pos, RESULT_METADATA_END);
  store<u32>(RESULT, pos - delta, RESULT_METADATA_END16);
  return true;
}

// The index: an object with a weight_map object and, if present, a metadata object; other keys hold any
// JSON. Every key of every object is logged for dedupe, as in a header.
function parseIndexDocument(): bool {
  skipWs();
  if (byte(pos) != 0x7b) return syntax(R_INDEX_NOT_OBJECT);
  hasWeightMap = false;
  if (!parseMembers(MEMBERS_INDEX, TOP_OBJECT)) return false;
  skipWs();
  if (pos != n) return syntax(R_TRAILING);
  if (!hasWeightMap) return fail(INVALID_HEADER_DESERIALIZATION, R_WEIGHT_MAP_MISSING, 0);
  return true;
}

// Validates the n bytes of a model index at input; returns the status. Memory from input + n on is this
// call's to use and grow.
export function scanIndex(input: usize, length: u32): i32 {
  let logStart = begin(input, length);
  if (logStart != 0) {
    let ok = parseIndexDocument();
    if (!ok) preferUtf8Error();
    if (ok) dedupe(logStart, top);
  }
  return finish();
}
