// compressed-tensors (quant_method "compressed-tensors": llm-compressor, vLLM; ../shared/quantized-layouts.md §3).
// config_groups say, per group of modules (`targets`), how its weights are quantized (num_bits, type, symmetric,
// strategy, group_size, block_structure, actorder) and in which format they are stored:
//
// - pack-quantized: `weight_packed` I32 [out, words] (unsigned codes q + 2^(bits-1), LSB-first along each row),
//   `weight_shape` [2] (the logical shape), `weight_scale` per row or group, `weight_zero_point` I32 packed the same
//   way down each column (asymmetric), `weight_g_idx` I32 [in] (actorder "group": each input column's group);
// - int-quantized (naive-quantized): `weight` I8 [out, in], `weight_scale`, `weight_zero_point` (asymmetric);
// - float-quantized: `weight` F8_E4M3 [out, in], `weight_scale` per tensor, row, group or block;
// - nvfp4-pack-quantized: `weight_packed` U8 [out, in / 2] (E2M1, the first in the low nibble), `weight_scale`
//   F8_E4M3 [out, in / 16], `weight_global_scale` F32 [1], which divides, and `input_global_scale` (dropped).
//
// The reference (<Compressor>.decompress, then forward.py dequantize) computes in the scale's dtype T:
// T((q - z) * scale), one rounding of an exact product for integer codes and F8; NVFP4 is
// bf16(f32(e2m1 * f32(f32(scale) / global_scale))) (E2M1 code 8 is -0 there, as the F4 dtype has it).

import type { JsonValue } from '../format/json-values.ts'
import type { CodeFormat, Params } from './kernels.ts'
import { guarded, type LayoutContext, type LogicalTensor, modulesWith, optionsOf, type QuantLayout, rowBlocks, scaleGrid } from './logical.ts'
import { nvfp4Tensor } from './nvfp4.ts'
import { targetPattern } from './target-pattern.ts'

const FORMATS = ['pack-quantized', 'int-quantized', 'naive-quantized', 'float-quantized', 'nvfp4-pack-quantized']
const PACKED_BITS = [2, 4, 8]
const PARTS = [
  '.weight',
  '.weight_packed',
  '.weight_shape',
  '.weight_scale',
  '.weight_zero_point',
  '.weight_g_idx',
  '.weight_global_scale',
  '.input_global_scale',
  '.input_scale',
  '.input_zero_point',
]

/** A config group: the modules it targets (by name, by a "re:" pattern, or by class), how and in which format they are stored. */
interface Group {
  /** Module names, and the "re:" targets' matchers. */
  names: Set<string>
  patterns: Array<(name: string) => boolean>
  /** Whether its targets are all class names (such as "Linear"), which a module's name cannot tell. */
  byClass: boolean
  weights: JsonValue
  format: string
}

/** A config group of the block, its targets read (a "re:" pattern of a form not read is UnsupportedQuantization naming it). */
function readGroup(group: JsonValue, overall: JsonValue): Group {
  group.object()
  const names = new Set<string>()
  const patterns: Group['patterns'] = []
  let byClass = true
  for (const target of group.get('targets').optional()?.items() ?? []) {
    const text = target.string()
    if (text.startsWith('re:')) {
      const matcher = targetPattern(text.slice(3))
      if (typeof matcher !== 'function') throw target.mustBe(`a pattern of the forms compressed-tensors writes (${matcher.unread})`)
      patterns.push(matcher)
    } else names.add(text)
    if (text.startsWith('re:') || text.includes('.')) byClass = false
  }
  const format = (group.get('format').optional() ?? overall).oneOf(FORMATS)
  return { names, patterns, byClass, weights: group.get('weights'), format }
}

export async function compressedTensorsLayout(ctx: LayoutContext): Promise<QuantLayout> {
  const { block } = ctx
  block.get('quantization_status').optional()?.oneOf(['compressed'])
  const configGroups = block.get('config_groups').members()
  if (configGroups.length === 0) throw block.get('config_groups').mustBe('an object of at least one config group')
  const groups = configGroups.map(([, group]) => readGroup(group, block.get('format')))
  const modules = new Set([...modulesWith(ctx, '.weight_packed'), ...modulesWith(ctx, '.weight_scale')])
  const tensors = await Promise.all(
    [...modules].map((module) => {
      const group = groupOf(ctx, groups, module)
      return guarded(ctx, module, `${module}.weight`, PARTS, () => ctTensor(ctx, module, group))
    }),
  )
  const { weights } = groups[0]
  return {
    quantization: {
      method: 'compressed-tensors',
      bits: weights.get('num_bits').integer(),
      groupSize: weights.get('group_size').optional()?.integer(1),
      ...optionsOf(block, ['quant_method']),
      ...(weights.present ? optionsOf(weights, ['num_bits', 'group_size']) : {}),
    },
    tensors,
  }
}

