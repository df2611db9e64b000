// F32 rows to ggml's quantized types, over the wasm kernels of assembly/ggml-quant.ts (build/ggml-quant.wasm), whose
// blocks are byte for byte what ggml_quantize_chunk writes with no importance matrix.
//
// The GGUF export loads this module when it first quantizes (src/gguf/kernels.ts), so at run time it imports only its
// wasm code and its contracts: the library's functions it calls are lent (GgmlRuntime), as ggml's dequantization
// kernels have them lent (src/gguf/ggml-kernels.ts says why).
import * as types from '../../assembly/boundary/ggml.ts?constants'
import * as contract from '../../assembly/boundary/ggml-quant.ts?constants'
import ggmlQuantWasm from '../../build/ggml-quant.wasm'
import type { WasmInstance } from '../core/wasm.ts'
import type { SafetensorsError } from '../errors.ts'
import { Staging } from '../pool/staging.ts'
import type { GgmlRuntime } from './ggml-kernels.ts'

/** The quantization module's functions (assembly/modules/ggml-quant.ts). */
interface GgmlQuantExports {
  heapBase(): number
  /** The address of the descriptor quantizeRows reads (assembly/boundary/ggml-quant.ts). */
  descriptor(): number
  /** Quantizes the rows its descriptor names; a status (STATUS_ of the contract). */
  quantizeRows(call: number): number
}

/** The ggml types quantizeRows writes, by gguf-py's names, with their numbers in the contract. */
const TYPE_NUMBERS = {
  Q4_0: types.TYPE_Q4_0,
  Q4_1: types.TYPE_Q4_1,
  Q5_0: types.TYPE_Q5_0,
  Q5_1: types.TYPE_Q5_1,
  Q8_0: types.TYPE_Q8_0,
  Q2_K: types.TYPE_Q2_K,
  Q3_K: types.TYPE_Q3_K,
  Q4_K: types.TYPE_Q4_K,
  Q5_K: types.TYPE_Q5_K,
  Q6_K: types.TYPE_Q6_K,
  TQ1_0: types.TYPE_TQ1_0,
  TQ2_0: types.TYPE_TQ2_0,
  IQ4_NL: types.TYPE_IQ4_NL,
  IQ4_XS: types.TYPE_IQ4_XS,
} as const

/** A ggml type this library quantizes to. */
export type QuantizedType = keyof typeof TYPE_NUMBERS

/** Values a call on the pool quantizes: a few calls a chunk of the GGUF export (2^20 values), so that every worker has one. */
const POOL_CALL_VALUES = 1 << 18

/** Every ggml type this library quantizes to. */
const QUANTIZED_TYPES = Object.keys(TYPE_NUMBERS) as QuantizedType[]

/** What an error names: the tensor, and the index in it of the first value quantized. */
interface QuantizeOrigin {
  name: string
  first: number
}

