import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
import { inlineWasm } from './scripts/inline-wasm.js'

// `npm test` is the quick loop of a contributor's edits; `npm run test:all` (TEST_ALL=1) runs every file, as CI
// does. The quick loop leaves out what tests other runtimes and tools rather than this code on this Node (Deno
// and Bun, the bundlers, llama.cpp judging GGUF files, and its quantizer judging the file types: 2 to 8 minutes), the
// install from a git URL (minutes of npm and of a build), the minute of killing model saves, the GGUF of every
// quantized fixture but one of each method, and ggml's slow quantizers of the IQ1 and IQ2 types. Three workers on two cores: most tests wait on child processes,
// servers and browsers rather than compute.
const all = process.env.TEST_ALL === '1'
const FULL_ONLY = [
  'test/integration/runtimes/**',
  'test/integration/consumers/**',
  'test/integration/gguf-llama.test.ts',
  'test/gguf/mixtures.test.ts',
  'test/integration/install.test.ts',
]
if (!all && !process.env.VITEST_WORKER_ID)
  console.log(
    'the quick loop: Deno and Bun (test/integration/runtimes), the bundlers (test/integration/consumers), llama.cpp (test/integration/gguf-llama.test.ts, test/gguf/mixtures.test.ts), the install from a git URL (test/integration/install.test.ts), the 200 kills of saves (test/node/save-model.test.ts), the GGUF of all but one quantized fixture per method (test/integration/quant-cli.test.ts) and ggml quantizing the IQ1 and IQ2 types (test/gguf/dequantize.test.ts) left out; npm run test:all runs them',
  )

export default defineConfig({
  // The .wasm imports of src/ inlined as the portable build does it.
  plugins: [inlineWasm],
  // The Node run tests src/ as Node sees the package: #platform by its `node` condition, from src/ (package.json's
  // "imports" name dist/).
  resolve: {
    alias: {
      '#platform': fileURLToPath(new URL('./src/platform/node.ts', import.meta.url)),
      '#workers': fileURLToPath(new URL('./src/platform/node-workers.ts', import.meta.url)),
    },
  },
  test: {
    include: ['test/**/*.test.ts'],
    exclude: all ? [] : FULL_ONLY,
    env: all ? {} : { TEST_QUICK: '1' },
    maxWorkers: 3,
    testTimeout: 60_000,
  },
})
