// XXH64, the cache's checksum: build/hash.wasm, used by src/core/checksum.ts.
export { xxh64 } from '../hash';
export { heapBase } from '../heap';
