// NVFP4 as two producers store it (../shared/quantized-layouts.md §3.4 and §7.2): E2M1 codes in U8 [out, in / 2]
// (the first in the low nibble), an F8_E4M3 scale per 16 of a row, and one F32 per tensor that ModelOpt's
// `weight_scale_2` multiplies the block scale by and compressed-tensors' `weight_global_scale` divides it by:
// value = ref(f32(e2m1 * f32(f32(e4m3) op global))).

import type { ConvertTarget } from '../core/convert.ts'
import { e2m1Values, type LayoutContext, type LogicalTensor, rowBlocks, scaleGrid } from './logical.ts'

const GROUP = 16

/** The stored parts of one NVFP4 module and how its producer reads them. */
interface Nvfp4Parts {
  weight: string
  scale: string
  /** The F32 per tensor, and whether it multiplies (ModelOpt) or divides (compressed-tensors) the block scales. */
  global: string
  divides: boolean
  /** Parts the dequantized model drops (activation scales). */
  dropped: string[]
  /** FP4 code 8: -0 (the F4 dtype's, compressed-tensors') or +0 (ModelOpt's table). */
  positiveZero: boolean
  ref: ConvertTarget
}

export function nvfp4Tensor(ctx: LayoutContext, module: string, parts: Nvfp4Parts): LogicalTensor {
  const weight = ctx.part(module, parts.weight)
  const scale = ctx.part(module, parts.scale)
  const global = ctx.part(module, parts.global)
  ctx.expect(module, weight, ['U8'])
  if (weight.shape.length !== 2) throw ctx.invalid(module, `${weight.name} has shape [${weight.shape.join(', ')}], not 2 dimensions`)
  const shape = [weight.shape[0], weight.shape[1] * 2]
  ctx.expect(module, scale, ['F8_E4M3'])
  const grid = scaleGrid(ctx, module, scale, shape, [1, GROUP])
  ctx.expect(module, global, ['F32'])
  if (ctx.runtime.elementsOf(global.shape) !== 1) throw ctx.invalid(module, `${global.name} has shape [${global.shape.join(', ')}], where one value is stored`)
  // -0 + 0 is +0: only code 8 changes.
  const table = parts.positiveZero ? e2m1Values(ctx).map((v) => v + 0) : e2m1Values(ctx)
  return {
    name: `${module}.weight`,
    module,
    dtype: parts.ref,
    shape,
    parts: [weight.name, scale.name, global.name, ...parts.dropped],
    bits: 4,
    groupSize: GROUP,
    rowsApart: true,
    async load(first, end, io) {
      const range: [number, number] = [first, end]
      const [codes, s, g] = await Promise.all([
        ctx.stored.read(weight.name, range, io),
        ctx.stored.read(scale.name, range, io),
        ctx.stored.read(global.name, undefined, io),
      ])
      const perTensor = ctx.floats(g, 'F32')[0]
      const scales = ctx.floats(s, 'F8_E4M3')
      for (let i = 0; i < scales.length; i++) scales[i] = parts.divides ? scales[i] / perTensor : scales[i] * perTensor
      return {
        codes,
        format: { rowBytes: weight.shape[1], wordStride: 1, bits: 4, order: 'lsb-first' },
        params: { scales, rowStride: grid.rowStride, groupSize: grid.groupSize, groupStride: 1, value: 'table', table, ref: parts.ref },
        rects: rowBlocks(first, end - first, shape[1], weight.shape[1], grid.paramRowOf(first)),
      }
    },
  }
}
