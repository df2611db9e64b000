import { defineConfig } from 'vitest/config'
import { inlineWasm } from './scripts/inline-wasm.js'

export default defineConfig({
  // The .wasm imports of src/ inlined as the portable build does it.
  plugins: [inlineWasm],
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
  },
})
