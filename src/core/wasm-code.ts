// The code of the wasm modules, all in this one module (what a build makes of a .wasm import:
// src/core/wasm-modules.d.ts). src/api.ts imports it first, so that a bundle puts the wasm it keeps in one block
// ahead of its JS: wasm between JS modules kept gzip's 32 KiB window from reaching across them (measured
// with esbuild, gzip -9: the whole API 1.4 kB smaller, open + getTensor 0.7 kB). Each module is a binding
// of its own, so a bundle still keeps only the wasm of the functions it uses. Typed declarations rather than
// re-exports, so that the package's .d.ts files name no .wasm file.
import convert from '../../build/convert.wasm'
import hash from '../../build/hash.wasm'
import header from '../../build/header.wasm'
import stats from '../../build/stats.wasm'
import type { WasmSource } from './wasm.ts'

export const kernelsWasm: WasmSource = convert
export const hashWasm: WasmSource = hash
export const scannerWasm: WasmSource = header
export const statsWasm: WasmSource = stats
