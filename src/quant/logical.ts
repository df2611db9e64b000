// What a quantized checkpoint's layouts have in common: the logical tensor each quantized module becomes, what
// the reading side lends this code (loaded on demand, it imports nothing the rest of the library uses at run
// time: a bundler would move every such module into a chunk of its own), and the work a layout hands the
// kernels (src/quant/kernels.ts, assembly/quant.ts).
import type { ConvertTarget, convertOverlapping } from '../core/convert.ts'
import type { DType, Float16Array, TypedArray } from '../core/dtypes.ts'
import type { SafetensorsError } from '../errors.ts'
import type { elementsOf, TensorInfo } from '../format/header.ts'
import type { JsonValue, parseJson } from '../format/json-values.ts'
import type { planSlice, SliceRange } from '../format/slice.ts'
import type { ProgressCallback } from '../sources/progress.ts'
import type { Job, KernelRuntime, Kernels, Rect } from './kernels.ts'

/**
 * What the reading side (src/read/model.ts) lends this code: the library's functions it needs, which it must not
 * import itself. Those of src/read/ are named by their shapes here (this folder is below it).
 */
export interface QuantRuntime extends KernelRuntime {
  SafetensorsError: typeof SafetensorsError
  /** A JSON file's value (a quant state stored as a tensor), checked as it is read. */
  parseJson: typeof parseJson
  convertOverlapping: typeof convertOverlapping
  planSlice: typeof planSlice
  elementsOf: typeof elementsOf
  /** A read's result array of `bytes` bytes of `dtype`: the caller's `out` (checked), or a new one. */
  output(name: string, dtype: DType, bytes: number, out: ArrayBuffer | ArrayBufferView | undefined): { data: TypedArray; bytes: Uint8Array }
  /** The runtime's Float16Array where a read's `float16Array` option asks for it (a TypeError where there is none). */
  float16Array(option: unknown): (new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Float16Array) | undefined
  /** A stream of the chunks `chunks` yields, pulled one at a time, ending on `signal` (src/read/streams.ts). */
  pulledStream(
    signal: AbortSignal | undefined,
    what: string,
    chunks: (signal: AbortSignal) => AsyncIterator<Uint8Array>,
    ready: number,
  ): ReadableStream<Uint8Array>
}

/** How a read of a logical tensor goes: its signal, and its progress, summed over its parts. */
export interface PartIo {
  signal?: AbortSignal
  progress?: PartsProgress
}

/** The stored tensors' side of the model (SafetensorsModel's reads with `stored: true`). */
export interface StoredModel {
  info(name: string, options: { stored: true }): TensorInfo
  getTensor(name: string, options: { stored: true; signal?: AbortSignal; onProgress?: ProgressCallback }): Promise<{ data: TypedArray }>
  getSlice(
    name: string,
    ranges: readonly SliceRange[],
    options: { stored: true; signal?: AbortSignal; onProgress?: ProgressCallback },
  ): Promise<{ data: TypedArray }>
}

/** A read's progress over the parts it reads, each read reporting its own. */
export class PartsProgress {
  readonly #onProgress: ProgressCallback
  #loaded = 0
  #total = 0

  constructor(onProgress: ProgressCallback) {
    this.#onProgress = onProgress
  }

  /** The progress callback of one part's read, of `bytes` bytes. */
  part(bytes: number): ProgressCallback {
    this.#total += bytes
    let seen = 0
    return ({ loaded }) => {
      this.#loaded += loaded - seen
      seen = loaded
      this.#onProgress({ loaded: this.#loaded, total: this.#total })
    }
  }
}

/** A model's stored tensors as the layouts read them. */
interface StoredTensors {
  /** Stored tensor names, in the model's order (shard by shard, in data order). */
  readonly names: readonly string[]
  /** A stored tensor's header entry; undefined when the model has none of that name. */
  info(name: string): TensorInfo | undefined
  /** Stored tensor `name`'s little-endian bytes: all of them, or those of rows [first, end) of its first dimension. */
  read(name: string, rows: readonly [first: number, end: number] | undefined, io: PartIo): Promise<Uint8Array>
}

