// Which Chromium the browser tests drive: CHROMIUM_PATH if set, else the system's /usr/bin/chromium
// where it exists, else the headless Chromium that `npm ci` brings inside @sparticuz/chromium (unpacked
// to the temp folder on first use). So `npm ci && npm test` needs no browser on the machine.
import { existsSync } from 'node:fs'
import sparticuz from '@sparticuz/chromium'

export interface ChromiumChoice {
  executablePath: string
  /** Where it came from, for the test log. */
  origin: string
  args: string[]
}

const SYSTEM_CHROMIUM = '/usr/bin/chromium'

// Closed network here: without these Chromium keeps trying to reach Google's hosts.
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-dev-shm-usage',
  '--disable-component-update',
  '--no-first-run',
]

export async function chromiumChoice(): Promise<ChromiumChoice> {
  const fromEnv = process.env.CHROMIUM_PATH
  if (fromEnv) return { executablePath: fromEnv, origin: `CHROMIUM_PATH=${fromEnv}`, args: ARGS }
  if (existsSync(SYSTEM_CHROMIUM)) return { executablePath: SYSTEM_CHROMIUM, origin: SYSTEM_CHROMIUM, args: ARGS }
  // --no-zygote: this build has no zygote helper beside it.
  return { executablePath: await sparticuz.executablePath(), origin: '@sparticuz/chromium (from npm)', args: [...ARGS, '--no-zygote'] }
}
