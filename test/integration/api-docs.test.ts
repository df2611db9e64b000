// The API reference as `npm run docs` (TypeDoc) writes it, read from its JSON: TypeDoc itself fails on an
// export without documentation; this checks what it does not: every exported function says what it throws,
// and every option says its default (but `signal` and callbacks, whose absence is the default).
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { ROOT } from '../packed.ts'

interface Reflection {
  name: string
  kind: number
  children?: Reflection[]
  signatures?: Reflection[]
  comment?: { blockTags?: Array<{ tag: string }> }
  type?: { type: string; name?: string }
}

// TypeDoc's ReflectionKind values.
const FUNCTION = 64
const INTERFACE = 256

const API_JSON = join(ROOT, 'build/api/api.json')
const has = (r: Reflection, tag: string) => r.comment?.blockTags?.some((t) => t.tag === tag) ?? false
const members = (kind: number) => readProject().flatMap((entry) => (entry.children ?? []).filter((r) => r.kind === kind).map((r) => ({ entry: entry.name, r })))

function readProject(): Reflection[] {
  if (!existsSync(API_JSON)) throw new Error(`${API_JSON} is missing: run npm run docs first`)
  return (JSON.parse(readFileSync(API_JSON, 'utf8')) as Reflection).children ?? []
}

test('every exported function has a @throws list', () => {
  const functions = members(FUNCTION)
  expect(functions.length).toBeGreaterThan(20)
  const silent = functions.filter(({ r }) => !r.signatures?.every((s) => has(s, '@throws'))).map(({ entry, r }) => `${entry}.${r.name}`)
  expect(silent).toEqual([])
})

test('every option has a @defaultValue, but a signal or a callback', () => {
  const options = members(INTERFACE).filter(({ r }) => r.name.endsWith('Options'))
  expect(options.length).toBeGreaterThan(10)
  const undocumented = options.flatMap(({ entry, r }) =>
    (r.children ?? [])
      .filter((p) => !has(p, '@defaultValue') && !['AbortSignal', 'ProgressCallback'].includes(p.type?.name ?? ''))
      .map((p) => `${entry}.${r.name}.${p.name}`),
  )
  expect(undocumented).toEqual([])
})
