// ggml's tensor types read as F32, F16 or BF16 (assembly/ggml.ts, build/ggml.wasm): the kernels behind
// src/gguf/dequantize.ts (dequantizeGgml, GgmlDequantizer), which documents them.
//
// GGUF reads load this module on demand (src/gguf/kernels.ts), so at run time it imports only its wasm code and its
// contract: the library's functions it calls are lent (GgmlRuntime), as src/quant/ has them lent, since a bundler
// would move every module it shared with the rest into a chunk of its own.
import * as contract from '../../assembly/boundary/ggml.ts?constants'
import ggmlWasm from '../../build/ggml.wasm'
import type { ByteOrder } from '../core/byte-order.ts'
import type { ConvertTarget } from '../core/convert.ts'
import type { reserveMemory, WasmInstance, WasmModule } from '../core/wasm.ts'
import type { SafetensorsError } from '../errors.ts'
import type { CallPiece, PoolReads } from '../pool/read.ts'
import type { GGML_TYPES, GgmlType, ggmlByteLength } from './ggml-types.ts'

/** What the kernels are lent (src/gguf/kernels.ts's GGML_RUNTIME). */
export interface GgmlRuntime {
  WasmModule: typeof WasmModule
  reserveMemory: typeof reserveMemory
  SafetensorsError: typeof SafetensorsError
  GGML_TYPES: typeof GGML_TYPES
  ggmlByteLength: typeof ggmlByteLength
  /** Values per round trip through the shared instance: src/core/convert.ts's ROUND_TRIP_ELEMENTS, whole blocks of every type. */
  roundTripElements: number
  /** src/core/convert.ts's POOL_MIN_BYTES: less work than this stays on the calling thread. */
  poolMinBytes: number
  /** The pool's calls (src/pool/read.ts), loaded on demand. */
  loadPool(): Promise<PoolReads | undefined>
}

/** The ggml module's functions (assembly/modules/ggml.ts). */
export interface GgmlExports {
  heapBase(): number
  /** Dequantizes as the descriptor at `descriptor` says (assembly/boundary/ggml.ts); returns a STATUS_. */
  dequantize(descriptor: number): number
}

type GgmlCore = WasmInstance<GgmlExports>

const TO: Record<ConvertTarget, number> = { F32: contract.TO_F32, F16: contract.TO_F16, BF16: contract.TO_BF16 }
const OUTPUT_BYTES: Record<ConvertTarget, number> = { F32: 4, F16: 2, BF16: 2 }

/** The descriptor's place: the first bytes JS manages, 16 kept so that what follows stays 16-aligned. */
const DESCRIPTOR_BYTES = (contract.DEQUANT_SIZE + 15) & ~15

/** Options of {@link dequantizeGgml}. */
export interface DequantizeOptions<Out> {
  /**
   * The byte order of the blocks' fields: 'big' for a GGUF written for a big-endian host.
   * @defaultValue 'little'
   */
  byteOrder?: ByteOrder
  /**
   * Where to write the result (of exactly `count` elements), rather than a new array.
   * @defaultValue a new array
   */
  out?: Out
}

