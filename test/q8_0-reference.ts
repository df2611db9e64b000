// A second Q8_0 quantizer for the tests, written from gguf-py's quants.py (Q8_0.quantize_blocks and np_roundf)
// step by step in float32 (Math.fround after each operation, as numpy's float32 arithmetic does) and shares no
// code with src/ or assembly/. test/gguf/ggml-quantizers.test.ts checks it against gguf-py's own bytes first.
import { encodeValue } from './float-reference.ts'

/** numpy's float32 -> int8 cast on x86-64: the low byte of the 32-bit conversion, 0 for NaN or out of range. */
function numpyInt8(q: number): number {
  return Number.isNaN(q) || Math.abs(q) >= 2 ** 31 ? 0 : q & 0xff
}

/** The Q8_0 bytes of `values` (a multiple of 32 of them) as gguf.quants.quantize gives them. */
export function referenceQ8_0(values: Float32Array): Uint8Array {
  const blocks = values.length / 32
  const out = new Uint8Array(blocks * 34)
  const view = new DataView(out.buffer)
  for (let b = 0; b < blocks; b++) {
    const block = values.subarray(b * 32, b * 32 + 32)
    let amax = 0
    for (const x of block) amax = Math.max(amax, Math.abs(x))
    const d = Math.fround(amax / 127)
    const id = d === 0 ? 0 : Math.fround(1 / d)
    view.setUint16(b * 34, encodeValue('F16', d), true)
    for (let j = 0; j < 32; j++) {
      // np_roundf: sign(n) * (floor(|n|) + floor(2 * (|n| - floor(|n|))))
      const n = Math.fround(block[j] * id)
      const a = Math.abs(n)
      const floored = Math.floor(a)
      const q = Math.sign(n) * (floored + Math.floor(Math.fround(2 * Math.fround(a - floored))))
      out[b * 34 + 2 + j] = numpyInt8(q)
    }
  }
  return out
}
