// GPTQ (AutoGPTQ, GPTQModel, optimum; ../shared/quantized-layouts.md §4): per module `qweight` I32
// [in * bits / 32, out] (each column's codes LSB-first down it), `qzeros` I32 [groups, out * bits / 32] (each
// group's zero points LSB-first along it), `scales` [groups, out] in F16 (sometimes BF16), `g_idx` I32 [in] (the
// group of each input column; derived as k / group_size where it is missing). GPTQModel's dequantize_weight
// computes W[n, k] = T(scale[g, n] * (q[k, n] - z[g, n])), g = g_idx[k], T the scales' dtype: one rounding of an
// exact product. Checkpoints in the historical format (checkpoint_format "gptq", the default) store each zero
// point minus one: GPTQModel adds the one back to each packed word at 2, 4 and 8 bits (a field of all ones
// carries into the next, as the reference computes it too) and field by field at 3 bits.
import type { Rect } from './kernels.ts'
import {
  guarded,
  type LayoutContext,
  type LogicalTensor,
  modulesWith,
  optionsOf,
  paramRows,
  type QuantLayout,
  RECT_ELEMENTS,
  referenceOf,
  WHOLE_ROW,
} from './logical.ts'

const BITS = [2, 3, 4, 8]
const PARTS = ['.qweight', '.qzeros', '.scales', '.g_idx']
/** GPTQModel's word constants for the historical format, by bits: a one in every field. */
const ONE_PER_FIELD: Record<number, number> = { 2: 0x55555555, 4: 0x11111111, 8: 0x01010101 }

export async function gptqLayout(ctx: LayoutContext): Promise<QuantLayout> {
  const { block } = ctx
  const bits = block.get('bits').integer()
  if (!BITS.includes(bits))
    throw ctx.unsupported(
      `GPTQ ${bits}-bit quantization is not supported: ${BITS.join(', ')} bits are (5, 6 and 7 bits exist only in GPTQModel's gptq_p format)`,
    )
  const format = block.get('checkpoint_format').optional()?.oneOf(['gptq', 'gptq_v2']) ?? 'gptq'
  block.get('pack_dtype').optional()?.oneOf(['int32'])
  const groupSize = block.get('group_size').optional()?.integer(-1) ?? -1
  if (groupSize === 0) throw block.get('group_size').mustBe('a positive integer or -1')
  const tensors = await Promise.all(
    modulesWith(ctx, '.qweight').map((module) =>
      guarded(ctx, module, `${module}.weight`, PARTS, () => gptqTensor(ctx, module, bits, groupSize, format === 'gptq')),
    ),
  )
  return { quantization: { method: 'gptq', bits, groupSize, ...optionsOf(block, ['quant_method', 'bits', 'group_size']) }, tensors }
}

function gptqTensor(ctx: LayoutContext, module: string, bits: number, groupSize: number, minusOne: boolean): LogicalTensor {
  const qweight = ctx.part(module, `${module}.qweight`)
  const qzeros = ctx.part(module, `${module}.qzeros`)
  const scales = ctx.part(module, `${module}.scales`)
  const gIdx = ctx.stored.info(`${module}.g_idx`)
  ctx.expect(module, qweight, ['I32'])
  if (qweight.shape.length !== 2) throw ctx.invalid(module, `${qweight.name} has shape [${qweight.shape.join(', ')}], not 2 dimensions`)
  const [words, out] = qweight.shape
  const cols = (words * 32) / bits
  const groups = groupSize === -1 ? 1 : Math.ceil(cols / groupSize)
  ctx.expect(module, scales, ['F16', 'BF16', 'F32'], [groups, out])
  if ((out * bits) % 32 !== 0) throw ctx.invalid(module, `${out} output columns of ${bits}-bit zero points are not whole 32-bit words`)
  ctx.expect(module, qzeros, ['I32'], [groups, (out * bits) / 32])
  if (gIdx) ctx.expect(module, gIdx, ['I32'], [cols])
  const ref = referenceOf(scales.dtype)!
  return {
    name: `${module}.weight`,
    module,
    dtype: ref,
    shape: [out, cols],
    parts: [qweight.name, qzeros.name, scales.name, ...(gIdx ? [gIdx.name] : [])],
    bits,
    groupSize: groupSize === -1 ? cols : groupSize,
    rowsApart: false,
    async load(first, end, io) {
      const parts = [qweight, qzeros, scales, ...(gIdx ? [gIdx] : [])]
      const [codes, zeroWords, s, g] = await Promise.all(parts.map((part) => ctx.stored.read(part.name, undefined, io)))
      const groupOf = g
        ? new Int32Array(g.buffer, g.byteOffset, cols)
        : Int32Array.from({ length: cols }, (_, k) => (groupSize === -1 ? 0 : Math.floor(k / groupSize)))
      const bad = groupOf.findIndex((group) => group < 0 || group >= groups)
      if (bad >= 0) throw ctx.invalid(module, `${gIdx!.name}[${bad}] is ${groupOf[bad]}, outside its ${groups} groups`)
      // A g_idx of consecutive groups (desc_act false) reads its groups without the index.
      const consecutive = groupSize !== -1 && groupOf.every((group, k) => group === Math.floor(k / groupSize))
      // Row n of the logical tensor is column n of qweight: its stream starts at word n, its words `out` apart.
      const per = Math.max(1, Math.floor(RECT_ELEMENTS / cols))
      const rects: Rect[] = []
      for (let row = first; row < end; row += per) {
        const count = Math.min(per, end - row)
        rects.push({ codeOffset: row * 4, rows: count, cols, colOffset: 0, paramRowOf: paramRows(count, (i) => row + i), first: row * cols })
      }
      return {
        codes,
        format: { rowBytes: 4, wordStride: out, bits, order: 'lsb-first' },
        params: {
          scales: ctx.floats(s, scales.dtype),
          zeros: Float32Array.from(zeroPoints(ctx, zeroWords, bits, groups * out, minusOne)),
          rowStride: 1,
          groupSize: groupSize === -1 ? WHOLE_ROW : consecutive ? groupSize : 0,
          groupOf: groupSize === -1 || consecutive ? undefined : groupOf,
          groupStride: out,
          value: 'affine',
          ref,
        },
        rects,
      }
    },
  }
}

/** The zero points of `qzeros` (one stream of count codes), the historical format's minus one undone as GPTQModel undoes it. */
function zeroPoints(ctx: LayoutContext, words: Uint8Array, bits: number, count: number, minusOne: boolean): Uint8Array {
  if (minusOne && bits !== 3) {
    const fixed = new Uint32Array(words.length / 4)
    new Uint8Array(fixed.buffer).set(words)
    for (let i = 0; i < fixed.length; i++) fixed[i] += ONE_PER_FIELD[bits]
    words = new Uint8Array(fixed.buffer)
  }
  const zeros = ctx.kernels.unpack(words, { bits, order: 'lsb-first', wordStride: 1 }, count)
  if (minusOne && bits === 3) for (let i = 0; i < count; i++) zeros[i] = (zeros[i] + 1) & 7
  return zeros
}
