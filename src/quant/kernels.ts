// The dequantization kernels (assembly/quant.ts, build/quant.wasm) on a layout's work: a job's codes and
// parameters laid out once in the module's scratch memory, then each rectangle run and handed out as it is done.

// Imported here, not through src/core/wasm-code.ts: a module that the main graph imports would bring the hex
// into every bundle's first load, when only a quantized model's reads need it.
import * as contract from '../../assembly/boundary/quant.ts?constants'
import quantWasm from '../../build/quant.wasm'
import type { ConvertTarget } from '../core/convert.ts'
import type { DType } from '../core/dtypes.ts'
import type { reserveMemory, WasmModule } from '../core/wasm.ts'

/** What the kernels need of the library's core, lent by the reading side (src/quant/logical.ts says why). */
export interface KernelRuntime {
  WasmModule: typeof WasmModule
  reserveMemory: typeof reserveMemory
  /** A dtype's index in DTYPES: how the wasm code names it. */
  dtypeIndex: (dtype: DType) => number
}

/** What one code is worth before its scale: itself (affine), an entry of a 16-entry table, or an F8 value. */
type CodeValue = 'affine' | 'table' | 'F8_E4M3' | 'F8_E5M2'

/** How rows of codes are stored (assembly/quant.ts, unpackCodes). */
export interface CodeFormat {
  /** Bytes from one row's stream to the next one's. */
  rowBytes: number
  /** Words from one 32-bit word of a stream to its next (1: contiguous). */
  wordStride: number
  bits: number
  order: 'lsb-first' | 'awq' | 'high-nibble-first'
  /** I8 codes, read as unsigned ones offset by 128. */
  signed?: boolean
  /**
   * 4-bit codes that run down the columns of words: row r's are code r % 8 (in `order`) of word r / 8 of each of
   * the rectangle's `cols` rows of words, rowBytes apart (AWQ's qweight, [in, out / 8], read as [out, in]).
   */
  columns?: boolean
}

/**
 * The per-group numbers of a job, F32: scale, zero and bias of group g of parameter row p at entry
 * p * rowStride + g * groupStride. A column's group is column / groupSize, or groupOf[column] (groupSize 0).
 */
export interface Params {
  scales: Float32Array
  /** Zero points: (q - zero) * scale. */
  zeros?: Float32Array
  /** Biases, added to the product rounded to the reference's dtype (MLX): ref(q * scale) + bias. */
  biases?: Float32Array
  rowStride: number
  groupSize: number
  groupOf?: Int32Array
  groupStride: number
  value: CodeValue
  /** The 16 values of 4-bit codes, for value 'table'. */
  table?: Float32Array
  /** A last factor (bitsandbytes 8-bit). */
  postMultiplier?: number
  ref: ConvertTarget
}

/** One call of the kernel: a rectangle of rows of codes, its output a run of the logical tensor's elements. */
export interface Rect {
  /** Where its first row's stream starts in the job's codes. */
  codeOffset: number
  rows: number
  cols: number
  /** The column of the layout's rows its first column is (groups count from there). */
  colOffset: number
  /** Each row's parameter row. */
  paramRowOf: Int32Array
  /** The logical tensor's (row-major, flattened) element the output's first one is. */
  first: number
}

/** What a read of a logical tensor hands the kernels: the codes it reads, how, and the rectangles. */
export interface Job {
  codes: Uint8Array
  format: CodeFormat
  params: Params
  rects: Rect[]
}

/** The quant module's functions (assembly/modules/quant.ts): each reads a descriptor (assembly/boundary/quant.ts). */
interface QuantExports {
  heapBase(): number
  dequantRows(descriptor: number): void
  unpackCodes(descriptor: number): void
}

const ORDERS: Record<CodeFormat['order'], number> = {
  'lsb-first': contract.ORDER_LSB_FIRST,
  awq: contract.ORDER_AWQ,
  'high-nibble-first': contract.ORDER_HIGH_NIBBLE_FIRST,
}

const BYTES: Record<ConvertTarget, number> = { F32: 4, F16: 2, BF16: 2 }

/** Slack after each region: a vector load may read a little past the bytes it uses. */
const SLACK = 16

export class Kernels {
  readonly #runtime: KernelRuntime
  readonly #module: WasmModule<QuantExports>

  constructor(runtime: KernelRuntime) {
    this.#runtime = runtime
    this.#module = new runtime.WasmModule<QuantExports>(quantWasm)
  }

