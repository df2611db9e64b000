// An independent SafeTensors header validator, written from the validation table in DESIGN.md
// ("The format") and nothing else. It is deliberately simple and slow-but-obvious: tests use it as an
// oracle for parseHeader, so it must not share code (or bugs) with src/ or assembly/.
//
// Rule order (DESIGN.md):
//   HeaderTooSmall, HeaderTooLarge, InvalidHeaderLength, InvalidHeader (strict UTF-8),
//   InvalidHeaderDeserialization (strict JSON + schema, whole header),
//   then per tensor in (begin, end) order: InvalidOffset, ValidationOverflow, MisalignedSlice,
//   TensorInvalidInfo; finally MetadataIncompleteBuffer.

import { DTYPE_BITS } from './dtype-table.ts'
export const MAX_HEADER_SIZE = 100_000_000n
/** Nesting depth limit of the JSON parser (objects and arrays; the top-level object is depth 1). */
export const MAX_DEPTH = 64
export const U64_MAX = (1n << 64n) - 1n
export const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER) // 2^53 - 1

export interface RefTensor {
  name: string
  dtype: string
  shape: number[]
  dataOffsets: [number, number]
  byteLength: number
}

export type RefResult =
  | { ok: true; headerSize: number; tensors: RefTensor[]; metadata: Record<string, string> | null }
  | {
      ok: false
      code: string
      /** Why (for humans reading a failed test). */
      reason: string
      /**
       * Other codes an implementation may equally report. Only set when tensors share the same
       * (begin, end): DESIGN.md sorts by (begin, end) but does not say how ties are ordered, and the
       * order of a tie can change which check fails first. `code` is the result for header order.
       */
      altCodes?: string[]
    }

// ---------------------------------------------------------------------------------------------
// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF,
// no truncated sequences. A BOM is decoded like any other character (it is not skipped).

/** Decodes bytes[start, end) or returns null if they are not valid UTF-8. */
export function decodeUtf8Strict(bytes: Uint8Array, start = 0, end = bytes.length): string | null {
  const chunks: string[] = []
  let units: number[] = []
  let i = start
  while (i < end) {
    const b0 = bytes[i]
    let cp: number
    let extra: number
    let min: number
    if (b0 < 0x80) {
      cp = b0
      extra = 0
      min = 0
    } else if (b0 >= 0xc2 && b0 <= 0xdf) {
      cp = b0 & 0x1f
      extra = 1
      min = 0x80
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      cp = b0 & 0x0f
      extra = 2
      min = 0x800
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      cp = b0 & 0x07
      extra = 3
      min = 0x10000
    } else {
      return null // a continuation byte with no lead, C0/C1 (always overlong), or F5..FF
    }
    if (i + extra >= end) return null // sequence cut off by the end of the header
    for (let k = 1; k <= extra; k++) {
      const b = bytes[i + k]
      if ((b & 0xc0) !== 0x80) return null
      cp = (cp << 6) | (b & 0x3f)
    }
    if (cp < min) return null // overlong
    if (cp >= 0xd800 && cp <= 0xdfff) return null // UTF-8-encoded surrogate
    if (cp > 0x10ffff) return null
    if (cp >= 0x10000) {
      const v = cp - 0x10000
      units.push(0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff))
    } else {
      units.push(cp)
    }
    i += extra + 1
    if (units.length >= 8192) {
      chunks.push(String.fromCharCode(...units))
      units = []
    }
  }
  chunks.push(String.fromCharCode(...units))
  return chunks.join('')
}

// ---------------------------------------------------------------------------------------------
// Strict JSON (RFC 8259, no extensions), over the decoded header text.

export type JValue =
  | { kind: 'object'; members: Array<[string, JValue]> }
  | { kind: 'array'; items: JValue[] }
  | { kind: 'string'; value: string }
  | { kind: 'number'; raw: string } // kept as text: shapes and offsets are checked on the text
  | { kind: 'literal'; value: true | false | null }

