// The wasm core reached without a package entry (an internal module imported directly) is the calling
// code's mistake: a TypeError that says what to import, not a plain Error (issue 11's review).
import { expect, test } from 'vitest'
import { sharedCore } from '../src/wasm.ts'

test('no module registered: a TypeError naming the fix', () => {
  expect(() => sharedCore()).toThrow(TypeError)
  expect(() => sharedCore()).toThrow(/import the package entry/)
})
