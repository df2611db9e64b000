// convertFile / convertModel (Node entry): rewrite a file (or a sharded model) with its floating-point tensors in
// another dtype, streaming chunk by chunk so memory stays bounded whatever the file size. The output is
// written beside the target under a temporary name and renamed at the end (see fileSink).
import { mkdir, rename, rm } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { byteLengthOf, convert, swapElements } from './convert.ts'
import type { DType } from './dtypes.ts'
import { open, type OpenOptions, type SafetensorsFile, type Source } from './file.ts'
import type { TensorInfo } from './header.ts'
import { openModel } from './model.ts'
import { readInto } from './source.ts'
import { fileSink, writeIndex } from './node-writer.ts'
import { SafetensorsWriter } from './writer.ts'

/** The dtypes that hold floating-point numbers; the others (integers, BOOL, C64) are copied as they are. */
const FLOATS: ReadonlySet<DType> = new Set<DType>(['F4', 'F6_E2M3', 'F6_E3M2', 'F8_E5M2', 'F8_E4M3', 'F8_E8M0', 'F8_E4M3FNUZ', 'F8_E5M2FNUZ', 'F16', 'BF16', 'F32', 'F64'])

export type ConvertTarget = 'F32' | 'F16' | 'BF16'

export interface ConvertFileOptions extends OpenOptions {
  dtype: ConvertTarget
  /** Called after each chunk with the input bytes done so far and in all. */
  onProgress?: (done: number, total: number) => void
}

/** Elements per chunk: bounds memory (about 40 MiB at most for F64 input) and is a multiple of 4 for F4/F6. */
const CHUNK_ELEMENTS = 4 << 20

/** The dtype `info` gets in the output. */
function targetOf(info: TensorInfo, dtype: ConvertTarget): DType {
  return FLOATS.has(info.dtype) ? dtype : info.dtype
}

/** Converts one chunk of little-endian bytes; through F32 when no kernel goes straight there. */
function convertChunk(bytes: Uint8Array, from: DType, to: DType): Uint8Array {
  if (from === to) return bytes
  const viaF32 = from === 'F32' || to === 'F32' ? convert(bytes, from, to) : convert(convert(bytes, from, 'F32'), 'F32', to)
  return new Uint8Array(viaF32.buffer, viaF32.byteOffset, viaF32.byteLength)
}

async function convertOne(file: SafetensorsFile, output: string, options: ConvertFileOptions, progress: { done: number; total: number }): Promise<number> {
  const declarations = file.header.tensors.map((info) => ({ name: info.name, dtype: targetOf(info, options.dtype), shape: info.shape }))
  const writer = SafetensorsWriter.create(await fileSink(output), declarations, { metadata: file.metadata })
  try {
    for (const info of file.header.tensors) {
      const to = targetOf(info, options.dtype)
      const elements = info.shape.reduce((a, b) => a * b, 1)
      for (let first = 0; first < elements; first += CHUNK_ELEMENTS) {
        const count = Math.min(CHUNK_ELEMENTS, elements - first)
        const bytes = new Uint8Array(byteLengthOf(info.dtype, count))
        await readInto(file.source, file.header.dataStart + info.dataOffsets[0] + byteLengthOf(info.dtype, first), bytes, options.signal)
        // A legacy big-endian input (open's byteOrder) still makes a little-endian file.
        if (file.byteOrder === 'big') swapElements(bytes, info.dtype)
        await writer.write(info.name, convertChunk(bytes, info.dtype, to))
        progress.done += bytes.length
        options.onProgress?.(progress.done, progress.total)
      }
    }
    await writer.close()
  } catch (error) {
    await writer.abort(error)
    throw error
  }
  return writer.layout.fileSize - writer.layout.dataStart
}

/** Writes `output` as `input` with every floating-point tensor in `options.dtype`. */
export async function convertFile(input: Source, output: string, options: ConvertFileOptions): Promise<void> {
  const file = await open(input, options)
  try {
    await convertOne(file, output, options, { done: 0, total: file.header.fileSize - file.header.dataStart })
  } finally {
    await file.close()
  }
}

/**
 * Converts a sharded model shard by shard into `folder`: the same shard names, and an index whose
 * total_size and weight_map describe the new shards. Shards are written under temporary names and
 * renamed only once all of them are complete, so a failure leaves the folder as it was.
 */
export async function convertModel(index: string | URL, folder: string, options: ConvertFileOptions): Promise<void> {
  const model = await openModel(index, options)
  const pending: Array<[temporary: string, final: string]> = []
  try {
    await mkdir(folder, { recursive: true })
    const progress = { done: 0, total: [...model.shards.values()].reduce((sum, f) => sum + f.header.fileSize - f.header.dataStart, 0) }
    const weightMap: Record<string, string> = {}
    let totalSize = 0
    for (const [name, file] of model.shards) {
      const final = join(folder, name)
      pending.push([`${final}.converting`, final])
      totalSize += await convertOne(file, `${final}.converting`, options, progress)
      for (const tensor of file.names()) weightMap[tensor] = name
    }
    for (const [temporary, final] of pending) await rename(temporary, final)
    pending.length = 0
    const { total_size: _, ...metadata } = model.metadata ?? {}
    await writeIndex(join(folder, basename(String(index).endsWith('.json') ? String(index) : 'model.safetensors.index.json')), totalSize, weightMap, metadata)
  } finally {
    await Promise.all(pending.map(([temporary]) => rm(temporary, { force: true })))
    await model.close()
  }
}
