// writeGguf (Node entry): ggufStream into a file, written beside it under a temporary name and renamed
// into place once complete (src/node/atomic-files.ts), so a failure leaves the target as it was.

import type { GgmlType } from '../gguf/ggml-types.ts'
import { type GgufOptions, type GgufStream, planGguf } from '../gguf/index.ts'
import type { ModelFiles, ModelFolder } from '../sources/source.ts'
import { fileSink } from './atomic-files.ts'

/** What {@link writeGguf} wrote. */
export interface GgufWritten {
  /** Tensors of each type. */
  types: Partial<Record<GgmlType, number>>
  /** Tensors in all. */
  tensors: number
  /** The file's size in bytes. */
  bytes: number
  /** What the GGUF says otherwise than config.json, one sentence each, as {@link GgufStream}'s `notes`. */
  notes: readonly string[]
}

/**
 * Writes the GGUF of a model (see {@link ggufStream}) to `output`, atomically.
 * @throws {@link index!SafetensorsError} the codes of {@link ggufStream}, before anything is written; `Io` when
 * the output cannot be written (the message names it), with the target left untouched; `Aborted`.
 * @throws TypeError as {@link ggufStream} does.
 */
export async function writeGguf(input: string | URL | ModelFiles | ModelFolder, output: string, options: GgufOptions = {}): Promise<GgufWritten> {
  const plan = await planGguf(input, options)
  const reader = plan.stream.getReader()
  let sink: Awaited<ReturnType<typeof fileSink>> | undefined
  try {
    sink = await fileSink(output)
    for (let position = 0; ; ) {
      const { done, value } = await reader.read()
      if (done) break
      await sink.write(value, position)
      position += value.length
    }
    await sink.commit()
  } catch (error) {
    await reader.cancel(error).catch(() => {})
    await sink?.abort(error)
    throw error
  }
  const types: Partial<Record<GgmlType, number>> = {}
  for (const t of plan.tensors) types[t.type] = (types[t.type] ?? 0) + 1
  return { types, tensors: plan.tensors.length, bytes: plan.fileSize, notes: plan.notes }
}