/** The quantizers over `runtime`: the types, the module, and the functions over it (tests and benchmarks call them directly). */
export function ggmlQuantizers(runtime: GgmlRuntime) {
  const { SafetensorsError, GGML_TYPES, ggmlByteLength, reserveMemory, roundTripElements } = runtime
  const ggmlQuantModule = new runtime.WasmModule<GgmlQuantExports>(ggmlQuantWasm)

  /**
   * The bytes of `rows` rows of `perRow` values quantized to `type`.
   * @throws RangeError when a row is not whole blocks of the type (32 values, or 256 for the K, TQ and IQ4_XS types).
   */
  function quantizedByteLength(type: QuantizedType, rows: number, perRow: number): number {
    const { block } = GGML_TYPES[type]
    if (!Number.isSafeInteger(rows) || rows < 0 || !Number.isSafeInteger(perRow) || perRow <= 0 || perRow % block !== 0) {
      throw new RangeError(`${type} quantizes rows of whole blocks of ${block} values, got ${rows} rows of ${perRow} values`)
    }
    return rows * ggmlByteLength(type, perRow)
  }

  /** Writes a call's descriptor into `fields`: `rows` rows of `perRow` F32 at `src` to blocks at `dst`. */
  function describe(fields: DataView, type: QuantizedType, src: number, dst: number, rows: number, perRow: number): void {
    fields.setUint32(contract.QUANTIZE_TYPE, TYPE_NUMBERS[type], true)
    fields.setUint32(contract.QUANTIZE_SRC, src, true)
    fields.setUint32(contract.QUANTIZE_DST, dst, true)
    fields.setUint32(contract.QUANTIZE_ROWS, rows, true)
    fields.setUint32(contract.QUANTIZE_PER_ROW, perRow, true)
  }

  /** The error of STATUS_NOT_FINITE or STATUS_SCALE_OVERFLOW at the call's value `bad`, which is `value`. */
  function statusError(status: number, bad: number, value: number, type: QuantizedType, origin: QuantizeOrigin): SafetensorsError {
    const at = origin.first + bad
    if (status === contract.STATUS_NOT_FINITE) {
      return new SafetensorsError('UnsupportedConversion', `cannot quantize ${origin.name} to ${type}: element ${at} is ${value}, which ${type} cannot hold`)
    }
    const last = at + GGML_TYPES[type].block - 1
    return new SafetensorsError(
      'UnsupportedConversion',
      `cannot quantize ${origin.name} to ${type}: elements ${at} to ${last} are too large for ${type}'s F16 scales (llama.cpp's quantizer refuses them too)`,
    )
  }

  /**
   * Quantizes `rows` rows of `perRow` F32 at byte `src` of the module's instance `core` into blocks at `dst`, which
   * may be `src` (in place) or memory that does not overlap it.
   * @throws {@link SafetensorsError} `UnsupportedConversion` for a NaN or infinite value, which no type can hold
   * (naming its index from `origin.first`; the blocks before its block are written, the input from its block on is
   * left as it was), or for values so large that a block's F16 scale overflows, which llama.cpp's quantizer refuses
   * (every block written).
   * @throws RangeError when a row is not whole blocks of the type.
   */
  function quantizeInWasm(
    core: WasmInstance<GgmlQuantExports>,
    type: QuantizedType,
    src: number,
    dst: number,
    rows: number,
    perRow: number,
    origin: QuantizeOrigin,
  ): void {
    quantizedByteLength(type, rows, perRow)
    const call = core.exports.descriptor()
    const fields = new DataView(core.memory.buffer, call, contract.QUANTIZE_SIZE)
    describe(fields, type, src, dst, rows, perRow)
    const status = core.exports.quantizeRows(call)
    if (status === contract.STATUS_OK) return
    if (status === contract.STATUS_BAD_CALL) throw new RangeError(`the ${type} kernel refused ${rows} rows of ${perRow} values`)
    const bad = fields.getUint32(contract.QUANTIZE_BAD, true)
    // The input from a non-finite value's block on is as it was; an overflow's block is written (its value unused).
    throw statusError(status, bad, new DataView(core.memory.buffer).getFloat32(src + 4 * bad, true), type, origin)
  }

  /**
   * Quantizes rows of F32 values to a ggml type, byte for byte as ggml's `ggml_quantize_chunk` does with no
   * importance matrix (what llama.cpp's `llama-quantize` writes without `--imatrix`).
   * @param type - the ggml type: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, TQ1_0, TQ2_0, IQ4_NL or IQ4_XS
   * @param values - the rows, one after the other
   * @param perRow - values per row, a multiple of the type's block (32, or 256 for the K, TQ and IQ4_XS types)
   * @param out - where to write the result: a Uint8Array of at least the result's bytes, of which the result is a
   * view; its bytes are unspecified after an error. It may share memory with `values` only at the same address
   * (in place), not otherwise.
   * @param origin - what an error names (the converter's tensor); by default "values" from index 0
   * @returns the blocks, {@link quantizedByteLength} bytes
   * @throws {@link SafetensorsError} `UnsupportedConversion` for a NaN or infinite value, naming its index, or for
   * values so large that a block's F16 scale overflows, which llama.cpp's quantizer refuses.
   * @throws RangeError when `values` are not whole rows of whole blocks, or `out` is too short.
   * @throws TypeError when `values` is not a Float32Array or `out` not a Uint8Array.
   */
  function quantize(
    type: QuantizedType,
    values: Float32Array,
    perRow: number,
    out?: Uint8Array,
    origin: QuantizeOrigin = { name: 'values', first: 0 },
  ): Uint8Array {
    if (!Object.hasOwn(TYPE_NUMBERS, type)) throw new TypeError(`type must be one of ${QUANTIZED_TYPES.join(', ')}, got ${JSON.stringify(type)}`)
    if (!(values instanceof Float32Array)) throw new TypeError(`values must be a Float32Array, got ${Object.prototype.toString.call(values)}`)
    if (out !== undefined && !(out instanceof Uint8Array)) throw new TypeError(`out must be a Uint8Array, got ${Object.prototype.toString.call(out)}`)
    const rowBytes = quantizedByteLength(type, 1, perRow)
    if (values.length % perRow !== 0) throw new RangeError(`${values.length} values are not whole rows of ${perRow}`)
    const rows = values.length / perRow
    const bytes = rows * rowBytes
    if (out !== undefined && out.length < bytes) throw new RangeError(`out must hold ${bytes} bytes for ${rows} rows of ${perRow} values, got ${out.length}`)
    const result = out?.subarray(0, bytes) ?? new Uint8Array(bytes)
    const core = ggmlQuantModule.shared()
    const chunkRows = Math.max(1, Math.floor(roundTripElements / perRow))
    reserveMemory(core, core.heapBase + Math.min(rows, chunkRows) * perRow * 4)
    for (let row = 0; row < rows; row += chunkRows) {
      const count = Math.min(chunkRows, rows - row)
      new Float32Array(core.memory.buffer, core.heapBase, count * perRow).set(values.subarray(row * perRow, (row + count) * perRow))
      quantizeInWasm(core, type, core.heapBase, core.heapBase, count, perRow, { name: origin.name, first: origin.first + row * perRow })
      result.set(new Uint8Array(core.memory.buffer, core.heapBase, count * rowBytes), row * rowBytes)
    }
    return result
  }

  /**
   * quantize() on `workers` of the pool's workers (src/pool/read.ts), a call per POOL_CALL_VALUES values of whole
   * rows, the values and the blocks through `staging` (src/pool/staging.ts), the blocks copied into a new array;
   * on the calling thread, with nothing staged, where there is no pool (`workers` 0, no workers here: workerd) or
   * for too few values. A call that fails is quantized again here, which names a value no type can hold as
   * quantize() does.
   */
  async function quantizeOnPool(
    type: QuantizedType,
    values: Float32Array,
    perRow: number,
    origin: QuantizeOrigin,
    workers: number | undefined,
    staging: Staging,
  ): Promise<Uint8Array> {
    const rowBytes = quantizedByteLength(type, 1, perRow)
    const rows = values.length / perRow
    if (workers === 0 || values.byteLength < runtime.poolMinBytes || !Number.isInteger(rows)) return quantize(type, values, perRow, undefined, origin)
    const reads = await runtime.loadPool()
    if (!reads || !(await reads.runsOnPool(workers))) return quantize(type, values, perRow, undefined, origin)
    const core = ggmlQuantModule.shared()
    const descriptorAt = core.exports.descriptor()
    const callRows = Math.max(1, Math.floor(POOL_CALL_VALUES / perRow))
    const calls = []
    for (let row = 0; row < rows; row += callRows) {
      const count = Math.min(callRows, rows - row)
      const descriptor = new Uint8Array(contract.QUANTIZE_SIZE)
      describe(new DataView(descriptor.buffer), type, core.heapBase, core.heapBase, count, perRow)
      calls.push({
        memory: core.heapBase + count * perRow * 4,
        writes: [{ at: descriptorAt, bytes: descriptor }],
        offset: row * perRow * 4,
        length: count * perRow * 4,
        inputAt: core.heapBase,
        call: 'quantizeRows',
        args: [descriptorAt],
        outputAt: core.heapBase,
        outputLength: count * rowBytes,
        outAt: row * rowBytes,
      })
    }
    const module = { name: 'ggml-quant', bytes: () => ggmlQuantModule.bytes() }
    // The values too go through the staging buffer: sent as they were, each call's span would be a copy handed to
    // a worker, which its heap keeps until it collects (up to V8's external memory limit, tens of MiB a worker).
    const area = staging.bytes(values.byteLength + rows * rowBytes)
    const input = area.subarray(0, values.byteLength)
    input.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength))
    const out = area.subarray(values.byteLength)
    const blocks = await reads
      .callOnPool(input, workers, module, { name: origin.name, dtype: 'U8', outBytes: out.length, out: { data: out, bytes: out } }, calls)
      .catch(() => undefined)
    return blocks ? out.slice() : quantize(type, values, perRow, undefined, origin)
  }

  /** A staging buffer for one export's quantizeOnPool calls (this module loads on demand; src/pool/staging.ts with it). */
  const staging = () => new Staging()

  return { types: QUANTIZED_TYPES, ggmlQuantModule, quantizedByteLength, quantizeInWasm, quantize, quantizeOnPool, staging }
}