/**
 * The config group of `module`: the one group there is; else the one whose targets name it (its name, or a
 * "re:" pattern matching from its start), else the one whose targets are class names (such as "Linear").
 */
function groupOf(ctx: LayoutContext, groups: Group[], module: string): Group {
  if (groups.length === 1) return groups[0]
  const named = groups.filter((g) => g.names.has(module) || g.patterns.some((matches) => matches(module)))
  const candidates = named.length > 0 ? named : groups.filter((g) => g.byClass)
  if (candidates.length !== 1) throw ctx.unsupported(`compressed-tensors: ${module} is targeted by ${candidates.length} config groups, where one is read`)
  return candidates[0]
}

async function ctTensor(ctx: LayoutContext, module: string, group: Group): Promise<LogicalTensor> {
  const { weights, format } = group
  const scale = ctx.part(module, `${module}.weight_scale`)
  const dropped = ['input_global_scale', 'input_scale', 'input_zero_point'].map((part) => `${module}.${part}`).filter((part) => ctx.stored.info(part))
  if (format === 'nvfp4-pack-quantized') {
    const names = { weight: `${module}.weight_packed`, scale: scale.name, global: `${module}.weight_global_scale` }
    // Its reference unpacks to BF16 and computes in it, whatever the model's dtype.
    return nvfp4Tensor(ctx, module, { ...names, divides: true, dropped, positiveZero: false, ref: 'BF16' })
  }
  const bits = weights.get('num_bits').integer()
  const symmetric = weights.get('symmetric').value !== false
  const packed = format === 'pack-quantized'
  if (packed ? !PACKED_BITS.includes(bits) : bits !== 8)
    throw ctx.unsupported(`compressed-tensors ${format} with ${bits} bits is not supported: ${packed ? PACKED_BITS.join(', ') : 8} bits are`)
  const float = format === 'float-quantized'
  if ((weights.get('type').optional()?.string() ?? 'int') !== (float ? 'float' : 'int'))
    throw weights.get('type').mustBe(`${JSON.stringify(float ? 'float' : 'int')} in ${format}`)
  const weight = ctx.part(module, packed ? `${module}.weight_packed` : `${module}.weight`)
  ctx.expect(module, weight, packed ? ['I32'] : float ? ['F8_E4M3'] : ['I8'])
  if (weight.shape.length !== 2) throw ctx.invalid(module, `${weight.name} has shape [${weight.shape.join(', ')}], not 2 dimensions`)
  ctx.expect(module, scale, ['BF16', 'F16', 'F32'])
  const parts = [weight.name, scale.name]
  let shape = weight.shape
  if (packed) {
    const stored = ctx.part(module, `${module}.weight_shape`)
    ctx.expect(module, stored, ['I64', 'I32'], [2])
    const bytes = await ctx.stored.read(stored.name, undefined, {})
    shape =
      stored.dtype === 'I64'
        ? Array.from(new BigInt64Array(bytes.buffer, bytes.byteOffset, 2), Number)
        : Array.from(new Int32Array(bytes.buffer, bytes.byteOffset, 2))
    if (shape[0] !== weight.shape[0] || Math.ceil((shape[1] * bits) / 32) !== weight.shape[1] || shape[1] < 0)
      throw ctx.invalid(
        module,
        `${stored.name} says [${shape.join(', ')}], which ${weight.name} [${weight.shape.join(', ')}] of ${bits}-bit codes does not hold`,
      )
    parts.push(stored.name)
  }
  const [rows, cols] = shape
  const grid = scaleGrid(ctx, module, scale, shape, blocksOf(ctx, module, weights, shape))
  const gIdx = ctx.stored.info(`${module}.weight_g_idx`)
  if (gIdx) {
    ctx.expect(module, gIdx, ['I32'], [cols])
    parts.push(gIdx.name)
  }
  const zeroPoint = symmetric ? undefined : ctx.part(module, `${module}.weight_zero_point`)
  const groups = scale.shape.length === 2 ? scale.shape[1] : 1
  if (zeroPoint) {
    if (packed) ctx.expect(module, zeroPoint, ['I32'], [Math.ceil((rows * bits) / 32), groups])
    else ctx.expect(module, zeroPoint, ['I8'], scale.shape)
    parts.push(zeroPoint.name)
  }
  const ref = scale.dtype as 'BF16' | 'F16' | 'F32'
  const format_: CodeFormat = packed
    ? { rowBytes: weight.shape[1] * 4, wordStride: 1, bits, order: 'lsb-first' }
    : { rowBytes: cols, wordStride: 1, bits: 8, order: 'lsb-first', signed: !float }
  return {
    name: `${module}.weight`,
    module,
    dtype: ref,
    shape,
    parts: [...parts, ...dropped],
    bits,
    groupSize: grid.groupSize < cols ? grid.groupSize : undefined,
    rowsApart: true,
    async load(first, end, io) {
      const [codes, s, g, z] = await Promise.all([
        ctx.stored.read(weight.name, [first, end], io),
        ctx.stored.read(scale.name, grid.rows(first, end), io),
        gIdx ? ctx.stored.read(gIdx.name, undefined, io) : undefined,
        // Packed zero points run down the columns: they are read whole.
        zeroPoint ? ctx.stored.read(zeroPoint.name, packed ? undefined : grid.rows(first, end), io) : undefined,
      ])
      const scales = ctx.floats(s, scale.dtype)
      const params: Params = { scales, rowStride: grid.rowStride, groupSize: grid.groupSize, groupStride: 1, value: float ? 'F8_E4M3' : 'affine', ref }
      if (g) {
        const groupOfColumn = new Int32Array(g.buffer, g.byteOffset, cols)
        const bad = groupOfColumn.findIndex((index) => index < 0 || index >= groups)
        if (bad >= 0) throw ctx.invalid(module, `${gIdx!.name}[${bad}] is ${groupOfColumn[bad]}, outside its ${groups} groups`)
        params.groupSize = 0
        params.groupOf = groupOfColumn
      }
      if (!float) params.zeros = zerosOf(ctx, z, packed, bits, rows, groups, scales.length, first)
      return { codes, format: format_, params, rects: rowBlocks(first, end - first, cols, format_.rowBytes, grid.paramRowOf(first)) }
    },
  }
}

