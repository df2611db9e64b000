// A sharded model's index, model.safetensors.index.json: read whole, validated by the wasm core's index
// scanner (assembly/header.ts scanIndex: JSON, the schema, every repeated key) and kept as its text and the
// scanner's table of weight_map entries. JSON.parse of the largest indexes (91,280 entries) builds an
// object of that many keys, which costs several times the scan; nothing here makes a string per entry
// until a lookup by name needs it.
import * as boundary from '../../assembly/boundary/header.ts?constants'
import { SafetensorsError } from '../errors.ts'
import { type Metadata, runScanner, syntaxMessage, type TensorInfo } from './header.ts'

export const DEFAULT_INDEX = 'model.safetensors.index.json'

/** A model saved as one file. transformers loads it in preference to an index beside it, and so does openModel. */
export const SINGLE_FILE = 'model.safetensors'

/** The JSON of model.safetensors.index.json. */
export interface ModelIndex {
  /** Whatever the writer put there, e.g. `{ total_size }`. */
  metadata?: Metadata<unknown>
  /** The shard file of each tensor, by tensor name. */
  weight_map: Record<string, string>
}

// The fields of a weight_map entry in the scanner's table, in 32-bit words.
const STRIDE = boundary.WEIGHT_SIZE / 4
const KEY16_START = boundary.WEIGHT_KEY16_START / 4
const KEY16_END = boundary.WEIGHT_KEY16_END / 4
const SHARD16_START = boundary.WEIGHT_SHARD16_START / 4
const SHARD16_END = boundary.WEIGHT_SHARD16_END / 4
const NEW_SHARD = boundary.WEIGHT_NEW_SHARD / 4

function indexError(where: string, message: string): SafetensorsError {
  return new SafetensorsError('InvalidHeaderDeserialization', `${where}: ${message}`)
}

/** A folder that shard names are resolved in as URLs: the rule depends on the name alone, not on where the index is. */
const URL_FOLDER = new URL('http://index.invalid/folder/')

/**
 * Shard names are plain file names beside the index, reached the same way on disk and over HTTP: nothing
 * that a file system or URL parsing reads as another file (URL parsing drops tabs and newlines and strips
 * white space at either end, so ".\t." or " .. " would become "..", and the request would carry the
 * caller's headers outside the model's folder).
 */
function checkShardName(where: string, shard: string): void {
  const why = whyNotPlain(shard)
  if (why) throw indexError(where, `shard name ${JSON.stringify(shard)} is not a plain file name in the index's folder: ${why}`)
}

function whyNotPlain(shard: string): string | undefined {
  if (shard === '') return 'it is empty'
  for (let i = 0; i < shard.length; i++) {
    const unit = shard.charCodeAt(i)
    if (unit < 0x20 || unit === 0x7f) return `it holds the control character U+${unit.toString(16).toUpperCase().padStart(4, '0')}`
  }
  if (shard.trim() !== shard) return 'it starts or ends with white space'
  const separator = /[/\\:]/.exec(shard)
  if (separator) return `it holds ${JSON.stringify(separator[0])}, a path separator or drive letter on some systems`
  // What remains to check is how a URL reads it: dot segments, % escapes, a query or a fragment.
  const url = new URL(shard, URL_FOLDER)
  const inFolder = url.href.startsWith(URL_FOLDER.href) ? url.href.slice(URL_FOLDER.href.length) : undefined
  if (inFolder === undefined || decodedPath(inFolder) !== shard) {
    return `as a URL beside the index (in ${URL_FOLDER.pathname}) it reads as ${JSON.stringify(url.pathname + url.search + url.hash)}`
  }
  return undefined
}

