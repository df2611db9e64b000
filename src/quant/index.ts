// A quantized model's logical tensors (loaded on demand by src/read/model.ts, only for a model whose config.json
// has a quantization block): which layout config.json names, the logical tensor of every quantized module and
// the stored parts it hides, and reads of logical tensors and of slices of them, whole or as a stream of blocks.

import type { ConvertTarget } from '../core/convert.ts'
import type { DType, Float16Array, TypedArray } from '../core/dtypes.ts'
import type { JsonValue } from '../format/json-values.ts'
import type { SliceRange } from '../format/slice.ts'
import type { ProgressCallback } from '../sources/progress.ts'
import { awqLayout } from './awq.ts'
import { bitsandbytesLayout } from './bitsandbytes.ts'
import { compressedTensorsLayout } from './compressed-tensors.ts'
import { fp8Layout } from './fp8.ts'
import { gptqLayout } from './gptq.ts'
import { Kernels } from './kernels.ts'
import {
  LayoutContext,
  type LogicalTensor,
  type LogicalTensorInfo,
  type PartIo,
  PartsProgress,
  type Quantization,
  type QuantLayout,
  type QuantRuntime,
  type StoredModel,
  storedTensors,
} from './logical.ts'
import { mlxLayout } from './mlx.ts'
import { modeloptLayout } from './modelopt.ts'
import { mxfp4Layout } from './mxfp4.ts'

/** Each quant_method read, and its layout. */
const LAYOUTS: Record<string, (ctx: LayoutContext) => QuantLayout | Promise<QuantLayout>> = {
  mlx: mlxLayout,
  gptq: gptqLayout,
  awq: awqLayout,
  bitsandbytes: bitsandbytesLayout,
  fp8: fp8Layout,
  fbgemm_fp8: fp8Layout,
  mxfp4: mxfp4Layout,
  'compressed-tensors': compressedTensorsLayout,
  modelopt: modeloptLayout,
}

const BYTES: Record<ConvertTarget, number> = { F32: 4, F16: 2, BF16: 2 }

/** Output elements a stream makes per step: its memory stays a few times this. */
const STREAM_ELEMENTS = 1 << 22

/**
 * The method and quantization block of a config.json (`quantization_config`, which must be an object; MLX's
 * `quantization`, which mlx-lm mirrors into `quantization_config` without a quant_method), its errors
 * UnsupportedQuantization; undefined for a model that is not quantized.
 */
function quantizationBlock(config: JsonValue): { method: string; block: JsonValue } | undefined {
  const block = config.get('quantization_config').withCode('UnsupportedQuantization').optional()?.object()
  const mlx = config.get('quantization').withCode('UnsupportedQuantization')
  const method = block?.get('quant_method').optional()?.string()
  if (method !== undefined) return { method, block: block! }
  if (mlx.isObject) return { method: 'mlx', block: mlx }
  if (block) return { method: 'mlx', block }
}

/** The options of a read of a logical tensor: those of SafetensorsModel's reads (src/read/file.ts, ReadOptions). */
interface LogicalReadOptions {
  dtype?: DType
  float16Array?: boolean
  signal?: AbortSignal
  onProgress?: ProgressCallback
  out?: ArrayBuffer | ArrayBufferView
}

/**
 * The logical tensors of a quantized model, from its stored tensors (`model`'s reads with `stored: true`, whose
 * names are `names`) and its config.json; undefined where config.json has no quantization block after all (an
 * MLX `quantization` key that is not an object).
 * @throws SafetensorsError `UnsupportedQuantization` for a method, bit width or option not read (naming it and
 * those that are); `InvalidQuantization` for parts that do not fit together (naming the module).
 */
export async function quantizedTensors(
  model: StoredModel,
  names: readonly string[],
  config: JsonValue,
  runtime: QuantRuntime,
): Promise<QuantizedTensors | undefined> {
  const found = quantizationBlock(config)
  if (!found) return undefined
  const layout = Object.hasOwn(LAYOUTS, found.method) ? LAYOUTS[found.method] : undefined
  const ctx = new LayoutContext(storedTensors(model, names), config, found.block, runtime, new Kernels(runtime))
  if (!layout) throw found.block.get('quant_method').mustBe(`one of ${Object.keys(LAYOUTS).join(', ')}`)
  return new QuantizedTensors(await layout(ctx), ctx)
}

export class QuantizedTensors {
  readonly quantization: Quantization
  /** The model's tensors: stored ones as they are, each quantized module's parts replaced by its logical tensor. */
  readonly names: string[]
  readonly #tensors = new Map<string, LogicalTensor>()
  readonly #ctx: LayoutContext

