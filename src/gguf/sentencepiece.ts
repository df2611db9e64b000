// tokenizer.model: SentencePiece's ModelProto (sentencepiece_model.proto) in protobuf's wire format. Only what a
// GGUF needs is read: each piece (field 1: its text 1, score 2, type 3) and the normalizer's add_dummy_prefix
// (field 3, then 3), whether a space goes before the text. Loaded on demand, by models that have a tokenizer.model;
// it imports nothing, so that a bundler's chunk of it holds it alone.

/** A SentencePiece model's pieces (type: the proto's enum, NORMAL 1 when absent) and add_dummy_prefix. */
export interface SentencePieceModel {
  pieces: Array<{ text: string; score: number; type: number }>
  addDummyPrefix: boolean
}

/** What a malformed message throws, for readSentencePiece to catch. */
class Malformed extends Error {}

/** Calls `field` for each field of the message in bytes [start, end): its number, and its varint value or its bytes' [from, to). */
function readMessage(bytes: Uint8Array, start: number, end: number, field: (number: number, value: number, from: number, to: number) => void): void {
  let at = start
  const varint = () => {
    let value = 0
    for (let shift = 0; shift < 64; shift += 7) {
      if (at >= end) break
      const byte = bytes[at++]
      value += (byte & 0x7f) * 2 ** shift
      if (byte < 0x80) return value
    }
    throw new Malformed()
  }
  while (at < end) {
    const key = varint()
    const wire = key % 8
    let value = 0
    let from = at
    // Wire types: 0 a varint, 1 eight bytes, 2 a length and its bytes, 5 four bytes; 3 and 4 (groups) are not in this proto.
    if (wire === 0) value = varint()
    else if (wire === 2) {
      const length = varint()
      from = at
      at += length
    } else if (wire === 1 || wire === 5) at += wire === 1 ? 8 : 4
    else throw new Malformed()
    if (at > end) throw new Malformed()
    field(Math.floor(key / 8), value, from, at)
  }
}

/** The pieces and add_dummy_prefix of a tokenizer.model; undefined for bytes that are not a protobuf message with pieces. */
export function readSentencePiece(bytes: Uint8Array): SentencePieceModel | undefined {
  const text = new TextDecoder()
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const model: SentencePieceModel = { pieces: [], addDummyPrefix: true }
  try {
    readMessage(bytes, 0, bytes.length, (number, _, start, end) => {
      if (number === 1) {
        const piece = { text: '', score: 0, type: 1 }
        readMessage(bytes, start, end, (field, value, from, to) => {
          if (field === 1) piece.text = text.decode(bytes.subarray(from, to))
          else if (field === 2 && to - from === 4) piece.score = view.getFloat32(from, true)
          else if (field === 3) piece.type = value
        })
        model.pieces.push(piece)
      } else if (number === 3) {
        readMessage(bytes, start, end, (field, value) => {
          if (field === 3) model.addDummyPrefix = value !== 0
        })
      }
    })
  } catch (error) {
    if (error instanceof Malformed) return undefined
    throw error
  }
  return model.pieces.length > 0 ? model : undefined
}
