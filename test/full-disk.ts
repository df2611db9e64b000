// A real full disk for tests of failed writes: a tmpfs of a few MiB (DESIGN.md, toolchain facts), mounted
// directly as root or through `sudo -n` (a CI user), and owned by this process's user either way, so that
// writes fail for want of space (ENOSPC), not of permission. Without either (a developer's machine), the
// tests that need one say so in one line and are skipped; CI runs as root, so there they always run.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface FullDisk {
  /** The mounted folder. */
  dir: string
  unmount(): void
}

/** Mounts a tmpfs of `size` (mount's syntax: "1m") on a fresh folder; `options` add mount's own ("ro"). */
export function mountTmpfs(size: string, ...options: string[]): FullDisk {
  const dir = mkdtempSync(join(tmpdir(), 'full-disk-'))
  const asRoot = (command: string, ...args: string[]) =>
    process.getuid?.() === 0 ? execFileSync(command, args) : execFileSync('sudo', ['-n', command, ...args])
  try {
    asRoot('mount', '-t', 'tmpfs', '-o', [`size=${size}`, `uid=${process.getuid?.()}`, `gid=${process.getgid?.()}`, ...options].join(','), 'tmpfs', dir)
  } catch (error) {
    rmdirSync(dir)
    throw error
  }
  return {
    dir,
    unmount() {
      asRoot('umount', dir)
      rmdirSync(dir)
    },
  }
}

/** Why no tmpfs can be mounted here, as the one line the tests print; undefined where one can (CI). */
export const fullDiskUnavailable: string | undefined = (() => {
  try {
    mountTmpfs('64k').unmount()
    return undefined
  } catch (error) {
    const why = String((error as Error).message).split('\n')[0]
    return `cannot mount a tmpfs (${why}): skipping the full-disk tests (CI runs them as root)`
  }
})()
if (fullDiskUnavailable) console.log(fullDiskUnavailable)
