#!/usr/bin/env node
// safetensors-wasm inspect | validate | convert. inspect and validate read only each file's length prefix
// and header (and, with --tensor, that one tensor), from a path or an http(s) URL. Results go to stdout;
// failures, usage and progress to stderr, one line each.
import { readFileSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { GGUF_DTYPE_NAMES, ggufDtypeOf } from './gguf/file-types.ts'
import { type GgufDtype, GgufFile, type GgufValue, openGguf, writeGguf } from './gguf-node.ts'
import { isGgufName } from './node/convert-file.ts'
import { cleanUpWrites } from './node/temporary-files.ts'
import {
  type ConvertTarget,
  convertFile,
  convertModel,
  type Header,
  type LogicalTensorInfo,
  type OpenModelOptions,
  open,
  openModel,
  type ProgressCallback,
  type Quantization,
  SafetensorsError,
  type SafetensorsFile,
  type SafetensorsModel,
  type TensorInfo,
  tensorStats,
} from './node.ts'
import { systemMessage } from './platform/node-files.ts'

const USAGE = `usage:
  safetensors-wasm inspect <file|url|model> [--json] [--tensor NAME]
  safetensors-wasm validate <file|url|model>... [--json]
  safetensors-wasm convert <in> <out> [--dtype F32|F16|BF16] [--max-shard-size SIZE] [--workers N]
  safetensors-wasm convert <model> <out.gguf> [--dtype F32|F16|BF16|Q8_0|Q4_K_M|...] [--workers N]
  safetensors-wasm convert <in.gguf> <out folder> [--dtype F32|F16|BF16] [--raw] [--workers N]
  safetensors-wasm --version
      floating-point tensors become --dtype (in any case: bf16), others are copied;
      <in> may be a model.safetensors.index.json (or its folder), and <out> is then a
      folder; --max-shard-size (2GB, 500MB, 1GiB) reshards into a folder with an index;
      an <out> ending in .gguf is a GGUF for llama.cpp of the model (Llama, Mistral,
      Mixtral, Qwen2/3, Qwen3-MoE, Gemma 2/3, Phi-3, GPT-2) and its tokenizer, F16
      unless --dtype says otherwise: F32, BF16 or a file type of llama-quantize (Q4_0,
      Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, TQ1_0, TQ2_0,
      IQ4_NL, IQ4_XS; Q3_K, Q4_K, Q5_K for the _M), as llama.cpp's quantizer makes it;
      an <in.gguf> becomes the Hugging Face folder transformers loads (weights,
      config.json, tokenizer), F32 unless --dtype says otherwise; --raw: its tensors
      by their GGUF names, its keys as metadata; --workers N: the threads that read and
      convert (default one per core, at most 8; 0: the calling thread only)
  a model is a model.safetensors.index.json (path or URL) or a folder holding one;
  a file is a SafeTensors or a GGUF file
  validate exits 0 when every input is valid, 1 when one is invalid, 3 when none is
  invalid but one could not be read (missing, no permission, an HTTP error); 2 is bad usage`

class UsageError extends Error {}

const ALIASES: Record<string, string> = { '-h': '--help', '-v': '--version' }

/** Splits `--flag` and `--option value` arguments from positional ones. */
function parseArgs(args: string[], flags: string[], options: string[]): { positional: string[]; flags: Set<string>; values: Map<string, string> } {
  const parsed = { positional: [] as string[], flags: new Set<string>(), values: new Map<string, string>() }
  for (let i = 0; i < args.length; i++) {
    const arg = ALIASES[args[i]] ?? args[i]
    if (!arg.startsWith('--')) parsed.positional.push(arg)
    else if (flags.includes(arg)) parsed.flags.add(arg)
    else if (options.includes(arg) && i + 1 < args.length) parsed.values.set(arg, args[++i])
    else throw new UsageError(options.includes(arg) ? `${arg} needs a value` : `unknown option ${arg}`)
  }
  return parsed
}

async function main(args: string[]): Promise<number> {
  const { positional, flags, values } = parseArgs(args, ['--json', '--help', '--version', '--raw'], ['--tensor', '--dtype', '--max-shard-size', '--workers'])
  if (flags.has('--version')) {
    console.log(version())
    return 0
  }
  const [command, ...files] = positional
  // Asked for, the usage is the output (stdout); after a mistake, the reason and where to find the usage (stderr).
  if (flags.has('--help') || command === 'help') {
    console.log(USAGE)
    return 0
  }
  if (command === undefined) throw new UsageError('a command is needed: inspect, validate or convert')
  const json = flags.has('--json')
  const tensor = values.get('--tensor')
  if (tensor !== undefined && command !== 'inspect') throw new UsageError('--tensor goes with inspect')
  if ((command === 'inspect' && files.length === 1) || (command === 'validate' && files.length > 0)) {
    for (const file of files) refuseFolderUrl(file, false)
    return command === 'inspect' ? inspect(files[0], json, tensor) : validate(files, json)
  }
  const raw = flags.has('--raw')
  if (raw && !(command === 'convert' && isGgufName(files[0] ?? ''))) throw new UsageError('--raw goes with convert of a .gguf into a folder')
  const workers = parseWorkers(values.get('--workers'))
  if (workers !== undefined && command !== 'convert') throw new UsageError('--workers goes with convert')
  if (command === 'convert' && files.length === 2)
    return convertCommand(files[0], files[1], { dtype: values.get('--dtype'), maxShardSize: values.get('--max-shard-size'), raw, workers })
  throw new UsageError(['inspect', 'validate', 'convert'].includes(command) ? `${command}: wrong number of files` : `unknown command ${command}`)
}

/** The version of the package this file ships in: dist/cli.js, beside ../package.json. */
function version(): string {
  return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version
}

const isUrl = (location: string) => /^https?:\/\//i.test(location)

/** A model index (a path or URL ending in .index.json) or a local folder is read as a sharded model. */
async function isModel(location: string): Promise<boolean> {
  if (location.endsWith('.index.json')) return true
  return !isUrl(location) && (await stat(location).catch(() => undefined))?.isDirectory() === true
}

/**
 * A URL that names no file of a model is bad usage: a folder's (HTTP cannot list one), or, where only a model
 * will do (`modelOnly`), one whose path ends in neither .json nor .safetensors, such as a folder's without its
 * slash (whose server answers with a page listing it).
 */
function refuseFolderUrl(location: string, modelOnly: boolean): void {
  if (!isUrl(location)) return
  const { pathname } = new URL(location)
  const folder = pathname.endsWith('/')
  if (!folder && (!modelOnly || /\.(json|safetensors)$/i.test(pathname))) return
  const base = folder ? location : `${location}/`
  throw new UsageError(
    `${location} ${folder ? "is a folder's URL, and HTTP cannot list a folder" : 'names neither a model index nor a .safetensors file'}: give the URL of the model's index or of its file, such as ${base}model.safetensors.index.json or ${base}model.safetensors`,
  )
}

/** Opens a sharded model and checks its index against its shards: every listed tensor is where the index says, and nothing is unlisted. */
async function checkedModel(location: string, options?: OpenModelOptions): Promise<SafetensorsModel> {
  const model = await openModel(location, options)
  const [first] = model.unlisted()
  if (first) {
    await model.close()
    const others = model.unlisted().length - 1
    throw new SafetensorsError(
      'TensorNotFound',
      `shard ${first.shard} holds ${JSON.stringify(first.tensor)}, which the index does not list there${others > 0 ? ` (and ${count(others, 'other tensor')})` : ''}`,
    )
  }
  return model
}

/** What inspect and validate read: a file, or a model, with, when its quantization is not read, why. */
interface Opened {
  source: SafetensorsFile | SafetensorsModel | GgufFile
  /** The model's quantization is one this library does not read: its stored tensors are read as they are. */
  unread?: SafetensorsError
}

async function openInput(location: string): Promise<Opened> {
  if (!(await isModel(location))) return { source: await openFile(location) }
  try {
    return { source: await checkedModel(location) }
  } catch (error) {
    // Its SafeTensors files are still judged, and its tensors listed, as stored.
    if (!(error instanceof SafetensorsError) || error.code !== 'UnsupportedQuantization') throw error
    return { source: await checkedModel(location, { quantization: false }), unread: error }
  }
}

/** The line that says a model's quantization is not read. */
const unreadNote = (error: SafetensorsError) => `quantization not read, tensors as stored: ${error.message}`

interface Checked {
  tensors: number
  shards?: Array<{ file: string; tensors: number }>
  note?: string
}

/** A GGUF file (by its name, or by what open() found in it) or a SafeTensors file. */
async function openFile(location: string): Promise<SafetensorsFile | GgufFile> {
  if (isGgufName(location)) return openGguf(location)
  try {
    return await open(location)
  } catch (error) {
    if (error instanceof SafetensorsError && error.message.includes('it is a GGUF file')) return openGguf(location)
    throw error
  }
}

async function check(location: string): Promise<Checked> {
  const { source, unread } = await openInput(location)
  await source.close()
  if (!('shards' in source)) return { tensors: source.header.tensors.length }
  const shards = [...source.shards].map(([file, shard]) => ({ file, tensors: shard.header.tensors.length }))
  return { tensors: source.names().length, shards, ...(unread && { note: unreadNote(unread) }) }
}

/**
 * The library's message without the input's name, which the line that prints it begins with: the input is
 * named once ("x: Io: cannot open: …", not "x: Io: x: cannot open x: …"). Other files (a shard, an index in a
 * folder) stay named.
 */
function withoutInput(message: string, input: string): string {
  const rest = message.startsWith(`${input}: `) ? message.slice(input.length + 2) : message
  return rest.startsWith(`${input} is `) ? rest.slice(input.length + 1) : rest.replace(` ${input}: `, ': ')
}

/** A failure as a line of stderr (or of validate's stdout, `status` before the code). */
function failureLine(file: string, error: SafetensorsError, status = ''): string {
  return `${file}: ${status}${error.code}: ${withoutInput(error.message, file)}`
}

/** A failure as validate --json and inspect --json print it. */
function failureJson(file: string, error: SafetensorsError): string {
  return JSON.stringify({ file, valid: false, code: error.code, message: withoutInput(error.message, file) })
}

/**
 * Exit 1 when an input is invalid, else 3 when one could not be read. Io is the one code about getting the
 * bytes (a missing file, a permission, an HTTP error, a dropped connection); every other is about the bytes.
 */
async function validate(files: string[], json: boolean): Promise<number> {
  let invalid = 0
  let unreadable = 0
  for (const file of files) {
    try {
      const { tensors, shards, note } = await check(file)
      if (json) console.log(JSON.stringify({ file, valid: true, tensors, ...(shards && { shards }), ...(note && { note }) }))
      else {
        console.log(`${file}: valid, ${count(tensors, 'tensor')}${shards ? ` in ${count(shards.length, 'shard')}` : ''}`)
        for (const shard of shards ?? []) console.log(`  ${shard.file}: valid, ${count(shard.tensors, 'tensor')}`)
        if (note) console.log(`  note: ${note}`)
      }
    } catch (error) {
      if (!(error instanceof SafetensorsError)) throw error
      const readable = error.code !== 'Io'
      if (readable) invalid++
      else unreadable++
      console.log(json ? failureJson(file, error) : failureLine(file, error, readable ? 'INVALID ' : 'UNREADABLE '))
    }
  }
  return invalid > 0 ? 1 : unreadable > 0 ? 3 : 0
}

interface Totals {
  tensors: number
  parameters: number
  bytes: number
}

/** A tensor as the tables and totals take it: a GGUF's `type` is its dtype. */
type Listed = Pick<TensorInfo, 'name' | 'shape' | 'byteLength'> & { dtype: string }

function summarize(tensors: readonly Listed[]): { total: Totals; byDtype: Record<string, Totals> } {
  const total: Totals = { tensors: 0, parameters: 0, bytes: 0 }
  const byDtype: Record<string, Totals> = {}
  for (const info of tensors) {
    const parameters = info.shape.reduce((a, b) => a * b, 1)
    for (const t of [total, (byDtype[info.dtype] ??= { tensors: 0, parameters: 0, bytes: 0 })]) {
      t.tensors++
      t.parameters += parameters
      t.bytes += info.byteLength
    }
  }
  return { total, byDtype }
}

async function inspect(location: string, json: boolean, tensor: string | undefined): Promise<number> {
  try {
    const { source, unread } = await openInput(location)
    try {
      if (tensor !== undefined) await printTensor(source, tensor, json)
      else if (source instanceof GgufFile) printGguf(location, source, json)
      else if ('header' in source) printHeader(location, source.header, json)
      else printModel(location, source, json, unread && unreadNote(unread))
    } finally {
      await source.close()
    }
    return 0
  } catch (error) {
    if (!(error instanceof SafetensorsError)) throw error
    if (json) console.log(failureJson(location, error))
    else console.error(failureLine(location, error))
    return 1
  }
}

/** 1,234 (and "1 tensor", "2 tensors" with a noun). */
function count(n: number, noun?: string): string {
  const digits = n.toLocaleString('en-US')
  return noun === undefined ? digits : `${digits} ${noun}${n === 1 ? '' : 's'}`
}

function printHeader(location: string, header: Header, json: boolean): void {
  const totals = summarize(header.tensors)
  if (json) {
    const { headerSize, dataStart, fileSize, metadata, tensors } = header
    console.log(
      JSON.stringify({ file: location, fileSize, headerSize, dataStart, metadata, tensors, totals: { ...totals.total, byDtype: totals.byDtype } }, null, 2),
    )
    return
  }
  console.log(`${location}: ${count(header.fileSize)} bytes, header ${count(header.headerSize)} bytes, data from byte ${count(header.dataStart)}`)
  printMetadata(header.metadata)
  printTable(
    header.tensors.map((t) => tensorRow(t)),
    [],
  )
  printTotals(totals)
}

function printModel(location: string, model: SafetensorsModel, json: boolean, note: string | undefined): void {
  // checkedModel leaves no stored tensor unlisted: each shard's are the model's (a quantized module's parts included).
  const shards = [...model.shards].map(([file, shard]) => ({
    file,
    fileSize: shard.header.fileSize,
    headerSize: shard.header.headerSize,
    ...summarize(shard.header.tensors).total,
  }))
  const infos = model.names().map((name) => model.info(name))
  const totals = summarize(infos)
  const { quantization } = model
  if (json) {
    const tensors = infos.map((t) => ({ ...t, shard: model.shardOf(t.name) }))
    console.log(
      JSON.stringify(
        {
          model: location,
          metadata: model.metadata,
          ...(quantization && { quantization }),
          ...(note && { note }),
          shards,
          tensors,
          totals: { ...totals.total, byDtype: totals.byDtype },
        },
        null,
        2,
      ),
    )
    return
  }
  const fileBytes = shards.reduce((sum, s) => sum + s.fileSize, 0)
  console.log(`${location}: sharded model, ${count(shards.length, 'shard')}, ${count(fileBytes)} bytes in all`)
  printMetadata(model.metadata)
  if (quantization) console.log(`\n${quantizationLine(quantization, infos)}`)
  if (note) console.log(`\nnote: ${note}`)
  console.log('\nshards:')
  const width = Math.max(...shards.map((s) => s.file.length))
  for (const s of shards) console.log(`  ${s.file.padEnd(width)}  ${count(s.tensors, 'tensor').padStart(13)}  ${count(s.fileSize, 'byte').padStart(20)}`)
  printTable(
    infos.map((t) => tensorRow(t, model.shardOf(t.name), ...(quantization ? [quantizedCell(t)] : []))),
    quantization ? ['shard', 'quantized'] : ['shard'],
  )
  printTotals(totals)
}

/** "quantization: gptq, 4-bit, group 32: 14 modules (12 at 4 bits, group 32; 2 at 8 bits, group 32)", each module counted at its own bits. */
function quantizationLine(quantization: Quantization, infos: TensorInfo[]): string {
  const counts = new Map<string, number>()
  for (const cell of infos.map(quantizedCell)) if (cell) counts.set(cell, (counts.get(cell) ?? 0) + 1)
  const modules = [...counts.values()].reduce((a, b) => a + b, 0)
  const { method, bits, groupSize } = quantization
  const each = [...counts]
    .sort(([, a], [, b]) => b - a)
    .map(([cell, n]) => `${count(n)} at ${cell}`)
    .join('; ')
  return `quantization: ${method}, ${bits}-bit${groupSize ? `, group ${groupSize}` : ''}: ${count(modules, 'module')} (${each})`
}

/** A logical tensor's bits and group ("4 bits, group 64"); '' for a stored one. */
function quantizedCell(info: TensorInfo | LogicalTensorInfo): string {
  if (!('quantized' in info)) return ''
  const { bits, groupSize } = info.quantized
  return `${bits} bits${groupSize ? `, group ${groupSize}` : ''}`
}

function printMetadata(metadata: Record<string, unknown> | null): void {
  if (!metadata) return
  console.log('\nmetadata:')
  for (const [key, value] of Object.entries(metadata)) console.log(`  ${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
}

function tensorRow(t: Listed, ...extra: Array<string | undefined>): string[] {
  return [t.name, t.dtype, `[${t.shape.join(', ')}]`, count(t.byteLength), ...extra.map((e) => e ?? '')]
}

/** The tensor table: name, dtype, shape, bytes (right-aligned), then any extra columns. */
function printTable(rows: string[][], extraTitles: string[]): void {
  const titles = ['name', 'dtype', 'shape', 'bytes', ...extraTitles]
  const widths = titles.map((title, i) => Math.max(title.length, ...rows.map((r) => r[i].length)))
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 3 ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd()
  console.log(`\n${line(titles)}`)
  for (const row of rows) console.log(line(row))
}

function printTotals({ total, byDtype }: ReturnType<typeof summarize>): void {
  console.log(`\n${count(total.tensors, 'tensor')}, ${count(total.parameters, 'parameter')}, ${count(total.bytes, 'byte')}`)
  for (const [dtype, t] of Object.entries(byDtype)) {
    console.log(
      `  ${dtype.padEnd(12)} ${count(t.tensors, 'tensor').padStart(13)}  ${count(t.parameters, 'parameter').padStart(24)}  ${count(t.bytes, 'byte').padStart(20)}`,
    )
  }
}

/** Arrays longer than this are shown as their first values and their length; strings longer than this many characters are cut. */
const SHOWN_VALUES = 8
const SHOWN_CHARACTERS = 200

/** The shortest decimal that reads back as the same float32: 1e-6 rather than 9.999999974752427e-7. */
function shortestF32(x: number): number {
  for (let digits = 1; digits < 9; digits++) if (Math.fround(Number(x.toPrecision(digits))) === x) return Number(x.toPrecision(digits))
  return x
}

/**
 * A GGUF value as JSON allows: float32s at their shortest, 64-bit integers and non-finite floats as strings, arrays
 * of more than 16 values as their length and first 8.
 */
function ggufJson(value: GgufValue, f32: boolean): unknown {
  if (typeof value === 'bigint' || (typeof value === 'number' && !Number.isFinite(value))) return String(value)
  if (typeof value === 'number') return f32 ? shortestF32(value) : value
  if (typeof value !== 'object') return value
  const values = Array.from(value as ArrayLike<GgufValue>, (v) => ggufJson(v, f32))
  return values.length > 2 * SHOWN_VALUES ? { length: values.length, first: values.slice(0, SHOWN_VALUES) } : values
}

/** A GGUF value in a line: as in JSON, strings unquoted where they are plain and short. */
function ggufText(value: GgufValue, f32: boolean, nested = false): string {
  if (typeof value === 'string') {
    const cut = value.length > SHOWN_CHARACTERS ? `${value.slice(0, SHOWN_CHARACTERS)}…` : value
    // Quoted where JSON would escape something (a newline, a quote), so that a value stays on its line.
    const quoted = JSON.stringify(cut)
    const text = nested || quoted.slice(1, -1) !== cut ? quoted : cut
    return cut === value ? text : `${text} (${count(value.length, 'character')})`
  }
  if (typeof value !== 'object') return String(ggufJson(value, f32))
  const values = Array.from(value as ArrayLike<GgufValue>)
  const shown = values.slice(0, values.length > 2 * SHOWN_VALUES ? SHOWN_VALUES : values.length).map((v) => ggufText(v, f32, true))
  return shown.length < values.length ? `[${shown.join(', ')}, … ${count(values.length, 'value')}]` : `[${shown.join(', ')}]`
}

function printGguf(location: string, file: GgufFile, json: boolean): void {
  const { version, byteOrder, alignment, dataStart, fileSize, metadata, metadataTypes } = file.header
  const tensors = file.header.tensors.map(({ name, type, shape, byteLength, offset }) => ({ name, dtype: type, shape, byteLength, offset }))
  const totals = summarize(tensors)
  const f32 = (key: string) => /^(ARRAY\[)?FLOAT32/.test(metadataTypes[key])
  if (json) {
    const entries = Object.entries(metadata).map(([key, value]) => [key, { type: metadataTypes[key], value: ggufJson(value, f32(key)) }])
    const listed = tensors.map(({ dtype, ...t }) => ({ name: t.name, type: dtype, shape: t.shape, byteLength: t.byteLength, offset: t.offset }))
    const gguf = { format: 'GGUF', version, byteOrder, alignment, fileSize, dataStart }
    console.log(
      JSON.stringify(
        { file: location, ...gguf, metadata: Object.fromEntries(entries), tensors: listed, totals: { ...totals.total, byType: totals.byDtype } },
        null,
        2,
      ),
    )
    return
  }
  console.log(`${location}: GGUF v${version}, ${byteOrder}-endian, ${count(fileSize)} bytes, alignment ${alignment}, data from byte ${count(dataStart)}`)
  console.log('\nmetadata:')
  for (const [key, value] of Object.entries(metadata)) console.log(`  ${key} (${metadataTypes[key]}): ${ggufText(value, f32(key))}`)
  printTable(
    tensors.map((t) => tensorRow(t)),
    [],
  )
  printTotals(totals)
}

/** Reads one tensor as F32 and prints its statistics (computed in wasm). */
async function printTensor(file: SafetensorsFile | SafetensorsModel | GgufFile, name: string, json: boolean): Promise<void> {
  const info = file instanceof GgufFile ? { ...file.info(name), dtype: file.info(name).type } : file.info(name)
  const onProgress = process.stderr.isTTY ? progressBar() : undefined
  const tensor = await file.getTensor(name, { dtype: 'F32', onProgress }).finally(() => onProgress && process.stderr.write('\n'))
  const stats = { name, dtype: info.dtype, shape: info.shape, ...tensorStats(tensor.data, { bins: 10 }) }
  if (json) {
    console.log(JSON.stringify(stats, null, 2))
    return
  }
  const { histogram } = stats
  console.log(`${name}: ${stats.dtype} [${stats.shape.join(', ')}], ${count(stats.count)} elements`)
  console.log(`  min ${stats.min}  max ${stats.max}  mean ${stats.mean}  std ${stats.std}`)
  console.log(`  NaN ${count(stats.nan)}  +Inf ${count(stats.posInf)}  -Inf ${count(stats.negInf)}`)
  const most = Math.max(1, ...histogram.counts)
  const width = (histogram.hi - histogram.lo) / histogram.counts.length
  histogram.counts.forEach((n, i) => {
    const from = histogram.lo + i * width
    console.log(`  ${from.toPrecision(6).padStart(13)}  ${'#'.repeat(Math.round((n / most) * 40)).padEnd(40)} ${count(n)}`)
  })
}

/** "2GB", "500MB", "1.5GiB", "4096": a size as transformers' max_shard_size takes it (KB/MB/GB decimal, KiB/MiB/GiB binary). */
function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([KMGT]i?B)?$/i.exec(text.trim())
  const units: Record<string, number> = { KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, KIB: 2 ** 10, MIB: 2 ** 20, GIB: 2 ** 30, TIB: 2 ** 40 }
  const value = match ? Number(match[1]) * (match[2] ? units[match[2].toUpperCase()] : 1) : NaN
  // A fraction of a unit rounds down; a fraction of a byte is a typo.
  const bytes = match?.[2] || Number.isInteger(value) ? Math.floor(value) : NaN
  if (!(bytes > 0)) throw new UsageError(`--max-shard-size takes a size such as 2GB, 500MB or 1GiB, got ${JSON.stringify(text)}`)
  return bytes
}

const TARGETS: readonly ConvertTarget[] = ['F32', 'F16', 'BF16']
function parseDtype(text: string): ConvertTarget {
  const dtype = TARGETS.find((t) => t === text.toUpperCase())
  if (dtype) return dtype
  if (ggufDtypeOf(text))
    throw new UsageError(`--dtype ${text} is a GGUF type: name an output ending in .gguf to write GGUF, or take F32, F16 or BF16 for SafeTensors`)
  throw new UsageError(`--dtype takes ${TARGETS.slice(0, -1).join(', ')} or ${TARGETS.at(-1)} (in any case), got ${JSON.stringify(text)}`)
}

function parseGgufDtype(text: string): GgufDtype {
  const dtype = ggufDtypeOf(text)
  if (dtype) return dtype
  throw new UsageError(
    `--dtype of a GGUF takes ${GGUF_DTYPE_NAMES.slice(0, -1).join(', ')} or ${GGUF_DTYPE_NAMES.at(-1)} (in any case), got ${JSON.stringify(text)}`,
  )
}

/** --workers N: a count from 0 to 256. */
function parseWorkers(text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  const workers = Number(text)
  if (!/^\d+$/.test(text) || workers > 256) throw new UsageError(`--workers takes a count of threads from 0 to 256, got ${JSON.stringify(text)}`)
  return workers
}

/** convert's flags as given: --dtype and --max-shard-size as text, --raw, --workers. */
interface ConvertFlags {
  dtype: string | undefined
  maxShardSize: string | undefined
  raw: boolean
  workers: number | undefined
}

async function convertCommand(input: string, output: string, flags: ConvertFlags): Promise<number> {
  const { dtype: dtypeText, maxShardSize: sizeText, raw, workers } = flags
  const gguf = /\.gguf$/i.test(output)
  if (isGgufName(input) && !gguf) return ggufToFolderCommand(input, output, flags)
  if (raw) throw new UsageError('--raw goes with convert of a .gguf into a folder')
  if (gguf && sizeText !== undefined) throw new UsageError(`--max-shard-size goes with a SafeTensors output; ${output} is a GGUF, written as one file`)
  const ggufDtype = gguf && dtypeText !== undefined ? parseGgufDtype(dtypeText) : undefined
  const dtype = !gguf && dtypeText !== undefined ? parseDtype(dtypeText) : undefined
  const maxShardSize = sizeText === undefined ? undefined : parseSize(sizeText)
  if (!gguf && dtype === undefined && maxShardSize === undefined) throw new UsageError('convert needs --dtype F32|F16|BF16, --max-shard-size SIZE or both')
  refuseFolderUrl(input, gguf)
  const model = await isModel(input)
  // The input's faults first: they say what to fix before the output's name matters.
  const fault = await inputFault(input, model)
  if (fault) return fail(failureLine(input, fault))
  const intoFolder = !gguf && (model || maxShardSize !== undefined)
  if (intoFolder && /\.safetensors$/i.test(output)) {
    throw new UsageError(
      `${output}: this writes a folder of the model's files, which a name ending in .safetensors would pass off as a file; give a folder name`,
    )
  }
  const wrong = await outputInTheWay(output, intoFolder)
  if (wrong) return fail(`${output}: Io: ${wrong}`)
  if (gguf) return ggufCommand(input, output, ggufDtype ?? 'F16', workers)
  const started = performance.now()
  const options = { dtype, maxShardSize, workers, onProgress: progressOption() }
  const written = await runWrite(input, output, model, options, () => (model ? convertModel(input, output, options) : convertFile(input, output, options)))
  if (written === undefined) return 1
  const seconds = (performance.now() - started) / 1000
  console.log(await describeWritten(output, intoFolder ? output : dirname(output), written, intoFolder, seconds))
  return 0
}

