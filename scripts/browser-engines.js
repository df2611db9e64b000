#!/usr/bin/env node
// The browser engines the tests run in, and what each needs on the machine. Chromium always runs: npm
// brings one (test/integration/browser/chromium.ts). Firefox and WebKit come from Debian (npm ships neither in a form
// that runs offline): .ci/run installs them with apt. This is the one place that decides whether an
// engine can run; the vitest configs and the consumer test ask it.
//
// `node scripts/browser-engines.js` (the browser part of `npm run test:all`) runs the browser suite in each
// engine there is, one after the other, and says in one line which it skipped and why, so that
// the full matrix passes on a machine without them.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const FIREFOX = '/usr/bin/firefox-esr'
export const WEBKIT_DRIVER = '/usr/bin/WebKitWebDriver'
export const MINIBROWSER = '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser'
export const XVFB = '/usr/bin/Xvfb'

/** Per engine: its npm script, and the files it needs with the Debian package of each. */
const ENGINES = {
  chromium: { script: 'test:browser', needs: [] },
  firefox: { script: 'test:firefox', needs: [[FIREFOX, 'firefox-esr']] },
  webkit: {
    script: 'test:webkit',
    needs: [
      [WEBKIT_DRIVER, 'webkit2gtk-driver'],
      [MINIBROWSER, 'webkit2gtk-driver'],
      [XVFB, 'xvfb'],
    ],
  },
}

/**
 * Why `engine` cannot run here (the missing files and the apt packages that bring them), or undefined when it can.
 * @param {'chromium' | 'firefox' | 'webkit'} engine
 * @returns {string | undefined}
 */
export function missing(engine) {
  const absent = ENGINES[engine].needs.filter(([path]) => !existsSync(path))
  if (absent.length === 0) return undefined
  const packages = [...new Set(absent.map(([, pkg]) => pkg))].join(' ')
  return `no ${absent.map(([path]) => path).join(', ')}: apt-get install ${packages}`
}

/**
 * Throws, naming what to install, when `engine` cannot run: for a run that asked for it by name.
 * @param {'chromium' | 'firefox' | 'webkit'} engine
 */
export function requireEngine(engine) {
  const why = missing(engine)
  if (why) throw new Error(`the ${engine} browser tests cannot run: ${why}`)
}

function main() {
  const skipped = []
  for (const [engine, { script }] of Object.entries(ENGINES)) {
    const why = missing(/** @type {'chromium' | 'firefox' | 'webkit'} */ (engine))
    if (why) {
      skipped.push(`${engine} (${why})`)
      continue
    }
    const started = performance.now()
    const { status } = spawnSync('npm', ['run', script, '--silent'], { stdio: 'inherit' })
    console.log(`browser tests in ${engine}: ${status === 0 ? 'passed' : 'FAILED'} in ${((performance.now() - started) / 1000).toFixed(0)} s`)
    if (status !== 0) process.exit(status ?? 1)
  }
  if (skipped.length > 0) console.log(`browser tests skipped in ${skipped.join(' and ')}`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main()
