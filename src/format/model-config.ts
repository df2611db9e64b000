// The JSON files of a Hugging Face model folder (read as objects, errors naming the file), and config.json as
// convertModel copies it: the dtype it names (torch_dtype, or dtype as transformers writes it since 4.56)
// becomes the converted weights' dtype, a quantized model's quantization block goes, and every other byte stays. Parsing and writing it again would not
// do: JSON.parse turns 10000.0 into 10000 and 1e-05 into 0.00001, and transformers checks the types of some
// fields (rope_scaling's factor must be a float).
import type { ConvertTarget } from '../core/convert.ts'
import { type JsonValue, jsonFileError, jsonText, parseJson } from './json-values.ts'

/** transformers' names of the dtypes a conversion writes: str(torch.bfloat16) without "torch.". */
const TORCH_DTYPE: Record<ConvertTarget, string> = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' }

const DTYPE_KEYS = new Set(['torch_dtype', 'dtype'])

/** An open object (undefined for an array): whether its dtype fields name the weights, the key being read. */
type Frame = { rewrite: boolean; key: string; atKey: boolean } | undefined

/** The largest config.json rewritten (the Hub's largest are tens of kilobytes). */
const MAX_CONFIG_BYTES = 16 << 20

/** The text and value of a JSON file that must hold an object; InvalidHeaderDeserialization naming `where` otherwise. */
export function readJsonObject(bytes: Uint8Array, where: string): { text: string; value: JsonValue } {
  const text = jsonText(bytes, where)
  const value = parseJson(text, where)
  if (!value.isObject) throw jsonFileError(where, 'not a JSON object')
  return { text, value }
}

/** Checked before the file is read, so that its size bounds the memory a rewrite takes. */
export function checkConfigSize(where: string, size: number): void {
  if (size > MAX_CONFIG_BYTES) throw jsonFileError(where, `it is ${size} bytes, above the limit of ${MAX_CONFIG_BYTES} for a config.json`)
}

/**
 * The bytes of config.json with every "torch_dtype" and "dtype" string naming `dtype`: in the top-level
 * object and in its sub-configs (objects under a key ending in "_config", such as text_config and
 * vision_config, which transformers saves with a dtype of their own). Throws InvalidHeaderDeserialization
 * naming `where` when the bytes are not UTF-8 text of a JSON object.
 */
export function withDtype(bytes: Uint8Array, dtype: ConvertTarget, where: string): Uint8Array {
  const { text } = readJsonObject(bytes, where)
  // The text is valid JSON: a walk over its strings and brackets finds every key and value.
  const name = JSON.stringify(TORCH_DTYPE[dtype])
  const open: Frame[] = []
  let out = ''
  let copied = 0
  for (let at = 0; at < text.length; at++) {
    const c = text[at]
    const top = open[open.length - 1]
    if (c === '"') {
      let end = at + 1
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1
      end++
      if (top?.atKey) top.key = JSON.parse(text.slice(at, end)) as string
      else if (top?.rewrite && DTYPE_KEYS.has(top.key)) {
        out += text.slice(copied, at) + name
        copied = end
      }
      at = end - 1
    } else if (c === '{') {
      open.push({ rewrite: open.length === 0 || (top?.rewrite === true && top.key.endsWith('_config')), key: '', atKey: true })
    } else if (c === '[') open.push(undefined)
    else if (c === '}' || c === ']') open.pop()
    else if (c === ':' && top) top.atKey = false
    else if (c === ',' && top) top.atKey = true
  }
  return new TextEncoder().encode(out + text.slice(copied))
}

/** The keys of a quantized model's config.json that say how it is quantized (MLX writes both). */
const QUANTIZATION_KEYS = new Set(['quantization_config', 'quantization'])

/** The end of the JSON value at `at` (or after the whitespace there) in valid JSON `text`. */
function valueEnd(text: string, at: number): number {
  while (/\s/.test(text[at])) at++
  let depth = 0
  for (let i = at; i < text.length; i++) {
    const c = text[i]
    if (depth === 0 && /[\s,}\]]/.test(c)) return i
    if (c === '"') {
      i++
      while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1
      if (depth === 0) return i + 1
    } else if (c === '{' || c === '[') depth++
    else if ((c === '}' || c === ']') && --depth === 0) return i + 1
  }
  return text.length
}

/**
 * The bytes of config.json without its quantization block (`quantization_config`, and MLX's `quantization`), as
 * the dequantized model's: the other members keep their bytes and the separators before them. Throws
 * InvalidHeaderDeserialization naming `where` when the bytes are not UTF-8 text of a JSON object.
 */
export function withoutQuantization(bytes: Uint8Array, where: string): Uint8Array {
  const { text } = readJsonObject(bytes, where)
  // The top-level members' spans: from a key's quote to its value's end.
  const members: Array<{ start: number; end: number; key: string }> = []
  let at = text.indexOf('{') + 1
  for (;;) {
    const start = text.indexOf('"', at)
    const object = text.indexOf('}', at)
    // An empty object has no key before its brace.
    if (start < 0 || (object >= 0 && object < start)) break
    const keyEnd = valueEnd(text, start)
    const valueStart = text.indexOf(':', keyEnd) + 1
    const end = valueEnd(text, valueStart)
    members.push({ start, end, key: JSON.parse(text.slice(start, keyEnd)) as string })
    at = end
    if (text.slice(at).trimStart()[0] !== ',') break
  }
  const kept = members.filter((member) => !QUANTIZATION_KEYS.has(member.key))
  if (kept.length === members.length) return bytes
  if (kept.length === 0) return new TextEncoder().encode(text.slice(0, members[0].start).trimEnd() + text.slice(members.at(-1)!.end).trimStart())
  // Each kept member after the first keeps the separator that came before it.
  let out = text.slice(0, members[0].start)
  kept.forEach((member, i) => {
    const before = members.indexOf(member)
    out += (i === 0 ? '' : text.slice(members[before - 1].end, member.start)) + text.slice(member.start, member.end)
  })
  return new TextEncoder().encode(out + text.slice(members.at(-1)!.end))
}
