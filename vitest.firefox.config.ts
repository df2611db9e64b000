// The browser run (vitest.browser.config.ts) in Debian's Firefox ESR, through puppeteer-core: npm run test:firefox.
import { requireEngine } from './scripts/browser-engines.js'
import { firefox } from './test/integration/browser/firefox-provider.ts'
import { browserConfig } from './vitest.browser.config.ts'

requireEngine('firefox')

// The provider takes no screenshots.
export default browserConfig('firefox', { browser: 'firefox', provider: firefox(), screenshotFailures: false })
