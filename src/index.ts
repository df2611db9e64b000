/**
 * The portable entry (browsers, and the `default` condition): the wasm is inlined and compiled on first
 * use. Nothing in its module graph needs Node; local files come with the Node entry (src/node.ts).
 * @packageDocumentation
 */

import scalar from '../build/core-scalar.wasm'
import simd from '../build/core-simd.wasm'
import { registerModules } from './wasm.ts'

registerModules({ simd, scalar })

export * from './api.ts'
