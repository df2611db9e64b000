// XXH64 of bytes, computed in the wasm core (assembly/hash.ts): the persistent cache's checksum.
import { reserveMemory, sharedCore, trimSharedCore } from './wasm.ts'

/** XXH64 of `bytes` with `seed` (both as the reference xxHash defines them), as an unsigned 64-bit bigint. */
export function xxh64(bytes: Uint8Array, seed = 0n): bigint {
  const core = sharedCore()
  reserveMemory(core, core.heapBase + bytes.length)
  new Uint8Array(core.memory.buffer, core.heapBase, bytes.length).set(bytes)
  const hash = core.exports.xxh64(core.heapBase, bytes.length, seed)
  trimSharedCore()
  // A wasm i64 arrives as a signed bigint.
  return BigInt.asUintN(64, hash)
}
