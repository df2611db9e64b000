// Header validation, one or more crafted files per row of the validation table in DESIGN.md,
// plus JSON corner cases, precedence between rules, and robustness against hostile headers.
// Every expected code is worked out from DESIGN.md; each case also runs through the independent
// reference validator, which must agree (that checks the reference as much as the library).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { parseHeader, SafetensorsError } from '../../src/index.ts'
import { DTYPE_BITS } from '../dtype-table.ts'
import { concat, entry, escapeBytes, FIXTURES_NUMBERS, makeFile, obj, utf8 } from '../helpers.ts'
import { referenceValidate } from '../reference-validator.ts'

type Opts = { fileSize?: number; tensor?: string }

function run(bytes: Uint8Array, fileSize?: number) {
  return fileSize === undefined ? parseHeader(bytes) : parseHeader(bytes, { fileSize })
}

/** parseHeader must throw SafetensorsError with `code`; the reference must say the same. */
function expectCode(bytes: Uint8Array, code: string, opts: Opts = {}): SafetensorsError {
  const ref = referenceValidate(bytes, opts.fileSize ?? bytes.length)
  expect(ref.ok ? 'ok' : ref.code, `reference validator on ${escapeBytes(bytes, 300)}`).toBe(code)
  let err: unknown
  try {
    run(bytes, opts.fileSize)
  } catch (e) {
    err = e
  }
  expect(err, 'parseHeader should throw').toBeInstanceOf(SafetensorsError)
  const e = err as SafetensorsError
  expect(e.code).toBe(code)
  expect(typeof e.message).toBe('string')
  expect(e.message.length).toBeGreaterThan(0)
  // "a message that names the tensor, offset or byte position involved"
  if (opts.tensor !== undefined) expect(e.message).toContain(opts.tensor)
  return e
}

/** The tensor table as plain data, so it compares with toEqual. */
function plainTensors(h: ReturnType<typeof parseHeader>) {
  return h.tensors.map((t) => ({
    name: t.name,
    dtype: t.dtype,
    shape: Array.from(t.shape),
    dataOffsets: [t.dataOffsets[0], t.dataOffsets[1]],
    byteLength: t.byteLength,
  }))
}

/** parseHeader must accept; its result must equal the reference's. Returns the header for more checks. */
function expectValid(bytes: Uint8Array, opts: Opts = {}) {
  const fileSize = opts.fileSize ?? bytes.length
  const ref = referenceValidate(bytes, fileSize)
  expect(ref, `reference validator on ${escapeBytes(bytes, 300)}`).toMatchObject({ ok: true })
  if (!ref.ok) throw new Error('unreachable')
  const h = run(bytes, opts.fileSize)
  expect(h.headerSize).toBe(ref.headerSize)
  expect(h.dataStart).toBe(8 + ref.headerSize)
  expect(h.fileSize).toBe(fileSize)
  expect(h.metadata).toEqual(ref.metadata)
  expect(plainTensors(h)).toEqual(ref.tensors)
  for (const t of ref.tensors) expect(h.tensor(t.name)?.name).toBe(t.name)
  return h
}

const IHD = 'InvalidHeaderDeserialization'
const OVERFLOW_GOLDEN = JSON.parse(readFileSync(join(FIXTURES_NUMBERS, 'overflow.json'), 'utf8')) as Array<[string, boolean]>

/** 'ok', or the code `parse` fails with. */
function verdictOf(parse: () => unknown): string {
  try {
    parse()
    return 'ok'
  } catch (e) {
    if (e instanceof SafetensorsError) return e.code
    throw e
  }
}
/** A U8 tensor of the right size for [begin, end). */
const u8 = (name: string, begin: number, end: number) => entry(name, 'U8', [end - begin], begin, end)
/** Header text of a single valid 4-byte tensor "w", with `extra` spliced into its object. */
const withExtra = (extra: string) => `{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4],${extra}}}`