/**
 * What is wrong with a local input (missing, not SafeTensors, a GGUF, a folder with no model), found by opening
 * it once. Over HTTP the conversion's own reads find it: a second open could mean a second download.
 */
async function inputFault(input: string, model: boolean): Promise<SafetensorsError | undefined> {
  if (isUrl(input)) return undefined
  try {
    await (model ? await openModel(input) : await open(input)).close()
    return undefined
  } catch (error) {
    if (error instanceof SafetensorsError) return error
    throw error
  }
}

function fail(line: string): number {
  console.error(line)
  return 1
}

function progressOption(): ProgressCallback | undefined {
  return process.stderr.isTTY ? progressBar() : undefined
}

/**
 * Runs the write of `output` (a file or model with other dtypes or shards, or a GGUF); a failure is printed as one line naming the output when writing it failed, else the
 * input, and the result is undefined.
 */
async function runWrite<T>(
  input: string,
  output: string,
  model: boolean,
  options: { onProgress?: ProgressCallback },
  run: () => Promise<T>,
): Promise<T | undefined> {
  // Interrupted, a write removes what it began and leaves its target as it was. What the removal makes the
  // write itself fail with (a file closed under it) is not a failure to report.
  let stopping = false
  const stop = (signal: NodeJS.Signals, code: number) => () => {
    stopping = true
    void cleanUpWrites().finally(() => {
      console.error(`${output}: stopped by ${signal}; the temporary files are removed`)
      process.exit(code)
    })
  }
  const onInterrupt = stop('SIGINT', 130)
  const onTerminate = stop('SIGTERM', 143)
  process.once('SIGINT', onInterrupt)
  process.once('SIGTERM', onTerminate)
  try {
    return await run()
  } catch (error) {
    // The process exits once the cleanup is done.
    if (stopping) return new Promise<never>(() => {})
    // The output is the input: bad usage, found before anything was written.
    if (error instanceof RangeError) throw new UsageError(error.message)
    // An error names the local file it is about (error.path): the input's (a file, or a model's index and the
    // shards beside it), or else the output's.
    const inputFolder = model ? resolve(/\.(index\.json|safetensors)$/.test(input) ? dirname(input) : input) : undefined
    const readsInput = (path: string) => resolve(path) === resolve(input) || dirname(resolve(path)) === inputFolder
    if (error instanceof SafetensorsError && error.code === 'Io' && error.path !== undefined && !readsInput(error.path)) {
      // In the system's words, without its paths: they name temporary files.
      fail(`${output}: Io: cannot write: ${error.cause === undefined ? error.message : systemMessage(error.cause)}`)
      return undefined
    }
    if (error instanceof SafetensorsError) {
      fail(failureLine(input, error))
      return undefined
    }
    throw error
  } finally {
    process.off('SIGINT', onInterrupt)
    process.off('SIGTERM', onTerminate)
    if (options.onProgress) process.stderr.write('\n')
  }
}