/** The stored tensors of `model`, whose names are `names`. */
export function storedTensors(model: StoredModel, names: readonly string[]): StoredTensors {
  const known = new Set(names)
  return {
    names,
    info: (name) => (known.has(name) ? model.info(name, { stored: true }) : undefined),
    async read(name, rows, { signal, progress }) {
      const info = model.info(name, { stored: true })
      const bytes = rows ? ((rows[1] - rows[0]) * info.byteLength) / (info.shape[0] || 1) : info.byteLength
      const options = { stored: true, signal, onProgress: progress?.part(bytes) } as const
      const { data } = rows ? await model.getSlice(name, [rows], options) : await model.getTensor(name, options)
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    },
  }
}

/** A quantized module as the dequantized transformers model has it, and how to read it. */
export interface LogicalTensor {
  readonly name: string
  /** The module, as error messages name it. */
  readonly module: string
  /** The reference's output dtype. */
  readonly dtype: ConvertTarget
  readonly shape: number[]
  /** The stored tensors it is read from. */
  readonly parts: readonly string[]
  readonly bits: number
  readonly groupSize?: number
  /**
   * Whether each row of the first dimension is stored apart (in its own rows of every part), so that a slice of
   * rows reads only those rows' bytes; GPTQ and AWQ pack along the rows and are read whole.
   */
  readonly rowsApart: boolean
  /** Reads what rows [first, end) of the first dimension need, and plans the kernel's work for at least them. */
  load(first: number, end: number, io: PartIo): Promise<Job>
  /** Why a module whose parts do not fit together cannot be read: its reads (and info) throw it. */
  readonly error?: SafetensorsError
}

/**
 * The logical tensor `name` of `module`, as `build` makes it; where its parts do not fit together, one whose reads
 * fail with that InvalidQuantization, so that the model opens and the rest of it can be read. Its parts are then
 * the stored tensors named `module` + one of `suffixes`.
 */
export async function guarded(
  ctx: LayoutContext,
  module: string,
  name: string,
  suffixes: readonly string[],
  build: () => LogicalTensor | Promise<LogicalTensor>,
): Promise<LogicalTensor> {
  try {
    return await build()
  } catch (error) {
    if (!(error instanceof ctx.runtime.SafetensorsError) || error.code !== 'InvalidQuantization') throw error
    const parts = suffixes.map((suffix) => module + suffix).filter((part) => ctx.stored.info(part))
    return { name, module, dtype: 'F32', shape: [], parts, bits: 0, rowsApart: false, error, load: () => Promise.reject(error) }
  }
}

/** What every layout is given: the stored tensors, the config, and the errors and numbers it needs. */
export class LayoutContext {
  constructor(
    readonly stored: StoredTensors,
    /** config.json. */
    readonly config: JsonValue,
    /** Its quantization block (quantization_config, or MLX's quantization), whose errors are UnsupportedQuantization. */
    readonly block: JsonValue,
    readonly runtime: QuantRuntime,
    readonly kernels: Kernels,
  ) {}

  /** InvalidQuantization: the parts of `module` do not fit together. */
  invalid(module: string, message: string): SafetensorsError {
    return new this.runtime.SafetensorsError('InvalidQuantization', `${module}: ${message}`)
  }

  /** UnsupportedQuantization: something this library does not read. */
  unsupported(message: string): SafetensorsError {
    return new this.runtime.SafetensorsError('UnsupportedQuantization', message)
  }

  /** The stored part `name` of `module`; InvalidQuantization when it is missing. */
  part(module: string, name: string): TensorInfo {
    const info = this.stored.info(name)
    if (!info) throw this.invalid(module, `its part ${JSON.stringify(name)} is missing`)
    return info
  }

