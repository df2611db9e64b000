// The result types follow the dtype asked for (checked by tsc, which npm test runs over test/).
import { expect, expectTypeOf, test } from 'vitest'
import { type Float16Array, open, type TypedArray } from '../../src/node.ts'
import { FIXTURES_REAL } from '../helpers.ts'

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

test("float16Array: true gives Float16Array for F16 (and may for a file's own dtype); without it, Uint16Array", async () => {
  const file = await open(`${FIXTURES_REAL}fluxml__safetensors.jl__model.safetensors`)
  try {
    // Types only: Node 20 has no Float16Array, so these reads are not run here (test/read/file-float16.test.ts runs them).
    const half = () => file.getTensor('float16_3', { dtype: 'F16', float16Array: true })
    expectTypeOf<Awaited<ReturnType<typeof half>>['data']>().toEqualTypeOf<Float16Array>()
    const own = () => file.getSlice('float16_3', [0], { float16Array: true })
    expectTypeOf<Awaited<ReturnType<typeof own>>['data']>().toEqualTypeOf<TypedArray | Float16Array>()
    const each = () => file.tensors({ dtype: 'F16', float16Array: true })
    expectTypeOf<ReturnType<typeof each>>().toEqualTypeOf<AsyncGenerator<import('../../src/node.ts').Tensor<Float16Array>>>()
    const f32 = await file.getTensor('float16_3', { dtype: 'F32', float16Array: false })
    expectTypeOf(f32.data).toEqualTypeOf<Float32Array>()
    const bits = await file.getTensor('float16_3', { dtype: 'F16' })
    expectTypeOf(bits.data).toEqualTypeOf<Uint16Array>()
    expect(bits.data).toBeInstanceOf(Uint16Array)
  } finally {
    await file.close()
  }
})