/** convert into a .gguf: "out.gguf: wrote 21 tensors (9 F32, 12 Q8_0), 1,234 bytes, 0.12 s". */
async function ggufCommand(input: string, output: string, dtype: GgufDtype, workers: number | undefined): Promise<number> {
  const started = performance.now()
  const options = { dtype, workers, onProgress: progressOption() }
  const written = await runWrite(input, output, true, options, () => writeGguf(input, output, options))
  if (written === undefined) return 1
  const seconds = (performance.now() - started) / 1000
  for (const note of written.notes) console.error(`${output}: ${note}`)
  const types = Object.entries(written.types).map(([type, n]) => `${count(n)} ${type}`)
  console.log(`${output}: wrote ${count(written.tensors, 'tensor')} (${types.join(', ')}), ${count(written.bytes, 'byte')}, ${seconds.toFixed(2)} s`)
  return 0
}

/** convert x.gguf OUT_DIR: the Hugging Face folder of a GGUF, F32 unless --dtype says otherwise. */
async function ggufToFolderCommand(input: string, output: string, { dtype: dtypeText, maxShardSize: sizeText, raw, workers }: ConvertFlags): Promise<number> {
  const dtype = dtypeText === undefined ? 'F32' : parseDtype(dtypeText)
  const maxShardSize = sizeText === undefined ? undefined : parseSize(sizeText)
  if (/\.safetensors$/i.test(output))
    throw new UsageError(
      `${output}: a GGUF converts to a folder of the model's files, which a name ending in .safetensors would pass off as a file; give a folder name`,
    )
  const wrong = await outputInTheWay(output, true)
  if (wrong) return fail(`${output}: Io: ${wrong}`)
  const started = performance.now()
  const options = { dtype, maxShardSize, raw, workers, onProgress: progressOption() }
  const written = await runWrite(input, output, false, options, () => convertModel(input, output, options))
  if (written === undefined) return 1
  console.log(await describeWritten(output, output, written, true, (performance.now() - started) / 1000))
  return 0
}