export class JsonError extends Error {}

const NUMBER_RE = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y
const HEX4_RE = /^[0-9a-fA-F]{4}$/

class JsonParser {
  pos = 0
  constructor(private readonly s: string) {}

  fail(what: string): never {
    throw new JsonError(`${what} at character ${this.pos}`)
  }

  // Only space, tab, LF and CR are JSON whitespace (not form feed, NBSP, BOM, ...).
  skipWs(): void {
    const s = this.s
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos)
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break
      this.pos++
    }
  }

  parseDocument(): JValue {
    this.skipWs()
    const v = this.parseValue(0)
    this.skipWs()
    if (this.pos !== this.s.length) this.fail('trailing characters after the JSON value')
    return v
  }

  parseValue(depth: number): JValue {
    this.skipWs()
    if (this.pos >= this.s.length) this.fail('unexpected end of JSON')
    const c = this.s[this.pos]
    if (c === '{' || c === '[') {
      if (depth + 1 > MAX_DEPTH) this.fail(`nesting depth above ${MAX_DEPTH}`)
      return c === '{' ? this.parseObject(depth + 1) : this.parseArray(depth + 1)
    }
    if (c === '"') return { kind: 'string', value: this.parseString() }
    if (c === '-' || (c >= '0' && c <= '9')) return this.parseNumber()
    for (const [word, value] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.s.startsWith(word, this.pos)) {
        this.pos += word.length
        return { kind: 'literal', value }
      }
    }
    this.fail(`unexpected character ${JSON.stringify(c)}`)
  }

  parseObject(depth: number): JValue {
    this.pos++ // '{'
    const members: Array<[string, JValue]> = []
    const seen = new Set<string>()
    this.skipWs()
    if (this.s[this.pos] === '}') {
      this.pos++
      return { kind: 'object', members }
    }
    for (;;) {
      this.skipWs()
      if (this.s[this.pos] !== '"') this.fail('expected a string key')
      const key = this.parseString()
      // Keys are compared after decoding escapes: "a" and "\u0061" are the same key.
      if (seen.has(key)) this.fail(`duplicate key ${JSON.stringify(key)}`)
      seen.add(key)
      this.skipWs()
      if (this.s[this.pos] !== ':') this.fail("expected ':'")
      this.pos++
      members.push([key, this.parseValue(depth)])
      this.skipWs()
      const c = this.s[this.pos]
      this.pos++
      if (c === '}') return { kind: 'object', members }
      if (c !== ',') {
        this.pos--
        this.fail("expected ',' or '}'")
      }
    }
  }

  parseArray(depth: number): JValue {
    this.pos++ // '['
    const items: JValue[] = []
    this.skipWs()
    if (this.s[this.pos] === ']') {
      this.pos++
      return { kind: 'array', items }
    }
    for (;;) {
      items.push(this.parseValue(depth))
      this.skipWs()
      const c = this.s[this.pos]
      this.pos++
      if (c === ']') return { kind: 'array', items }
      if (c !== ',') {
        this.pos--
        this.fail("expected ',' or ']'")
      }
    }
  }

  parseString(): string {
    const s = this.s
    this.pos++ // opening quote
    let out = ''
    let runStart = this.pos
    for (;;) {
      if (this.pos >= s.length) this.fail('unterminated string')
      const c = s.charCodeAt(this.pos)
      if (c === 0x22) {
        // closing quote
        out += s.slice(runStart, this.pos)
        this.pos++
        return out
      }
      if (c < 0x20) this.fail('raw control character in string')
      if (c !== 0x5c) {
        this.pos++
        continue
      }
      // Escape sequence.
      out += s.slice(runStart, this.pos)
      const e = s[this.pos + 1]
      this.pos += 2
      switch (e) {
        case '"':
          out += '"'
          break
        case '\\':
          out += '\\'
          break
        case '/':
          out += '/'
          break
        case 'b':
          out += '\b'
          break
        case 'f':
          out += '\f'
          break
        case 'n':
          out += '\n'
          break
        case 'r':
          out += '\r'
          break
        case 't':
          out += '\t'
          break
        case 'u': {
          const u = this.hex4()
          if (u >= 0xdc00 && u <= 0xdfff) this.fail('lone low surrogate escape')
          if (u >= 0xd800 && u <= 0xdbff) {
            // A high surrogate must be followed at once by an escaped low surrogate.
            if (s[this.pos] !== '\\' || s[this.pos + 1] !== 'u') this.fail('lone high surrogate escape')
            this.pos += 2
            const low = this.hex4()
            if (low < 0xdc00 || low > 0xdfff) this.fail('lone high surrogate escape')
            out += String.fromCharCode(u, low)
          } else {
            out += String.fromCharCode(u)
          }
          break
        }
        default:
          this.pos -= 2
          this.fail('invalid escape')
      }
      runStart = this.pos
    }
  }

  hex4(): number {
    const h = this.s.slice(this.pos, this.pos + 4)
    if (!HEX4_RE.test(h)) this.fail('invalid \\u escape')
    this.pos += 4
    return parseInt(h, 16)
  }

  parseNumber(): JValue {
    NUMBER_RE.lastIndex = this.pos
    const m = NUMBER_RE.exec(this.s)
    if (!m) this.fail('invalid number')
    if (outOfRange(m[0])) this.fail(`number out of range: ${m[0].slice(0, 40)}`)
    this.pos += m[0].length
    return { kind: 'number', raw: m[0] }
  }
}

