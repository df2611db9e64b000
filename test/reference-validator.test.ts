// Tests of the reference validator itself: if the oracle is wrong, every comparison against it is
// worthless. Its pieces are checked against independent oracles (TextDecoder, JSON.parse, the
// Python-generated golden files) and against hand-worked cases for every error code.
import { readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import { entry, FIXTURES_GOLDEN, FIXTURES_REAL, goldenName, makeFile, obj, realFixtures } from './helpers.ts'
import { decodeUtf8Strict, JsonError, type JValue, parseJson, referenceValidate } from './reference-validator.ts'
import { prng } from './random.ts'

const fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
function textDecoderOrNull(b: Uint8Array): string | null {
  try {
    return fatal.decode(b)
  } catch {
    return null
  }
}

function toJs(v: JValue): unknown {
  switch (v.kind) {
    case 'object':
      return Object.fromEntries(v.members.map(([k, x]) => [k, toJs(x)]))
    case 'array':
      return v.items.map(toJs)
    case 'string':
      return v.value
    case 'number':
      return Number(v.raw)
    case 'literal':
      return v.value
  }
}

describe('strict UTF-8 decoder', () => {
  const cases: Array<[string, number[], boolean]> = [
    ['ASCII', [0x41, 0x7f], true],
    ['2-byte é', [0xc3, 0xa9], true],
    ['3-byte €', [0xe2, 0x82, 0xac], true],
    ['4-byte 😀', [0xf0, 0x9f, 0x98, 0x80], true],
    ['BOM is a character', [0xef, 0xbb, 0xbf], true],
    ['U+10FFFF', [0xf4, 0x8f, 0xbf, 0xbf], true],
    ['overlong "/" (C0 AF)', [0xc0, 0xaf], false],
    ['overlong C1', [0xc1, 0x81], false],
    ['overlong 3-byte', [0xe0, 0x80, 0xaf], false],
    ['overlong 4-byte', [0xf0, 0x80, 0x80, 0xaf], false],
    ['surrogate U+D800', [0xed, 0xa0, 0x80], false],
    ['surrogate U+DFFF', [0xed, 0xbf, 0xbf], false],
    ['above U+10FFFF', [0xf4, 0x90, 0x80, 0x80], false],
    ['F5 lead', [0xf5, 0x80, 0x80, 0x80], false],
    ['FF', [0xff], false],
    ['lone continuation', [0x80], false],
    ['truncated 3-byte', [0xe2, 0x82], false],
    ['truncated then ASCII', [0xe2, 0x82, 0x41], false],
  ]
  test.each(cases)('%s', (_, bytes, valid) => {
    const b = new Uint8Array(bytes)
    expect(decodeUtf8Strict(b) !== null).toBe(valid)
    expect(decodeUtf8Strict(b)).toBe(textDecoderOrNull(b))
  })

  test('agrees with TextDecoder(fatal) on 20,000 random byte strings', () => {
    const rnd = prng(1234)
    const interesting = [0x00, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0xa0, 0x9f, 0x90, 0x8f]
    for (let i = 0; i < 20000; i++) {
      const b = new Uint8Array(1 + Math.floor(rnd() * 8))
      for (let k = 0; k < b.length; k++) {
        b[k] = rnd() < 0.7 ? interesting[Math.floor(rnd() * interesting.length)] : Math.floor(rnd() * 256)
      }
      expect(decodeUtf8Strict(b), `bytes ${[...b].map((x) => x.toString(16))}`).toBe(textDecoderOrNull(b))
    }
  })
})

describe('strict JSON parser', () => {
  test.each([
    '{}',
    '[]',
    '0',
    '-0',
    '1.5e-3',
    '-12E+7',
    '"a\\"b\\\\c\\/\\b\\f\\n\\r\\t"',
    '"\\u00e9\\uD83D\\uDE00"',
    ' \t\r\n{"a":[1,2,{"b":null}],"c":true,"d":false} \n',
    '"\u007f"',
    '"\uFEFF"',
  ])('accepts %j like JSON.parse', (text) => {
    expect(toJs(parseJson(text))).toEqual(JSON.parse(text))
  })

  test.each([
    ['empty', ''],
    ['whitespace only', ' '],
    ['BOM first', '\uFEFF{}'],
    ['form feed', '\f{}'],
    ['NBSP', '\u00a0{}'],
    ['trailing garbage', '{}x'],
    ['two values', '{}{}'],
    ['trailing comma (array)', '[1,]'],
    ['trailing comma (object)', '{"a":1,}'],
    ['leading zero', '01'],
    ['plus', '+1'],
    ['bare dot', '.5'],
    ['dot no digits', '1.'],
    ['exponent no digits', '1e'],
    ['minus alone', '-'],
    ['NaN', 'NaN'],
    ['Infinity', 'Infinity'],
    ['single quotes', "'a'"],
    ['raw tab in string', '"\t"'],
    ['raw NUL in string', '"\u0000"'],
    ['bad escape', '"\\x41"'],
    ['short \\u', '"\\u12"'],
    ['non-hex \\u', '"\\u12G4"'],
    ['unterminated', '"abc'],
    ['lone high surrogate', '"\\ud800"'],
    ['lone low surrogate', '"\\udc00"'],
    ['high then non-low', '"\\ud800\\u0041"'],
    ['reversed pair', '"\\udc00\\ud800"'],
    ['duplicate key', '{"a":1,"a":1}'],
    ['escaped duplicate key', '{"a":1,"\\u0061":2}'],
    ['nested duplicate', '{"x":[{"k":1,"k":2}]}'],
    ['depth 65', '['.repeat(65) + ']'.repeat(65)],
    ['tru', 'tru'],
    ['nul', 'nul'],
    ['True', 'True'],
    ['missing colon', '{"a" 1}'],
    ['unquoted key', '{a:1}'],
  ])('rejects %s', (_, text) => {
    expect(() => parseJson(text)).toThrow(JsonError)
  })

  test('accepts depth 64', () => {
    expect(() => parseJson('['.repeat(64) + ']'.repeat(64))).not.toThrow()
  })

  test('100,000 nested brackets fail fast without a stack overflow', () => {
    expect(() => parseJson('['.repeat(100000) + ']'.repeat(100000))).toThrow(JsonError)
  })

  // Differential test: random small JSON texts, mutated. Where we accept, JSON.parse must accept and
  // agree; where only JSON.parse accepts, it must be for one of our deliberate extra rules.
  test('agrees with JSON.parse on 20,000 mutated documents', () => {
    const rnd = prng(99)
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]
    const strs = ['"a"', '"b"', '"\\u0061"', '"\\ud83d\\ude00"', '"\\ud800"', '"é"', '"x\\"y"', '""']
    const nums = ['0', '-0', '1', '12', '1.5', '1e3', '-2E-2', '01', '1.', '.5', '+1', '1e']
    const gen = (d: number): string => {
      const r = rnd()
      if (d > 3 || r < 0.3) return pick([...strs, ...nums, 'true', 'false', 'null'])
      if (r < 0.65) return `[${Array.from({ length: Math.floor(rnd() * 4) }, () => gen(d + 1)).join(',')}]`
      return `{${Array.from({ length: Math.floor(rnd() * 4) }, () => `${pick(strs)}:${gen(d + 1)}`).join(',')}}`
    }
    const noise = [' ', '\t', '\n', '\r', '\f', ',', ':', '[', ']', '{', '}', '"', '\\', '0', '-', 'e', '.', '\u00a0', '\uFEFF', '\u0001']
    for (let i = 0; i < 20000; i++) {
      let text = gen(0)
      if (rnd() < 0.5) {
        const p = Math.floor(rnd() * (text.length + 1))
        text = rnd() < 0.5 ? text.slice(0, p) + pick(noise) + text.slice(p) : text.slice(0, p) + text.slice(p + 1)
      }
      let ours: unknown 
      let ourError: string | undefined
      try {
        ours = toJs(parseJson(text))
      } catch (e) {
        if (!(e instanceof JsonError)) throw e
        ourError = e.message
      }
      let theirs: unknown 
      let theirsOk = true
      try {
        theirs = JSON.parse(text)
      } catch {
        theirsOk = false
      }
      if (ourError === undefined) {
        expect(theirsOk, `we accept, JSON.parse rejects: ${JSON.stringify(text)}`).toBe(true)
        expect(ours).toEqual(theirs)
      } else if (theirsOk) {
        expect(ourError, `we reject, JSON.parse accepts: ${JSON.stringify(text)}`).toMatch(/duplicate|surrogate/)
      }
    }
  })
})

