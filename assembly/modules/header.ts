// The header and index scanners: build/header.wasm, used by src/format/header.ts. Each file in this folder is one
// wasm module, so that a bundle carries the wasm of what it imports and nothing more.
export { scanHeader, scanIndex, resultPtr } from '../header';
export { dtypeTable } from '../dtypes';
export { heapBase } from '../heap';
// The layout of the scanner's results and its codes (assembly/boundary/header.ts) are not exported: the builds
// give src/format/header.ts that file's constants as a module of its own (scripts/inline-wasm.js).
