// The quantized checkpoints of test/fixtures/quantized (made by scripts/make-quantized-models.py, whose README
// says what each holds): their folders, their reference.json, and the inconsistent variants of mutations.json
// made as copies. Nothing here uses the library: the expected values are the references' goldens.
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { encodeValue } from './float-reference.ts'
import { buildFile, headerOf, type TensorSpec, tensorBytes } from './read-helpers.ts'

export const QUANTIZED = fileURLToPath(new URL('./fixtures/quantized/', import.meta.url))

/** The fixture folders, sorted. */
export const FOLDERS = readdirSync(QUANTIZED)
  .filter((name) => statSync(join(QUANTIZED, name)).isDirectory())
  .sort()

/** What reference.json says of a folder (the fields the tests use). */
export interface Reference {
  /** The transformers class of the model, which its config.json leaves out. */
  architecture: string
  /** The dtype the reference computes in: the goldens' dtype of every quantized tensor. */
  golden_dtype: 'F32' | 'F16' | 'BF16'
  /** Each logical tensor: its dtype, shape, and the stored parts it is read from (null: stored as it is). */
  tensors: Record<string, { dtype: string; shape: number[]; stored: string[] | null }>
}

export function referenceOf(folder: string): Reference {
  return JSON.parse(readFileSync(join(QUANTIZED, folder, 'reference.json'), 'utf8'))
}

/** The quantization method a fixture's folder is of (as `Quantization.method` names it), by its name's first word. */
export function methodOf(folder: string): string {
  const methods: Record<string, string> = {
    mlx: 'mlx',
    gptq: 'gptq',
    awq: 'awq',
    bnb: 'bitsandbytes',
    fp8: 'fp8',
    mxfp4: 'mxfp4',
    ct: 'compressed-tensors',
    modelopt: 'nvfp4',
  }
  return methods[folder.split('-')[0]]
}

/** The logical tensors a folder quantizes (those read from stored parts). */
export function quantizedNames(folder: string): string[] {
  return Object.entries(referenceOf(folder).tensors)
    .filter(([, t]) => t.stored !== null)
    .map(([name]) => name)
}

/** The stored tensors of a fixture's model, from its files' headers: dtype, shape and byte length by name. */
export function storedOf(folder: string): Map<string, { dtype: string; shape: number[]; byteLength: number }> {
  const dir = join(QUANTIZED, folder)
  return new Map(
    weightFiles(dir).flatMap((file) =>
      Object.entries(headerOf(new Uint8Array(readFileSync(join(dir, file)))).tensors).map(
        ([
          name,
          {
            dtype,
            shape,
            data_offsets: [begin, end],
          },
        ]) => [name, { dtype, shape, byteLength: end - begin }] as const,
      ),
    ),
  )
}

/** The safetensors files of a folder's model (not its golden). */
export function weightFiles(folder: string): string[] {
  return readdirSync(folder).filter((name) => name.endsWith('.safetensors') && name !== 'golden.safetensors')
}

type Op =
  | { op: 'removeTensor'; tensor: string }
  | { op: 'replaceTensor'; tensor: string; dtype: string; shape: number[]; values?: number[]; utf8?: string }
  | { op: 'setConfig'; path: string[]; value: unknown }

export interface Mutation {
  name: string
  folder: string
  ops: Op[]
  /** The logical tensor whose read (if the open does not fail first) fails. */
  read: string
  expect: { code: 'InvalidQuantization' | 'UnsupportedQuantization'; mentions: string[] }
}

export const MUTATIONS: Mutation[] = JSON.parse(readFileSync(join(QUANTIZED, 'mutations.json'), 'utf8')).mutations

/** The bytes of `values` as `dtype`, little-endian. */
function encode(dtype: string, values: number[]): Uint8Array {
  const typed =
    dtype === 'F32'
      ? Float32Array.from(values)
      : dtype === 'I32'
        ? Int32Array.from(values)
        : dtype === 'I64'
          ? BigInt64Array.from(values, BigInt)
          : dtype === 'F16' || dtype === 'BF16'
            ? Uint16Array.from(values, (v) => encodeValue(dtype, v))
            : Uint8Array.from(values)
  return new Uint8Array(typed.buffer)
}

/** A copy of `mutation`'s folder with its ops applied, in a new temporary folder; its path. */
export function mutatedCopy(mutation: Mutation): string {
  const folder = join(mkdtempSync(join(tmpdir(), 'quant-mutation-')), mutation.folder)
  cpSync(join(QUANTIZED, mutation.folder), folder, { recursive: true })
  const indexPath = join(folder, 'model.safetensors.index.json')
  for (const op of mutation.ops) {
    if (op.op === 'setConfig') {
      const config = JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8'))
      let at = config
      for (const key of op.path.slice(0, -1)) at = at[key]
      at[op.path.at(-1)!] = op.value
      writeFileSync(join(folder, 'config.json'), JSON.stringify(config, null, 2))
      continue
    }
    const file = weightFiles(folder).find((name) => op.tensor in headerOf(readFileSync(join(folder, name))).tensors)!
    const bytes = new Uint8Array(readFileSync(join(folder, file)))
    const { tensors, metadata } = headerOf(bytes)
    const specs: TensorSpec[] = Object.entries(tensors)
      .sort(([, a], [, b]) => a.data_offsets[0] - b.data_offsets[0])
      .filter(([name]) => op.op !== 'removeTensor' || name !== op.tensor)
      .map(([name, t]) =>
        op.op === 'replaceTensor' && name === op.tensor
          ? { name, dtype: op.dtype, shape: op.shape, bytes: op.utf8 !== undefined ? new TextEncoder().encode(op.utf8) : encode(op.dtype, op.values!) }
          : { name, dtype: t.dtype, shape: t.shape, bytes: tensorBytes(bytes, name) },
      )
    writeFileSync(join(folder, file), buildFile(specs, metadata))
    if (op.op === 'removeTensor' && existsSync(indexPath)) {
      const index = JSON.parse(readFileSync(indexPath, 'utf8'))
      delete index.weight_map[op.tensor]
      writeFileSync(indexPath, JSON.stringify(index, null, 2))
    }
  }
  return folder
}

/** GPT-2's byte-level alphabet: the 256 tokens of a byte-level BPE vocabulary without merges. */
export function byteLevelTokenizer(): string {
  const printable = [...Array(256).keys()].filter((b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
  let extra = 0
  const vocab = Object.fromEntries([...Array(256).keys()].map((b) => [String.fromCodePoint(printable.includes(b) ? b : 256 + extra++), b]))
  return JSON.stringify({
    model: { type: 'BPE', vocab, merges: [] },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    decoder: { type: 'ByteLevel' },
    added_tokens: [],
  })
}
