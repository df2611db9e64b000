// A vitest browser provider for Firefox through puppeteer-core (WebDriver BiDi): what vitest needs to run
// test files in a browser is a page opened at its URL. @vitest/browser-webdriverio cannot drive Firefox
// here, as it downloads geckodriver. The tests use no provider commands (userEvent and the like).
import { defineBrowserProvider } from '@vitest/browser'
import type { Browser, Page } from 'puppeteer-core'
import type { BrowserProvider, BrowserProviderOption } from 'vitest/node'
import { launchFirefox } from './engines.ts'

class FirefoxProvider implements BrowserProvider {
  name = 'firefox-puppeteer'
  supportsParallelism = false
  #browser: Promise<Browser> | undefined
  readonly #pages = new Map<string, Page>()

  getCommandsContext(sessionId: string) {
    return { page: this.#pages.get(sessionId) }
  }

  async openPage(sessionId: string, url: string): Promise<void> {
    const browser = await (this.#browser ??= launchFirefox())
    await this.#pages.get(sessionId)?.close()
    const page = await browser.newPage()
    this.#pages.set(sessionId, page)
    await page.goto(url, { timeout: 0 })
  }

  async close(): Promise<void> {
    const browser = this.#browser
    this.#browser = undefined
    this.#pages.clear()
    await (await browser)?.close()
  }
}

export function firefox(): BrowserProviderOption {
  return defineBrowserProvider({ name: 'firefox-puppeteer', options: {}, providerFactory: () => new FirefoxProvider() })
}
