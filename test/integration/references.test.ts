// The repository's references to its own files, in comments, docs and scripts: a path such as src/read/file.ts or
// docs/gguf.md must lead to a file, so that a move or a removal updates what names it. The changelog is history and
// may name what is gone.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { ROOT } from '../packed.ts'

const SCANNED = ['src', 'assembly', 'test', 'docs', 'scripts', 'bench', 'inspector', 'examples']
const TOP_FILES = ['README.md', 'rollup.config.js', 'vitest.config.ts', 'vitest.browser.config.ts', 'package.json', '.ci/run']
const PATH = /\b(?:src|test|assembly|docs|scripts|bench|inspector|examples)\/[A-Za-z0-9_./-]+\.(?:ts|js|mjs|md|json|py|html|css|wasm)\b/g

function filesOf(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .map((file) => `${folder}/${file.split('\\').join('/')}`)
    .filter((file) => /\.(ts|js|mjs|md|py|html)$/.test(file) && !file.startsWith('test/fixtures/') && !file.startsWith('test/screenshots/'))
}

test('every file path named in the code, the docs and the scripts exists', () => {
  const files = [...SCANNED.flatMap(filesOf), ...TOP_FILES]
  expect(files.length).toBeGreaterThan(100)
  const named = files.flatMap((file) => [...readFileSync(join(ROOT, file), 'utf8').matchAll(PATH)].map(([path]) => ({ file, path })))
  expect(named.length).toBeGreaterThan(50)
  const missing = named.filter(({ path }) => !existsSync(join(ROOT, path)))
  expect(missing.map(({ file, path }) => `${file}: ${path}`)).toEqual([])
})
