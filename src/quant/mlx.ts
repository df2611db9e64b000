// MLX's affine quantization (mlx-lm; ../shared/quantized-layouts.md §7.1): per module `weight` U32 [..., out,
// in * bits / 32] (codes LSB-first along each row, straddling words at 3, 5 and 6 bits), `scales` and `biases`
// [..., out, in / group] in the model's float dtype T, and W = T(T(q * scale) + bias), each step computed in
// F32 and rounded to T, as MLX's CPU fallback (mlx/ops.cpp affine_dequantize) does. config.json's
// `quantization` holds the defaults and per-module overrides (an object, or false for a module left as it is);
// as mlx-lm does, a module is quantized when its `scales` are stored.
import type { JsonValue } from '../format/json-values.ts'
import { guarded, type LayoutContext, type LogicalTensor, type QuantLayout, referenceOf, rowBlocks } from './logical.ts'

const BITS = [2, 3, 4, 5, 6, 8]
const PARTS = ['.weight', '.scales', '.biases']

interface Setting {
  bits: number
  groupSize: number
  mode: string
}

/** The bits, group size and mode of the block's defaults, or of a module's override (`where` names it). */
function settingOf(ctx: LayoutContext, value: JsonValue, where: string): Setting {
  const mode = value.get('mode').optional()?.oneOf(['affine']) ?? 'affine'
  const bits = value.get('bits').integer()
  if (!BITS.includes(bits)) throw ctx.unsupported(`MLX ${bits}-bit quantization${where} is not supported: ${BITS.join(', ')} bits are`)
  return { bits, groupSize: value.get('group_size').integer(1), mode }
}

export async function mlxLayout(ctx: LayoutContext): Promise<QuantLayout> {
  const block = ctx.block
  const defaults = settingOf(ctx, block, '')
  const tensors: Array<Promise<LogicalTensor>> = []
  for (const name of ctx.stored.names) {
    if (!name.endsWith('.scales')) continue
    const module = name.slice(0, -'.scales'.length)
    const override = block.get(module)
    const { bits, groupSize } = override.isObject ? settingOf(ctx, override, ` (${module})`) : defaults
    tensors.push(
      guarded(ctx, module, `${module}.weight`, PARTS, () => {
        if (override.value === false) throw ctx.invalid(module, 'config.json leaves it unquantized, but its scales are stored')
        return affineTensor(ctx, module, bits, groupSize)
      }),
    )
  }
  return { quantization: { method: 'mlx', bits: defaults.bits, groupSize: defaults.groupSize, mode: defaults.mode }, tensors: await Promise.all(tensors) }
}

function affineTensor(ctx: LayoutContext, module: string, bits: number, groupSize: number): LogicalTensor {
  const weight = ctx.part(module, `${module}.weight`)
  const scales = ctx.part(module, `${module}.scales`)
  const biases = ctx.part(module, `${module}.biases`)
  ctx.expect(module, weight, ['U32'])
  const words = weight.shape.at(-1) ?? 0
  const lead = weight.shape.slice(0, -1)
  if (lead.length === 0 || (words * 32) % bits !== 0)
    throw ctx.invalid(module, `${weight.name} [${weight.shape.join(', ')}] does not hold rows of whole ${bits}-bit codes`)
  const cols = (words * 32) / bits
  if (cols % groupSize !== 0) throw ctx.invalid(module, `its rows of ${cols} ${bits}-bit codes are not whole groups of ${groupSize}`)
  const groups = cols / groupSize
  ctx.expect(module, scales, ['BF16', 'F16', 'F32'], [...lead, groups])
  ctx.expect(module, biases, [scales.dtype], scales.shape)
  const inner = ctx.runtime.elementsOf(lead.slice(1))
  return {
    name: `${module}.weight`,
    module,
    dtype: referenceOf(scales.dtype)!,
    shape: [...lead, cols],
    parts: [weight.name, scales.name, biases.name],
    bits,
    groupSize,
    rowsApart: true,
    async load(first, end, io) {
      const rows: [number, number] = [first, end]
      const [codes, s, b] = await Promise.all([weight, scales, biases].map((part) => ctx.stored.read(part.name, rows, io)))
      return {
        codes,
        format: { rowBytes: words * 4, wordStride: 1, bits, order: 'lsb-first' },
        params: {
          scales: ctx.floats(s, scales.dtype),
          biases: ctx.floats(b, biases.dtype),
          rowStride: groups,
          groupSize,
          groupStride: 1,
          value: 'affine',
          ref: referenceOf(scales.dtype)!,
        },
        rects: rowBlocks(first * inner, (end - first) * inner, cols, words * 4, (row) => row),
      }
    },
  }
}
