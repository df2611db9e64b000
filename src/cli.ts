#!/usr/bin/env node
// safetensors-wasm inspect | validate: read only each file's length prefix and header (and, with
// --tensor, that one tensor), from a path or an http(s) URL.
import { stat } from 'node:fs/promises'
import {
  SafetensorsError,
  open,
  openModel,
  tensorStats,
  convertFile,
  convertModel,
  type ConvertTarget,
  type DType,
  type Header,
  type SafetensorsFile,
  type SafetensorsModel,
  type TensorInfo,
  type ProgressCallback,
} from './node.ts'

const USAGE = `usage:
  safetensors-wasm inspect <file|url|model> [--json] [--tensor NAME]
  safetensors-wasm validate <file|url|model>... [--json]
  safetensors-wasm convert <in> <out> [--dtype F32|F16|BF16] [--max-shard-size SIZE]
      floating-point tensors become --dtype, others are copied; <in> may be a
      model.safetensors.index.json (or its folder), and <out> is then a folder;
      --max-shard-size (2GB, 500MB, 1GiB) reshards into a folder with an index
  a model is a model.safetensors.index.json (path or URL) or a folder holding one`

class UsageError extends Error {}

/** Splits `--flag` and `--option value` arguments from positional ones. */
function parseArgs(args: string[], flags: string[], options: string[]): { positional: string[]; set: Map<string, string | true> } {
  const positional: string[] = []
  const set = new Map<string, string | true>()
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (!arg.startsWith('--')) positional.push(arg)
    else if (flags.includes(arg)) set.set(arg, true)
    else if (options.includes(arg) && i + 1 < args.length) set.set(arg, args[++i])
    else throw new UsageError(options.includes(arg) ? `${arg} needs a value` : `unknown option ${arg}`)
  }
  return { positional, set }
}

async function main(args: string[]): Promise<number> {
  const { positional, set } = parseArgs(args, ['--json', '--help'], ['--tensor', '--dtype', '--max-shard-size'])
  const json = set.has('--json')
  const [command, ...files] = positional
  const tensor = set.get('--tensor') as string | undefined
  if (tensor !== undefined && command !== 'inspect') throw new UsageError('--tensor goes with inspect')
  if (command === 'inspect' && files.length === 1) return inspect(files[0], json, tensor)
  if (command === 'validate' && files.length > 0) return validate(files, json)
  if (command === 'convert' && files.length === 2) return convertCommand(files[0], files[1], set.get('--dtype'), set.get('--max-shard-size'))
  if (command === 'help' || set.has('--help') || args.includes('-h') || args.length === 0) {
    console.log(USAGE)
    return args.length === 0 ? 2 : 0
  }
  throw new UsageError(['inspect', 'validate', 'convert'].includes(command) ? `${command}: wrong number of files` : `unknown command ${command ?? ''}`)
}

/** A model index (a path or URL ending in .index.json) or a local folder is read as a sharded model. */
async function isModel(location: string): Promise<boolean> {
  if (location.endsWith('.index.json')) return true
  return !/^https?:\/\//i.test(location) && (await stat(location).catch(() => undefined))?.isDirectory() === true
}