/** The kernels over `runtime`: GgmlDequantizer and dequantizeGgml. */
export function ggmlKernels(runtime: GgmlRuntime) {
  const { SafetensorsError, GGML_TYPES, ggmlByteLength, reserveMemory } = runtime
  const ggmlModule = new runtime.WasmModule<GgmlExports>(ggmlWasm)

  /** The types the kernels read, or those they read big-endian: asked of the module itself, with a call of no values. */
  function typesRead(byteOrder: ByteOrder): GgmlType[] {
    const core = ggmlModule.shared()
    return (Object.keys(GGML_TYPES) as GgmlType[]).filter((type) => call(core, type, 0, 'F32', byteOrder, 0, 0) === contract.STATUS_OK)
  }

  /** Writes a call's descriptor into `descriptor`. */
  function describe(descriptor: DataView, type: GgmlType, count: number, to: ConvertTarget, byteOrder: ByteOrder, src: number, dst: number): void {
    descriptor.setUint32(contract.DEQUANT_SRC, src, true)
    descriptor.setUint32(contract.DEQUANT_DST, dst, true)
    descriptor.setUint32(contract.DEQUANT_COUNT, count, true)
    descriptor.setUint32(contract.DEQUANT_TYPE, GGML_TYPES[type].id, true)
    descriptor.setUint32(contract.DEQUANT_TO, TO[to], true)
    descriptor.setUint32(contract.DEQUANT_ORDER, byteOrder === 'big' ? contract.ORDER_BIG : contract.ORDER_LITTLE, true)
  }

  /** Writes the descriptor at heapBase and runs it; the status. */
  function call(core: GgmlCore, type: GgmlType, count: number, to: ConvertTarget, byteOrder: ByteOrder, src: number, dst: number): number {
    describe(new DataView(core.memory.buffer, core.heapBase, contract.DEQUANT_SIZE), type, count, to, byteOrder, src, dst)
    return core.exports.dequantize(core.heapBase)
  }

  /** Runs a call whose arguments are checked; a type or byte order the kernels do not read is UnsupportedQuantization. */
  function run(core: GgmlCore, type: GgmlType, count: number, to: ConvertTarget, byteOrder: ByteOrder, src: number, dst: number): void {
    const status = call(core, type, count, to, byteOrder, src, dst)
    if (status === contract.STATUS_UNKNOWN_TYPE) {
      throw new SafetensorsError(
        'UnsupportedQuantization',
        `ggml type ${type} is not read (ggml has no dequantization for it); read are ${typesRead('little').join(', ')}`,
      )
    }
    if (status === contract.STATUS_NO_BIG_ENDIAN) {
      throw new SafetensorsError(
        'UnsupportedQuantization',
        `big-endian ${type} is not read: its blocks have fields that ggml reads as wider words, whose big-endian layout is not defined; read big-endian are ${typesRead('big').join(', ')}`,
      )
    }
  }

  function checkArguments(type: GgmlType, count: number, to: ConvertTarget, byteOrder: ByteOrder): void {
    if (!Object.hasOwn(GGML_TYPES, type)) throw new TypeError(`${JSON.stringify(type)} is not a ggml type; the types are ${Object.keys(GGML_TYPES).join(', ')}`)
    if (!Object.hasOwn(TO, to)) throw new TypeError(`to must be 'F32', 'F16' or 'BF16', got ${JSON.stringify(to)}`)
    if (byteOrder !== 'little' && byteOrder !== 'big') throw new TypeError(`byteOrder must be 'little' or 'big', got ${JSON.stringify(byteOrder)}`)
    const { block } = GGML_TYPES[type]
    if (!Number.isSafeInteger(count) || count < 0 || count % block !== 0) {
      throw new RangeError(`count must be a whole number of ${type} blocks (${block} values each), got ${count}`)
    }
  }

  /**
   * A wasm memory of its own, sized once, for a reader that puts a file's bytes straight into it: fill `input()`,
   * then `run()` dequantizes them and gives a view of the result. Views stay valid until the next call, as the memory
   * never grows.
   */
  class GgmlDequantizer {
    readonly #core: GgmlCore
    readonly #inputAt: number
    readonly #maxInputBytes: number
    readonly #outputAt: number
    readonly #maxOutputBytes: number

    /**
     * @param maxInputBytes - the most bytes of blocks one run reads
     * @param maxOutputBytes - the most bytes one run writes (4 a value as F32, 2 as F16 or BF16)
     * @throws RangeError for sizes that are not whole numbers or do not fit a wasm memory (4 GiB).
     */
    constructor(maxInputBytes: number, maxOutputBytes: number) {
      for (const [name, value] of Object.entries({ maxInputBytes, maxOutputBytes })) {
        if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a whole number of bytes, got ${value}`)
      }
      this.#maxInputBytes = maxInputBytes
      this.#maxOutputBytes = maxOutputBytes
      const inputBytes = (maxInputBytes + 15) & ~15
      this.#core = ggmlModule.instantiate(DESCRIPTOR_BYTES + inputBytes + maxOutputBytes, false)
      this.#inputAt = this.#core.heapBase + DESCRIPTOR_BYTES
      this.#outputAt = this.#inputAt + inputBytes
    }

    /**
     * The first `byteLength` bytes of the input, for the caller to fill with blocks: a view of wasm memory.
     * @throws RangeError when `byteLength` is more than the constructor's `maxInputBytes`.
     */
    input(byteLength: number): Uint8Array {
      if (!Number.isSafeInteger(byteLength) || byteLength < 0 || byteLength > this.#maxInputBytes) {
        throw new RangeError(`the input holds at most ${this.#maxInputBytes} bytes, asked for ${byteLength}`)
      }
      return new Uint8Array(this.#core.memory.buffer, this.#inputAt, byteLength)
    }

    /**
     * Dequantizes `count` values of `type` from the start of the input to `to`: the little-endian result, a view of
     * wasm memory valid until the next call. Big-endian blocks (`byteOrder` 'big') are swapped to little-endian in the
     * input first.
     * @throws {@link index!SafetensorsError} `UnsupportedQuantization` for a type ggml does not dequantize (Q8_1) or one
     * whose big-endian layout is not defined (Q5_0, Q5_1, Q3_K, IQ2_XXS, IQ3_XXS, IQ1_M), naming those read.
     * @throws RangeError when `count` is not whole blocks or its bytes or result do not fit the sizes given to the
     * constructor; TypeError for a `type`, `to` or `byteOrder` that is none.
     */
    run(type: GgmlType, count: number, to: ConvertTarget = 'F32', byteOrder: ByteOrder = 'little'): Uint8Array {
      checkArguments(type, count, to, byteOrder)
      const inBytes = ggmlByteLength(type, count)
      const outBytes = count * OUTPUT_BYTES[to]
      if (inBytes > this.#maxInputBytes || outBytes > this.#maxOutputBytes) {
        throw new RangeError(
          `${count} ${type} values take ${inBytes} bytes and give ${outBytes} as ${to}; this dequantizer holds ${this.#maxInputBytes} and ${this.#maxOutputBytes}`,
        )
      }
      run(this.#core, type, count, to, byteOrder, this.#inputAt, this.#outputAt)
      return new Uint8Array(this.#core.memory.buffer, this.#outputAt, outBytes)
    }
  }

  /** dequantizeGgml (src/gguf/dequantize.ts documents it, with its overloads). */
  function dequantizeGgml(
    type: GgmlType,
    blocks: Uint8Array,
    count: number,
    to: ConvertTarget = 'F32',
    { byteOrder = 'little', out }: DequantizeOptions<Float32Array | Uint16Array> = {},
  ): Float32Array | Uint16Array {
    if (!(blocks instanceof Uint8Array)) throw new TypeError(`blocks must be a Uint8Array, got ${Object.prototype.toString.call(blocks)}`)
    checkArguments(type, count, to, byteOrder)
    if (blocks.length < ggmlByteLength(type, count)) {
      throw new RangeError(`${count} ${type} values take ${ggmlByteLength(type, count)} bytes, blocks has ${blocks.length}`)
    }
    const natural = to === 'F32' ? Float32Array : Uint16Array
    if (out !== undefined && (!(out instanceof natural) || out.length !== count)) {
      throw new RangeError(`out must be a ${natural.name} of ${count} elements, got ${Object.prototype.toString.call(out)} of ${out.length}`)
    }
    const result = out ?? new natural(count)
    const output = new Uint8Array(result.buffer, result.byteOffset, result.byteLength)
    const core = ggmlModule.shared()
    // A chunk is whole blocks of every type (roundTripElements is a multiple of 256).
    const chunk = Math.min(count, runtime.roundTripElements)
    const inputAt = core.heapBase + DESCRIPTOR_BYTES
    const outputAt = inputAt + ((ggmlByteLength(type, chunk) + 15) & ~15)
    reserveMemory(core, outputAt + chunk * OUTPUT_BYTES[to])
    try {
      // With no values, a call of none still says whether the type and byte order are read.
      if (count === 0) run(core, type, 0, to, byteOrder, inputAt, outputAt)
      for (let first = 0; first < count; first += chunk) {
        const n = Math.min(chunk, count - first)
        const memory = new Uint8Array(core.memory.buffer)
        memory.set(blocks.subarray(ggmlByteLength(type, first), ggmlByteLength(type, first + n)), inputAt)
        run(core, type, n, to, byteOrder, inputAt, outputAt)
        output.set(memory.subarray(outputAt, outputAt + n * OUTPUT_BYTES[to]), first * OUTPUT_BYTES[to])
      }
    } finally {
      ggmlModule.trimShared()
    }
    return result
  }

  /**
   * The calls that dequantize runs of blocks on the pool's workers (src/pool/read.ts, callOnPool): each run
   * `length` bytes of whole blocks from `offset` of the source, its values written at `outAt` of the result;
   * a call per `values` values at most. A type or byte order the kernels do not read fails here, as
   * dequantizeGgml does.
   */
  function dequantizeCalls(
    type: GgmlType,
    to: ConvertTarget,
    byteOrder: ByteOrder,
    runs: ReadonlyArray<{ offset: number; length: number; outAt: number }>,
    values: number,
  ): { module: { name: string; bytes(): Uint8Array<ArrayBuffer> }; calls: CallPiece[] } {
    checkArguments(type, 0, to, byteOrder)
    const core = ggmlModule.shared()
    run(core, type, 0, to, byteOrder, 0, 0)
    const { block, bytes } = GGML_TYPES[type]
    const perCall = Math.max(1, Math.floor(values / block))
    const inputAt = core.heapBase + DESCRIPTOR_BYTES
    const calls: CallPiece[] = []
    for (const { offset, length, outAt } of runs) {
      for (let first = 0; first < length / bytes; first += perCall) {
        const n = Math.min(perCall, length / bytes - first)
        const outputAt = inputAt + ((n * bytes + 15) & ~15)
        const outputLength = n * block * OUTPUT_BYTES[to]
        const descriptor = new Uint8Array(contract.DEQUANT_SIZE)
        describe(new DataView(descriptor.buffer), type, n * block, to, byteOrder, inputAt, outputAt)
        calls.push({
          memory: outputAt + outputLength,
          writes: [{ at: core.heapBase, bytes: descriptor }],
          offset: offset + first * bytes,
          length: n * bytes,
          inputAt,
          call: 'dequantize',
          args: [core.heapBase],
          outputAt,
          outputLength,
          outAt: outAt + first * block * OUTPUT_BYTES[to],
        })
      }
    }
    return { module: { name: 'ggml', bytes: () => ggmlModule.bytes() }, calls }
  }

  return { GgmlDequantizer, dequantizeGgml, dequantizeCalls }
}

/** The kernels, as ggmlKernels gives them. */
export type GgmlKernels = ReturnType<typeof ggmlKernels>
