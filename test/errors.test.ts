// src/errors.ts: the one error class and its codes. The codes are held to the user's guide (docs/reading.md, "What
// is checked": the header's checks in their order, then the reads', the quantized models' and GGUF's), the
// class to what every layer relies on: `instanceof` across the entries, the facts as fields, inContext keeping
// them.
import { readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import { inContext, SafetensorsError } from '../src/errors.ts'
import { openGguf } from '../src/gguf-node.ts'
import { SafetensorsError as FromIndex, parseHeader } from '../src/index.ts'
import { SafetensorsError as FromNode, open } from '../src/node.ts'
import { EVERY_OUTCOME } from './mutants.ts'
import { ROOT } from './packed.ts'

const SOURCE = readFileSync(`${ROOT}src/errors.ts`, 'utf8')

/** The codes docs/reading.md names: the table of the header's checks in order, then the codes it says the rest add. */
function guideCodes(): string[] {
  const guide = readFileSync(`${ROOT}docs/reading.md`, 'utf8')
  const checked = guide.slice(guide.indexOf('## What is checked'))
  const table = [...checked.matchAll(/^\|[^\n]*\| `(\w+)` \|$/gm)].map(([, code]) => code)
  const after = checked.slice(checked.indexOf('Every error is a `SafetensorsError`'))
  const added = [...after.slice(0, after.indexOf('\n\n')).matchAll(/`(\w+)`/g)].map(([, code]) => code).filter((code) => code !== 'SafetensorsError')
  return [...table, ...added]
}

describe('the codes', () => {
  test('the guide lists the header checks in the order of the format`s rules, then nine more codes', () => {
    const codes = guideCodes()
    expect(codes.slice(0, 10)).toEqual(EVERY_OUTCOME.slice(1))
    expect(codes).toHaveLength(19)
  })

  test('ErrorCode is the guide`s codes, in its order, and its TSDoc explains each in that order', () => {
    const union = SOURCE.slice(SOURCE.indexOf('export type ErrorCode'))
    const declared = [...union.slice(0, union.indexOf('\n\n')).matchAll(/\| '(\w+)'/g)].map(([, code]) => code)
    expect(declared).toEqual(guideCodes())
    const explained = [...SOURCE.slice(0, SOURCE.indexOf('export type ErrorCode')).matchAll(/^ \* - `(\w+)`:/gm)].map(([, code]) => code)
    expect(explained).toEqual(declared)
  })
})

describe('SafetensorsError', () => {
  test('an Error with its code, message and name; the facts as fields, the cause as Error keeps it', () => {
    const cause = new Error('ECONNRESET')
    const error = new SafetensorsError('Io', 'https://example.com/a.safetensors: HTTP 503', { status: 503, url: 'https://example.com/a.safetensors', cause })
    expect(error).toBeInstanceOf(Error)
    expect(error.name).toBe('SafetensorsError')
    expect(error.code).toBe('Io')
    expect(error.message).toBe('https://example.com/a.safetensors: HTTP 503')
    expect([error.status, error.url, error.path, error.cause]).toEqual([503, 'https://example.com/a.safetensors', undefined, cause])
    expect(String(error)).toBe('SafetensorsError: https://example.com/a.safetensors: HTTP 503')
    const bare = new SafetensorsError('TensorNotFound', 'no tensor "w"')
    expect([bare.status, bare.url, bare.path, 'cause' in bare]).toEqual([undefined, undefined, undefined, false])
  })

  test('one class, exported by the main entries: what the header, the files and the GGUF entry throw is an instance of it', async () => {
    expect(new Set([SafetensorsError, FromIndex, FromNode]).size).toBe(1)
    const fromHeader = (() => {
      try {
        parseHeader(new Uint8Array(4))
      } catch (error) {
        return error
      }
    })()
    const fromFile = await open(`${ROOT}test/fixtures/no-such-file.safetensors`).catch((error: unknown) => error)
    const fromGguf = await openGguf(new Uint8Array(16)).catch((error: unknown) => error)
    for (const [error, code] of [
      [fromHeader, 'HeaderTooSmall'],
      [fromFile, 'Io'],
      [fromGguf, 'InvalidGguf'],
    ] as const) {
      expect(error).toBeInstanceOf(FromIndex)
      expect(error).toBeInstanceOf(FromNode)
      expect((error as SafetensorsError).code).toBe(code)
    }
    expect((fromFile as SafetensorsError).path).toBe(`${ROOT}test/fixtures/no-such-file.safetensors`)
  })
})

describe('inContext', () => {
  const inner = new SafetensorsError('Io', 'HTTP 404', { status: 404, url: 'https://example.com/m/model-00002-of-00003.safetensors' })

  test('the message led by the context; the code and every fact kept; the cause is the error it wraps', () => {
    const outer = inContext(inner, 'model-00002-of-00003.safetensors')
    expect(outer).toBeInstanceOf(SafetensorsError)
    expect(outer).not.toBe(inner)
    expect(outer.message).toBe('model-00002-of-00003.safetensors: HTTP 404')
    expect([outer.code, outer.status, outer.url, outer.path, outer.cause]).toEqual(['Io', 404, inner.url, undefined, inner])
  })

  test('`more` adds facts and replaces those it names, never the cause', () => {
    const outer = inContext(inner, 'shard 2', { path: '/models/m', url: 'https://example.com/m/index.json', cause: new Error('other') })
    expect([outer.status, outer.url, outer.path, outer.cause]).toEqual([404, 'https://example.com/m/index.json', '/models/m', inner])
    expect(inContext(outer, 'model').message).toBe('model: shard 2: HTTP 404')
  })
})
