#!/usr/bin/env node
// safetensors-wasm inspect | validate: reads only each file's length prefix and header.
import { SafetensorsError, readHeader, fileSource, type Header, type DType } from './index.ts'

const USAGE = `usage:
  safetensors-wasm inspect <file> [--json]
  safetensors-wasm validate <file>... [--json]`

class UsageError extends Error {}

async function main(args: string[]): Promise<number> {
  const json = args.includes('--json')
  const unknown = args.find((a) => a.startsWith('--') && a !== '--json')
  if (unknown) throw new UsageError(`unknown option ${unknown}`)
  const [command, ...files] = args.filter((a) => a !== '--json')
  if (command === 'inspect' && files.length === 1) return inspect(files[0], json)
  if (command === 'validate' && files.length > 0) return validate(files, json)
  if (command === 'help' || args.includes('-h') || args.length === 0) {
    console.log(USAGE)
    return args.length === 0 ? 2 : 0
  }
  throw new UsageError(command === 'inspect' || command === 'validate' ? `${command}: wrong number of files` : `unknown command ${command ?? ''}`)
}

async function loadHeader(path: string): Promise<Header> {
  const source = await fileSource(path)
  try {
    return await readHeader(source)
  } finally {
    await source.close?.()
  }
}

async function validate(files: string[], json: boolean): Promise<number> {
  let invalid = 0
  for (const file of files) {
    try {
      const header = await loadHeader(file)
      console.log(json ? JSON.stringify({ file, valid: true, tensors: header.tensors.length }) : `${file}: valid, ${header.tensors.length} tensors`)
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

function summarize(header: Header): { total: Totals; byDtype: Partial<Record<DType, Totals>> } {
  const total: Totals = { tensors: 0, parameters: 0, bytes: 0 }
  const byDtype: Partial<Record<DType, Totals>> = {}
  for (const info of header.tensors) {
    const parameters = info.shape.reduce((a, b) => a * b, 1)
    for (const t of [total, (byDtype[info.dtype] ??= { tensors: 0, parameters: 0, bytes: 0 })]) {
      t.tensors++
      t.parameters += parameters
      t.bytes += info.byteLength
    }
  }
  return { total, byDtype }
}

async function inspect(file: string, json: boolean): Promise<number> {
  let header: Header
  try {
    header = await loadHeader(file)
  } catch (error) {
    if (!(error instanceof SafetensorsError)) throw error
    console.error(`${file}: ${error.code}: ${error.message}`)
    return 1
  }
  const { total, byDtype } = summarize(header)
  if (json) {
    const { headerSize, dataStart, fileSize, metadata, tensors } = header
    console.log(JSON.stringify({ file, fileSize, headerSize, dataStart, metadata, tensors, totals: { ...total, byDtype } }, null, 2))
    return 0
  }
  const count = (n: number) => n.toLocaleString('en-US')
  console.log(`${file}: ${count(header.fileSize)} bytes, header ${count(header.headerSize)} bytes, data from byte ${count(header.dataStart)}`)
  if (header.metadata) {
    console.log('\nmetadata:')
    for (const [key, value] of Object.entries(header.metadata)) console.log(`  ${key}: ${value}`)
  }
  const rows = header.tensors.map((t) => [t.name, t.dtype, `[${t.shape.join(', ')}]`, count(t.byteLength)])
  const titles = ['name', 'dtype', 'shape', 'bytes']
  const widths = titles.map((title, i) => Math.max(title.length, ...rows.map((r) => r[i].length)))
  const line = (cells: string[]) => cells.map((c, i) => (i === 3 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd()
  console.log(`\n${line(titles)}`)
  for (const row of rows) console.log(line(row))
  console.log(`\n${count(total.tensors)} tensors, ${count(total.parameters)} parameters, ${count(total.bytes)} bytes`)
  for (const [dtype, t] of Object.entries(byDtype)) {
    console.log(`  ${dtype.padEnd(12)} ${count(t.tensors).padStart(6)} tensors  ${count(t.parameters).padStart(14)} parameters  ${count(t.bytes).padStart(14)} bytes`)
  }
  return 0
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
