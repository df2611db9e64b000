// A GGUF rewritten with one of its conversion's steps undone, for the negative controls of test/integration/gguf-llama.test.ts:
// keys dropped or changed, tensors dropped or their bytes replaced. The file is read with @huggingface/gguf and
// written again with the converter's own container code (src/gguf/format.ts: the header, offsets, padding), which
// does not decide any value: every key and tensor not patched keeps the original file's bytes.
import { readFileSync, writeFileSync } from 'node:fs'
import { GGMLQuantizationType, type GGUFTypedMetadata, GGUFValueType, gguf } from '@huggingface/gguf'
import { alignUp, encodeHeader, type KeyValue } from '../src/gguf/format.ts'
import { type GgmlType, ggmlByteLength } from '../src/gguf/ggml-types.ts'

/** A tensor of the file: its name, dims in ggml's order (a row's length first), type and data. */
export interface GgufTensor {
  name: string
  dims: number[]
  type: GgmlType
  bytes: Uint8Array
}

export interface GgufPatch {
  /** Keys left out. */
  dropKeys?: string[]
  /** Keys set to a new value: [key, type, value] as the converter's encoder takes them. */
  setKeys?: KeyValue[]
  /** Tensors left out. */
  dropTensors?: string[]
  /** Tensors given another name (the new name by the old one). */
  renameTensors?: Record<string, string>
  /** A tensor's new data (of its length), or undefined to keep it. */
  tensor?: (tensor: GgufTensor) => Uint8Array | undefined
}

const SCALARS: Partial<Record<GGUFValueType, 'u32' | 'i32' | 'f32' | 'bool' | 'string'>> = {
  [GGUFValueType.UINT32]: 'u32',
  [GGUFValueType.INT32]: 'i32',
  [GGUFValueType.FLOAT32]: 'f32',
  [GGUFValueType.BOOL]: 'bool',
  [GGUFValueType.STRING]: 'string',
}
const TYPES: Partial<Record<GGMLQuantizationType, GgmlType>> = {
  [GGMLQuantizationType.F32]: 'F32',
  [GGMLQuantizationType.F16]: 'F16',
  [GGMLQuantizationType.BF16]: 'BF16',
  [GGMLQuantizationType.Q8_0]: 'Q8_0',
  [GGMLQuantizationType.MXFP4]: 'MXFP4',
}

/** The metadata of the GGUF at `path` as [key, type, value] entries, and its tensors with their data. */
async function readGguf(path: string): Promise<{ metadata: KeyValue[]; tensors: GgufTensor[] }> {
  const { typedMetadata, tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true, typedMetadata: true })
  const { version, tensor_count, kv_count, ...entries } = typedMetadata as GGUFTypedMetadata &
    Record<string, { type: GGUFValueType; subType?: GGUFValueType; value: unknown }>
  const metadata = Object.entries(entries).map(([key, { type, subType, value }]): KeyValue => {
    const scalar = SCALARS[type === GGUFValueType.ARRAY ? subType! : type]
    if (!scalar) throw new Error(`${path}: ${key} has a type the patcher does not write (${GGUFValueType[type]})`)
    return [key, type === GGUFValueType.ARRAY ? (`${scalar}[]` as KeyValue[1]) : scalar, value as KeyValue[2]]
  })
  const file = readFileSync(path)
  const tensors = tensorInfos.map((info) => {
    const type = TYPES[info.dtype]
    if (!type) throw new Error(`${path}: ${info.name} is ${GGMLQuantizationType[info.dtype]}`)
    const dims = info.shape.map(Number)
    const start = Number(tensorDataOffset + info.offset)
    const length = ggmlByteLength(
      type,
      dims.reduce((a, b) => a * b, 1),
    )
    return { name: info.name, dims, type, bytes: new Uint8Array(file.subarray(start, start + length)) }
  })
  return { metadata, tensors }
}

/** Writes the GGUF at `from`, patched, to `to`. */
export async function patchGguf(from: string, to: string, patch: GgufPatch): Promise<void> {
  const { metadata, tensors } = await readGguf(from)
  const set = new Map((patch.setKeys ?? []).map((kv) => [kv[0], kv]))
  const kept = metadata.filter(([key]) => !patch.dropKeys?.includes(key) && !set.has(key)).concat([...set.values()])
  const written = tensors
    .filter((t) => !patch.dropTensors?.includes(t.name))
    .map((t) => ({ ...t, name: patch.renameTensors?.[t.name] ?? t.name, bytes: patch.tensor?.(t) ?? t.bytes }))
  for (const [i, t] of written.entries())
    if (
      t.bytes.length !==
      ggmlByteLength(
        t.type,
        t.dims.reduce((a, b) => a * b, 1),
      )
    )
      throw new Error(`${t.name}: patched data of another length (tensor ${i})`)
  const { head, sizes, fileSize } = encodeHeader(kept, written)
  const out = new Uint8Array(fileSize)
  out.set(head)
  let offset = head.length
  for (const [i, t] of written.entries()) {
    out.set(t.bytes, offset)
    offset += alignUp(sizes[i])
  }
  writeFileSync(to, out)
}
