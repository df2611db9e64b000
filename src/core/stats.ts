// tensorStats: summary statistics and a histogram of F32 data, computed in wasm (assembly/stats.ts).
import * as contract from '../../assembly/boundary/stats.ts?constants'
import { reserveMemory, WasmModule } from './wasm.ts'
import { statsWasm } from './wasm-code.ts'

/** The statistics module's functions (assembly/modules/stats.ts). */
interface StatsExports {
  heapBase(): number
  statsPtr(): number
  statsReset(): void
  statsFirstPass(ptr: number, count: number): void
  /** Reads its inputs from the STATS struct (assembly/boundary/stats.ts). */
  statsSecondPass(ptr: number, count: number): void
}

const statsModule = /* @__PURE__ */ new WasmModule<StatsExports>(statsWasm)

/** What {@link tensorStats} computes. */
export interface TensorStats {
  /** All elements, including NaN and infinities. */
  readonly count: number
  /** min, max, mean, std and the histogram cover only the finite values. */
  readonly finite: number
  /** The smallest finite value; NaN when there is none. */
  readonly min: number
  /** The largest finite value; NaN when there is none. */
  readonly max: number
  /** The mean of the finite values; NaN when there is none. */
  readonly mean: number
  /** Population standard deviation. */
  readonly std: number
  /** NaN elements. */
  readonly nan: number
  /** +Infinity elements. */
  readonly posInf: number
  /** -Infinity elements. */
  readonly negInf: number
  /**
   * `counts[i]` finite values fall in [lo + i * width, lo + (i + 1) * width), width = (hi - lo) / bins; the
   * last bin includes hi.
   */
  readonly histogram: {
    /** The low edge of the first bin: min. */
    readonly lo: number
    /** The high edge of the last bin: max. */
    readonly hi: number
    /** Finite values per bin, `bins` of them. */
    readonly counts: number[]
  }
}

/** Elements copied into the shared core per call: the copy and both passes stay in cache. */
const CHUNK = 1 << 16

/**
 * Counts, min, max, mean, standard deviation and a histogram of F32 data, computed in wasm in two passes.
 * `options.bins` is the histogram's number of bins, from 1 to 65536 (default 64).
 * @throws RangeError for `bins` out of range. It gives no SafetensorsError: any Float32Array is valid data.
 */
export function tensorStats(
  data: Float32Array,
  options: {
    /**
     * Bins of the histogram, from 1 to 65536.
     * @defaultValue 64
     */
    bins?: number
  } = {},
): TensorStats {
  const bins = options.bins ?? 64
  if (!Number.isInteger(bins) || bins < 1 || bins > 1 << 16) throw new RangeError(`bins must be an integer from 1 to 65536, got ${bins}`)
  const core = statsModule.shared()
  const { exports } = core
  const input = core.heapBase
  const counts = input + CHUNK * 4
  reserveMemory(core, counts + bins * 4)
  const eachChunk = (pass: (ptr: number, count: number) => void) => {
    for (let first = 0; first < data.length; first += CHUNK) {
      const chunk = data.subarray(first, first + CHUNK)
      new Float32Array(core.memory.buffer, input, chunk.length).set(chunk)
      pass(input, chunk.length)
    }
  }
  exports.statsReset()
  eachChunk(exports.statsFirstPass)
  const view = new DataView(core.memory.buffer, exports.statsPtr(), contract.STATS_SIZE)
  const finite = Number(view.getBigUint64(contract.STATS_FINITE, true))
  const min = finite > 0 ? view.getFloat64(contract.STATS_MIN, true) : NaN
  const max = finite > 0 ? view.getFloat64(contract.STATS_MAX, true) : NaN
  const mean = finite > 0 ? view.getFloat64(contract.STATS_SUM, true) / finite : NaN
  new Uint32Array(core.memory.buffer, counts, bins).fill(0)
  view.setFloat64(contract.STATS_MEAN, mean, true)
  view.setUint32(contract.STATS_BINS, bins, true)
  view.setUint32(contract.STATS_COUNTS, counts, true)
  eachChunk(exports.statsSecondPass)
  return {
    count: data.length,
    finite,
    min,
    max,
    mean,
    std: finite > 0 ? Math.sqrt(view.getFloat64(contract.STATS_DEVIATIONS, true) / finite) : NaN,
    nan: Number(view.getBigUint64(contract.STATS_NAN, true)),
    posInf: Number(view.getBigUint64(contract.STATS_POS_INF, true)),
    negInf: Number(view.getBigUint64(contract.STATS_NEG_INF, true)),
    histogram: { lo: min, hi: max, counts: [...new Uint32Array(core.memory.buffer, counts, bins)] },
  }
}
