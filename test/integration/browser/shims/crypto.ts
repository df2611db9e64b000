// node:crypto for the browser run: the shared read helpers import createHash for tests that hash whole
// files; none of those runs in the browser, so calling it is a mistake that should fail loudly.
export function createHash(algorithm: string): never {
  throw new Error(`createHash(${JSON.stringify(algorithm)}) is not available in the browser run (browser shim of node:crypto)`)
}
