// The index scanner (src/format/model-index.ts over assembly/header.ts scanIndex) against a reference written
// here from the rules: the strict JSON parser of the reference validator (every object's keys distinct
// after decoding, no lone surrogate, at most 64 levels), then the index's schema. Mutants of real and
// synthetic indexes must get the same verdict, and where valid the same metadata, shards and entries.
//
//   INDEX_MUTANTS=100000 npx vitest run test/format/model-index.test.ts   # more mutants (default 4000)
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { SafetensorsError } from '../../src/errors.ts'
import { parseIndex } from '../../src/format/model-index.ts'
import { openModel } from '../../src/node.ts'
import { escapeBytes, FIXTURES_NUMBERS, FIXTURES_REAL, utf8 } from '../helpers.ts'
import { rangeHandler, startServer } from '../http-server.ts'
import { bytesToLatin1, latin1ToBytes, mutate, type Rng, rngFor } from '../mutants.ts'
import { buildFile } from '../read-helpers.ts'
import { decodeUtf8Strict, JsonError, type JValue, parseJson } from '../reference-validator.ts'

const COUNT = Number(process.env.INDEX_MUTANTS ?? 4000)

type Verdict = { ok: true; metadata: unknown; shards: string[]; entries: Array<[string, string]> } | { ok: false; why: string }

/** The rules of an index, one by one, over the reference's parse tree. */
function referenceIndex(bytes: Uint8Array): Verdict {
  const fail = (why: string): Verdict => ({ ok: false, why })
  let text = decodeUtf8Strict(bytes)
  if (text === null) return fail('not UTF-8')
  // A byte order mark is dropped, as TextDecoder does (the index's JSON.parse never saw one).
  if (text.startsWith('\ufeff')) text = text.slice(1)
  let doc: JValue
  try {
    doc = parseJson(text)
  } catch (e) {
    if (e instanceof JsonError) return fail(e.message)
    throw e
  }
  if (doc.kind !== 'object') return fail('not an object')
  const member = (key: string) => doc.members.find(([k]) => k === key)?.[1]
  const map = member('weight_map')
  if (map?.kind !== 'object') return fail('no weight_map object')
  const metadata = member('metadata')
  if (metadata !== undefined && metadata.kind !== 'object') return fail('metadata not an object')
  const entries: Array<[string, string]> = []
  for (const [name, value] of map.members) {
    if (value.kind !== 'string') return fail(`weight_map[${name}] not a string`)
    entries.push([name, value.value])
  }
  const shards = [...new Set(entries.map(([, shard]) => shard))]
  for (const shard of shards) if (!plainFileName(shard)) return fail(`shard name ${shard}`)
  return { ok: true, metadata: metadata && JSON.parse(text).metadata, shards, entries }
}

/**
 * A shard name that is a file directly in the index's folder, however it is reached: not empty, "." or
 * "..", no control character (URL parsing drops tabs and newlines), no white space at either end (URL
 * parsing strips it), no path separator or drive letter, none of % ? # (a URL would read an escape, a
 * query or a fragment).
 */
function plainFileName(shard: string): boolean {
  if (shard === '' || shard === '.' || shard === '..') return false
  for (const c of shard) if (c.charCodeAt(0) < 0x20 || c === '\u007f' || '/\\:%?#'.includes(c)) return false
  return shard.trim() === shard
}

function library(bytes: Uint8Array): Verdict {
  try {
    const index = parseIndex('index.json', bytes)
    return { ok: true, metadata: index.metadata, shards: index.shards, entries: [...index.weightMap()] }
  } catch (e) {
    if (e instanceof SafetensorsError && e.code === 'InvalidHeaderDeserialization') return { ok: false, why: e.message }
    throw e
  }
}

const SEEDS = [
  readFileSync(join(FIXTURES_REAL, 'index', 'fluxml__safetensors.jl__model.safetensors.index.json')),
  readFileSync(join(FIXTURES_REAL, 'index', 'yourilalain__2prymmal-yi1.5-6b-slerp__model.safetensors.index.json')),
  utf8('{"weight_map":{}}'),
  utf8(
    '\ufeff { "metadata" : {"total_size": 12, "nested": {"a": [1, -2.5e3, true, null, {"b": "c"}]}},\n' +
      ' "weight_map": {"a": "s1.safetensors", "b\\u0061": "s1.safetensors", "é": "s2.safetensors", "😀": "s\\u0031.safetensors",\n' +
      '  "c": "s2.safetensors", "d\\"q": "s3.safetensors"}, "format": ["pt", 1] }\n',
  ),
].map((b) => bytesToLatin1(new Uint8Array(b)))

