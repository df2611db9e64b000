// The browser run (vitest.browser.config.ts) in WebKitGTK's MiniBrowser (Safari's engine), through
// WebKitWebDriver and @vitest/browser-webdriverio: npm run test:webkit.
import { webdriverio } from '@vitest/browser-webdriverio'
import { startWebKit } from './test/integration/browser/engines.ts'
import { browserConfig } from './vitest.browser.config.ts'

const { hostname, port, capabilities } = await startWebKit()

// Not headless: MiniBrowser has no such mode; it draws on Xvfb's display. The provider lists the browsers
// its own drivers start (not MiniBrowser), but works with any WebDriver session it is pointed at.
export default browserConfig('webkit', {
  browser: 'MiniBrowser',
  headless: false,
  provider: { ...webdriverio({ hostname, port, capabilities }), supportedBrowser: ['MiniBrowser'] },
})