describe('referenceValidate on the real fixtures', () => {
  const { valid, invalid } = realFixtures()

  test('there are fixtures', () => {
    expect(valid.length).toBeGreaterThan(10)
    expect(invalid.length).toBe(1)
  })

  test.each(valid)('%s matches its golden file', (f) => {
    const golden = JSON.parse(readFileSync(FIXTURES_GOLDEN + goldenName(f), 'utf8'))
    const r = referenceValidate(new Uint8Array(readFileSync(FIXTURES_REAL + f)))
    expect(r).toEqual({ ok: true, headerSize: golden.headerSize, metadata: golden.metadata, tensors: golden.tensors })
  })

  test.each(invalid)('%s is InvalidHeaderLength', (f) => {
    expect(referenceValidate(new Uint8Array(readFileSync(FIXTURES_REAL + f)))).toMatchObject({ ok: false, code: 'InvalidHeaderLength' })
  })
})

describe('referenceValidate: one hand-worked case per code', () => {
  const u8 = (name: string, b: number, e: number, n = e - b) => entry(name, 'U8', [n], b, e)
  const cases: Array<[string, Uint8Array, string]> = [
    ['valid', makeFile(obj(u8('a', 0, 4)), 4), 'ok'],
    ['7 bytes', new Uint8Array(7), 'HeaderTooSmall'],
    ['N = 100,000,001', makeFile('{}', 0, 100_000_001), 'HeaderTooLarge'],
    ['N = 100,000,000 (not too large, but past the file)', makeFile('{}', 0, 100_000_000), 'InvalidHeaderLength'],
    ['N past the file', makeFile('{}', 0, 3), 'InvalidHeaderLength'],
    ['invalid UTF-8', makeFile(new Uint8Array([0x7b, 0xff, 0x7d])), 'InvalidHeader'],
    ['not JSON', makeFile('{'), 'InvalidHeaderDeserialization'],
    ['gap', makeFile(obj(u8('a', 0, 4), u8('b', 5, 9)), 9), 'InvalidOffset'],
    ['overflow', makeFile(obj(entry('a', 'U8', [2, '18446744073709551614'], 0, 4)), 4), 'ValidationOverflow'],
    ['misaligned', makeFile(obj(entry('a', 'F4', [3], 0, 2)), 2), 'MisalignedSlice'],
    ['wrong size', makeFile(obj(entry('a', 'F32', [3], 0, 8)), 8), 'TensorInvalidInfo'],
    ['trailing byte', makeFile(obj(u8('a', 0, 4)), 5), 'MetadataIncompleteBuffer'],
  ]
  test.each(cases)('%s', (_, bytes, code) => {
    const r = referenceValidate(bytes)
    expect(r.ok ? 'ok' : r.code).toBe(code)
  })

  test('valid result lists tensors in data order with sizes', () => {
    const r = referenceValidate(makeFile(obj(entry('b', 'F16', [2], 4, 8), entry('a', 'F32', [], 0, 4)), 8))
    expect(r).toEqual({
      ok: true,
      headerSize: expect.any(Number),
      metadata: null,
      tensors: [
        { name: 'a', dtype: 'F32', shape: [], dataOffsets: [0, 4], byteLength: 4 },
        { name: 'b', dtype: 'F16', shape: [2], dataOffsets: [4, 8], byteLength: 4 },
      ],
    })
  })

  test('ties in (begin, end) report the codes any order could give', () => {
    // Same (0, 2): header order checks the good one first, so the bad one fails InvalidOffset;
    // the other order would check the F4 one first and fail MisalignedSlice.
    const r = referenceValidate(makeFile(obj(entry('good', 'U8', [2], 0, 2), entry('bad', 'F4', [3], 0, 2)), 2))
    expect(r).toMatchObject({ ok: false, code: 'InvalidOffset', altCodes: ['MisalignedSlice'] })
    // No tie: no alternatives.
    const r2 = referenceValidate(makeFile(obj(entry('bad', 'F4', [3], 0, 2)), 2))
    expect(r2).not.toHaveProperty('altCodes')
  })

  test('header bytes cut short while fileSize says the file is larger', () => {
    const full = makeFile(obj(u8('a', 0, 4)), 4)
    expect(referenceValidate(full.subarray(0, full.length - 4), full.length)).toMatchObject({ ok: true })
    expect(referenceValidate(full.subarray(0, 10), full.length)).toMatchObject({ ok: false, code: 'InvalidHeaderLength' })
  })

  test('metadata keys such as __proto__ stay own string properties', () => {
    const r = referenceValidate(makeFile('{"__metadata__":{"__proto__":"x","constructor":"y"}}'))
    expect(r.ok).toBe(true)
    if (r.ok)
      expect(Object.entries(r.metadata!)).toEqual([
        ['__proto__', 'x'],
        ['constructor', 'y'],
      ])
  })

  test('a tensor called "constructor" with dtype "constructor" is an unknown dtype, not a crash', () => {
    expect(referenceValidate(makeFile(obj(entry('constructor', 'constructor', [1], 0, 1)), 1))).toMatchObject({
      ok: false,
      code: 'InvalidHeaderDeserialization',
    })
  })
})
