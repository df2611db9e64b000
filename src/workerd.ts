/**
 * Entry for workerd (Cloudflare Workers): it will not compile wasm from bytes at run time, so the
 * modules are imported as files, which the runtime compiles ahead of time.
 * @packageDocumentation
 */

import scalar from '../build/core-scalar.wasm?module'
import simd from '../build/core-simd.wasm?module'
import { registerModules } from './wasm.ts'

registerModules({ simd: () => simd, scalar: () => scalar })

export * from './api.ts'