  /** Checks a part's dtype (one of `dtypes`) and shape; InvalidQuantization naming what differs. */
  expect(module: string, info: TensorInfo, dtypes: readonly DType[], shape?: readonly number[]): void {
    if (!dtypes.includes(info.dtype)) throw this.invalid(module, `${info.name} is ${info.dtype}, where the layout stores ${dtypes.join(' or ')}`)
    if (shape && !sameShape(info.shape, shape))
      throw this.invalid(module, `${info.name} has shape [${info.shape.join(', ')}], where [${shape.join(', ')}] fits the other parts`)
  }

  /** The model's dtype as config.json names it (torch_dtype, or dtype since transformers 4.56); BF16 when it names none. */
  modelDtype(): ConvertTarget {
    const name = this.config.first('torch_dtype', 'dtype').value
    return name === 'float16' ? 'F16' : name === 'float32' ? 'F32' : 'BF16'
  }

  /** The `count` values of a float part's bytes as F32 (exact: every float dtype widens to F32 without rounding). */
  floats(bytes: Uint8Array, dtype: DType, count = bytes.length / bytesPer(dtype)): Float32Array {
    const out = new Float32Array(count)
    this.runtime.convertOverlapping(bytes, dtype, 'F32', new Uint8Array(out.buffer))
    return out
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i])
}

/** Bytes per element of the whole-byte dtypes parts come in. */
function bytesPer(dtype: DType): number {
  return /64/.test(dtype) ? 8 : /32/.test(dtype) ? 4 : /16/.test(dtype) ? 2 : 1
}

/** A reference dtype from a stored float dtype (the scales' dtype where the reference computes in it). */
export function referenceOf(dtype: DType): ConvertTarget | undefined {
  return dtype === 'F32' || dtype === 'F16' || dtype === 'BF16' ? dtype : undefined
}

/** An Int32Array of `count` parameter rows: row i's is rowOf(i). */
export function paramRows(count: number, rowOf: (row: number) => number): Int32Array {
  const rows = new Int32Array(count)
  for (let i = 0; i < count; i++) rows[i] = rowOf(i)
  return rows
}

/** A group size larger than any row: one group per row. */
export const WHOLE_ROW = 2 ** 30

/** The elements one rectangle's output is kept to, so that it stays in cache on its way out. */
export const RECT_ELEMENTS = 1 << 18

/** Blocks of `rows` rows of `cols` elements each (the first `first` of the tensor), at most RECT_ELEMENTS each (and at least a row). */
export function rowBlocks(first: number, rows: number, cols: number, rowBytes: number, paramRowOf: (row: number) => number): Rect[] {
  const per = Math.max(1, Math.floor(RECT_ELEMENTS / Math.max(1, cols)))
  const rects: Rect[] = []
  for (let row = 0; row < rows; row += per) {
    const count = Math.min(per, rows - row)
    rects.push({
      codeOffset: row * rowBytes,
      rows: count,
      cols,
      colOffset: 0,
      paramRowOf: paramRows(count, (i) => paramRowOf(row + i)),
      first: (first + row) * cols,
    })
  }
  return rects
}