// -----------------------------------------------------------------------------------------------
describe('valid files', () => {
  test('one tensor; header fields', () => {
    const bytes = makeFile(obj(u8('w', 0, 4)), 4)
    const h = expectValid(bytes)
    const n = utf8(obj(u8('w', 0, 4))).length
    expect(h.headerSize).toBe(n)
    expect(h.dataStart).toBe(8 + n)
    expect(h.fileSize).toBe(bytes.length)
    expect(h.metadata).toBeNull()
    expect(plainTensors(h)).toEqual([{ name: 'w', dtype: 'U8', shape: [4], dataOffsets: [0, 4], byteLength: 4 }])
  })

  test('empty header {} with no data: zero tensors', () => {
    const h = expectValid(makeFile('{}'))
    expect(h.tensors).toEqual([])
    expect(h.metadata).toBeNull()
  })

  test('header order differs from data order: tensors come back in data order', () => {
    const h = expectValid(makeFile(obj(entry('c', 'F32', [1], 6, 10), entry('a', 'U8', [2], 0, 2), entry('b', 'I16', [2], 2, 6)), 10))
    expect(h.tensors.map((t) => t.name)).toEqual(['a', 'b', 'c'])
    expect(h.tensor('c').dataOffsets).toEqual([6, 10])
  })

  test.each([...DTYPE_BITS])('dtype %s with shape [8] is %i bytes', (dtype, bits) => {
    const h = expectValid(makeFile(obj(entry('t', dtype, [8], 0, bits)), bits))
    expect(h.tensors[0].dtype).toBe(dtype)
    expect(h.tensors[0].byteLength).toBe(bits)
  })

  test.each([...DTYPE_BITS].filter(([, bits]) => bits % 8 === 0))('scalar shape [] of %s is one element', (dtype, bits) => {
    const h = expectValid(makeFile(obj(entry('s', dtype, [], 0, bits / 8)), bits / 8))
    expect(h.tensors[0].shape).toEqual([])
    expect(h.tensors[0].byteLength).toBe(bits / 8)
  })

  test('zero-sized tensors at the start, in the middle and at the end', () => {
    const h = expectValid(
      makeFile(obj(entry('z0', 'F32', [0], 0, 0), u8('a', 0, 4), entry('z1', 'F64', [3, 0], 4, 4), u8('b', 4, 6), entry('z2', 'BF16', [0, 7], 6, 6)), 6),
    )
    expect(h.tensors.map((t) => t.name)).toEqual(['z0', 'a', 'z1', 'b', 'z2'])
    expect(h.tensor('z1').byteLength).toBe(0)
  })

  test('two zero-sized tensors at the same offset (their relative order is not specified)', () => {
    const h = expectValid(makeFile(obj(u8('a', 0, 2), entry('y', 'F32', [0], 2, 2), entry('x', 'U8', [0], 2, 2)), 2))
    expect(h.tensors[0].name).toBe('a')
    expect(h.tensors.map((t) => t.name).sort()).toEqual(['a', 'x', 'y'])
  })

  test('F4 with an even count and F6 with a multiple of 4 are valid', () => {
    const h = expectValid(
      makeFile(
        obj(entry('f4', 'F4', [2, 3], 0, 3), entry('e2m3', 'F6_E2M3', [4], 3, 6), entry('e3m2', 'F6_E3M2', [2, 6], 6, 15), entry('f4z', 'F4', [0], 15, 15)),
        15,
      ),
    )
    expect(h.tensors.map((t) => t.byteLength)).toEqual([3, 3, 9, 0])
  })

  test('metadata: object of strings', () => {
    const h = expectValid(makeFile(`{"__metadata__":{"format":"pt","empty":"","uni":"\\u00e9\\n"},${u8('w', 0, 1)}}`, 1))
    expect(h.metadata).toEqual({ format: 'pt', empty: '', uni: 'é\n' })
  })

  test('metadata: null is valid and gives metadata === null', () => {
    const h = expectValid(makeFile(`{"__metadata__":null,${u8('w', 0, 1)}}`, 1))
    expect(h.metadata).toBeNull()
  })

  test('metadata: empty object gives {}', () => {
    expect(expectValid(makeFile('{"__metadata__":{}}')).metadata).toEqual({})
  })

  test('metadata: keys like __proto__ are plain keys', () => {
    const h = expectValid(makeFile('{"__metadata__":{"__proto__":"p","constructor":"c"}}'))
    expect(Object.entries(h.metadata!).sort()).toEqual([
      ['__proto__', 'p'],
      ['constructor', 'c'],
    ])
  })

  test('metadata can come after the tensors', () => {
    expect(expectValid(makeFile(`{${u8('w', 0, 1)},"__metadata__":{"a":"b"}}`, 1)).metadata).toEqual({ a: 'b' })
  })

  test('"\\u005f_metadata__" is the __metadata__ key once decoded', () => {
    expect(expectValid(makeFile('{"\\u005f_metadata__":{"a":"b"}}')).metadata).toEqual({ a: 'b' })
  })

  test.each([
    ['spaces', '   {"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}      '],
    ['tab, CR, LF', '\t\r\n{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}\n\r\t'],
    ['inside', '{ "w" :\n{ "dtype" : "U8" ,\t"shape" : [ 1 ] ,\r"data_offsets" : [ 0 , 1 ] } }'],
  ])('whitespace: %s', (_, header) => {
    expect(expectValid(makeFile(header, 1)).tensors[0].name).toBe('w')
  })

  test.each([
    ['escaped quote', '"a\\"b"', 'a"b'],
    ['escaped backslash and slash', '"a\\\\b\\/c"', 'a\\b/c'],
    ['control escapes', '"\\b\\f\\n\\r\\t"', '\b\f\n\r\t'],
    ['\\u00e9', '"caf\\u00e9"', 'café'],
    ['upper-case hex', '"caf\\u00E9"', 'café'],
    ['surrogate pair escape', '"\\ud83d\\ude00"', '😀'],
    ['raw é', '"café"', 'café'],
    ['raw CJK', '"日本語"', '日本語'],
    ['raw emoji', '"😀"', '😀'],
    ['raw DEL', '"a\u007fb"', 'a\u007fb'],
    ['empty name', '""', ''],
  ])('tensor name: %s', (_, jsonName, decoded) => {
    const h = expectValid(makeFile(`{${jsonName}:{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1))
    expect(h.tensors[0].name).toBe(decoded)
    expect(h.tensor(decoded).name).toBe(decoded)
  })

  test('field names and dtype compare after decoding escapes', () => {
    const h = expectValid(makeFile('{"w":{"d\\u0074ype":"F\\u00332","sh\\u0061pe":[1],"data\\u005foffsets":[0,4]}}', 4))
    expect(h.tensors[0].dtype).toBe('F32')
  })

  test('unknown extra fields of any valid JSON type are ignored', () => {
    const extra = '"x":{"a":[1,-2.5e-3,0,-0,1E+2,true,false,null,"s\\u00e9"],"b":{}},"y":[],"z":"\\ud83d\\ude00","n":-1.0'
    expect(expectValid(makeFile(withExtra(extra), 4)).tensors[0].name).toBe('w')
  })

  test('moderate nesting (depth 10) in an unknown field is fine', () => {
    expect(expectValid(makeFile(withExtra(`"x":${'['.repeat(8)}${']'.repeat(8)}`), 4)).tensors).toHaveLength(1)
  })

  test('2^53-1 is still a safe integer (no ValidationOverflow; the size check fails instead)', () => {
    expectCode(makeFile(obj(entry('big', 'U8', ['9007199254740991'], 0, 0))), 'TensorInvalidInfo', { tensor: 'big' })
  })

  test('fileSize option: only the header bytes are given', () => {
    const full = makeFile(obj(u8('w', 0, 100)), 100)
    const prefix = full.subarray(0, full.length - 100)
    const h = expectValid(prefix, { fileSize: full.length })
    expect(h.fileSize).toBe(full.length)
    expectCode(prefix, 'MetadataIncompleteBuffer', { fileSize: full.length - 1 })
    expectCode(prefix, 'MetadataIncompleteBuffer', { fileSize: full.length + 1 })
    expectCode(prefix, 'InvalidHeaderLength', { fileSize: prefix.length - 1 })
  })

  test('fewer than 8 + N bytes given although fileSize says they exist: InvalidHeaderLength', () => {
    // The bytes handed over end inside the header, as when 8 + N exceeds a whole buffer.
    const full = makeFile(obj(u8('w', 0, 4)), 4)
    for (const len of [8, 12, full.length - 5]) {
      expectCode(full.subarray(0, len), 'InvalidHeaderLength', { fileSize: full.length })
    }
  })

  test('the header bytes need not be at offset 0 of their ArrayBuffer', () => {
    const file = makeFile(obj(u8('w', 0, 3)), 3)
    const shifted = concat(new Uint8Array(5), file).subarray(5)
    expect(expectValid(shifted).tensors[0].name).toBe('w')
  })
})

// -----------------------------------------------------------------------------------------------
describe('HeaderTooSmall', () => {
  test.each([0, 1, 7])('%i bytes', (len) => {
    expectCode(new Uint8Array(len), 'HeaderTooSmall')
  })
})

describe('HeaderTooLarge', () => {
  test.each([
    ['100,000,001', 100_000_001n],
    ['2^32 + 2 (a 32-bit read would see 2)', 2n ** 32n + 2n],
    ['2^63', 2n ** 63n],
    ['2^64 - 1', 2n ** 64n - 1n],
  ])('N = %s', (_, n) => {
    expectCode(makeFile('{}', 0, n), 'HeaderTooLarge')
  })

  test('N = 100,000,000 is not too large (here it is past the end of the file)', () => {
    expectCode(makeFile('{}', 0, 100_000_000), 'InvalidHeaderLength')
  })
})

describe('InvalidHeaderLength', () => {
  test('header length one past the end of the file', () => {
    expectCode(makeFile('{}', 0, 3), 'InvalidHeaderLength')
  })
  test('header length past the file, even with data after the header text', () => {
    expectCode(makeFile(obj(u8('w', 0, 4)), 4, 1000), 'InvalidHeaderLength')
  })
  test('8 bytes with N = 1', () => {
    expectCode(makeFile('', 0, 1), 'InvalidHeaderLength')
  })
})

describe('InvalidHeader (UTF-8)', () => {
  // Each one sits inside a metadata string, so the JSON would otherwise be valid.
  test.each([
    ['FF', [0xff]],
    ['lone continuation byte', [0x80]],
    ['overlong 2-byte "/"', [0xc0, 0xaf]],
    ['overlong C1', [0xc1, 0xbf]],
    ['overlong 3-byte', [0xe0, 0x80, 0xaf]],
    ['overlong 4-byte', [0xf0, 0x80, 0x80, 0xaf]],
    ['encoded high surrogate U+D800', [0xed, 0xa0, 0x80]],
    ['encoded low surrogate U+DC00', [0xed, 0xb0, 0x80]],
    ['above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['F5 lead', [0xf5, 0x80, 0x80, 0x80]],
    ['truncated 3-byte then quote', [0xe2, 0x82]],
  ])('%s', (_, bad) => {
    const header = concat(utf8('{"__metadata__":{"k":"a'), new Uint8Array(bad), utf8('"}}'))
    expectCode(makeFile(header), 'InvalidHeader')
  })

  test('a multi-byte sequence cut by the end of the header', () => {
    expectCode(makeFile(concat(utf8('{} '), new Uint8Array([0xe2, 0x82]))), 'InvalidHeader')
  })

  test('non-UTF-8 header (Latin-1 bytes in a tensor name)', () => {
    expectCode(makeFile(concat(utf8('{"caf'), new Uint8Array([0xe9]), utf8('":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}')), 1), 'InvalidHeader')
  })
})

// -----------------------------------------------------------------------------------------------
describe('InvalidHeaderDeserialization: JSON syntax', () => {
  test.each([
    ['{ only', '{'],
    ['empty header (N = 0)', ''],
    ['whitespace only', '        '],
    ['trailing garbage', `${obj(u8('w', 0, 1))}x`],
    ['a second object', `${obj(u8('w', 0, 1))}{}`],
    ['NUL padding instead of spaces', `${obj(u8('w', 0, 1))}\u0000\u0000`],
    ['form feed before {', `\f${obj(u8('w', 0, 1))}`],
    ['form feed after }', `${obj(u8('w', 0, 1))}\f`],
    ['NBSP before {', `\u00a0${obj(u8('w', 0, 1))}`],
    ['BOM before {', `\uFEFF${obj(u8('w', 0, 1))}`],
    ['trailing comma in object', `{${u8('w', 0, 1)},}`],
    ['trailing comma in shape', '{"w":{"dtype":"U8","shape":[1,],"data_offsets":[0,1]}}'],
    ['single quotes', "{'w':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}"],
    ['unquoted key', '{w:{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'],
    ['raw tab inside a name', '{"a\tb":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'],
    ['raw newline inside metadata', `{"__metadata__":{"k":"a\nb"},${u8('w', 0, 1)}}`],
    ['invalid escape \\x', '{"a\\x41":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'],
    ['short \\u escape', '{"a\\u41":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'],
    ['unterminated string', '{"w":{"dtype":"U8'],
    ['NaN in an unknown field', withExtra('"x":NaN')],
    ['Infinity in an unknown field', withExtra('"x":Infinity')],
    ['+1 in an unknown field', withExtra('"x":+1')],
    ['.5 in an unknown field', withExtra('"x":.5')],
    ['1. in an unknown field', withExtra('"x":1.')],
    ['01 in an unknown field', withExtra('"x":01')],
    ['tru in an unknown field', withExtra('"x":tru')],
    ['comment', withExtra('"x":1 /* c */')],
  ])('%s', (_, header) => {
    expectCode(makeFile(header, 1), IHD)
  })
})

describe('InvalidHeaderDeserialization: numbers in shape and data_offsets', () => {
  const bad = ['1.0', '1e0', '1E0', '-0', '01', '-1', '+1', '0x1', '1.5', '"1"', 'null', 'true']
  test.each(bad)('shape entry %s', (v) => {
    expectCode(makeFile(`{"w":{"dtype":"U8","shape":[${v}],"data_offsets":[0,1]}}`, 1), IHD)
  })
  test.each(bad)('begin offset %s', (v) => {
    expectCode(makeFile(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[${v},0]}}`), IHD)
  })
  test.each(bad)('end offset %s', (v) => {
    expectCode(makeFile(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,${v}]}}`, 1), IHD)
  })
  test('integers above 2^64-1 in shape, begin, end', () => {
    expectCode(makeFile(obj(entry('w', 'U8', ['18446744073709551616'], 0, 0))), IHD)
    expectCode(makeFile(obj(entry('w', 'U8', [0], '18446744073709551616', 0))), IHD)
    expectCode(makeFile(obj(entry('w', 'U8', [0], 0, '18446744073709551616'))), IHD)
    expectCode(makeFile(obj(entry('w', 'U8', ['99999999999999999999999999999999'], 0, 0))), IHD)
  })
})

describe('InvalidHeaderDeserialization: numbers that overflow a double', () => {
  // The reference's verdict on each number, in an unknown field (test/fixtures/numbers/make_numbers.py).
  test(`${OVERFLOW_GOLDEN.length} numbers about the largest double, in many spellings: the reference's verdicts`, () => {
    const wrong: string[] = []
    for (const [number, valid] of OVERFLOW_GOLDEN) {
      const bytes = makeFile(withExtra(`"x":${number}`), 4)
      const got = verdictOf(() => parseHeader(bytes))
      const ref = referenceValidate(bytes)
      const want = valid ? 'ok' : IHD
      if (got !== want || (ref.ok ? 'ok' : ref.code) !== want)
        wrong.push(`${number}: reference ${want}, parseHeader ${got}, test reference ${ref.ok ? 'ok' : ref.code}`)
    }
    expect(wrong.slice(0, 20), `${wrong.length} disagreements`).toEqual([])
    // Both verdicts must be common, or the agreement says little.
    expect(OVERFLOW_GOLDEN.filter(([, valid]) => valid).length).toBeGreaterThan(1000)
    expect(OVERFLOW_GOLDEN.filter(([, valid]) => !valid).length).toBeGreaterThan(1000)
  })

  test.each([
    ['1e309', false],
    ['-1e400', false],
    ['9'.repeat(309), false],
    ['1.7976931348623159e308', false],
    ['1e-400', true],
    ['1.7976931348623157e308', true],
  ] as const)('%s anywhere: nested in unknown fields, in an array, beside the tensors', (number, valid) => {
    const goldenVerdict = OVERFLOW_GOLDEN.find(([n]) => n === number)?.[1]
    expect(goldenVerdict, 'the case is in the golden file').toBe(valid)
    for (const header of [
      withExtra(`"x":[${number}]`),
      withExtra(`"x":{"a":[true,{"b":[0,${number}]}]}`),
      withExtra(`"x":{"a":${number},"b":null}`),
      `{"w":{"extra":[${number}],"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`,
    ]) {
      if (valid) expectValid(makeFile(header, 4))
      else expect(expectCode(makeFile(header, 4), IHD).message).toMatch(/number out of range/)
    }
    // In __metadata__ a number is wrong whatever its value; a string holding one is fine.
    expectCode(makeFile(`{"__metadata__":{"a":${number}},"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 4), IHD)
    expectValid(makeFile(`{"__metadata__":{"a":"${number}"},"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 4))
  })

  test('the message gives the byte position of the number', () => {
    const header = withExtra('"x":[1, 2e400]')
    expect(expectCode(makeFile(header, 4), IHD).message).toContain(`byte ${header.indexOf('2e400')}`)
  })
})

describe('InvalidHeaderDeserialization: lone surrogate escapes', () => {
  const t = (name: string) => `{${name}:{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
  test.each([
    ['high alone in a name', t('"a\\ud800"')],
    ['low alone in a name', t('"a\\udc00b"')],
    ['high followed by a non-low escape in a name', t('"\\ud800\\u0041"')],
    ['low then high in a name', t('"\\udc00\\ud800"')],
    ['high alone in a metadata value', `{"__metadata__":{"k":"\\ud83d"},${u8('w', 0, 1)}}`],
    ['low alone in a metadata value', `{"__metadata__":{"k":"\\ude00"},${u8('w', 0, 1)}}`],
    ['high alone in a metadata key', `{"__metadata__":{"\\ud800":"v"},${u8('w', 0, 1)}}`],
    ['high alone in an unknown field', withExtra('"x":"\\uD800"')],
  ])('%s', (_, header) => {
    expectCode(makeFile(header, 4), IHD)
  })
})

describe('InvalidHeaderDeserialization: duplicate keys', () => {
  test('duplicate tensor name', () => {
    expectCode(makeFile(obj(u8('w', 0, 1), u8('w', 1, 2)), 2), IHD)
  })
  test('duplicate tensor name with identical entries', () => {
    expectCode(makeFile(obj(u8('w', 0, 1), u8('w', 0, 1)), 1), IHD)
  })
  test('duplicate tensor name, one spelled with a \\u escape', () => {
    expectCode(makeFile(`{${u8('ab', 0, 1)},"\\u0061b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), IHD)
  })
  test('duplicate tensor name, differently escaped non-ASCII', () => {
    expectCode(makeFile(`{"é":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"\\u00e9":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), IHD)
  })
  test('duplicate __metadata__', () => {
    expectCode(makeFile(`{"__metadata__":{"a":"b"},${u8('w', 0, 1)},"__metadata__":{"a":"b"}}`, 1), IHD)
  })
  test('duplicate __metadata__, both null', () => {
    expectCode(makeFile('{"__metadata__":null,"__metadata__":null}'), IHD)
  })
  test('duplicate __metadata__, one escaped', () => {
    expectCode(makeFile('{"__metadata__":null,"\\u005f_metadata__":null}'), IHD)
  })
  test('duplicate metadata key', () => {
    expectCode(makeFile(`{"__metadata__":{"k":"1","k":"1"},${u8('w', 0, 1)}}`, 1), IHD)
  })
  test('duplicate field in a tensor: two dtype', () => {
    expectCode(makeFile('{"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', 1), IHD)
  })
  test('duplicate field in a tensor: two data_offsets', () => {
    expectCode(makeFile('{"w":{"dtype":"U8","shape":[1],"data_offsets":[5,9],"data_offsets":[0,1]}}', 1), IHD)
  })
  test('duplicate unknown field in a tensor', () => {
    expectCode(makeFile(withExtra('"x":1,"x":2'), 4), IHD)
  })
  test("duplicate keys inside an unknown field's nested object", () => {
    expectCode(makeFile(withExtra('"x":{"y":[{"k":1,"k":1}]}'), 4), IHD)
  })
})

describe('InvalidHeaderDeserialization: schema', () => {
  test.each([
    ['top level is an array', '[]'],
    ['top level is a string', '"x"'],
    ['top level is null', 'null'],
    ['top level is a number', '1'],
    ['tensor is a number', '{"w":1}'],
    ['tensor is null', '{"w":null}'],
    ['tensor is an array', '{"w":["U8",[1],[0,1]]}'],
    ['unknown dtype', obj(entry('w', 'F128', [1], 0, 16))],
    ['lower-case dtype', obj(entry('w', 'f32', [1], 0, 4))],
    ['dtype with a trailing space', obj(entry('w', 'F32 ', [1], 0, 4))],
    ['dtype is a number', '{"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}}'],
    ['dtype is null', '{"w":{"dtype":null,"shape":[1],"data_offsets":[0,4]}}'],
    ['missing dtype', '{"w":{"shape":[1],"data_offsets":[0,4]}}'],
    ['missing shape', '{"w":{"dtype":"F32","data_offsets":[0,4]}}'],
    ['missing data_offsets', '{"w":{"dtype":"F32","shape":[1]}}'],
    ['empty tensor object', '{"w":{}}'],
    ['data_offsets with 1 entry', '{"w":{"dtype":"F32","shape":[1],"data_offsets":[4]}}'],
    ['data_offsets with 3 entries', '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}}'],
    ['data_offsets empty', '{"w":{"dtype":"F32","shape":[0],"data_offsets":[]}}'],
    ['offsets as strings', '{"w":{"dtype":"F32","shape":[1],"data_offsets":["0","4"]}}'],
    ['data_offsets is an object', '{"w":{"dtype":"F32","shape":[1],"data_offsets":{"0":0,"1":4}}}'],
    ['shape is a number', '{"w":{"dtype":"F32","shape":1,"data_offsets":[0,4]}}'],
    ['shape is null', '{"w":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}'],
    ['shape with a nested array', '{"w":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}}'],
    ['metadata value is a number', `{"__metadata__":{"k":1},${u8('w', 0, 4)}}`],
    ['metadata value is null', `{"__metadata__":{"k":null},${u8('w', 0, 4)}}`],
    ['metadata value is nested', `{"__metadata__":{"k":{"a":"b"}},${u8('w', 0, 4)}}`],
    ['metadata value is an array', `{"__metadata__":{"k":["a"]},${u8('w', 0, 4)}}`],
    ['metadata is a string', `{"__metadata__":"pt",${u8('w', 0, 4)}}`],
    ['metadata is an array', `{"__metadata__":[],${u8('w', 0, 4)}}`],
    ['metadata is false', `{"__metadata__":false,${u8('w', 0, 4)}}`],
  ])('%s', (_, header) => {
    expectCode(makeFile(header, 4), IHD)
  })
})

// -----------------------------------------------------------------------------------------------
describe('InvalidOffset', () => {
  test('first tensor does not start at 0', () => {
    expectCode(makeFile(obj(u8('late', 4, 8)), 8), 'InvalidOffset', { tensor: 'late' })
  })
  test('gap between tensors', () => {
    expectCode(makeFile(obj(u8('a', 0, 4), u8('gap', 5, 9)), 9), 'InvalidOffset', { tensor: 'gap' })
  })
  test('overlapping tensors', () => {
    expectCode(makeFile(obj(u8('a', 0, 8), u8('overlap', 4, 12)), 12), 'InvalidOffset', { tensor: 'overlap' })
  })
  test('end < begin', () => {
    expectCode(makeFile(obj(u8('a', 0, 4), entry('backwards', 'U8', [0], 4, 2)), 4), 'InvalidOffset', { tensor: 'backwards' })
  })
  test('ten tensors all at [0, 16]', () => {
    const names = Array.from({ length: 10 }, (_, i) => `t${i}`)
    expectCode(makeFile(obj(...names.map((n) => u8(n, 0, 16))), 16), 'InvalidOffset')
  })
  test('a zero-sized tensor inside another one', () => {
    expectCode(makeFile(obj(u8('a', 0, 8), entry('inside', 'U8', [0], 4, 4)), 8), 'InvalidOffset', { tensor: 'inside' })
  })
})

describe('ValidationOverflow', () => {
  test('shape [2, 18446744073709551614]: element count overflows u64', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', [2, '18446744073709551614'], 0, 4)), 4), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('shape [2^32, 2^32]: product 2^64 overflows u64 (each dim is a safe integer)', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', [4294967296, 4294967296], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('shape [2^32, 2^32, 0]: the product overflows before the 0, as in the reference crate', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', [4294967296, 4294967296, 0], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('shape [0, 2^32, 2^32]: a leading 0 keeps every partial product at 0 (valid, empty)', () => {
    expect(expectValid(makeFile(obj(entry('zero', 'U8', [0, 4294967296, 4294967296], 0, 0)))).tensors[0].byteLength).toBe(0)
  })
  test('shape [2^64-1]: fits u64, not a safe integer', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', ['18446744073709551615'], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('F64 shape [2^61]: bit count 2^67 overflows u64', () => {
    expectCode(makeFile(obj(entry('ovf', 'F64', ['2305843009213693952'], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('dim 2^53 is above 2^53-1', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', ['9007199254740992'], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('dim above 2^53-1 next to a 0 (the product is 0, the dim still is not a safe integer)', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', [0, '9007199254740993'], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('element count 2^54 from safe dims', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', [134217728, 134217728], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('F64 byte size 2^53 from a safe element count 2^50', () => {
    expectCode(makeFile(obj(entry('ovf', 'F64', ['1125899906842624'], 0, 0))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('F4 element count above 2^53-1 while the byte size (2^53-1) is safe', () => {
    expectCode(makeFile(obj(entry('ovf', 'F4', ['9007199254740991', 2], 0, '9007199254740991'))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('end offset 2^53', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', [1], 0, '9007199254740992'))), 'ValidationOverflow', { tensor: 'ovf' })
  })
  test('end offset 2^64-1', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', [1], 0, '18446744073709551615'))), 'ValidationOverflow', { tensor: 'ovf' })
  })
})

describe('MisalignedSlice', () => {
  test.each([
    ['F4 odd count [3]', 'F4', [3], 2],
    ['F4 odd count [3, 5]', 'F4', [3, 5], 8],
    ['F4 scalar []', 'F4', [], 1],
    ['F6_E2M3 count 2', 'F6_E2M3', [2], 2],
    ['F6_E3M2 count 6', 'F6_E3M2', [6], 5],
    ['F6_E2M3 scalar []', 'F6_E2M3', [], 1],
  ])('%s', (_, dtype, shape, size) => {
    expectCode(makeFile(obj(entry('mis', dtype as string, shape as number[], 0, size as number)), size as number), 'MisalignedSlice', { tensor: 'mis' })
  })
})

describe('TensorInvalidInfo', () => {
  test('byte size not matching the shape', () => {
    expectCode(makeFile(obj(entry('wrong', 'F32', [2, 2], 0, 12)), 12), 'TensorInvalidInfo', { tensor: 'wrong' })
  })
  test('byte size one too large', () => {
    expectCode(makeFile(obj(entry('wrong', 'I16', [3], 0, 7)), 7), 'TensorInvalidInfo', { tensor: 'wrong' })
  })
  test('zero-sized shape with a non-empty range', () => {
    expectCode(makeFile(obj(entry('wrong', 'F32', [0], 0, 4)), 4), 'TensorInvalidInfo', { tensor: 'wrong' })
  })
  test('scalar with an empty range', () => {
    expectCode(makeFile(obj(entry('wrong', 'F64', [], 0, 0))), 'TensorInvalidInfo', { tensor: 'wrong' })
  })
})

describe('MetadataIncompleteBuffer', () => {
  test('trailing bytes after the last tensor', () => {
    expectCode(makeFile(obj(u8('w', 0, 4)), 5), 'MetadataIncompleteBuffer')
  })
  test('truncated data', () => {
    expectCode(makeFile(obj(u8('w', 0, 4)), 3), 'MetadataIncompleteBuffer')
  })
  test('no data at all for a tensor', () => {
    expectCode(makeFile(obj(u8('w', 0, 4))), 'MetadataIncompleteBuffer')
  })
  test('{} followed by a byte', () => {
    expectCode(makeFile('{}', 1), 'MetadataIncompleteBuffer')
  })
})

// -----------------------------------------------------------------------------------------------
describe('precedence of the rules', () => {
  test('HeaderTooLarge before InvalidHeaderLength', () => {
    expectCode(makeFile('{}', 0, 200_000_000), 'HeaderTooLarge')
  })
  test('InvalidHeaderLength before InvalidHeader', () => {
    expectCode(makeFile(new Uint8Array([0xff, 0xff]), 0, 3), 'InvalidHeaderLength')
  })
  test('InvalidHeader even when a JSON error comes earlier in the header', () => {
    const header = concat(utf8('{x"__metadata__":{"k":"'), new Uint8Array([0xff]), utf8('"}}'))
    expectCode(makeFile(header), 'InvalidHeader')
  })
  test('InvalidHeader for invalid UTF-8 in the trailing padding', () => {
    expectCode(makeFile(concat(utf8(`${obj(u8('w', 0, 1))}   `), new Uint8Array([0xc0]))), 'InvalidHeader')
  })
  test('InvalidHeaderDeserialization (late duplicate) before InvalidOffset (early tensor)', () => {
    expectCode(makeFile(obj(u8('a', 4, 8), u8('b', 8, 9), u8('b', 8, 9)), 9), IHD)
  })
  test('InvalidHeaderDeserialization (late unknown dtype) before TensorInvalidInfo', () => {
    expectCode(makeFile(obj(entry('a', 'F32', [1], 0, 3), entry('b', 'Q8', [1], 3, 4)), 4), IHD)
  })
  test('InvalidHeaderDeserialization (late value > 2^64-1) before TensorInvalidInfo of an earlier tensor', () => {
    expectCode(makeFile(obj(entry('a', 'F32', [1], 0, 3), entry('b', 'U8', ['18446744073709551616'], 3, 4)), 4), IHD)
  })
  test('TensorInvalidInfo of an earlier tensor before ValidationOverflow (> 2^53-1) of a later one', () => {
    expectCode(makeFile(obj(entry('b', 'U8', ['9007199254740993'], 3, 4), entry('a', 'F32', [1], 0, 3)), 4), 'TensorInvalidInfo', { tensor: 'a' })
  })
  test('InvalidOffset of the first tensor in data order before TensorInvalidInfo of a later one (header order reversed)', () => {
    expectCode(makeFile(obj(entry('later_bad', 'F32', [1], 8, 16), u8('first_bad', 4, 8)), 16), 'InvalidOffset', { tensor: 'first_bad' })
  })
  test('TensorInvalidInfo of the first tensor in data order before InvalidOffset of a later one (header order reversed)', () => {
    expectCode(makeFile(obj(u8('later_bad', 9, 13), entry('first_bad', 'F32', [1], 0, 8)), 13), 'TensorInvalidInfo', { tensor: 'first_bad' })
  })
  test('MisalignedSlice of an earlier tensor before ValidationOverflow of a later one', () => {
    expectCode(makeFile(obj(entry('ovf', 'U8', ['18446744073709551615'], 1, 1), entry('mis', 'F4', [1], 0, 1)), 1), 'MisalignedSlice', { tensor: 'mis' })
  })
  test('within a tensor: InvalidOffset before ValidationOverflow', () => {
    expectCode(makeFile(obj(entry('t', 'U8', ['18446744073709551615'], 1, 1)), 1), 'InvalidOffset', { tensor: 't' })
  })
  test('within a tensor: ValidationOverflow before MisalignedSlice', () => {
    expectCode(makeFile(obj(entry('t', 'F4', ['9007199254740993'], 0, 1)), 1), 'ValidationOverflow', { tensor: 't' })
  })
  test('within a tensor: MisalignedSlice before TensorInvalidInfo', () => {
    expectCode(makeFile(obj(entry('t', 'F4', [3], 0, 7)), 7), 'MisalignedSlice', { tensor: 't' })
  })
  test('TensorInvalidInfo before MetadataIncompleteBuffer', () => {
    expectCode(makeFile(obj(entry('t', 'F32', [2], 0, 4)), 100), 'TensorInvalidInfo', { tensor: 't' })
  })
  test('InvalidOffset before MetadataIncompleteBuffer', () => {
    expectCode(makeFile(obj(u8('t', 1, 2))), 'InvalidOffset', { tensor: 't' })
  })
})

// -----------------------------------------------------------------------------------------------
// Hostile sizes. Each must finish within the default test timeout, throw only SafetensorsError,
// and not use memory out of proportion to the header (a coarse guard: RSS is noisy). The memory bound
// is checked where the process can be measured (the Node run); the browser run checks the outcome.
describe('robustness: large and hostile headers', () => {
  const MB = 1024 * 1024

  function bounded(bytes: Uint8Array, headerSize: number): { header?: ReturnType<typeof parseHeader>; error?: SafetensorsError } {
    const rss = () => globalThis.process?.memoryUsage?.().rss ?? 0
    const before = rss()
    let header: ReturnType<typeof parseHeader> | undefined
    let error: SafetensorsError | undefined
    try {
      header = parseHeader(bytes)
    } catch (e) {
      expect(e).toBeInstanceOf(SafetensorsError)
      error = e as SafetensorsError
    }
    const growth = rss() - before
    expect(growth, `RSS grew by ${(growth / MB).toFixed(1)} MB`).toBeLessThan(20 * headerSize + 64 * MB)
    return { header, error }
  }

  test('~10 MB header: an unknown field with a million small keys (valid)', () => {
    const keys: string[] = []
    for (let i = 0; i < 1_000_000; i++) keys.push(`"k${i}":0`)
    const header = withExtra(`"x":{${keys.join(',')}}`)
    const bytes = makeFile(header, 4)
    const { header: h, error } = bounded(bytes, header.length)
    expect(error?.code).toBeUndefined()
    expect(h!.tensors.map((t) => t.name)).toEqual(['w'])
  })

  test('~10 MB header with a duplicate key at the very end of a million keys', () => {
    const keys: string[] = []
    for (let i = 0; i < 1_000_000; i++) keys.push(`"k${i}":0`)
    keys.push('"k0":0')
    const header = withExtra(`"x":{${keys.join(',')}}`)
    expect(bounded(makeFile(header, 4), header.length).error?.code).toBe(IHD)
  })

  test('5 MB of [ as the whole header', () => {
    const header = '['.repeat(5 * MB)
    expect(bounded(makeFile(header), header.length).error?.code).toBe(IHD)
  })

  test('5 MB of [ in an unknown field', () => {
    const header = withExtra(`"x":${'['.repeat(5 * MB)}`)
    expect(bounded(makeFile(header, 4), header.length).error?.code).toBe(IHD)
  })

  test('100,000 balanced [ ] in an unknown field: depth is bounded', () => {
    const header = withExtra(`"x":${'['.repeat(100_000)}${']'.repeat(100_000)}`)
    expectCode(makeFile(header, 4), IHD)
  })

  test('1,000,000 nested objects {"a": in an unknown field', () => {
    const header = withExtra(`"x":${'{"a":'.repeat(1_000_000)}0${'}'.repeat(1_000_000)}`)
    expect(bounded(makeFile(header, 4), header.length).error?.code).toBe(IHD)
  })

  test('5 MB metadata string value (valid)', () => {
    const value = 'v'.repeat(5 * MB)
    const header = `{"__metadata__":{"big":"${value}"}}`
    const { header: h } = bounded(makeFile(header), header.length)
    expect(h!.metadata!.big.length).toBe(value.length)
  })

  test('5 MB of leading spaces before {} (valid)', () => {
    const header = `${' '.repeat(5 * MB)}{}`
    expect(bounded(makeFile(header), header.length).header!.tensors).toEqual([])
  })

  test('100,000 tensors (valid, data order kept)', () => {
    const entries: string[] = []
    for (let i = 99_999; i >= 0; i--) entries.push(u8(`t${i}`, i, i + 1)) // header order reversed
    const header = obj(...entries)
    const { header: h } = bounded(makeFile(header, 100_000), header.length)
    expect(h!.tensors.length).toBe(100_000)
    expect(h!.tensors[0].name).toBe('t0')
    expect(h!.tensors[99_999].name).toBe('t99999')
    expect(h!.tensor('t12345').dataOffsets).toEqual([12345, 12346])
  })

  test('N = 100,000,000 claimed by a 1 KB file: rejected without reading or allocating it', () => {
    const bytes = makeFile(' '.repeat(1000), 0, 100_000_000)
    expect(bounded(bytes, 1000).error?.code).toBe('InvalidHeaderLength')
  })
})
