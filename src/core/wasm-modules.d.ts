// A .wasm import (rollup.config.js and vitest.config.ts say how each build resolves it): the module's bytes
// in hex where they are inlined, the compiled module under workerd (src/core/wasm.ts, WasmSource).
declare module '*.wasm' {
  const source: import('./wasm.ts').WasmSource
  export default source
}
// The constants of a file of assembly/boundary/ by name (scripts/inline-wasm.js), imported as a namespace
// (`boundary.RESULT_A`); test/integration/boundary.test.ts checks that every name src/ reads is declared there.
declare module '*.ts?constants' {
  const constants: Readonly<Record<string, number>>
  export = constants
}
