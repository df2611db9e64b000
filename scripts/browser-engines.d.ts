// Types of scripts/browser-engines.js for the TypeScript configs and tests that ask it.
export type Engine = 'chromium' | 'firefox' | 'webkit'
export const FIREFOX: string
export const WEBKIT_DRIVER: string
export const MINIBROWSER: string
export const XVFB: string
export function missing(engine: Engine): string | undefined
export function requireEngine(engine: Engine): void