  constructor(layout: QuantLayout, ctx: LayoutContext) {
    this.quantization = layout.quantization
    this.#ctx = ctx
    const owner = new Map<string, LogicalTensor>()
    for (const tensor of layout.tensors) {
      this.#tensors.set(tensor.name, tensor)
      for (const part of tensor.parts) owner.set(part, tensor)
    }
    const listed = new Set<LogicalTensor>()
    this.names = ctx.stored.names.flatMap((name) => {
      const tensor = owner.get(name)
      if (!tensor) {
        if (this.#tensors.has(name))
          throw ctx.invalid(this.#tensors.get(name)!.module, `${name} is stored as a tensor of its own, and is also its logical tensor`)
        return [name]
      }
      if (listed.has(tensor)) return []
      listed.add(tensor)
      return [tensor.name]
    })
  }

  /** Whether `name` is a logical tensor (a quantized module's). */
  has(name: string): boolean {
    return this.#tensors.has(name)
  }

  /** The first stored part of a logical tensor: the shard holding it is the tensor's. */
  firstPart(name: string): string {
    return this.#tensors.get(name)!.parts[0]
  }

  info(name: string): LogicalTensorInfo {
    const { dtype, shape, parts, bits, groupSize, error } = this.#tensors.get(name)!
    if (error) throw error
    const byteLength = this.#ctx.runtime.elementsOf(shape) * BYTES[dtype]
    return { name, dtype, shape: [...shape], dataOffsets: [0, byteLength], byteLength, quantized: { parts, bits, groupSize } }
  }

  /**
   * Reads logical tensor `name` (or the slice `ranges` of it) as options.dtype (default: the reference's), reading
   * the parts of the rows of the first dimension it covers (all of them where the layout is read whole).
   */
  async read(name: string, ranges: readonly SliceRange[] | undefined, options: LogicalReadOptions): Promise<LogicalTensorRead> {
    const { runtime } = this.#ctx
    const plan = this.#plan(name, ranges, options.dtype)
    const half = runtime.float16Array(options.float16Array)
    // Checked before any read: a wrong `out` is the caller's mistake, not the file's.
    const { data, bytes } = runtime.output(name, plan.to, runtime.elementsOf(plan.shape) * BYTES[plan.to], options.out)
    const io: PartIo = { signal: options.signal, progress: options.onProgress && new PartsProgress(options.onProgress) }
    if (plan.rest) this.#gather(plan, plan.rows, await this.#rows(plan, plan.rows, io), bytes)
    else await this.#rows(plan, plan.rows, io, bytes)
    return { name, dtype: plan.to, shape: plan.shape, data: half && plan.to === 'F16' ? new half(data.buffer, data.byteOffset, data.length) : data }
  }

  /**
   * The little-endian bytes of logical tensor `name` (or the slice `ranges` of it) as `dtype`, as a stream of
   * blocks of rows of the first dimension (one block where the layout is read whole).
   */
  stream(name: string, options: { dtype?: DType; signal?: AbortSignal; ranges?: readonly SliceRange[] }): ReadableStream<Uint8Array> {
    const plan = this.#plan(name, options.ranges, options.dtype)
    return this.#ctx.runtime.pulledStream(options.signal, `reading tensor ${JSON.stringify(name)}`, (signal) => this.#blocks(plan, signal), 1)
  }

  /**
   * The values of logical tensor `name` (or of its rows `rows` of the first dimension) as `dtype`, `chunk` elements
   * at a time (the last chunk the rest), each a view valid until the next is asked for: the fixed-size chunks a GGUF
   * conversion takes (src/gguf/index.ts).
   */
  async *chunks(name: string, dtype: DType, chunk: number, signal: AbortSignal, rows?: readonly [number, number]): AsyncGenerator<Uint8Array> {
    const plan = this.#plan(name, rows && [[rows[0], rows[1]]], dtype)
    // Chunks inside a block are views of it; only a chunk that straddles two blocks is copied, into `buffer`.
    const buffer = new Uint8Array(Math.min(chunk, this.#ctx.runtime.elementsOf(plan.shape)) * BYTES[plan.to])
    if (buffer.length === 0) return
    let filled = 0
    for await (const block of this.#blocks(plan, signal)) {
      let at = 0
      if (filled > 0) {
        at = Math.min(buffer.length - filled, block.length)
        buffer.set(block.subarray(0, at), filled)
        filled += at
        if (filled < buffer.length) continue
        yield buffer
      }
      for (; block.length - at >= buffer.length; at += buffer.length) yield block.subarray(at, at + buffer.length)
      buffer.set(block.subarray(at))
      filled = block.length - at
    }
    if (filled > 0) yield buffer.subarray(0, filled)
  }

  /** The plan's bytes, a block of rows of the first dimension at a time. */
  async *#blocks(plan: ReadPlan, signal: AbortSignal): AsyncGenerator<Uint8Array> {
    const { tensor, to, rows } = plan
    const rowBytes = this.#ctx.runtime.elementsOf(tensor.shape.slice(1)) * BYTES[to]
    const step = tensor.rowsApart ? Math.max(1, Math.floor((STREAM_ELEMENTS * BYTES[to]) / rowBytes)) : rows[1] - rows[0]
    for (let first = rows[0]; first < rows[1]; first += step) {
      const part: [number, number] = [first, Math.min(rows[1], first + step)]
      const block = await this.#rows(plan, part, { signal })
      yield plan.rest ? this.#gather(plan, part, block) : block
    }
  }

  #plan(name: string, ranges: readonly SliceRange[] | undefined, dtype: DType | undefined): ReadPlan {
    const tensor = this.#tensors.get(name)!
    if (tensor.error) throw tensor.error
    const to = dtype ?? tensor.dtype
    if (to !== 'F32' && to !== 'F16' && to !== 'BF16')
      throw new this.#ctx.runtime.SafetensorsError('UnsupportedConversion', `cannot convert ${tensor.dtype} to ${to}: ${name} is read as F32, F16 or BF16`)
    const whole: [number, number] = [0, tensor.shape[0]]
    if (ranges === undefined) return { tensor, to, shape: [...tensor.shape], rows: whole }
    const { shape } = this.#ctx.runtime.planSlice(name, to, tensor.shape, ranges)
    const first = ranges[0] ?? null
    const rows: [number, number] = first === null ? whole : typeof first === 'number' ? [first, first + 1] : [first[0], first[1]]
    return { tensor, to, shape, rows, rest: ranges.slice(1).some((range) => range !== null) || typeof first === 'number' ? ranges : undefined }
  }

  /** Rows [first, end) of the first dimension as plan.to, into `into` (a new buffer if none). */
  async #rows({ tensor, to }: ReadPlan, [first, end]: [number, number], io: PartIo, into?: Uint8Array): Promise<Uint8Array> {
    const per = this.#ctx.runtime.elementsOf(tensor.shape.slice(1))
    const bytes = BYTES[to]
    const target = into ?? new Uint8Array((end - first) * per * bytes)
    const job = await tensor.load(first, end, io)
    const [from, until] = [first * per, end * per]
    this.#ctx.kernels.run(job, to, (output, rect) => {
      const start = Math.max(rect.first, from)
      const stop = Math.min(rect.first + rect.rows * rect.cols, until)
      if (stop > start) target.set(output.subarray((start - rect.first) * bytes, (stop - rect.first) * bytes), (start - from) * bytes)
    })
    return target
  }

  /** The slice's bytes within `block`, the rows `part` of the first dimension (into `into` if given). */
  #gather({ tensor, to, rest }: ReadPlan, part: [number, number], block: Uint8Array, into?: Uint8Array): Uint8Array {
    const ranges = rest!.map((range, i) => (i === 0 ? (typeof range === 'number' ? range - part[0] : [0, part[1] - part[0]]) : range)) as SliceRange[]
    const { runs } = this.#ctx.runtime.planSlice(tensor.name, to, [part[1] - part[0], ...tensor.shape.slice(1)], ranges)
    const out = into ?? new Uint8Array(runs.reduce((sum, [, length]) => sum + length, 0))
    let at = 0
    for (const [offset, length] of runs) {
      out.set(block.subarray(offset, offset + length), at)
      at += length
    }
    return out
  }
}

/** A logical tensor read: what SafetensorsModel's reads give (src/read/file.ts, Tensor). */
interface LogicalTensorRead {
  name: string
  dtype: DType
  shape: number[]
  data: TypedArray | Float16Array
}

/** What a read of a logical tensor needs: the rows of the first dimension it covers, and the rest of its slice. */
interface ReadPlan {
  tensor: LogicalTensor
  to: ConvertTarget
  /** The result's shape. */
  shape: number[]
  rows: [number, number]
  /** The slice's ranges where it is more than whole rows of the first dimension. */
  rest?: readonly SliceRange[]
}
