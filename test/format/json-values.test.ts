// The typed reading of a model's JSON files (src/format/json-values.ts): each getter refuses what it is not given
// with a coded error naming the file and the key path, quoting at most a short excerpt; depth is checked before
// JSON.parse sees the text.
import { expect, test } from 'vitest'
import { excerpt, JsonValue, MAX_JSON_DEPTH, parseJson } from '../../src/format/json-values.ts'
import { SafetensorsError } from '../../src/index.ts'

/** The coded error `read` throws. */
function errorOf(read: () => unknown): SafetensorsError {
  try {
    read()
  } catch (error) {
    expect(error).toBeInstanceOf(SafetensorsError)
    return error as SafetensorsError
  }
  throw new Error('no error')
}

const config = parseJson(
  JSON.stringify({ architectures: [{ toString: 1 }], rope_scaling: { factor: 'x', long: 'y'.repeat(10_000) }, heads: 4.5, list: [1, 2], flag: 0 }).replace(
    '4.5',
    '4.5,"big":1e400',
  ),
  'config.json',
)

test('each getter refuses another type, naming the file, the key path and what it got', () => {
  const cases: Array<[() => unknown, string]> = [
    [() => config.get('architectures').items()[0].string(), 'config.json: "architectures"[0] must be a string, got an object'],
    [() => config.get('rope_scaling').get('factor').number(), 'config.json: "rope_scaling"."factor" must be a finite number, got the string "x"'],
    [() => config.get('big').number(), 'config.json: "big" must be a finite number, got a number beyond the range of a double'],
    [() => config.get('heads').integer(1, 2 ** 32 - 1), 'config.json: "heads" must be an integer from 1 to 4294967295, got the number 4.5'],
    [() => config.get('missing').integer(0), 'config.json: "missing" is missing: it must be an integer of at least 0'],
    [() => config.get('list').get('x'), 'config.json: "list" must be an object, got an array of 2 items'],
    [() => config.get('list').string(), 'config.json: "list" must be a string, got an array of 2 items'],
    [() => config.get('flag').boolean(), 'config.json: "flag" must be true or false, got the number 0'],
    [() => config.get('flag').oneOf(['a', 'b']), 'config.json: "flag" must be one of "a", "b", got the number 0'],
    [() => config.members()[0][1].object().get('x'), 'config.json: "architectures" must be an object, got an array of 1 item'],
  ]
  for (const [read, message] of cases) {
    const error = errorOf(read)
    expect(error.code).toBe('InvalidHeaderDeserialization')
    expect(error.message).toBe(message)
  }
})

test('a long string is quoted as an excerpt of 40 characters, never whole', () => {
  const message = errorOf(() => config.get('rope_scaling').get('long').number()).message
  expect(message).toBe(`config.json: "rope_scaling"."long" must be a finite number, got the string ${JSON.stringify('y'.repeat(40))}…`)
  expect(excerpt('a"b')).toBe('"a\\"b"')
})

test('absent values: a missing key and null are absent, optional() gives undefined, a member of an absent object is absent', () => {
  const value = parseJson('{"a":null,"b":{"c":1}}', 'x.json')
  expect(value.get('a').present).toBe(false)
  expect(value.get('a').optional()).toBeUndefined()
  expect(value.get('nope').get('deeper').optional()).toBeUndefined()
  expect(value.get('b').get('c').optional()?.integer()).toBe(1)
  expect(value.first('nope', 'a', 'b').path).toBe('"b"')
  expect(value.first('nope', 'a').path).toBe('"nope"')
})

test('withCode: the same value, its errors of another code (a quantization block is UnsupportedQuantization)', () => {
  const block = parseJson('{"bits":{}}', 'config.json').get('bits').withCode('UnsupportedQuantization')
  const error = errorOf(() => block.integer())
  expect([error.code, error.message]).toEqual(['UnsupportedQuantization', 'config.json: "bits" must be an integer, got an object'])
})

test(`nesting deeper than ${MAX_JSON_DEPTH}, even 300,000 deep, is refused before JSON.parse, naming the top-level key`, () => {
  const deep = (n: number) => `{"a":"[[[","hidden_size":${'['.repeat(n)}${']'.repeat(n)}}`
  expect(
    parseJson(deep(MAX_JSON_DEPTH - 1), 'config.json')
      .get('hidden_size')
      .items(),
  ).toHaveLength(1)
  for (const depth of [MAX_JSON_DEPTH, 300_000]) {
    const error = errorOf(() => parseJson(deep(depth), 'config.json'))
    expect([error.code, error.message]).toEqual(['InvalidHeaderDeserialization', `config.json: "hidden_size" nests deeper than ${MAX_JSON_DEPTH} levels`])
  }
  expect(errorOf(() => parseJson('['.repeat(100), 'tokenizer.json')).message).toBe(`tokenizer.json: the top level nests deeper than ${MAX_JSON_DEPTH} levels`)
})

test('text that is not JSON: InvalidHeaderDeserialization naming the file (or the code given)', () => {
  expect(errorOf(() => parseJson('{"a":', 'tokenizer.json')).message).toMatch(/^tokenizer\.json: not JSON: /)
  expect(errorOf(() => parseJson('nul', 'state', 'InvalidQuantization')).code).toBe('InvalidQuantization')
  expect(new JsonValue(1, 'f.json').path).toBe('the top level')
})