/** Opens a sharded model and checks its index against its shards: every listed tensor is where the index says, and nothing is unlisted. */
async function checkedModel(location: string): Promise<SafetensorsModel> {
  const model = await openModel(location)
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

interface Checked {
  tensors: number
  shards?: Array<{ file: string; tensors: number }>
}

async function check(location: string): Promise<Checked> {
  if (!(await isModel(location))) {
    const file = await open(location)
    await file.close()
    return { tensors: file.header.tensors.length }
  }
  const model = await checkedModel(location)
  await model.close()
  const shards = [...model.shards].map(([file, shard]) => ({ file, tensors: shard.header.tensors.length }))
  return { tensors: model.names().length, shards }
}

async function validate(files: string[], json: boolean): Promise<number> {
  let invalid = 0
  for (const file of files) {
    try {
      const { tensors, shards } = await check(file)
      if (json) console.log(JSON.stringify({ file, valid: true, tensors, ...(shards && { shards }) }))
      else {
        console.log(`${file}: valid, ${count(tensors, 'tensor')}${shards ? ` in ${count(shards.length, 'shard')}` : ''}`)
        for (const shard of shards ?? []) console.log(`  ${shard.file}: valid, ${count(shard.tensors, 'tensor')}`)
      }
    } catch (error) {
      if (!(error instanceof SafetensorsError)) throw error
      invalid++
      console.log(json ? JSON.stringify({ file, valid: false, code: error.code, message: error.message }) : `${file}: INVALID ${error.code}: ${error.message}`)
    }
  }
  return invalid > 0 ? 1 : 0
}

interface Totals {
  tensors: number
  parameters: number
  bytes: number
}

function summarize(tensors: readonly TensorInfo[]): { total: Totals; byDtype: Partial<Record<DType, Totals>> } {
  const total: Totals = { tensors: 0, parameters: 0, bytes: 0 }
  const byDtype: Partial<Record<DType, Totals>> = {}
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
  let source: SafetensorsFile | SafetensorsModel
  try {
    source = (await isModel(location)) ? await checkedModel(location) : await open(location)
  } catch (error) {
    if (!(error instanceof SafetensorsError)) throw error
    console.error(`${location}: ${error.code}: ${error.message}`)
    return 1
  }
  try {
    if (tensor !== undefined) return await inspectTensor(source, tensor, json)
    if ('header' in source) printHeader(location, source.header, json)
    else printModel(location, source, json)
    return 0
  } finally {
    await source.close()
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

function printModel(location: string, model: SafetensorsModel, json: boolean): void {
  const shardOf = new Map(model.names().map((name) => [name, '']))
  const shards = [...model.shards].map(([file, shard]) => {
    const tensors = shard.header.tensors.filter((t) => shardOf.has(t.name))
    for (const t of tensors) shardOf.set(t.name, file)
    return { file, fileSize: shard.header.fileSize, headerSize: shard.header.headerSize, ...summarize(tensors).total }
  })
  const infos = model.names().map((name) => model.info(name))
  const totals = summarize(infos)
  if (json) {
    const tensors = infos.map((t) => ({ ...t, shard: shardOf.get(t.name) }))
    console.log(JSON.stringify({ model: location, metadata: model.metadata, shards, tensors, totals: { ...totals.total, byDtype: totals.byDtype } }, null, 2))
    return
  }
  const fileBytes = shards.reduce((sum, s) => sum + s.fileSize, 0)
  console.log(`${location}: sharded model, ${count(shards.length, 'shard')}, ${count(fileBytes)} bytes in all`)
  printMetadata(model.metadata)
  console.log('\nshards:')
  const width = Math.max(...shards.map((s) => s.file.length))
  for (const s of shards) console.log(`  ${s.file.padEnd(width)}  ${count(s.tensors, 'tensor').padStart(13)}  ${count(s.fileSize, 'byte').padStart(20)}`)
  printTable(
    infos.map((t) => tensorRow(t, shardOf.get(t.name))),
    ['shard'],
  )
  printTotals(totals)
}

function printMetadata(metadata: Record<string, unknown> | null): void {
  if (!metadata) return
  console.log('\nmetadata:')
  for (const [key, value] of Object.entries(metadata)) console.log(`  ${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
}

function tensorRow(t: TensorInfo, ...extra: Array<string | undefined>): string[] {
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

/** Reads one tensor as F32 and prints its statistics (computed in wasm). */
async function inspectTensor(file: SafetensorsFile | SafetensorsModel, name: string, json: boolean): Promise<number> {
  let stats
  try {
    const info = file.info(name)
    const onProgress = process.stderr.isTTY ? progressBar() : undefined
    const tensor = await file.getTensor(name, { dtype: 'F32', onProgress }).finally(() => onProgress && process.stderr.write('\n'))
    stats = { name, dtype: info.dtype, shape: info.shape, ...tensorStats(tensor.data, { bins: 10 }) }
  } catch (error) {
    if (!(error instanceof SafetensorsError)) throw error
    console.error(`${error.code}: ${error.message}`)
    return 1
  }
  if (json) {
    console.log(JSON.stringify(stats, null, 2))
    return 0
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
  return 0
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

async function convertCommand(input: string, output: string, dtype: string | true | undefined, maxShardSize: string | true | undefined): Promise<number> {
  if (dtype !== undefined && dtype !== 'F32' && dtype !== 'F16' && dtype !== 'BF16') throw new UsageError('--dtype takes F32, F16 or BF16')
  if (dtype === undefined && maxShardSize === undefined) throw new UsageError('convert needs --dtype F32|F16|BF16, --max-shard-size SIZE or both')
  const options = {
    dtype: dtype as ConvertTarget | undefined,
    maxShardSize: maxShardSize === undefined ? undefined : parseSize(String(maxShardSize)),
    onProgress: process.stderr.isTTY ? progressBar() : undefined,
  }
  try {
    await ((await isModel(input)) ? convertModel(input, output, options) : convertFile(input, output, options))
  } catch (error) {
    if (!(error instanceof SafetensorsError)) throw error
    console.error(`${input}: ${error.code}: ${error.message}`)
    return 1
  } finally {
    if (options.onProgress) process.stderr.write('\n')
  }
  return 0
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error) => {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n${USAGE}`)
      process.exitCode = 2
    } else {
      console.error(error)
      process.exitCode = 1
    }
  },
)
