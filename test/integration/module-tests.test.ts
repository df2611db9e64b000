// Tests follow modules: the tests of src/<room>/<module>.ts are test/<room>/<module>.test.ts, so that a
// module's tests are found by its path. Held for the modules of 100 lines or more (the small ones are entries,
// tables and glue, tested through the modules that use them), at 80% at least, so that the share stays as
// modules are added; the failure lists the modules without a test file, largest first.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { ROOT } from '../packed.ts'

const MIN_LINES = 100
const MIN_SHARE = 0.8

/** Every module of src/ (TypeScript, not declarations) with its line count. */
function modules(): Array<{ path: string; lines: number }> {
  return readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .map((file) => `src/${file.split('\\').join('/')}`)
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))
    .map((path) => ({ path, lines: readFileSync(join(ROOT, path), 'utf8').split('\n').length - 1 }))
}

/** Where the tests of a module live: src/<room>/<module>.ts -> test/<room>/<module>.test.ts. */
const testFileOf = (path: string) => path.replace(/^src\//, 'test/').replace(/\.ts$/, '.test.ts')

test(`at least ${MIN_SHARE * 100}% of the src modules of ${MIN_LINES}+ lines have a test file named after them, where they are`, () => {
  const large = modules().filter(({ lines }) => lines >= MIN_LINES)
  expect(large.length).toBeGreaterThan(40)
  const untested = large.filter(({ path }) => !existsSync(join(ROOT, testFileOf(path))))
  const share = (large.length - untested.length) / large.length
  const listed = untested
    .sort((a, b) => b.lines - a.lines)
    .map(({ path, lines }) => `${path} (${lines} lines): no ${testFileOf(path)}`)
    .join('\n')
  console.log(`${large.length - untested.length} of ${large.length} src modules of ${MIN_LINES}+ lines have a test file (${(share * 100).toFixed(0)}%)`)
  expect(share, `${untested.length} modules without a test file:\n${listed}`).toBeGreaterThanOrEqual(MIN_SHARE)
})

test('every test file of a room of src/ is named after one of its modules', () => {
  const rooms = readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true }).filter((entry) => entry.isDirectory())
  expect(rooms.length).toBeGreaterThan(5)
  const tests = readdirSync(join(ROOT, 'test'), { recursive: true, encoding: 'utf8' })
    .map((file) => `test/${file.split('\\').join('/')}`)
    .filter((path) => path.endsWith('.test.ts') && !path.startsWith('test/integration/') && path.includes('/', 5))
  expect(tests.length).toBeGreaterThan(20)
  // A module's second file says which of its sides it tests after a dash: test/read/file-float16.test.ts.
  const orphans = tests.filter((path) => {
    const base = path.replace(/^test\//, 'src/').replace(/\.test\.ts$/, '')
    return !existsSync(`${join(ROOT, base)}.ts`) && !existsSync(`${join(ROOT, base.replace(/-[^/-]*$/, ''))}.ts`)
  })
  expect(orphans, 'test files in a room of test/ named after no module of src/').toEqual([])
})
