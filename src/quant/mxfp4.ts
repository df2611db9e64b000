// MXFP4, as gpt-oss stores its experts (../shared/quantized-layouts.md §1): `<proj>_blocks` U8 [experts, out,
// in / 32, 16] (32 E2M1 codes per block, the first in the low nibble) and `<proj>_scales` U8 [experts, out, in / 32]
// (E8M0: 2^(byte - 127)). transformers' convert_moe_packed_tensors gives ldexp(e2m1, byte - 127), exact, rounded
// once to the model's dtype, as `<proj>` [experts, in, out] (GptOssExperts' orientation: the blocks' transpose).
// A scale byte of 0xFF is 2^128, not NaN: codes times 2 times 2^(byte - 128) keep every product exact in F32
// (0.5 x 2^128 is 2^127; larger ones overflow to infinity, and zero stays zero).
import type { Rect } from './kernels.ts'
import { e2m1Values, guarded, type LayoutContext, type LogicalTensor, modulesWith, optionsOf, paramRows, type QuantLayout, RECT_ELEMENTS } from './logical.ts'

const BLOCK = 32

/** 2^(byte - 128) by E8M0 byte: the scale the doubled codes are multiplied by. */
const HALF_POWERS = Float32Array.from({ length: 256 }, (_, byte) => 2 ** (byte - 128))

/** The scales of `experts` experts' [rows, groups] bytes, as F32 transposed: [experts, groups, rows]. */
function scalesOf(bytes: Uint8Array, experts: number, rows: number, groups: number): Float32Array {
  const scales = new Float32Array(bytes.length)
  for (let e = 0; e < experts; e++) {
    const base = e * rows * groups
    for (let r = 0; r < rows; r++) for (let g = 0; g < groups; g++) scales[base + g * rows + r] = HALF_POWERS[bytes[base + r * groups + g]]
  }
  return scales
}

export async function mxfp4Layout(ctx: LayoutContext): Promise<QuantLayout> {
  const tensors = await Promise.all(
    modulesWith(ctx, '_blocks').map((module) => guarded(ctx, module, module, ['_blocks', '_scales'], () => mxfp4Tensor(ctx, module))),
  )
  return { quantization: { method: 'mxfp4', bits: 4, groupSize: BLOCK, ...optionsOf(ctx.block, ['quant_method']) }, tensors }
}

function mxfp4Tensor(ctx: LayoutContext, module: string): LogicalTensor {
  const blocks = ctx.part(module, `${module}_blocks`)
  const scales = ctx.part(module, `${module}_scales`)
  ctx.expect(module, blocks, ['U8'])
  if (blocks.shape.length !== 4 || blocks.shape[3] !== BLOCK / 2)
    throw ctx.invalid(module, `${blocks.name} has shape [${blocks.shape.join(', ')}], not [experts, rows, blocks, 16]`)
  const [experts, rows, groups] = blocks.shape
  ctx.expect(module, scales, ['U8'], blocks.shape.slice(0, 3))
  const cols = groups * BLOCK
  const ref = ctx.modelDtype()
  const doubled = e2m1Values(ctx).map((v) => v * 2)
  return {
    name: module,
    module,
    dtype: ref,
    shape: [experts, cols, rows],
    parts: [blocks.name, scales.name],
    bits: 4,
    groupSize: BLOCK,
    rowsApart: true,
    async load(first, end, io) {
      const range: [number, number] = [first, end]
      const [codes, bytes] = await Promise.all([ctx.stored.read(blocks.name, range, io), ctx.stored.read(scales.name, range, io)])
      // An expert's row k of the result is column k of its blocks: code k % 8 of word k / 8 of each of its rows.
      // Its scales are those of column k's group in each row: the scales transposed, a row per group.
      const per = Math.max(32, Math.floor(RECT_ELEMENTS / rows / 32) * 32)
      const rects: Rect[] = []
      for (let expert = first; expert < end; expert++) {
        const base = expert - first
        for (let k = 0; k < cols; k += per) {
          const count = Math.min(per, cols - k)
          rects.push({
            codeOffset: base * rows * groups * 16 + k / 2,
            rows: count,
            cols: rows,
            colOffset: 0,
            paramRowOf: paramRows(count, (i) => base * groups + Math.floor((k + i) / BLOCK)),
            first: (expert * cols + k) * rows,
          })
        }
      }
      return {
        codes,
        format: { rowBytes: groups * 16, wordStride: 1, bits: 4, order: 'lsb-first', columns: true },
        params: {
          scales: scalesOf(bytes, end - first, rows, groups),
          rowStride: rows,
          groupSize: 1,
          groupStride: 1,
          value: 'table',
          table: doubled,
          // A product of at most two significant bits is exact in BF16 as in F32 (an overflow is infinity in both):
          // rounding it to BF16 changes nothing, and is left out. F16's range is narrower.
          ref: ref === 'F16' ? 'F16' : 'F32',
        },
        rects,
      }
    },
  }
}
