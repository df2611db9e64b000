// XXH64 of bytes, computed in the wasm core (assembly/hash.ts): the persistent cache's checksum.
import { reserveMemory, WasmModule } from './wasm.ts'
import { hashWasm } from './wasm-code.ts'

/** The hash module's function (assembly/modules/hash.ts): the u64 comes back as a signed bigint. */
interface HashExports {
  heapBase(): number
  xxh64(ptr: number, length: number, seed: bigint): bigint
}

const hashModule = /* @__PURE__ */ new WasmModule<HashExports>(hashWasm)

/** XXH64 of `bytes` with `seed` (both as the reference xxHash defines them), as an unsigned 64-bit bigint. */
export function xxh64(bytes: Uint8Array, seed = 0n): bigint {
  const core = hashModule.shared()
  reserveMemory(core, core.heapBase + bytes.length)
  new Uint8Array(core.memory.buffer, core.heapBase, bytes.length).set(bytes)
  const hash = core.exports.xxh64(core.heapBase, bytes.length, seed)
  hashModule.trimShared()
  // A wasm i64 arrives as a signed bigint.
  return BigInt.asUintN(64, hash)
}