/** The blocks of one scale: the strategy's (a tensor, a row, a group of a row, block_structure). */
function blocksOf(ctx: LayoutContext, module: string, weights: JsonValue, [rows, cols]: number[]): number[] {
  const strategy = weights.get('strategy').oneOf(['tensor', 'channel', 'group', 'tensor_group', 'block'])
  if (strategy === 'tensor') return [rows, cols]
  if (strategy === 'channel') return [1, cols]
  if (strategy === 'group' || strategy === 'tensor_group') {
    const groupSize = weights.get('group_size').integer(1)
    if (cols % groupSize !== 0)
      throw ctx.unsupported(`compressed-tensors group_size ${groupSize} for ${module}'s ${cols} columns is not supported: a divisor of them is`)
    return [1, groupSize]
  }
  const block = weights.get('block_structure')
  const sizes = block.items().map((size) => size.integer(1))
  if (sizes.length !== 2) throw block.mustBe('two positive integers')
  return sizes
}

/**
 * Each scale's zero point, as the unsigned code it is subtracted from: 2^(bits - 1) where symmetric, else the
 * stored zero point plus that offset (packed down the columns for pack-quantized, I8 values for int-quantized).
 */
function zerosOf(
  ctx: LayoutContext,
  stored: Uint8Array | undefined,
  packed: boolean,
  bits: number,
  rows: number,
  groups: number,
  count: number,
  first: number,
): Float32Array {
  const offset = packed ? 2 ** (bits - 1) : 128
  if (!stored) return new Float32Array(count).fill(offset)
  if (!packed) return Float32Array.from(new Int8Array(stored.buffer, stored.byteOffset, stored.length), (z) => z + offset)
  // Column g of [ceil(rows * bits / 32), groups] words is group g's stream of `rows` codes; the rows read (from
  // `first` on) take theirs, [row, group] as the scales are.
  const columns = ctx.kernels.unpack(stored, { bits, order: 'lsb-first', wordStride: groups }, rows, groups, 1)
  return Float32Array.from({ length: count }, (_, i) => columns[(i % groups) * rows + first + Math.floor(i / groups)])
}