  /**
   * Runs every rectangle of `job`, its output in `to`, and hands each output to `each` (a view of wasm memory,
   * valid until `each` returns) with its rectangle, in order.
   */
  run(job: Job, to: ConvertTarget, each: (output: Uint8Array, rect: Rect) => void): void {
    const { codes, format, params, rects } = job
    const core = this.#module.shared()
    const most = (of: (rect: Rect) => number) => Math.max(0, ...rects.map(of))
    const outBytes = most((r) => r.rows * r.cols) * BYTES[to]
    let end = core.heapBase
    const region = (bytes: number) => {
      const start = end
      end = (end + bytes + SLACK + 15) & ~15
      return start
    }
    const at = {
      descriptor: region(contract.DEQUANT_SIZE),
      codes: region(codes.length),
      scales: region(params.scales.byteLength),
      zeros: params.zeros ? region(params.zeros.byteLength) : 0,
      biases: params.biases ? region(params.biases.byteLength) : 0,
      groupOf: params.groupOf ? region(params.groupOf.byteLength) : 0,
      table: params.table ? region(params.table.byteLength) : 0,
      paramRowOf: region(4 * most((r) => r.rows)),
      out: region(outBytes),
    }
    this.#runtime.reserveMemory(core, end)
    const memory = new Uint8Array(core.memory.buffer)
    const put = (data: ArrayBufferView | undefined, where: number) => data && memory.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), where)
    put(codes, at.codes)
    put(params.scales, at.scales)
    put(params.zeros, at.zeros)
    put(params.biases, at.biases)
    put(params.groupOf, at.groupOf)
    put(params.table, at.table)
    const descriptor = new DataView(core.memory.buffer, at.descriptor, contract.DEQUANT_SIZE)
    const field = (offset: number, value: number) => descriptor.setUint32(offset, value, true)
    field(contract.DEQUANT_CODE_ROW_BYTES, format.rowBytes)
    field(contract.DEQUANT_WORD_STRIDE, format.wordStride)
    field(contract.DEQUANT_BITS, format.bits)
    field(contract.DEQUANT_ORDER, ORDERS[format.order])
    field(contract.DEQUANT_SCALES, at.scales)
    field(contract.DEQUANT_ZEROS, at.zeros)
    field(contract.DEQUANT_BIASES, at.biases)
    field(contract.DEQUANT_PARAM_ROW_OF, at.paramRowOf)
    field(contract.DEQUANT_PARAM_ROW_STRIDE, params.rowStride)
    field(contract.DEQUANT_GROUP_SIZE, params.groupSize)
    field(contract.DEQUANT_GROUP_OF, at.groupOf)
    field(contract.DEQUANT_GROUP_STRIDE, params.groupStride)
    field(
      contract.DEQUANT_VALUE,
      params.value === 'affine' ? contract.VALUE_AFFINE : params.value === 'table' ? contract.VALUE_TABLE : this.#runtime.dtypeIndex(params.value),
    )
    field(contract.DEQUANT_TABLE, at.table)
    field(
      contract.DEQUANT_FLAGS,
      (format.signed ? contract.FLAG_SIGNED_CODES : 0) |
        (params.postMultiplier !== undefined ? contract.FLAG_POST_MULTIPLY : 0) |
        (format.columns ? contract.FLAG_COLUMN_CODES : 0),
    )
    descriptor.setFloat32(contract.DEQUANT_POST_MULTIPLIER, params.postMultiplier ?? 0, true)
    field(contract.DEQUANT_REF, this.#runtime.dtypeIndex(params.ref))
    field(contract.DEQUANT_TO, this.#runtime.dtypeIndex(to))
    field(contract.DEQUANT_OUT, at.out)
    try {
      for (const rect of rects) {
        put(rect.paramRowOf, at.paramRowOf)
        field(contract.DEQUANT_CODES, at.codes + rect.codeOffset)
        field(contract.DEQUANT_ROWS, rect.rows)
        field(contract.DEQUANT_COLS, rect.cols)
        field(contract.DEQUANT_COL_OFFSET, rect.colOffset)
        core.exports.dequantRows(at.descriptor)
        each(memory.subarray(at.out, at.out + rect.rows * rect.cols * BYTES[to]), rect)
      }
    } finally {
      this.#module.trimShared()
    }
  }

  /**
   * `count` codes of each of `streams` streams in `words` (stream s from word s * streamStep; each stream's
   * words `wordStride` words apart), one a byte, stream after stream.
   */
  unpack(words: Uint8Array, format: Pick<CodeFormat, 'bits' | 'order' | 'wordStride'>, count: number, streams = 1, streamStep = 0): Uint8Array {
    const core = this.#module.shared()
    const descriptor = core.heapBase
    const wordsAt = descriptor + ((contract.UNPACK_SIZE + 15) & ~15)
    const into = (wordsAt + words.length + SLACK + 15) & ~15
    this.#runtime.reserveMemory(core, into + streams * count + SLACK)
    const memory = new Uint8Array(core.memory.buffer)
    memory.set(words, wordsAt)
    const view = new DataView(core.memory.buffer, descriptor, contract.UNPACK_SIZE)
    const field = (offset: number, value: number) => view.setUint32(offset, value, true)
    field(contract.UNPACK_WORD_STRIDE, format.wordStride)
    field(contract.UNPACK_BITS, format.bits)
    field(contract.UNPACK_ORDER, ORDERS[format.order])
    field(contract.UNPACK_SIGNED, 0)
    field(contract.UNPACK_COUNT, count)
    for (let s = 0; s < streams; s++) {
      field(contract.UNPACK_WORDS, wordsAt + 4 * s * streamStep)
      field(contract.UNPACK_OUT, into + s * count)
      core.exports.unpackCodes(descriptor)
    }
    const codes = memory.slice(into, into + streams * count)
    this.#module.trimShared()
    return codes
  }
}
