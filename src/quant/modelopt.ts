// NVFP4 as NVIDIA's ModelOpt exports it (quant_method "modelopt", quant_algo "NVFP4"; ../shared/
// quantized-layouts.md §7.2): per module `weight` U8 [out, in / 2] (E2M1 codes, the first in the low nibble),
// `weight_scale` F8_E4M3 [out, in / 16] and `weight_scale_2` F32 [] (one per tensor), which multiplies; and
// `input_scale`, an activation scale the dequantized model drops. NVFP4QTensor.dequantize (its non-fast path)
// computes dtype(f32(e2m1 * f32(f32(weight_scale) * weight_scale_2))) with its own E2M1 table, whose code 8 is +0.
import { e2m1Values, guarded, type Layout, type LayoutContext, type LogicalTensor, modulesWith, optionsOf, rowBlocks, scaleGrid } from './logical.ts'

const GROUP = 16
const PARTS = ['.weight', '.weight_scale', '.weight_scale_2', '.input_scale']

export async function modeloptLayout(ctx: LayoutContext): Promise<Layout> {
  const { quant_algo: algorithm } = ctx.block
  if (algorithm !== 'NVFP4') throw ctx.unsupported(`ModelOpt quant_algo ${JSON.stringify(algorithm)} is not supported: "NVFP4" is`)
  const tensors = await Promise.all(
    modulesWith(ctx, '.weight_scale').map((module) => guarded(ctx, module, `${module}.weight`, PARTS, () => nvfp4Tensor(ctx, module))),
  )
  return { quantization: { method: 'nvfp4', bits: 4, groupSize: GROUP, ...optionsOf(ctx.block, ['quant_method']) }, tensors }
}

function nvfp4Tensor(ctx: LayoutContext, module: string): LogicalTensor {
  const weight = ctx.part(module, `${module}.weight`)
  const scale = ctx.part(module, `${module}.weight_scale`)
  const scale2 = ctx.part(module, `${module}.weight_scale_2`)
  const input = ctx.stored.info(`${module}.input_scale`)
  ctx.expect(module, weight, ['U8'])
  if (weight.shape.length !== 2) throw ctx.invalid(module, `${weight.name} has shape [${weight.shape.join(', ')}], not 2 dimensions`)
  const shape = [weight.shape[0], weight.shape[1] * 2]
  ctx.expect(module, scale, ['F8_E4M3'])
  const grid = scaleGrid(ctx, module, scale, shape, [1, GROUP])
  ctx.expect(module, scale2, ['F32'])
  if (scale2.shape.some((n) => n !== 1)) throw ctx.invalid(module, `${scale2.name} has shape [${scale2.shape.join(', ')}], where one value is stored`)
  const ref = ctx.modelDtype()
  const table = e2m1Values(ctx).map((v) => v + 0)
  return {
    name: weight.name,
    module,
    dtype: ref,
    shape,
    parts: [weight.name, scale.name, scale2.name, ...(input ? [input.name] : [])],
    bits: 4,
    groupSize: GROUP,
    rowsApart: true,
    async load(first, end, io) {
      const range: [number, number] = [first, end]
      const [codes, s, s2] = await Promise.all([
        ctx.stored.read(weight.name, range, io),
        ctx.stored.read(scale.name, range, io),
        ctx.stored.read(scale2.name, undefined, io),
      ])
      const perTensor = ctx.floats(s2, 'F32')[0]
      const scales = ctx.floats(s, 'F8_E4M3')
      for (let i = 0; i < scales.length; i++) scales[i] *= perTensor
      return {
        codes,
        format: { rowBytes: weight.shape[1], wordStride: 1, bits: 4, order: 'lsb-first' },
        params: { scales, rowStride: grid.rowStride, groupSize: grid.groupSize, groupStride: 1, value: 'table', table, ref },
        rects: rowBlocks(first, end - first, shape[1], weight.shape[1], grid.paramRowOf(first)),
      }
    },
  }
}
