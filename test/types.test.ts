// The result types follow the dtype asked for (checked by tsc, which npm test runs over test/).
import { expect, expectTypeOf, test } from 'vitest'
import { open, type TypedArray } from '../src/node.ts'
import { FIXTURES_REAL } from './helpers.ts'

test('getTensor, getSlice and tensors() give Float32Array for F32, Uint16Array for F16/BF16, else TypedArray', async () => {
  const file = await open(`${FIXTURES_REAL}fluxml__safetensors.jl__model.safetensors`)
  try {
    const f32 = await file.getTensor('bfloat16_3', { dtype: 'F32' })
    expectTypeOf(f32.data).toEqualTypeOf<Float32Array>()
    expect(f32.data).toBeInstanceOf(Float32Array)
    const bf16 = await file.getSlice('float32_35', [0], { dtype: 'BF16' })
    expectTypeOf(bf16.data).toEqualTypeOf<Uint16Array>()
    expect(bf16.data).toBeInstanceOf(Uint16Array)
    const raw = await file.getTensor('int64_3')
    expectTypeOf(raw.data).toEqualTypeOf<TypedArray>()
    expect(raw.data).toBeInstanceOf(BigInt64Array)
    for await (const t of file.tensors({ dtype: 'F32' })) {
      expectTypeOf(t.data).toEqualTypeOf<Float32Array>()
      if (t.dtype === 'F32') expect(t.data).toBeInstanceOf(Float32Array)
      break
    }
  } finally {
    await file.close()
  }
})
