// AWQ in its GEMM layout (AutoAWQ, now in GPTQModel; ../shared/quantized-layouts.md §5), nearly every AWQ model
// on the Hub: per module `qweight` I32 [in, out / 8] and `qzeros` I32 [in / group, out / 8], eight 4-bit codes a
// word in AWQ's interleaved order, and `scales` F16 [in / group, out]. AutoAWQ's dequantize_gemm computes
// W^T[k, n] = f16((q[k, n] - z[k / group, n]) * scale[k / group, n]), one rounding of an exact product, [in, out]:
// the logical tensor, [out, in], is its transpose: the kernel reads qweight's codes down its columns.
import type { Rect } from './kernels.ts'
import { guarded, type LayoutContext, type LogicalTensor, modulesWith, optionsOf, paramRows, type QuantLayout, RECT_ELEMENTS, referenceOf } from './logical.ts'

const PARTS = ['.qweight', '.qzeros', '.scales']

export async function awqLayout(ctx: LayoutContext): Promise<QuantLayout> {
  const { block } = ctx
  const bits = block.get('bits').integer()
  if (bits !== 4) throw ctx.unsupported(`AWQ ${bits}-bit quantization is not supported: AWQ's GEMM layout is 4-bit`)
  const version = block.get('version')
  if ((version.optional()?.string().toLowerCase() ?? 'gemm') !== 'gemm') throw version.mustBe('"gemm" (in any case)')
  if (block.get('zero_point').optional()?.boolean() === false) throw ctx.unsupported('AWQ without zero points (zero_point false) is not supported')
  const groupSize = block.get('group_size').integer(1)
  const tensors = await Promise.all(
    modulesWith(ctx, '.qweight').map((module) => guarded(ctx, module, `${module}.weight`, PARTS, () => awqTensor(ctx, module, groupSize))),
  )
  return { quantization: { method: 'awq', bits, groupSize, ...optionsOf(block, ['quant_method', 'bits', 'group_size']) }, tensors }
}

function awqTensor(ctx: LayoutContext, module: string, groupSize: number): LogicalTensor {
  const qweight = ctx.part(module, `${module}.qweight`)
  const qzeros = ctx.part(module, `${module}.qzeros`)
  const scales = ctx.part(module, `${module}.scales`)
  ctx.expect(module, qweight, ['I32'])
  if (qweight.shape.length !== 2) throw ctx.invalid(module, `${qweight.name} has shape [${qweight.shape.join(', ')}], not 2 dimensions`)
  const [cols, words] = qweight.shape
  const out = words * 8
  if (cols % groupSize !== 0) throw ctx.invalid(module, `its ${cols} input columns are not whole groups of ${groupSize}`)
  const groups = cols / groupSize
  ctx.expect(module, scales, ['F16', 'BF16', 'F32'], [groups, out])
  ctx.expect(module, qzeros, ['I32'], [groups, words])
  const ref = referenceOf(scales.dtype)!
  return {
    name: `${module}.weight`,
    module,
    dtype: ref,
    shape: [out, cols],
    parts: [qweight.name, qzeros.name, scales.name],
    bits: 4,
    groupSize,
    rowsApart: false,
    async load(first, end, io) {
      const [codes, zeroWords, s] = await Promise.all([qweight, qzeros, scales].map((part) => ctx.stored.read(part.name, undefined, io)))
      // Row n of the logical tensor is column n of AWQ's [in, out]: code n % 8 of word n / 8 of each qweight row.
      // Rectangles of whole words of rows (a slice's first row rounded down to one), 32 rows (four words) at a time.
      const per = Math.max(32, Math.floor(RECT_ELEMENTS / cols / 32) * 32)
      const rects: Rect[] = []
      for (let n = Math.floor(first / 8) * 8; n < end; n += per) {
        const count = Math.min(per, out - n)
        rects.push({ codeOffset: n / 2, rows: count, cols, colOffset: 0, paramRowOf: paramRows(count, (i) => n + i), first: n * cols })
      }
      const zeros = ctx.kernels.unpack(zeroWords, { bits: 4, order: 'awq', wordStride: 1 }, groups * out)
      return {
        codes,
        format: { rowBytes: words * 4, wordStride: 1, bits: 4, order: 'awq', columns: true },
        params: { scales: ctx.floats(s, scales.dtype), zeros: Float32Array.from(zeros), rowStride: 1, groupSize, groupStride: out, value: 'affine', ref },
        rects,
      }
    },
  }
}