const I32_MAX = 2n ** 31n - 1n

/**
 * Whether the reference's JSON parser (serde_json, built without its float_roundtrip feature) refuses
 * a number as out of range, written from its algorithm. It reads digits left to right into a u64 while
 * they fit; past that an integer digit adds one to the exponent, and the fraction's remaining digits
 * are dropped (a fraction digit that still fits is kept, even after the integer part overflowed). An
 * exponent above i32 is out of range unless it is negative or the digits kept are 0. Otherwise the
 * digits as a double, times the double nearest 10^exponent (its table holds 1e0..1e308), must be
 * finite. This is not the correctly rounded value: 1.797693134862315708e308, below the largest
 * double, is out of range.
 */
export function outOfRange(raw: string): boolean {
  const [, integer, fraction = '', sign, exponentDigits] = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?)(\d+))?$/.exec(raw)!
  let digits = 0n
  let exponent = 0
  let full = false
  for (const d of integer) {
    if (!full && digits * 10n + BigInt(d) <= U64_MAX) digits = digits * 10n + BigInt(d)
    else {
      full = true
      exponent++
    }
  }
  for (const d of fraction) {
    if (digits * 10n + BigInt(d) > U64_MAX) break
    digits = digits * 10n + BigInt(d)
    exponent--
  }
  if (exponentDigits !== undefined) {
    const value = BigInt(exponentDigits)
    if (value > I32_MAX) return sign !== '-' && digits !== 0n
    exponent += sign === '-' ? -Number(value) : Number(value)
  }
  if (digits === 0n || exponent < 0) return false
  return exponent > 308 || Number(digits) * Number(`1e${exponent}`) === Infinity
}

/** Parses strict JSON; throws JsonError. Exported for the validator's own tests. */
export function parseJson(text: string): JValue {
  return new JsonParser(text).parseDocument()
}

// ---------------------------------------------------------------------------------------------
// Schema.

interface Parsed {
  name: string
  dtype: string
  bits: number
  shape: bigint[]
  begin: bigint
  end: bigint
}

class SchemaError extends Error {}

