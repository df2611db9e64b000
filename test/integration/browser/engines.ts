// Starting Firefox and WebKit for the tests (Chromium: chromium.ts). scripts/browser-engines.js says
// whether each is on the machine.
// - Firefox: Debian's firefox-esr, driven by puppeteer-core through WebDriver BiDi (no geckodriver).
// - WebKit: Debian's WebKitWebDriver driving WebKitGTK's MiniBrowser (Safari's engine) over classic
//   WebDriver, on a display of its own from Xvfb (MiniBrowser has no headless mode).
import { type ChildProcess, spawn } from 'node:child_process'
import { createServer, type Socket } from 'node:net'
import puppeteer, { type Browser } from 'puppeteer-core'
import { FIREFOX, MINIBROWSER, requireEngine, WEBKIT_DRIVER, XVFB } from '../../../scripts/browser-engines.js'

export function launchFirefox(): Promise<Browser> {
  requireEngine('firefox')
  return puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true })
}

/** Where a WebDriver client finds the WebKit driver started by startWebKit, and the capabilities of a session. */
export interface WebKitDriver {
  hostname: string
  port: number
  capabilities: Record<string, unknown>
  close(): void
}

// browserName MiniBrowser is what WebKitWebDriver matches; classic WebDriver, since WebKitGTK's BiDi is not complete.
const WEBKIT_CAPABILITIES = {
  browserName: 'MiniBrowser',
  'wdio:enforceWebDriverClassic': true,
  'webkitgtk:browserOptions': { binary: MINIBROWSER, args: ['--automation'] },
}

/**
 * Xvfb on a free display, and WebKitWebDriver on a free port drawing there. Neither keeps this process
 * alive; both end with it.
 */
export async function startWebKit(): Promise<WebKitDriver> {
  requireEngine('webkit')
  const children: ChildProcess[] = []
  const close = () => {
    for (const child of children) child.kill()
  }
  process.once('exit', close)
  // -displayfd: Xvfb picks a display no one uses and writes its number.
  const xvfb = spawn(XVFB, ['-displayfd', '1', '-nolisten', 'tcp', '-screen', '0', '1280x1024x24'], { stdio: ['ignore', 'pipe', 'ignore'] })
  children.push(xvfb)
  const display = await new Promise<string>((resolve, reject) => {
    xvfb.stdout!.once('data', (data) => resolve(String(data).trim()))
    xvfb.once('exit', (code) => reject(new Error(`Xvfb exited (${code}) before it had a display`)))
  })
  // Left open (Xvfb exits when its end of the pipe goes away), but not keeping this process alive.
  ;(xvfb.stdout as Socket).unref()
  xvfb.unref()
  const port = await freePort()
  const driver = spawn(WEBKIT_DRIVER, [`--port=${port}`], { env: { ...process.env, DISPLAY: `:${display}` }, stdio: 'ignore' })
  children.push(driver)
  driver.unref()
  for (let tries = 0; ; tries++) {
    const ready = await fetch(`http://127.0.0.1:${port}/status`).then(
      (r) => r.ok,
      () => false,
    )
    if (ready) break
    if (tries === 100 || driver.exitCode !== null) throw new Error(`WebKitWebDriver did not answer on port ${port} (exit code ${driver.exitCode})`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { hostname: '127.0.0.1', port, capabilities: WEBKIT_CAPABILITIES, close }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}
