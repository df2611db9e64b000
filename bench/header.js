// parseHeader against JSON.parse plus the same checks in plain JavaScript, on synthetic headers shaped
// like real checkpoints. Target: parseHeader at most 1.5x the JSON.parse path.
import { parseHeader, DTYPE_INFO } from '../dist/node.js'
import { compare, table } from './util.js'

const decoder = new TextDecoder()

/** A file (header + zero data) of `count` BF16 tensors named like a transformer's layers. */
export function makeFile(count) {
  const header = { __metadata__: { format: 'pt' } }
  let offset = 0
  for (let i = 0; i < count; i++) {
    const shape = i % 3 === 0 ? [4096] : [4096, 1024 + (i % 7)]
    const bytes = shape.reduce((a, b) => a * b, 2)
    header[`model.layers.${i >> 4}.mlp.experts.${i & 15}.${i % 3 === 0 ? 'bias' : 'weight'}`] = { dtype: 'BF16', shape, data_offsets: [offset, offset + bytes] }
    offset += bytes
  }
  let json = JSON.stringify(header)
  json += ' '.repeat((8 - (json.length % 8)) % 8)
  const bytes = new Uint8Array(8 + json.length)
  new DataView(bytes.buffer).setBigUint64(0, BigInt(json.length), true)
  new TextEncoder().encodeInto(json, bytes.subarray(8))
  return { bytes, fileSize: 8 + json.length + offset }
}

/** What a careful user writes without this library: JSON.parse, then the format's checks. */
function jsonParsePath(bytes, fileSize) {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true))
  if (n > 100_000_000 || 8 + n > fileSize) throw new Error('bad header length')
  const header = JSON.parse(decoder.decode(bytes.subarray(8, 8 + n)))
  const tensors = []
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue
    const { dtype, shape, data_offsets: offsets } = entry
    const info = DTYPE_INFO[dtype]
    if (!info || !Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new Error(name)
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new Error(name)
    tensors.push({ name, dtype, shape, dataOffsets: offsets, byteLength: offsets[1] - offsets[0] })
  }
  tensors.sort((a, b) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1])
  let end = 0
  for (const t of tensors) {
    if (t.dataOffsets[0] !== end || t.dataOffsets[1] < end) throw new Error(`offset ${t.name}`)
    end = t.dataOffsets[1]
    const bits = t.shape.reduce((a, b) => a * b, 1) * DTYPE_INFO[t.dtype].bits
    if (bits % 8 !== 0 || bits / 8 !== t.byteLength) throw new Error(`size ${t.name}`)
  }
  if (end + 8 + n !== fileSize) throw new Error('file size')
  return tensors
}

export function run() {
  console.log('\nparseHeader vs JSON.parse + checks (median ms; ratio = parseHeader / JSON.parse path, target <= 1.5)')
  const rows = []
  for (const count of [300, 20_000, 200_000]) {
    const { bytes, fileSize } = makeFile(count)
    const a = parseHeader(bytes, { fileSize }).tensors
    const b = jsonParsePath(bytes, fileSize)
    if (a.length !== b.length || a.some((t, i) => t.name !== b[i].name)) throw new Error('the two paths disagree')
    const rounds = count > 50_000 ? 9 : count > 1000 ? 25 : 400
    const ms = compare({ wasm: () => parseHeader(bytes, { fileSize }), json: () => jsonParsePath(bytes, fileSize) }, rounds)
    rows.push({
      tensors: count,
      'header bytes': bytes.length - 8,
      'parseHeader ms': ms.wasm.toFixed(3),
      'JSON.parse path ms': ms.json.toFixed(3),
      ratio: (ms.wasm / ms.json).toFixed(2),
      'parseHeader MB/s': (bytes.length / ms.wasm / 1000).toFixed(0),
    })
  }
  table(rows)
  return rows
}

if (import.meta.url === `file://${process.argv[1]}`) run()