/** A shape or offset entry: a plain non-negative integer (no '-', '.', exponent, leading zero) <= 2^64-1. */
function u64(v: JValue, what: string): bigint {
  if (v.kind !== 'number' || !/^(?:0|[1-9][0-9]*)$/.test(v.raw)) {
    throw new SchemaError(`${what} is not a plain non-negative integer`)
  }
  const n = BigInt(v.raw)
  if (n > U64_MAX) throw new SchemaError(`${what} does not fit in u64`)
  return n
}

function readSchema(doc: JValue): { tensors: Parsed[]; metadata: Record<string, string> | null } {
  if (doc.kind !== 'object') throw new SchemaError('header is not a JSON object')
  let metadata: Record<string, string> | null = null
  const tensors: Parsed[] = []
  for (const [name, value] of doc.members) {
    if (name === '__metadata__') {
      if (value.kind === 'literal' && value.value === null) continue
      if (value.kind !== 'object') throw new SchemaError('__metadata__ is not an object or null')
      const entries: Array<[string, string]> = []
      for (const [k, v] of value.members) {
        if (v.kind !== 'string') throw new SchemaError(`metadata value of ${JSON.stringify(k)} is not a string`)
        entries.push([k, v.value])
      }
      metadata = Object.fromEntries(entries) // own data properties, even for a key like "__proto__"
      continue
    }
    if (value.kind !== 'object') throw new SchemaError(`tensor ${JSON.stringify(name)} is not an object`)
    const fields = new Map(value.members) // no duplicates: the parser rejected them
    const dtype = fields.get('dtype')
    const shape = fields.get('shape')
    const offsets = fields.get('data_offsets')
    if (!dtype || !shape || !offsets) throw new SchemaError(`tensor ${JSON.stringify(name)} misses a field`)
    if (dtype.kind !== 'string' || !DTYPE_BITS.has(dtype.value)) {
      throw new SchemaError(`tensor ${JSON.stringify(name)} has an unknown dtype`)
    }
    if (shape.kind !== 'array') throw new SchemaError(`shape of ${JSON.stringify(name)} is not an array`)
    if (offsets.kind !== 'array' || offsets.items.length !== 2) {
      throw new SchemaError(`data_offsets of ${JSON.stringify(name)} is not an array of 2`)
    }
    tensors.push({
      name,
      dtype: dtype.value,
      bits: DTYPE_BITS.get(dtype.value)!,
      shape: shape.items.map((d) => u64(d, `shape of ${JSON.stringify(name)}`)),
      begin: u64(offsets.items[0], `data_offsets of ${JSON.stringify(name)}`),
      end: u64(offsets.items[1], `data_offsets of ${JSON.stringify(name)}`),
    })
  }
  return { tensors, metadata }
}

// ---------------------------------------------------------------------------------------------
// Per-tensor checks.

/**
 * Element count as the reference crate computes it: a checked product from left to right, so an
 * intermediate overflow is an overflow even when a later dimension is 0. U64_MAX + 1 means overflow.
 */
function elementCount(shape: bigint[]): bigint {
  let n = 1n
  for (const d of shape) {
    n *= d
    if (n > U64_MAX) return U64_MAX + 1n
  }
  return n
}

/** The first failing per-tensor check for `t`, given the end of the previous tensor; null if it passes. */
function tensorCheck(t: Parsed, prevEnd: bigint): string | null {
  if (t.begin !== prevEnd || t.end < t.begin) return 'InvalidOffset'
  const count = elementCount(t.shape)
  const bits = count * BigInt(t.bits)
  if (
    count > U64_MAX ||
    bits > U64_MAX || // overflows u64
    t.begin > SAFE_MAX ||
    t.end > SAFE_MAX ||
    t.shape.some((d) => d > SAFE_MAX) || // not a safe JS integer
    count > SAFE_MAX ||
    bits / 8n > SAFE_MAX
  ) {
    return 'ValidationOverflow'
  }
  if (bits % 8n !== 0n) return 'MisalignedSlice'
  if (t.end - t.begin !== bits / 8n) return 'TensorInvalidInfo'
  return null
}