/** What is already at `output` and in the way: a folder where a file goes, a file where a folder goes. */
async function outputInTheWay(output: string, intoFolder: boolean): Promise<string | undefined> {
  const found = await stat(output).catch(() => undefined)
  if (!found || found.isDirectory() === intoFolder) return undefined
  return intoFolder
    ? 'exists and is not a folder (a model is written as a folder of its files)'
    : `is a folder (name the file to write, such as ${join(output, 'model.safetensors')})`
}

/** One line from the files written, read back: "out: wrote 36 tensors (3 F16, 3 I64), 1,234 bytes in 6 shards and model.safetensors.index.json, 0.12 s". */
async function describeWritten(output: string, folder: string, names: string[], intoFolder: boolean, seconds: number): Promise<string> {
  // One file is named as the output is, whatever its extension; a folder's shards are its .safetensors.
  const shards = intoFolder ? names.filter((name) => name.endsWith('.safetensors')) : names
  // The index, if any: a model's other files (config.json, ...) come after it.
  const index = names.find((name) => name.endsWith('.index.json'))
  const tensors: TensorInfo[] = []
  let bytes = 0
  for (const name of shards) {
    const file = await open(join(folder, name))
    await file.close()
    tensors.push(...file.header.tensors)
    bytes += file.header.fileSize
  }
  const { total, byDtype } = summarize(tensors)
  const dtypes = Object.entries(byDtype).map(([dtype, t]) => `${count(t.tensors)} ${dtype}`)
  const where = intoFolder ? ` in ${count(shards.length, 'shard')}${index ? ` and ${index}` : ''}` : ''
  return `${output}: wrote ${count(total.tensors, 'tensor')}${dtypes.length ? ` (${dtypes.join(', ')})` : ''}, ${count(bytes, 'byte')}${where}, ${seconds.toFixed(2)} s`
}

