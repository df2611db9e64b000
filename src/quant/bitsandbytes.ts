// bitsandbytes as transformers serializes it (../shared/quantized-layouts.md §6).
//
// 4-bit (NF4, FP4): per module `weight` U8 [(n + 1) / 2, 1] holds the row-major weight's n codes, two a byte, the
// first in the high nibble; `weight.absmax` has a scale per block of `blocksize` codes (blocks run over the
// flattened weight, so they straddle rows), F32, or with double quantization U8 codes of the nested map
// `weight.nested_quant_map` times `weight.nested_absmax` (per block of `nested_blocksize`) plus `nested_offset`;
// `weight.quant_state.bitsandbytes__<type>` is the UTF-8 JSON of the rest (the shape, the blocksize, the dtype of
// the result). The default backend computes dtype(f32(code[q] * absmax)) with its built-in NF4 or FP4 table (the
// stored `weight.quant_map` is not read), and the nested absmax as f32(f32(map[a] * nested_absmax) + offset).
//
// 8-bit (LLM.int8): `weight` I8 [out, in], `SCB` F32 [out] and `weight_format` U8 [] (0, row-major);
// int8_vectorwise_dequant computes f32(f32(q * SCB[row]) * f32(1 / 127)), F32.
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
  rowBlocks,
  WHOLE_ROW,
} from './logical.ts'

/** bitsandbytes' functional.get_4bit_type tables, as F32. */
const TABLES: Record<string, Float32Array> = {
  nf4: Float32Array.from([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
  ]),
  // Listed as sign, 2 exponent bits and a mantissa bit with bitsandbytes' own bias, then divided by the largest (in
  // F32). Code 8 is the Python int -0, which is +0.
  fp4: Float32Array.from([0, 0.0625, 8, 12, 4, 6, 2, 3, 0, -0.0625, -8, -12, -4, -6, -2, -3], (v) => Math.fround(v / 12)),
}

/** int8_vectorwise_dequant's factor, as F32. */
const ONE_127TH = Math.fround(7.874015718698502e-3)

const DTYPES: Record<string, 'F32' | 'F16' | 'BF16'> = { float32: 'F32', float16: 'F16', bfloat16: 'BF16' }
const BLOCK_SIZES = [32, 64, 128, 256, 512, 1024, 2048, 4096]
/** A module's parts, the two quant states last. */
const FOUR_BIT_PARTS = [
  '.weight',
  '.weight.absmax',
  '.weight.quant_map',
  '.weight.nested_absmax',
  '.weight.nested_quant_map',
  '.weight.quant_state.bitsandbytes__nf4',
  '.weight.quant_state.bitsandbytes__fp4',
]
const INT8_PARTS = ['.weight', '.SCB', '.weight_format']

export async function bitsandbytesLayout(ctx: LayoutContext): Promise<QuantLayout> {
  const eight = ctx.block.get('load_in_8bit').optional()?.boolean() ?? false
  // 8-bit: every I8 weight is quantized; 4-bit: every weight with a quant state.
  const modules = eight
    ? modulesWith(ctx, '.weight').filter((module) => ctx.stored.info(`${module}.weight`)!.dtype === 'I8')
    : [...new Set([...modulesWith(ctx, '.weight.quant_state.bitsandbytes__nf4'), ...modulesWith(ctx, '.weight.quant_state.bitsandbytes__fp4')])]
  const tensors = await Promise.all(
    modules.map((module) =>
      guarded(ctx, module, `${module}.weight`, eight ? INT8_PARTS : FOUR_BIT_PARTS, () => (eight ? int8Tensor(ctx, module) : fourBitTensor(ctx, module))),
    ),
  )
  return { quantization: { method: 'bitsandbytes', bits: eight ? 8 : 4, groupSize: tensors[0]?.groupSize, ...optionsOf(ctx.block, ['quant_method']) }, tensors }
}

