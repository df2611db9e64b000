// The CLI as a user runs it: `node dist/cli.js` in a child process (npm test builds dist/ before vitest
// runs). Asynchronous, so an HTTP server in the test's own process keeps answering meanwhile.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

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

/** The CLI started with `args`, to be signalled while it runs; `done` resolves as `cli` does, with the signal that ended it. */
export function spawnCli(...args: string[]): { child: ChildProcess; done: Promise<Run & { signal: NodeJS.Signals | null }> } {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  const done = new Promise<Run & { signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code: code ?? 1, signal, stdout, stderr })),
  )
  return { child, done }
}