/** The primitive options of a quantization block (strings, numbers, booleans), as config.json names them. */
export function optionsOf(block: JsonValue, without: readonly string[]): Record<string, string | number | boolean> {
  const options: Record<string, string | number | boolean> = {}
  for (const [key, { value }] of block.members()) {
    if (!without.includes(key) && (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')) options[key] = value
  }
  return options
}

/** The methods read, as {@link Quantization.method} names them. */
export type QuantizationMethod = 'mlx' | 'gptq' | 'awq' | 'bitsandbytes' | 'fp8' | 'mxfp4' | 'compressed-tensors' | 'nvfp4'

/**
 * How a model is quantized, from its config.json (`quantization_config`, or MLX's `quantization`): the method,
 * the bits and group size of most of its modules (a module may differ: see each logical tensor's
 * {@link LogicalTensorInfo}), and the layout's own options as config.json names them (`desc_act`, `sym`,
 * `checkpoint_format`, `bnb_4bit_quant_type`, `weight_block_size`, `format`, ...).
 */
export interface Quantization {
  /** The layout. */
  readonly method: QuantizationMethod
  /** Bits per stored code of most modules. */
  readonly bits: number
  /** Elements per scale of most modules, where the layout has groups. */
  readonly groupSize?: number
  /** The layout's own options, as config.json names them. */
  readonly [option: string]: unknown
}

/**
 * The header entry of a logical tensor (a quantized module's, from {@link index!SafetensorsModel.info}): its dtype
 * (the reference's), its shape, its size in that dtype (`dataOffsets` are [0, byteLength]: it is not stored as
 * such), and what it is read from.
 */
export interface LogicalTensorInfo extends TensorInfo {
  /** How it is stored. */
  readonly quantized: {
    /** The stored tensors it is read from (each readable by its own name). */
    readonly parts: readonly string[]
    /** Bits per stored code. */
    readonly bits: number
    /** Elements per scale, where the layout has groups. */
    readonly groupSize?: number
  }
}

/** What a layout makes of a model: its quantization, and a logical tensor per quantized module. */
export interface QuantLayout {
  quantization: Quantization
  tensors: LogicalTensor[]
}

/** The 16 values of E2M1 codes (FP4), as the F4 dtype decodes them (code 8 is -0). */
export function e2m1Values(ctx: LayoutContext): Float32Array {
  return ctx.floats(new Uint8Array([0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe]), 'F4', 16)
}

/**
 * Scales over blocks of a [rows, cols] weight: one per `blockRows` x `blockCols` block, the last ones cropped
 * (a grid of ceil(rows / blockRows) x ceil(cols / blockCols)): per tensor, per row, per group of a row, or 2-D
 * blocks (FP8's 128 x 128). How a load of rows [first, end) reads and addresses them.
 */
interface ScaleGrid {
  /** The grid rows that rows [first, end) use; undefined for a single scale, read whole. */
  rows(first: number, end: number): [number, number] | undefined
  /** Entries from one grid row to the next. */
  rowStride: number
  /** Columns per scale: groupSize for the kernel. */
  groupSize: number
  /** For a load from row `first`: the grid row (counted from the first one read) of each row (counted from `first`). */
  paramRowOf(first: number): (row: number) => number
}

/** The grid of `scale`, a part of `module`, for [rows, cols] in blocks of [blockRows, blockCols]; InvalidQuantization when its shape does not fit. */
export function scaleGrid(
  ctx: LayoutContext,
  module: string,
  scale: TensorInfo,
  [rows, cols]: readonly number[],
  [blockRows, blockCols]: readonly number[],
): ScaleGrid {
  const grid = [Math.ceil(rows / blockRows), Math.ceil(cols / blockCols)]
  const one = grid[0] === 1 && grid[1] === 1
  const fits = one
    ? ctx.runtime.elementsOf(scale.shape) === 1 && scale.shape.length <= 2
    : sameShape(scale.shape, grid) || (grid[1] === 1 && sameShape(scale.shape, [grid[0]]))
  if (!fits)
    throw ctx.invalid(
      module,
      `${scale.name} has shape [${scale.shape.join(', ')}], where blocks of ${blockRows} x ${blockCols} over [${rows}, ${cols}] need [${grid.join(', ')}]`,
    )
  return {
    rows: (first, end) => (one ? undefined : [Math.floor(first / blockRows), Math.ceil(end / blockRows)]),
    rowStride: grid[1],
    groupSize: blockCols >= cols ? WHOLE_ROW : blockCols,
    paramRowOf: (first) => (row) => Math.floor((first + row) / blockRows) - Math.floor(first / blockRows),
  }
}

/** The modules of the stored tensors named `<module><suffix>`, in the model's order. */
export function modulesWith(ctx: LayoutContext, suffix: string): string[] {
  return ctx.stored.names.filter((name) => name.endsWith(suffix)).map((name) => name.slice(0, -suffix.length))
}