function progressBar(): ProgressCallback {
  let shown = -1
  return ({ loaded, total }) => {
    const percent = total > 0 ? Math.floor((loaded / total) * 100) : 100
    if (percent === shown) return
    shown = percent
    const filled = Math.round(percent / 2.5)
    process.stderr.write(
      `\r[${'#'.repeat(filled).padEnd(40)}] ${String(percent).padStart(3)}%  ${(loaded / 2 ** 20).toFixed(0)} of ${(total / 2 ** 20).toFixed(0)} MiB`,
    )
  }
}

// A command whose promise is left pending with nothing more to wait for (a bug) must not pass for a success.
let settled = false
process.on('exit', (code) => {
  if (settled || code !== 0) return
  console.error('safetensors-wasm: stopped before the command finished, with nothing left to wait for (a bug: please report it)')
  process.exitCode = 1
})

main(process.argv.slice(2)).then(
  (code) => {
    settled = true
    process.exitCode = code
  },
  (error) => {
    settled = true
    if (error instanceof UsageError) {
      console.error(`${error.message}\nsee safetensors-wasm --help`)
      process.exitCode = 2
      return
    }
    // Not a failure the library reports on purpose (the platform refusing something, or a bug): still one line.
    if (process.env.SAFETENSORS_WASM_DEBUG === '1') console.error(error)
    else
      console.error(
        `${error instanceof Error ? `${error.name}: ${error.message}` : String(error)} (SAFETENSORS_WASM_DEBUG=1 shows where)`.replace(/\s*\n\s*/g, ' '),
      )
    process.exitCode = 1
  },
)
