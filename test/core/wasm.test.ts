// The wasm modules' loading (src/core/wasm.ts): a shared instance is reused across calls but not kept once a call made
// it huge, and a runtime without WebAssembly SIMD is told so.
import { expect, test, vi } from 'vitest'
import { parseHeader, scannerModule } from '../../src/format/header.ts'
import { makeFile } from '../helpers.ts'

const small = makeFile('{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', 2)

test('small calls reuse one shared core', () => {
  parseHeader(small)
  const core = scannerModule.shared()
  parseHeader(small)
  expect(scannerModule.shared()).toBe(core)
})

test('after a huge header the shared core is dropped, so its memory can be collected', () => {
  parseHeader(small)
  const before = scannerModule.shared()
  const keys = Array.from({ length: 2_000_000 }, (_, i) => `"k${i}":0`).join(',')
  const huge = makeFile(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":{${keys}}}}`, 2)
  expect(parseHeader(huge).tensors.map((t) => t.name)).toEqual(['w'])
  const after = scannerModule.shared()
  expect(after).not.toBe(before)
  expect(after.memory.buffer.byteLength).toBeLessThan(1 << 20)
  expect(parseHeader(small).tensors).toHaveLength(1)
})

// Every supported runtime has WebAssembly SIMD, and there is no scalar build to fall back on (src/core/wasm.ts,
// compile): a runtime without it refuses to compile the module, as simulated here with the CompileError V8
// gives for a SIMD opcode it does not know, and the caller gets a TypeError that says what the module needs.
test('a runtime without WebAssembly SIMD gets a TypeError saying so', async () => {
  vi.resetModules()
  const refused = 'WebAssembly.Module(): Compiling function #0 failed: invalid simd opcode'
  // A function, not an arrow: the mock is called with `new`.
  const compile = vi.spyOn(WebAssembly, 'Module').mockImplementation(function refuse() {
    throw new WebAssembly.CompileError(refused)
  })
  try {
    const fresh = await import('../../src/index.ts')
    expect(() => fresh.parseHeader(small)).toThrow(TypeError)
    expect(() => fresh.parseHeader(small)).toThrow(/needs WebAssembly SIMD .*: WebAssembly.Module\(\): Compiling function #0 failed: invalid simd opcode$/)
    expect(() => fresh.convert(new Uint8Array(2), 'BF16', 'F32')).toThrow(/needs WebAssembly SIMD/)
    expect(compile).toHaveBeenCalled()
  } finally {
    compile.mockRestore()
    vi.resetModules()
  }
})