const VALUES = ['1', 'null', 'true', '{}', '[]', '"s1.safetensors"', '"../x"', '"a/b"', '"%2e%2e"', '""', '"x\\u0000y"', '"s\\u002fx"']
// Names that URL parsing or a file system would read as another file, and names that are fine.
const BAD_SHARD_NAMES = [
  '.\t.',
  ' .. ',
  '..',
  '.',
  'a/b',
  'a\\b',
  '%2e%2e',
  '.%2E',
  '\u0000x',
  'a\tb.safetensors',
  'a\nb.safetensors',
  'a\rb.safetensors',
  'a\u007fb.safetensors',
  'a\u001fb.safetensors',
  ' model.safetensors',
  'model.safetensors ',
  '\u00a0model.safetensors',
  'model.safetensors\u3000',
  'c:model.safetensors',
  'model.safetensors?x=1',
  'model.safetensors#x',
  'model%41.safetensors',
  '100%.safetensors',
]
const GOOD_SHARD_NAMES = [
  'model-00001-of-00002.safetensors',
  'modèle-日本語.safetensors',
  'my model.safetensors',
  'a\u00a0b.safetensors',
  "x!$&'()*+,;=@~.safetensors",
]
/** A JSON string of `s` in ASCII alone (the mutants' text is one char per byte). */
const asciiJson = (s: string) => JSON.stringify(s).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
VALUES.push(...[...BAD_SHARD_NAMES, ...GOOD_SHARD_NAMES].map(asciiJson))
const DEEP = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`

/** Mutations where an index's own rules live, on its text (one char per byte). */
function mutateIndex(text: string, r: Rng, log: string[]): string {
  const pairs = [...text.matchAll(/"((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)"/g)]
  const pair = pairs.length > 0 ? r.pick(pairs) : undefined
  switch (r.int(8)) {
    case 0: // an entry listed again, in the same shard or another
      if (!pair) return text
      log.push(`repeat ${pair[1]}`)
      return text.replace(pair[0], `${pair[0]}, "${pair[1]}": "${r.pick(pairs)[2]}"`)
    case 1: // a value that is not a plain file name
      if (!pair) return text
      log.push(`value of ${pair[1]}`)
      return text.replace(pair[0], `"${pair[1]}": ${r.pick(VALUES)}`)
    case 2: // weight_map or metadata of another type, or gone
      log.push('weight_map/metadata')
      return text.replace(
        r.pick([/"weight_map"\s*:/, /"metadata"\s*:/]),
        r.pick(['"weight_map": ', '"metadata": ', '"other": ', `"metadata": ${r.pick(VALUES)}, "x":`]),
      )
    case 3: // a value nested around the depth limit, at the top or in the metadata
      log.push('deep')
      return text.replace(r.pick(['{', /"metadata"\s*:\s*{/]), (found) => `${found}"deep": ${DEEP(60 + r.int(6))}, `)
    case 4: // a name's character escaped: the same name, or a repeat of another entry's
      if (!pair) return text
      log.push(`escape in ${pair[1]}`)
      return text.replace(`"${pair[1]}"`, `"${pair[1].replace(/[a-z]/, (c) => `\\u00${c.charCodeAt(0).toString(16)}`)}"`)
    case 5: // a byte order mark, or text before or after the object
      log.push('around')
      return r.pick([`\u00ef\u00bb\u00bf${text}`, `${text} x`, `${text}{}`, ` ${text}\n`])
    case 6: // two entries' names the same
      if (pairs.length < 2) return text
      log.push('rename')
      return text.replace(r.pick(pairs)[0], `"${r.pick(pairs)[1]}": "s.safetensors"`)
    default: // a top-level key repeated, weight_map included
      log.push('top repeat')
      return text.replace(/}\s*$/, `, ${r.pick(['"weight_map": {}', '"metadata": {}', '"format": 1'])}}`)
  }
}

describe('the index scanner agrees with the reference', () => {
  test(
    `${COUNT} mutants of real and synthetic indexes: the same verdict, and where valid the same metadata, shards and entries`,
    () => {
      const outcomes = { ok: 0, rejected: 0 }
      for (let i = 0; i < COUNT; i++) {
        const r = rngFor(0x1dec5, i)
        let text = r.pick(SEEDS)
        const log: string[] = []
        for (let k = 1 + r.int(3); k > 0; k--) {
          if (r.next() < 0.5) text = mutateIndex(text, r, log)
          else {
            // The header mutants' byte-level changes (bytes, bits, numbers, whitespace, escapes).
            const m = { header: text, dataLength: 0, log }
            mutate(m, r)
            text = m.header
          }
        }
        const bytes = latin1ToBytes(text)
        const want = referenceIndex(bytes)
        const got = library(bytes)
        const context = `mutant ${i}: ${log.join('; ')}\n${escapeBytes(bytes, 400)}\nreference: ${want.ok ? 'valid' : want.why}\nlibrary: ${got.ok ? 'valid' : got.why}`
        expect(got.ok, context).toBe(want.ok)
        if (got.ok && want.ok) {
          expect(got.metadata, context).toEqual(want.metadata)
          expect(got.shards, context).toEqual(want.shards)
          expect(got.entries, context).toEqual(want.entries)
        }
        outcomes[want.ok ? 'ok' : 'rejected']++
      }
      // Agreement says little unless both verdicts are common.
      expect(outcomes.ok).toBeGreaterThan(COUNT / 10)
      expect(outcomes.rejected).toBeGreaterThan(COUNT / 10)
    },
    60_000 + COUNT * 5,
  )

  test('an index of 91,280 entries over 163 shards, in model order and sorted: the entries and shards JSON.parse finds, in order', () => {
    const names = Array.from({ length: 91_280 }, (_, i) => `model.layers.${Math.floor(i / 1520)}.mlp.experts.${(i >> 2) % 380}.w${i % 4}.weight`)
    const modelOrder = names.map((name, i) => [name, `model-${String(1 + Math.floor(i / 560)).padStart(5, '0')}-of-00163.safetensors`])
    for (const entries of [modelOrder, modelOrder.toSorted(([a], [b]) => (a < b ? -1 : 1))]) {
      const index = JSON.stringify({ metadata: { total_size: 1e12 }, weight_map: Object.fromEntries(entries) }, null, 2)
      const parsed = parseIndex('index.json', utf8(index))
      expect([...parsed.weightMap()]).toEqual(entries)
      expect(parsed.shards).toEqual([...new Set(entries.map(([, shard]) => shard))])
      expect(parsed.shards).toHaveLength(163)
      expect(parsed.entries).toBe(91_280)
      expect(parsed.metadata).toEqual({ total_size: 1e12 })
    }
  })
})

describe('errors name what is wrong and where', () => {
  const messageOf = (text: string | Uint8Array) => {
    try {
      parseIndex('model.safetensors.index.json', typeof text === 'string' ? utf8(text) : text)
    } catch (e) {
      expect(e).toBeInstanceOf(SafetensorsError)
      expect((e as SafetensorsError).code).toBe('InvalidHeaderDeserialization')
      return (e as SafetensorsError).message
    }
    throw new Error(`accepted: ${text}`)
  }
  test.each([
    ['{"weight_map":{"a":"s.safetensors","a":"t.safetensors"}}', 'byte 35: the key "a" appears twice in one object'],
    ['{"weight_map":{"w\\u0031":"s.safetensors","w1":"s.safetensors"}}', 'the key "w1" appears twice'],
    ['{"weight_map":{"a":"s.safetensors","b":7}}', 'byte 39: weight_map["b"] must be a file name'],
    ['{"metadata":{"total_size":1}}', 'expected an object with a "weight_map" object'],
    ['[]', 'byte 0: expected an object with a "weight_map" object'],
    ['{"weight_map":[]}', 'byte 14: "weight_map" must be an object'],
    ['{"weight_map":{},"metadata":null}', 'byte 28: "metadata" must be an object'],
    ['{"weight_map":{}} x', 'byte 18: unexpected characters after the JSON object'],
    ['{"weight_map":{"a":"s.safetensors"', "byte 34: expected ',' or '}' (the index ended)"],
    [`{"weight_map":{},"x":${DEEP(64)}}`, 'byte 84: values nested deeper than 64 levels'],
    ['{"weight_map":{"a":"../s.safetensors"}}', 'shard name "../s.safetensors" is not a plain file name'],
  ])('%s', (text, message) => {
    const got = messageOf(text)
    expect(got.startsWith('model.safetensors.index.json: '), got).toBe(true)
    expect(got).toContain(message)
  })

  test('text that is not UTF-8', () => {
    expect(messageOf(new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))).toContain('not UTF-8')
  })
})

describe('numbers that overflow a double are refused in an index, as in a header', () => {
  const golden = JSON.parse(readFileSync(join(FIXTURES_NUMBERS, 'overflow.json'), 'utf8')) as Array<[string, boolean]>
  const indexWith = (number: string) => utf8(`{"metadata":{"total_size":4,"x":[{"y":${number}}]},"weight_map":{"w":"s.safetensors"}}`)

  test("in the metadata, numbers about the largest double (test/fixtures/numbers): the reference's verdicts", () => {
    const wrong = golden.filter(([number, valid]) => library(indexWith(number)).ok !== valid || referenceIndex(indexWith(number)).ok !== valid)
    expect(
      wrong.slice(0, 20).map(([number]) => number),
      `${wrong.length} disagreements`,
    ).toEqual([])
  })

  test('openModel of a folder whose index holds 1e309 rejects it, naming the index', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'index-number-'))
    try {
      writeFileSync(join(folder, 'model.safetensors.index.json'), indexWith('1e309'))
      await expect(openModel(folder)).rejects.toMatchObject({
        code: 'InvalidHeaderDeserialization',
        message: expect.stringMatching(/model\.safetensors\.index\.json: .*number out of range/),
      })
    } finally {
      rmSync(folder, { recursive: true, force: true })
    }
  })
})

describe('shard names: a file directly in the index folder, or an error that names it', () => {
  const SHARD = buildFile([{ name: 'w', dtype: 'U8', shape: [2], bytes: new Uint8Array([1, 2]) }])
  const indexFor = (shard: string) => utf8(JSON.stringify({ weight_map: { w: shard } }))

  test.each(BAD_SHARD_NAMES.map((name) => [JSON.stringify(name), name]))('%s is refused', (_, name) => {
    let error: unknown
    try {
      parseIndex('model.safetensors.index.json', indexFor(name))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SafetensorsError)
    expect(error).toMatchObject({ code: 'InvalidHeaderDeserialization', message: expect.stringContaining(`shard name ${JSON.stringify(name)}`) })
  })

  test('over HTTP, with an Authorization header: the server sees no request outside the folder', async () => {
    // Every path but the index's serves a valid shard, so that a request that escapes would succeed.
    const server = await startServer(rangeHandler((path) => (path === '/models/m/model.safetensors.index.json' ? index : SHARD)))
    let index = indexFor('')
    try {
      for (const name of BAD_SHARD_NAMES) {
        index = indexFor(name)
        server.clear()
        await expect(openModel(`${server.url}models/m/`, { headers: { Authorization: 'Bearer secret' } }), JSON.stringify(name)).rejects.toMatchObject({
          code: 'InvalidHeaderDeserialization',
          message: expect.stringContaining(JSON.stringify(name)),
        })
        await server.settled()
        expect(server.log.map((e) => e.path)).toEqual(['/models/m/model.safetensors.index.json'])
      }
      for (const name of GOOD_SHARD_NAMES) {
        index = indexFor(name)
        server.clear()
        const model = await openModel(`${server.url}models/m/`)
        expect(model.shardOf('w')).toBe(name)
        expect([...(await model.getTensor('w')).data]).toEqual([1, 2])
        await model.close()
        await server.settled()
        expect(new Set(server.log.map((e) => e.path))).toEqual(
          new Set(['/models/m/model.safetensors.index.json', `/models/m/${name}`, '/models/m/config.json']),
        )
      }
    } finally {
      await server.close()
    }
  })

  test('on disk: the same verdicts', async () => {
    const root = mkdtempSync(join(tmpdir(), 'shard-names-'))
    try {
      const folder = join(root, 'm')
      mkdirSync(folder)
      for (const name of BAD_SHARD_NAMES) {
        writeFileSync(join(folder, 'model.safetensors.index.json'), indexFor(name))
        await expect(openModel(folder), JSON.stringify(name)).rejects.toMatchObject({
          code: 'InvalidHeaderDeserialization',
          message: expect.stringContaining(JSON.stringify(name)),
        })
      }
      for (const name of GOOD_SHARD_NAMES) {
        writeFileSync(join(folder, 'model.safetensors.index.json'), indexFor(name))
        writeFileSync(join(folder, name), SHARD)
        const model = await openModel(folder)
        expect([...(await model.getTensor('w')).data]).toEqual([1, 2])
        await model.close()
      }
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
