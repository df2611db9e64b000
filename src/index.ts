// Default entry (Node, browsers, Deno, Bun): the wasm is inlined and compiled on first use.
import simd from '../build/core-simd.wasm'
import scalar from '../build/core-scalar.wasm'
import { registerModules } from './wasm.ts'

registerModules({ simd, scalar })

export * from './api.ts'
