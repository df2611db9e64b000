// The CLI as a user runs it: `node dist/cli.js` in a child process (npm test builds dist/ before vitest
// runs). Asynchronous, so an HTTP server in the test's own process keeps answering meanwhile.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'

export const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url))

export interface Run {
  code: number
  stdout: string
  stderr: string
}

/** Runs the CLI with `args`; `env` is added to this process's environment. */
export function cliWith(options: { env?: Record<string, string> }, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const env = { ...process.env, ...options.env }
    execFile(process.execPath, [CLI, ...args], { encoding: 'utf8', maxBuffer: 16 << 20, env }, (error, stdout, stderr) => {
      // A child killed by a signal has no exit code: count it as a failure.
      const code = error ? (error as { code?: unknown }).code : 0
      resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr })
    })
  })
}

export const cli = (...args: string[]): Promise<Run> => cliWith({}, ...args)

/**
 * The CLI started with `args` (`env` added to this process's environment), to be signalled while it runs; `done`
 * resolves as `cli` does, with the signal that ended it.
 */
export function spawnCliWith(
  options: { env?: Record<string, string> },
  ...args: string[]
): { child: ChildProcess; done: Promise<Run & { signal: NodeJS.Signals | null }> } {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...options.env } })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  const done = new Promise<Run & { signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code: code ?? 1, signal, stdout, stderr })),
  )
  return { child, done }
}

export const spawnCli = (...args: string[]) => spawnCliWith({}, ...args)

/** The lines of an output, without the final newline. */
export const lines = (text: string) => text.replace(/\n$/, '').split('\n')

/** What one line of stderr must be: exactly one line, no stack frame, no temporary file name. */
export function expectOneLine(stderr: string): string {
  const [line, ...more] = lines(stderr)
  expect(more, stderr).toEqual([])
  expect(line).not.toMatch(/\.tmp\b|^\s+at /)
  return line
}
