// The package installed from source (issue 38), in the full matrix only (minutes: the clone's dependencies are
// installed and the package built): `npm install <git url>` of a clone of this repository's committed HEAD (a
// git+file:// URL, so nothing but npm's cache is fetched) into an empty folder builds it by its prepare script,
// and the installed command and both entries work. And `npm ci` warns of no engine on any Node the README names.
import { execFile, execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import { nodeBinary, VERSIONS } from '../../scripts/node-versions.js'
import { FIXTURES_REAL } from '../helpers.ts'
import { ROOT } from '../packed.ts'
import { headerOf } from '../read-helpers.ts'

const run = promisify(execFile)
const FILE = `${FIXTURES_REAL}fluxml__safetensors.jl__model.with_metadata.safetensors`
const TEMP = mkdtempSync(join(tmpdir(), 'safetensors-install-'))
afterAll(() => rmSync(TEMP, { recursive: true, force: true }))

test('npm install git+file://<a clone> into an empty folder: the command and both entries work', async () => {
  const clone = join(TEMP, 'clone')
  execFileSync('git', ['clone', '--quiet', ROOT, clone])
  const app = join(TEMP, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', `git+file://${clone}`], { cwd: app, maxBuffer: 64 << 20 })

  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
  const bin = join(app, 'node_modules/.bin/safetensors-wasm')
  expect((await run(bin, ['--version'], { cwd: app })).stdout).toBe(`${version}\n`)
  const inspected = JSON.parse((await run(bin, ['inspect', FILE, '--json'], { cwd: app })).stdout)
  const names = Object.keys(headerOf(readFileSync(FILE)).tensors).sort()
  expect(inspected.tensors.map((t: { name: string }) => t.name).sort()).toEqual(names)

  const script = `const main = await import('safetensors-wasm')
const gguf = await import('safetensors-wasm/gguf')
const file = await main.open(process.argv[1])
console.log(JSON.stringify({ names: file.names().sort(), writeGguf: typeof gguf.writeGguf }))
await file.close()`
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script, FILE], { cwd: app })
  expect(JSON.parse(stdout)).toEqual({ names, writeGguf: 'function' })
}, 1_800_000)

describe('npm ci prints no engine warning', () => {
  // The npm on the PATH, run by each Node: its engine checks take the Node that runs it.
  const npmCli = realpathSync(execFileSync('which', ['npm'], { encoding: 'utf8' }).trim())
  test.each([process.versions.node, ...VERSIONS])(
    'on Node %s',
    async (version) => {
      const node = version === process.versions.node ? process.execPath : nodeBinary(version)
      const dir = mkdtempSync(join(TEMP, 'engines-'))
      for (const file of ['package.json', 'package-lock.json']) cpSync(join(ROOT, file), join(dir, file))
      const { stdout, stderr } = await run(node, [npmCli, 'ci', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir, maxBuffer: 64 << 20 })
      expect(`${stdout}${stderr}`).not.toContain('EBADENGINE')
    },
    600_000,
  )
})
