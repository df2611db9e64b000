// FP8 weights (../shared/quantized-layouts.md §2): `weight` F8_E4M3 (or E5M2) [out, in] with a scale it is
// multiplied by: fine-grained `weight_scale_inv` F32 over blocks of weight_block_size (128 x 128 in DeepSeek-V3/R1
// and Qwen3-FP8; the grid is ceil-div and the last blocks are cropped, as DeepSeek's weight_dequant and
// llama.cpp's converter read them, never a block size guessed from the shapes), or `weight_scale` per tensor
// (AutoFP8: [] or [1]) or per row (fbgemm_fp8: [out, 1]). The value is f32(w) * f32(scale) rounded once to the
// model's dtype, as DeepSeek's kernel and transformers' Fp8Dequantize give it. Activation scales
// (`input_scale`, `activation_scale`) are parts that the dequantized model drops.
import type { TensorInfo } from '../format/header.ts'
import { guarded, type LayoutContext, type LogicalTensor, optionsOf, type QuantLayout, rowBlocks, scaleGrid } from './logical.ts'

const F8 = ['F8_E4M3', 'F8_E5M2'] as const
const PARTS = ['.weight', '.weight_scale_inv', '.weight_scale', '.input_scale', '.activation_scale']

export async function fp8Layout(ctx: LayoutContext): Promise<QuantLayout> {
  const sizes = ctx.block.get('weight_block_size').optional()
  const blockSize = sizes?.items().map((size) => size.integer(1))
  if (blockSize && blockSize.length !== 2) throw sizes!.mustBe('two positive integers')
  const tensors: Array<Promise<LogicalTensor>> = []
  for (const name of ctx.stored.names) {
    const module = name.slice(0, -'.weight'.length)
    if (name.endsWith('.weight') && (F8 as readonly string[]).includes(ctx.stored.info(name)!.dtype))
      tensors.push(guarded(ctx, module, name, PARTS, () => fp8Tensor(ctx, module, blockSize)))
    else if (/\.weight_scale(_inv)?$/.test(name) && !ctx.stored.info(name.replace(/_scale(_inv)?$/, ''))?.dtype.startsWith('F8'))
      throw ctx.invalid(name.replace(/\.weight_scale(_inv)?$/, ''), `${name} is stored, but its weight is not FP8`)
  }
  return {
    quantization: { method: 'fp8', bits: 8, ...(blockSize ? { weight_block_size: blockSize } : {}), ...optionsOf(ctx.block, []) },
    tensors: await Promise.all(tensors),
  }
}

function fp8Tensor(ctx: LayoutContext, module: string, blockSize: number[] | undefined): LogicalTensor {
  const weight = ctx.part(module, `${module}.weight`)
  const scale = ctx.stored.info(`${module}.weight_scale_inv`) ?? ctx.stored.info(`${module}.weight_scale`)
  if (!scale) throw ctx.invalid(module, `its scale is missing: neither ${module}.weight_scale_inv nor ${module}.weight_scale is stored`)
  ctx.expect(module, scale, ['F32', 'BF16', 'F16'])
  if (weight.shape.length !== 2) throw ctx.invalid(module, `${weight.name} has shape [${weight.shape.join(', ')}], not 2 dimensions`)
  const [rows, cols] = weight.shape
  const blocks = blocksOf(scale, rows, cols, blockSize)
  const grid = scaleGrid(ctx, module, scale, weight.shape, blocks)
  const activations = ['input_scale', 'activation_scale'].map((part) => `${module}.${part}`).filter((part) => ctx.stored.info(part))
  const ref = ctx.modelDtype()
  return {
    name: weight.name,
    module,
    dtype: ref,
    shape: [rows, cols],
    parts: [weight.name, scale.name, ...activations],
    bits: 8,
    groupSize: blocks[1] < cols ? blocks[1] : undefined,
    rowsApart: true,
    async load(first, end, io) {
      const [codes, s] = await Promise.all([ctx.stored.read(weight.name, [first, end], io), ctx.stored.read(scale.name, grid.rows(first, end), io)])
      return {
        codes,
        format: { rowBytes: cols, wordStride: 1, bits: 8, order: 'lsb-first' },
        params: {
          scales: ctx.floats(s, scale.dtype),
          rowStride: grid.rowStride,
          groupSize: grid.groupSize,
          groupStride: 1,
          value: weight.dtype as (typeof F8)[number],
          ref,
        },
        rects: rowBlocks(first, end - first, cols, cols, grid.paramRowOf(first)),
      }
    },
  }
}

/** The blocks a scale covers: the config's for fine-grained scales; else by the scale's shape. */
function blocksOf(scale: TensorInfo, rows: number, cols: number, blockSize: number[] | undefined): number[] {
  if (scale.name.endsWith('_inv') && blockSize) return blockSize
  // A grid of several columns: blocks, 128 x 128 where the config names no size (as transformers reads it).
  if (scale.shape.length === 2 && scale.shape[1] !== 1) return blockSize ?? [128, 128]
  // A scale per row (fbgemm_fp8), or one for the whole tensor (AutoFP8).
  return scale.shape[0] === rows && rows > 1 ? [1, cols] : [rows, cols]
}
