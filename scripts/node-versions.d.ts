// Types of scripts/node-versions.js for the tests that ask it.
export const VERSIONS: string[]
export function nodeBinary(version: string): string
