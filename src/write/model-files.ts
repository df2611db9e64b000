// The files of a sharded model as transformers writes them: which tensors go to which shard, the shards'
// names, and model.safetensors.index.json's bytes.

import { compareCodePoints } from '../format/layout.ts'
import type { ModelIndex } from '../format/model-index.ts'

export const DEFAULT_MAX_SHARD_SIZE = 5_000_000_000

/**
 * Splits tensors into shards as transformers does: in the order given, a new shard whenever the next
 * tensor would take the current one past `maxShardSize` (a larger tensor gets a shard alone). Returns
 * each shard's tensors and its file name: model-0000i-of-0000n.safetensors, or model.safetensors alone.
 */
export function planShards<T>(tensors: readonly T[], byteLength: (t: T) => number, maxShardSize: number): Array<{ file: string; tensors: T[] }> {
  if (!(maxShardSize > 0)) throw new RangeError(`maxShardSize must be a positive number of bytes, got ${maxShardSize}`)
  const shards: T[][] = []
  let size = 0
  for (const t of tensors) {
    const bytes = byteLength(t)
    if (shards.length === 0 || (size + bytes > maxShardSize && size > 0)) {
      shards.push([])
      size = 0
    }
    shards[shards.length - 1].push(t)
    size += bytes
  }
  if (shards.length === 0) shards.push([])
  const count = shards.length
  const file = (i: number) => (count === 1 ? 'model.safetensors' : `model-${String(i + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.safetensors`)
  return shards.map((shard, i) => ({ file: file(i), tensors: shard }))
}

/**
 * model.safetensors.index.json as transformers writes it: Python's json.dumps(indent=2, sort_keys=True)
 * and a newline, so keys in code point order and everything past ASCII as \u escapes (ensure_ascii).
 */
export function indexBytes(index: ModelIndex): Uint8Array {
  return new TextEncoder().encode(`${pythonJson(index, '')}\n`)
}

/** json.dumps(value, indent=2, sort_keys=True): built by hand, since JS objects reorder integer-like keys. */
function pythonJson(value: unknown, indent: string): string {
  const inner = `${indent}  `
  if (Array.isArray(value)) {
    return value.length === 0 ? '[]' : `[\n${value.map((v) => inner + pythonJson(v, inner)).join(',\n')}\n${indent}]`
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => compareCodePoints(a, b))
    return entries.length === 0 ? '{}' : `{\n${entries.map(([k, v]) => `${inner}${pythonJson(k, inner)}: ${pythonJson(v, inner)}`).join(',\n')}\n${indent}}`
  }
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}
