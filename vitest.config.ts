import { defineConfig } from 'vitest/config'
import { inlineWasm } from './scripts/inline-wasm.js'

// `npm test` is the quick loop of a contributor's edits; `npm run test:all` (TEST_ALL=1) runs every file at
// full strength, as CI does. The quick loop leaves out what tests other runtimes and tools rather than this
// code on this Node (Deno and Bun, the bundlers, llama.cpp judging GGUF files) and kills a save fewer times.
const all = process.env.TEST_ALL === '1'
const FULL_ONLY = ['test/runtimes/**', 'test/consumers/**', 'test/gguf-llama.test.ts']
if (!all && !process.env.VITEST_WORKER_ID)
  console.log(
    'the quick loop: Deno and Bun (test/runtimes), the bundlers (test/consumers) and llama.cpp (test/gguf-llama.test.ts) left out, 40 kills of a save rather than 200; npm run test:all runs them',
  )

export default defineConfig({
  // The .wasm imports of src/ inlined as the portable build does it.
  plugins: [inlineWasm],
  test: {
    include: ['test/**/*.test.ts'],
    exclude: all ? [] : FULL_ONLY,
    env: all ? {} : { SAVE_KILLS: process.env.SAVE_KILLS ?? '40' },
    testTimeout: 60_000,
  },
})
