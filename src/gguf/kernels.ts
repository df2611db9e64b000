// ggml's kernels (src/gguf/ggml-kernels.ts), loaded with the first quantized read, and its quantizers
// (src/gguf/ggml-quantizers.ts), loaded with the first quantized tensor a GGUF export writes; and what this side
// lends them: the library's functions they call, which they do not import (src/gguf/ggml-kernels.ts says why).
import { POOL_MIN_BYTES, ROUND_TRIP_ELEMENTS } from '../core/convert.ts'
import { reserveMemory, WasmModule } from '../core/wasm.ts'
import { SafetensorsError } from '../errors.ts'
import { loadPool } from '../read/file.ts'
import type { GgmlKernels, GgmlRuntime } from './ggml-kernels.ts'
import type { ggmlQuantizers } from './ggml-quantizers.ts'
import { GGML_TYPES, ggmlByteLength } from './ggml-types.ts'

/** What the kernels are lent. */
export const GGML_RUNTIME: GgmlRuntime = {
  WasmModule,
  reserveMemory,
  SafetensorsError,
  GGML_TYPES,
  ggmlByteLength,
  roundTripElements: ROUND_TRIP_ELEMENTS,
  poolMinBytes: POOL_MIN_BYTES,
  loadPool,
}

let kernels: Promise<GgmlKernels> | undefined

/** ggml's kernels, loaded once. */
export function loadGgmlKernels(): Promise<GgmlKernels> {
  kernels ??= import('./ggml-kernels.ts').then((module) => module.ggmlKernels(GGML_RUNTIME))
  return kernels
}

let quantizers: Promise<ReturnType<typeof ggmlQuantizers>> | undefined

/** ggml's quantizers, loaded once. */
export function loadGgmlQuantizers(): Promise<ReturnType<typeof ggmlQuantizers>> {
  quantizers ??= import('./ggml-quantizers.ts').then((module) => module.ggmlQuantizers(GGML_RUNTIME))
  return quantizers
}