/** A URL's path segment as the file name it names; undefined where it is not one segment of valid escapes. */
function decodedPath(segment: string): string | undefined {
  if (/[/?#]/.test(segment)) return undefined
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/** Entries [start, end) of the weight_map, in its order, that name one shard. */
interface Run {
  shard: string
  start: number
  end: number
}

const decoder = new TextDecoder('utf-8', { fatal: true })
const BOM = [0xef, 0xbb, 0xbf]

/** Validates an index's bytes; the error names `where`. */
export function parseIndex(where: string, bytes: Uint8Array): ParsedIndex {
  let text: string
  try {
    text = decoder.decode(bytes)
  } catch {
    throw indexError(where, 'the index is not UTF-8 text')
  }
  // TextDecoder drops a byte order mark, as the text JSON.parse used to see did: so does the scan.
  const json = BOM.every((b, i) => bytes[i] === b) ? bytes.subarray(3) : bytes
  return runScanner(
    json,
    'an index',
    (exports, input, n) => exports.scanIndex(input, n),
    (scan) => {
      const { status, result, view } = scan
      if (status === boundary.STATUS_OUT_OF_MEMORY)
        throw indexError(where, `validating an index of ${json.length} bytes needs more wasm memory than could be allocated`)
      if (status !== boundary.STATUS_OK) throw indexError(where, `invalid index at ${syntaxMessage(scan, json, 0, 'index')}`)
      const u32At = (at: number) => view.getUint32(at, true)
      const entries = u32At(result + boundary.RESULT_TENSOR_COUNT)
      const weights = u32At(result + boundary.RESULT_WEIGHTS)
      const table = new Uint32Array(view.buffer.slice(weights, weights + entries * boundary.WEIGHT_SIZE))
      const metadata =
        u32At(result + boundary.RESULT_METADATA_START) === 0xffffffff
          ? undefined
          : (JSON.parse(text.slice(u32At(result + boundary.RESULT_METADATA_START16), u32At(result + boundary.RESULT_METADATA_END16))) as Record<
              string,
              unknown
            >)
      const index = new ParsedIndex(text, table, entries, metadata)
      for (const shard of index.shards) checkShardName(where, shard)
      return index
    },
  )
}

/** The index once valid: its metadata, shards and entries; the check of a shard's tensors against it. */
export class ParsedIndex {
  /** The weight_map's distinct shard names, in order of first appearance. */
  readonly shards: string[]
  readonly #text: string
  readonly #table: Uint32Array
  readonly #runs: Run[] = []
  readonly #firstRuns = new Map<string, Run>()
  /** Shards whose entries come in more than one run, and (once the check needs them) their entries in order. */
  readonly #scattered = new Set<string>()
  #gathered?: Map<string, number[]>
  #shardOf?: Map<string, string>

  constructor(
    text: string,
    table: Uint32Array,
    /** The weight_map's entries. */
    readonly entries: number,
    readonly metadata: Metadata<unknown> | undefined,
  ) {
    this.#text = text
    this.#table = table
    let run: Run = { shard: '', start: 0, end: 0 }
    for (let i = 0, at = 0; i < entries; i++, at += STRIDE) {
      // The scanner marks where the shard's text changes; escapes can spell one name two ways.
      if (table[at + NEW_SHARD] === 0) continue
      const shard = this.#decoded(table[at + SHARD16_START], table[at + SHARD16_END])
      if (shard === run.shard && i > 0) continue
      run.end = i
      this.#runs.push((run = { shard, start: i, end: i }))
      if (this.#firstRuns.has(shard)) this.#scattered.add(shard)
      else this.#firstRuns.set(shard, run)
    }
    run.end = entries
    this.shards = [...this.#firstRuns.keys()]
  }

  #decoded(start: number, end: number): string {
    const raw = this.#text.slice(start, (end & ~boundary.ESCAPED) >>> 0)
    return end & boundary.ESCAPED ? (JSON.parse(`"${raw}"`) as string) : raw
  }

  /** The tensor name of entry `i`. */
  nameAt(i: number): string {
    const at = i * STRIDE
    return this.#decoded(this.#table[at + KEY16_START], this.#table[at + KEY16_END])
  }

  // Whether entry `i` names `name`.
  #isNameAt(i: number, name: string): boolean {
    const at = i * STRIDE
    const start = this.#table[at + KEY16_START]
    const end = this.#table[at + KEY16_END]
    // A slice and === costs a third of startsWith here (V8).
    return end & boundary.ESCAPED ? this.nameAt(i) === name : this.#text.slice(start, end) === name
  }

  /** Every entry as [tensor, shard], in the weight_map's order. */
  *weightMap(): Generator<[string, string]> {
    for (const { shard, start, end } of this.#runs) for (let i = start; i < end; i++) yield [this.nameAt(i), shard]
  }

  /** The shard the weight_map puts `name` in. The table by name is made when first needed. */
  shardOf(name: string): string | undefined {
    if (this.#shardOf === undefined) {
      // A loop, not weightMap(): the generator's pairs cost about a third more on the largest indexes.
      this.#shardOf = new Map()
      for (const { shard, start, end } of this.#runs) for (let i = start; i < end; i++) this.#shardOf.set(this.nameAt(i), shard)
    }
    return this.#shardOf.get(name)
  }

  /**
   * How many of `tensors` (shard `shard`'s) the index lists in that shard. Where the index lists exactly
   * them, in their order, each is listed there: comparing names tells without hashing every name, which
   * costs several times more (91,280 new strings in the largest models). That holds for an index written
   * in the order of the shards (one run each), and for a sorted one, as transformers writes, over shards
   * that safetensors laid out by name (one dtype each): their runs, gathered once, are in order.
   * Otherwise, a set of the shard's entries: names are unique in the index, so an entry of this shard is
   * one the weight_map puts here.
   */
  listedIn(shard: string, tensors: readonly TensorInfo[]): number {
    const run = this.#firstRuns.get(shard)
    if (run === undefined) return 0
    const gathered = this.#scattered.has(shard) ? (this.#gathered ??= this.#gather()).get(shard)! : undefined
    const count = gathered ? gathered.length : run.end - run.start
    const entry = gathered ? (i: number) => gathered[i] : (i: number) => run.start + i
    if (count === tensors.length && tensors.every((t, i) => this.#isNameAt(entry(i), t.name))) return tensors.length
    const names = new Set<string>()
    for (let i = 0; i < count; i++) names.add(this.nameAt(entry(i)))
    let listed = 0
    for (const t of tensors) if (names.has(t.name)) listed++
    return listed
  }

  /** The entries of each scattered shard, in index order: one pass over the runs. */
  #gather(): Map<string, number[]> {
    const gathered = new Map<string, number[]>()
    for (const { shard, start, end } of this.#runs) {
      if (!this.#scattered.has(shard)) continue
      let entries = gathered.get(shard)
      if (entries === undefined) gathered.set(shard, (entries = []))
      for (let i = start; i < end; i++) entries.push(i)
    }
    return gathered
  }
}
