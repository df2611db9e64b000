#!/usr/bin/env node
// The build, once for what is here: `node scripts/build-if-changed.js` runs `npm run build` unless dist/ is the
// build of these very sources, and `--record` (the build's last step) records that it is. npm runs it as
// `prepare` (on `npm ci` here, and twice in the clone that `npm install <git url>` makes: once when it installs
// the clone's dependencies, once before it packs it) and as `prepack` (`npm pack` runs prepack and prepare), and
// `npm test` runs it first: a build takes minutes on a small machine, so each of these builds at most once.
//
// dist/ is the build of the sources when the build's inputs (the sources, the build's settings, the lock file)
// and its outputs (dist/) hash as they did when the last build ended. A clone without its dependencies (`npm
// install ./clone`, `npm pack` in a fresh clone) gets them first with `npm ci`, whose own `prepare` then builds.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const INPUTS = [
  'src',
  'assembly',
  'scripts/inline-wasm.js',
  'rollup.config.js',
  'tsconfig.json',
  'tsconfig.build.json',
  'asconfig.json',
  'package.json',
  'package-lock.json',
]
const OUTPUTS = ['dist']
const RECORD = join(ROOT, 'build/last-build.json')
// The build's own tools: without them, the clone's dependencies are not installed.
const TOOLS = ['asc', 'tsc', 'rollup'].map((tool) => join(ROOT, 'node_modules/.bin', tool))

/**
 * One hash of the files under `paths` (relative to the repository): their names and bytes, in a fixed order.
 * @param {string[]} paths
 */
function hashOf(paths) {
  const hash = createHash('sha256')
  const add = (/** @type {string} */ path) => {
    if (!existsSync(path)) return
    if (statSync(path).isDirectory()) {
      for (const name of readdirSync(path).sort()) add(join(path, name))
      return
    }
    hash.update(`${relative(ROOT, path)}\0`)
    hash.update(readFileSync(path))
    hash.update('\0')
  }
  for (const path of paths) add(join(ROOT, path))
  return hash.digest('hex')
}

const state = () => ({ inputs: hashOf(INPUTS), outputs: hashOf(OUTPUTS) })

function lastBuild() {
  try {
    return JSON.parse(readFileSync(RECORD, 'utf8'))
  } catch {
    return undefined
  }
}

/**
 * Runs npm with `args` here, as the npm that runs this script (npm_execpath), else the one on the PATH; exits as
 * it does when it fails.
 * @param {string[]} args
 */
function npm(args) {
  const execPath = process.env.npm_execpath
  const [command, prefix] = execPath?.endsWith('.js') ? [process.execPath, [execPath]] : [execPath ?? 'npm', []]
  const run = spawnSync(command, [...prefix, ...args], { cwd: ROOT, stdio: 'inherit' })
  if (run.status !== 0) process.exit(run.status ?? 1)
}

if (process.argv.includes('--record')) {
  mkdirSync(join(ROOT, 'build'), { recursive: true })
  writeFileSync(RECORD, `${JSON.stringify(state())}\n`)
} else {
  if (!TOOLS.every((tool) => existsSync(tool))) {
    console.log("build-if-changed: the build's tools are not installed: npm ci first")
    npm(['ci', '--no-audit', '--no-fund'])
  }
  const last = lastBuild()
  const now = state()
  if (last?.inputs === now.inputs && last?.outputs === now.outputs) console.log('build-if-changed: dist/ is the build of these sources')
  else npm(['run', 'build', '--silent'])
}
