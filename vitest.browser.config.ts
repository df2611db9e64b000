// The browser run: test files that need no Node API run in a real browser against dist/index.js, the
// bundle users import (wasm inlined), never against src/. This file is the definition for every engine
// and the Chromium run (npm run test:browser); vitest.firefox.config.ts and vitest.webkit.config.ts give
// it their engine. `npm test` runs each engine there is after the Node run (scripts/browser-engines.js).
import { fileURLToPath } from 'node:url'
import { playwright } from '@vitest/browser-playwright'
import { defineConfig, type Plugin } from 'vitest/config'
import type { BrowserInstanceOption } from 'vitest/node'
import type { Engine } from './scripts/browser-engines.js'
import { chromiumChoice } from './test/integration/browser/chromium.ts'

const abs = (path: string) => fileURLToPath(new URL(path, import.meta.url))
const SRC = abs('./src/')

// Every test imports the package as '../src/index.ts'; here that name means the built bundle.
// Any other module under src/ would bring the sources (and their wasm) back in, so it is an error.
const bundleNotSources: Plugin = {
  name: 'bundle-not-sources',
  enforce: 'pre',
  load(id) {
    if (id.startsWith(SRC))
      this.error(`${id}: the browser run tests dist/index.js; import the package as '../src/index.ts' (aliased to the bundle), not an internal module`)
  },
}

// fuzz.test.ts reads its knobs from process.env (FUZZ_SEED, FUZZ_MUTANTS, FUZZ_ONLY); pass those through,
// so a failure replays in the browser the same way as in Node.
const FUZZ_ENV = Object.fromEntries(Object.entries(process.env).filter(([key]) => key.startsWith('FUZZ_')))

/** The browser run in `engine`: `instance` says which browser and the provider that drives it. */
// `browser` is any name the provider's driver knows (MiniBrowser for WebKitGTK), not only those vitest's types list.
export function browserConfig(engine: Engine, instance: Omit<BrowserInstanceOption, 'browser'> & { browser: string; headless?: boolean }) {
  return defineConfig({
    plugins: [bundleNotSources],
    define: { 'process.env': JSON.stringify(FUZZ_ENV) },
    resolve: {
      alias: [
        { find: /^(\.\.\/)+src\/index\.ts$/, replacement: abs('./dist/index.js') },
        // The shared test helpers import these at top level; test/integration/browser/shims says what each one offers.
        { find: /^node:fs$/, replacement: abs('./test/integration/browser/shims/fs.ts') },
        { find: /^node:path$/, replacement: abs('./test/integration/browser/shims/path.ts') },
        { find: /^node:url$/, replacement: abs('./test/integration/browser/shims/url.ts') },
        { find: /^node:crypto$/, replacement: abs('./test/integration/browser/shims/crypto.ts') },
      ],
    },
    test: {
      name: engine,
      // Chosen by hand: these use only the public API, plus fixture files read through the fs shim.
      // A new test file joins when it needs nothing from Node but reading fixtures.
      include: [
        'test/format/header.test.ts',
        'test/integration/golden.test.ts',
        'test/integration/fuzz.test.ts',
        'test/format/slice.test.ts',
        'test/core/stats.test.ts',
        'test/read/file-float16.test.ts',
        'test/integration/browser/*.browser.ts',
      ],
      testTimeout: 60_000,
      // Failure screenshots and attachments go where screenshots belong (gitignored), not beside the tests.
      attachmentsDir: 'test/screenshots/attachments',
      browser: {
        screenshotDirectory: 'test/screenshots/browser-failures',
        enabled: true,
        headless: instance.headless ?? true,
        instances: [instance as BrowserInstanceOption],
      },
    },
  })
}

// A function, so that the Firefox and WebKit configs importing browserConfig do not look for a Chromium.
export default defineConfig(async () => {
  const chromium = await chromiumChoice()
  console.log(`browser tests: Chromium from ${chromium.origin}`)
  return browserConfig('chromium', {
    browser: 'chromium',
    // Driven by playwright with a Chromium of ours (test/integration/browser/chromium.ts): no browser download.
    provider: playwright({ launchOptions: { executablePath: chromium.executablePath, args: chromium.args } }),
  })
})