function fail(code: string, reason: string, altCodes?: string[]): RefResult {
  return altCodes?.length ? { ok: false, code, reason, altCodes } : { ok: false, code, reason }
}

// ---------------------------------------------------------------------------------------------

/**
 * Validates a SafeTensors file (or its start: at least 8 + N bytes, with the real size in fileSize).
 * If fewer than 8 + N bytes are given although fileSize says they exist, the header cannot be read:
 * that is reported as InvalidHeaderLength too.
 */
export function referenceValidate(bytes: Uint8Array, fileSize: number = bytes.length): RefResult {
  if (bytes.length < 8 || fileSize < 8) return fail('HeaderTooSmall', 'fewer than 8 bytes')
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true)
  if (n > MAX_HEADER_SIZE) return fail('HeaderTooLarge', `N = ${n}`)
  // Numbers, not BigInts (N is at most MAX_HEADER_SIZE here): Firefox ESR 140.12 got `8n + n > BigInt(size)`
  // wrong once its JIT had warmed up.
  const headerSize = Number(n)
  if (8 + headerSize > fileSize || 8 + headerSize > bytes.length) {
    return fail('InvalidHeaderLength', `8 + N = ${8 + headerSize} is past the file (${fileSize} bytes)`)
  }

  const text = decodeUtf8Strict(bytes, 8, 8 + headerSize)
  if (text === null) return fail('InvalidHeader', 'header is not valid UTF-8')

  let schema: ReturnType<typeof readSchema>
  try {
    schema = readSchema(parseJson(text))
  } catch (e) {
    if (e instanceof JsonError || e instanceof SchemaError) return fail('InvalidHeaderDeserialization', e.message)
    throw e
  }

  // Data order. Array.prototype.sort is stable, so ties keep header order.
  const sorted = schema.tensors.slice().sort((a, b) => (a.begin !== b.begin ? (a.begin < b.begin ? -1 : 1) : a.end !== b.end ? (a.end < b.end ? -1 : 1) : 0))

  let prevEnd = 0n
  for (let i = 0; i < sorted.length; ) {
    // A group of tensors with the same (begin, end); usually just one tensor.
    let j = i + 1
    while (j < sorted.length && sorted[j].begin === sorted[i].begin && sorted[j].end === sorted[i].end) j++
    const group = sorted.slice(i, j)

    // Checked in header order (the stable sort).
    let code: string | null = null
    let culprit = ''
    let pe = prevEnd
    for (const t of group) {
      code = tensorCheck(t, pe)
      if (code) {
        culprit = t.name
        break
      }
      pe = t.end
    }
    if (code) {
      // Which codes could another order of the tie give? The tensor checked first sees prevEnd;
      // after a non-empty one passes, the next one starts at its end, so it fails InvalidOffset.
      const possible = new Set<string>()
      if (group.length > 1) {
        const first = group.map((t) => tensorCheck(t, prevEnd))
        for (const c of first) if (c) possible.add(c)
        const empty = group[0].begin === group[0].end
        if (!empty && first.some((c) => c === null)) possible.add('InvalidOffset')
        possible.delete(code)
      }
      return fail(code, `tensor ${JSON.stringify(culprit)}`, [...possible])
    }
    prevEnd = pe
    i = j
  }

  if (prevEnd + 8n + n !== BigInt(fileSize)) {
    return fail('MetadataIncompleteBuffer', `data ends at ${prevEnd + 8n + n}, file has ${fileSize} bytes`)
  }

  return {
    ok: true,
    headerSize,
    metadata: schema.metadata,
    tensors: sorted.map((t) => {
      const count = elementCount(t.shape)
      return {
        name: t.name,
        dtype: t.dtype,
        shape: t.shape.map(Number),
        dataOffsets: [Number(t.begin), Number(t.end)],
        byteLength: Number((count * BigInt(t.bits)) / 8n),
      }
    }),
  }
}