async function fourBitTensor(ctx: LayoutContext, module: string): Promise<LogicalTensor> {
  const [stateName] = FOUR_BIT_PARTS.slice(-2)
    .map((suffix) => module + suffix)
    .filter((name) => ctx.stored.info(name))
  const weight = ctx.part(module, `${module}.weight`)
  const absmax = ctx.part(module, `${module}.weight.absmax`)
  const quantMap = ctx.stored.info(`${module}.weight.quant_map`)
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(await ctx.stored.read(stateName, undefined, {}))
  } catch {
    throw ctx.invalid(module, `${stateName} is not the UTF-8 JSON of a quant state`)
  }
  // Its errors name the tensor, which names the module.
  const state = ctx.runtime.parseJson(text, stateName, 'InvalidQuantization').object()
  const type = stateName.slice(stateName.lastIndexOf('__') + 2)
  const quantType = state.get('quant_type').withCode('UnsupportedQuantization').oneOf(Object.keys(TABLES))
  if (quantType !== type) throw state.get('quant_type').error(`is ${JSON.stringify(quantType)}, where the tensor's name says ${JSON.stringify(type)}`)
  const blocksize = state.get('blocksize').oneOf(BLOCK_SIZES)
  const dtype = state.get('dtype').withCode('UnsupportedQuantization').oneOf(Object.keys(DTYPES))
  const shape = state
    .get('shape')
    .items()
    .map((d) => d.integer(0))
  if (shape.length === 0) throw state.get('shape').mustBe('a list of dimensions')
  const count = ctx.runtime.elementsOf(shape)
  const blocks = Math.ceil(count / blocksize)
  if (weight.dtype !== 'U8') throw ctx.unsupported(`bitsandbytes 4-bit codes stored as ${weight.dtype} (${weight.name}) are not supported: U8 is`)
  ctx.expect(module, weight, ['U8'], [Math.ceil(count / 2), 1])
  const nested = state.get('nested_blocksize').present
  const parts = [weight.name, absmax.name, ...(quantMap ? [quantMap.name] : []), stateName]
  let nestedParts: { absmax: string; map: string; blocksize: number; offset: number } | undefined
  if (nested) {
    const nestedBlocksize = state.get('nested_blocksize').oneOf(BLOCK_SIZES)
    const offset = state.get('nested_offset').number()
    ctx.expect(module, absmax, ['U8'], [blocks])
    const nestedAbsmax = ctx.part(module, `${module}.weight.nested_absmax`)
    const nestedMap = ctx.part(module, `${module}.weight.nested_quant_map`)
    ctx.expect(module, nestedAbsmax, ['F32'], [Math.ceil(blocks / nestedBlocksize)])
    ctx.expect(module, nestedMap, ['F32'], [256])
    nestedParts = { absmax: nestedAbsmax.name, map: nestedMap.name, blocksize: nestedBlocksize, offset: Math.fround(offset) }
    parts.push(nestedAbsmax.name, nestedMap.name)
  } else ctx.expect(module, absmax, ['F32'], [blocks])
  const cols = ctx.runtime.elementsOf(shape.slice(1))
  return {
    name: `${module}.weight`,
    module,
    dtype: DTYPES[dtype],
    shape,
    parts,
    bits: 4,
    groupSize: blocksize,
    rowsApart: true,
    async load(first, end, io) {
      // The blocks the rows' codes lie in, from the first block's start: the codes of one block start on a byte.
      const from = Math.floor((first * cols) / blocksize)
      const until = Math.ceil((end * cols) / blocksize)
      const lastCode = Math.min(count, until * blocksize)
      const [codes, scaleBytes, nestedAbsmax, nestedMap] = await Promise.all([
        ctx.stored.read(weight.name, [(from * blocksize) / 2, Math.ceil(lastCode / 2)], io),
        ctx.stored.read(absmax.name, [from, until], io),
        ...(nestedParts ? [ctx.stored.read(nestedParts.absmax, undefined, io), ctx.stored.read(nestedParts.map, undefined, io)] : []),
      ])
      let scales: Float32Array
      if (nestedParts) {
        const map = ctx.floats(nestedMap, 'F32')
        const nestedScales = ctx.floats(nestedAbsmax, 'F32')
        const { blocksize: nestedBlocksize, offset } = nestedParts
        scales = new Float32Array(scaleBytes.length)
        for (let i = 0; i < scales.length; i++) scales[i] = Math.fround(map[scaleBytes[i]] * nestedScales[Math.floor((from + i) / nestedBlocksize)]) + offset
      } else scales = ctx.floats(scaleBytes, 'F32')
      // One row of codes from the first block on, in rectangles of whole blocks.
      const per = Math.max(blocksize, Math.floor(RECT_ELEMENTS / blocksize) * blocksize)
      const rects: Rect[] = []
      const start = from * blocksize
      for (let at = start; at < lastCode; at += per) {
        rects.push({
          codeOffset: (at - start) / 2,
          rows: 1,
          cols: Math.min(per, lastCode - at),
          colOffset: at - start,
          paramRowOf: paramRows(1, () => 0),
          first: at,
        })
      }
      return {
        codes,
        format: { rowBytes: 0, wordStride: 1, bits: 4, order: 'high-nibble-first' },
        params: { scales, rowStride: 0, groupSize: blocksize, groupStride: 1, value: 'table', table: TABLES[type], ref: DTYPES[dtype] },
        rects,
      }
    },
  }
}

function int8Tensor(ctx: LayoutContext, module: string): LogicalTensor {
  const weight = ctx.part(module, `${module}.weight`)
  const scb = ctx.part(module, `${module}.SCB`)
  const format = ctx.stored.info(`${module}.weight_format`)
  ctx.expect(module, weight, ['I8'])
  if (weight.shape.length !== 2) throw ctx.invalid(module, `${weight.name} has shape [${weight.shape.join(', ')}], not 2 dimensions`)
  const [rows, cols] = weight.shape
  ctx.expect(module, scb, ['F32'], [rows])
  if (format) ctx.expect(module, format, ['U8'], [])
  return {
    name: `${module}.weight`,
    module,
    dtype: 'F32',
    shape: [rows, cols],
    parts: [weight.name, scb.name, ...(format ? [format.name] : [])],
    bits: 8,
    rowsApart: true,
    async load(first, end, io) {
      const range: [number, number] = [first, end]
      const [codes, s, layout] = await Promise.all([
        ctx.stored.read(weight.name, range, io),
        ctx.stored.read(scb.name, range, io),
        ...(format ? [ctx.stored.read(format.name, undefined, io)] : []),
      ])
      if (layout && layout[0] !== 0) throw ctx.unsupported(`bitsandbytes weight_format ${layout[0]} (${module}) is not supported: 0 (row-major) is`)
      const scales = ctx.floats(s, 'F32')
      return {
        codes,
        format: { rowBytes: cols, wordStride: 1, bits: 8, order: 'lsb-first', signed: true },
        // Signed codes come offset by 128: a zero point of 128 gives q back, exactly.
        params: {
          scales,
          zeros: new Float32Array(scales.length).fill(128),
          rowStride: 1,
          groupSize: WHOLE_ROW,
          groupStride: 1,
          value: 'affine',
          postMultiplier: ONE_127TH,
          ref: 'F32',
        },
        rects: rowBlocks(first, end - first, cols, cols, (row) => row),
      }
    },
  }
}
