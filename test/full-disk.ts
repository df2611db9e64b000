// A real full disk for tests of failed writes: a tmpfs of a few MiB (DESIGN.md, toolchain facts), mounted
// directly as root or through `sudo -n` (a CI user), and owned by this process's user either way, so that
// writes fail for want of space (ENOSPC), not of permission. Without either the test fails: it is not skipped.
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
  asRoot('mount', '-t', 'tmpfs', '-o', [`size=${size}`, `uid=${process.getuid?.()}`, `gid=${process.getgid?.()}`, ...options].join(','), 'tmpfs', dir)
  return {
    dir,
    unmount() {
      asRoot('umount', dir)
      rmdirSync(dir)
    },
  }
}
