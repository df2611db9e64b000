// Which Chromium the browser tests drive: CHROMIUM_PATH if set, else the system's /usr/bin/chromium
// where it exists, else the headless Chromium that `npm ci` brings inside @sparticuz/chromium (unpacked
// to the temp folder on first use). So `npm ci && npm test` needs no browser on the machine.
// The WebGPU test always takes the npm one, with SwiftShader's WebGPU (webgpuChromium).
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

/** WebGPU on the CPU: SwiftShader's Vulkan. --disable-gpu would leave no adapter at all. */
const WEBGPU_ARGS = ['--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader', '--enable-features=Vulkan']

/**
 * The Chromium of the WebGPU test: always the one inside @sparticuz/chromium, whatever the machine has,
 * so that every run (a fresh clone, CI) drives the same browser and the same SwiftShader adapter.
 * (Debian's chromium 156 gives the same adapter with these flags; it is not used so that the result
 * does not depend on what apt installed.)
 */
export function webgpuChromium(): Promise<ChromiumChoice> {
  return npmChromium([...ARGS.filter((a) => a !== '--disable-gpu'), ...WEBGPU_ARGS])
}

/** The Chromium inside @sparticuz/chromium (unpacked on first use); --no-zygote: it has no zygote helper beside it. */
async function npmChromium(args: string[]): Promise<ChromiumChoice> {
  return { executablePath: await sparticuz.executablePath(), origin: '@sparticuz/chromium (from npm)', args: [...args, '--no-zygote'] }
}

export async function chromiumChoice(): Promise<ChromiumChoice> {
  const fromEnv = process.env.CHROMIUM_PATH
  if (fromEnv) return { executablePath: fromEnv, origin: `CHROMIUM_PATH=${fromEnv}`, args: ARGS }
  if (existsSync(SYSTEM_CHROMIUM)) return { executablePath: SYSTEM_CHROMIUM, origin: SYSTEM_CHROMIUM, args: ARGS }
  return npmChromium(ARGS)
}
