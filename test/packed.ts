// The package as users get it: `npm pack`'s tarball of the built dist/, installed into a fresh folder
// outside the repository (inside it, 'safetensors-wasm' would resolve to the repository itself). Tests that
// run a consumer (runtimes, package hygiene, bundlers) share one pack per process.
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll } from 'vitest'

export const ROOT = fileURLToPath(new URL('../', import.meta.url))

/** What `npm pack --json` says about the tarball. */
export interface PackInfo {
  filename: string
  size: number
  unpackedSize: number
  files: Array<{ path: string; size: number }>
}

export interface PackedConsumer {
  /** A folder with package.json and node_modules/safetensors-wasm installed from the tarball. */
  dir: string
  /** The tarball's absolute path. */
  tarball: string
  pack: PackInfo
}

let consumer: PackedConsumer | undefined

// Vitest ends its workers without an 'exit' event, so the folder goes with the test file that made it.
afterAll(() => {
  if (consumer) rmSync(dirname(consumer.dir), { recursive: true, force: true })
  consumer = undefined
})

export function packedConsumer(): PackedConsumer {
  if (consumer) return consumer
  const root = mkdtempSync(join(tmpdir(), 'safetensors-packed-'))
  // --ignore-scripts: the tarball of dist/ as the tests found it built, not a build of prepack's own.
  const [pack] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', root], { cwd: ROOT, encoding: 'utf8' }),
  ) as PackInfo[]
  const tarball = join(root, pack.filename)
  const dir = join(root, 'consumer')
  mkdirSync(dir)
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }))
  // --offline: the package has no dependencies, so installing it must not need the network.
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: dir, stdio: 'pipe' })
  consumer = { dir, tarball, pack }
  return consumer
}
