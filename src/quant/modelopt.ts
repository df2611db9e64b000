// NVFP4 as NVIDIA's ModelOpt exports it (quant_method "modelopt", quant_algo "NVFP4"; src/quant/nvfp4.ts reads the
// tensors): per module `weight`, `weight_scale`, `weight_scale_2` (F32 [], which multiplies) and `input_scale`, an
// activation scale the dequantized model drops. NVFP4QTensor.dequantize (its non-fast path) computes
// dtype(f32(e2m1 * f32(f32(weight_scale) * weight_scale_2))), dtype the model's, with its own E2M1 table, whose
// code 8 is +0.
import { guarded, type LayoutContext, modulesWith, optionsOf, type QuantLayout } from './logical.ts'
import { nvfp4Tensor } from './nvfp4.ts'

const PARTS = ['.weight', '.weight_scale', '.weight_scale_2', '.input_scale']

export async function modeloptLayout(ctx: LayoutContext): Promise<QuantLayout> {
  ctx.block.get('quant_algo').oneOf(['NVFP4'])
  const ref = ctx.modelDtype()
  const tensors = await Promise.all(
    modulesWith(ctx, '.weight_scale').map((module) =>
      guarded(ctx, module, `${module}.weight`, PARTS, () => {
        const names = { weight: `${module}.weight`, scale: `${module}.weight_scale`, global: `${module}.weight_scale_2` }
        const dropped = ctx.stored.info(`${module}.input_scale`) ? [`${module}.input_scale`] : []
        return nvfp4Tensor(ctx, module, { ...names, divides: false, dropped, positiveZero: true, ref })
      }),
    ),
  )
  return { quantization: { method: 'nvfp4', bits: 4, groupSize: 16, ...optionsOf(ctx.block, ['quant_method']) }, tensors }
}
