import wasm from '@rollup/plugin-wasm'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  // enforce: 'pre' keeps Vite's own wasm handling from taking the .wasm imports first.
  plugins: [{ ...wasm({ sync: ['build/core-simd.wasm', 'build/core-scalar.wasm'], targetEnv: 'auto-inline' }), enforce: 'pre' }],
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
  },
})
