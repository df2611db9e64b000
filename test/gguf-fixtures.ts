// What the GGUF tests share: the test models of test/fixtures/gguf/ (made by scripts/make-gguf-models.py), copies
// of them changed by a test, and a GGUF file read back with @huggingface/gguf, a reader of its own.
import { createHash } from 'node:crypto'
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { GGMLQuantizationType, type GGUFParseOutput, type GGUFTypedMetadata, gguf } from '@huggingface/gguf'

export const GGUF_FIXTURES = fileURLToPath(new URL('./fixtures/gguf/', import.meta.url))

export const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8'))

/** A GGUF file's metadata (typed) and tensor infos, as @huggingface/gguf reads them. */
export async function parseGguf(path: string): Promise<GGUFParseOutput & { typedMetadata: GGUFTypedMetadata }> {
  return gguf(path, { allowLocalFile: true, typedMetadata: true })
}

/** Bytes per value of each type the converter writes (ggml's blocks: Q8_0's 34 bytes and MXFP4's 17 per 32 values). */
export const BYTES_PER_VALUE: Record<string, number> = { F32: 4, F16: 2, BF16: 2, Q8_0: 34 / 32, MXFP4: 17 / 32 }

/** Each tensor of the GGUF at `path`: its name, type, shape (ggml's order) and data, in the file's order. */
export async function ggufTensors(path: string): Promise<Array<{ name: string; type: string; shape: number[]; bytes: Uint8Array }>> {
  const file = readFileSync(path)
  const { tensorInfos, tensorDataOffset } = await parseGguf(path)
  return tensorInfos.map((t) => {
    const type = GGMLQuantizationType[t.dtype]
    const shape = t.shape.map(Number)
    const elements = shape.reduce((a, b) => a * b, 1)
    const start = Number(tensorDataOffset + t.offset)
    return { name: t.name, type, shape, bytes: file.subarray(start, start + elements * BYTES_PER_VALUE[type]) }
  })
}

/** Each tensor of the GGUF at `path` with the sha256 of its data instead of the data (as llama-cpp-f16.json lists them). */
export async function ggufTensorHashes(path: string): Promise<Array<{ name: string; type: string; shape: number[]; sha256: string }>> {
  return (await ggufTensors(path)).map(({ bytes, ...t }) => ({ ...t, sha256: createHash('sha256').update(bytes).digest('hex') }))
}

/** Copies of the test models in `dir`, each in a folder `name` of its own. */
export function modelCopies(dir: string) {
  /** A copy of a test model changed by `change`. */
  const modelCopy = (model: string, name: string, change: (folder: string) => void): string => {
    const folder = join(dir, name)
    cpSync(join(GGUF_FIXTURES, model), folder, { recursive: true })
    change(folder)
    return folder
  }
  /** A copy of a test model whose config.json `edit` changes. */
  const withConfig = (model: string, name: string, edit: (config: Record<string, unknown>) => void) =>
    modelCopy(model, name, (f) => {
      const config = readJson<Record<string, unknown>>(join(f, 'config.json'))
      edit(config)
      writeFileSync(join(f, 'config.json'), JSON.stringify(config))
    })
  return { modelCopy, withConfig }
}
