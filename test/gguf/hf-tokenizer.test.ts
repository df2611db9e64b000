// tokenizerFiles on llama.cpp's converter's GGUFs of the test models, against the originals' own files: a
// SentencePiece vocabulary's tokenizer.json merges as transformers made them (Mixtral's tokenizer.json), its
// tokenizer.model without the converter's padding; a tokenizer of another kind refused. The whole round trip,
// every model, is test/node/gguf-model.test.ts.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, test } from 'vitest'
import type { GgufFile } from '../../src/gguf/file.ts'
import { tokenizerFiles } from '../../src/gguf/hf-tokenizer.ts'
import { readSentencePiece } from '../../src/gguf/sentencepiece.ts'
import { openGguf } from '../../src/gguf-node.ts'
import { SafetensorsError } from '../../src/index.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/gguf-to-hf/', import.meta.url))
const ORIGINALS = fileURLToPath(new URL('../fixtures/gguf/', import.meta.url))
const json = (bytes: Uint8Array) => JSON.parse(new TextDecoder().decode(bytes))

async function filesOf(model: string): Promise<Record<string, Uint8Array>> {
  const file = await openGguf(join(FIXTURES, model, `${model}-f32.gguf`))
  try {
    return tokenizerFiles(file, String(file.metadata['general.architecture']), 256)
  } finally {
    await file.close()
  }
}

test("SentencePiece: tokenizer.json's merges and vocabulary are the ones transformers made from the original", async () => {
  const ours = json((await filesOf('mixtral'))['tokenizer.json'])
  const theirs = JSON.parse(readFileSync(join(ORIGINALS, 'mixtral', 'tokenizer.json'), 'utf8'))
  expect(ours.model.merges).toEqual(theirs.model.merges)
  expect(ours.model.vocab).toEqual(theirs.model.vocab)
  expect(ours.model.byte_fallback).toBe(true)
})

test("SentencePiece: tokenizer.model has the original's pieces, without the [PAD<id>] ids the converter added", async () => {
  const files = await filesOf('llama2-spm')
  const ours = readSentencePiece(files['tokenizer.model'])!
  const theirs = readSentencePiece(readFileSync(join(ORIGINALS, 'llama2-spm', 'tokenizer.model')))!
  expect(ours.pieces.length).toBe(500)
  expect(ours.pieces).toEqual(theirs.pieces)
  expect(json(files['tokenizer_config.json'])).toMatchObject({ tokenizer_class: 'LlamaTokenizer', bos_token: '<s>', add_bos_token: true })
})

test('another tokenizer model is UnsupportedConversion naming it', () => {
  const file = { metadata: { 'tokenizer.ggml.model': 'bert', 'tokenizer.ggml.tokens': ['a', 'b'] } } as unknown as GgufFile
  const error = (() => {
    try {
      tokenizerFiles(file, 'bert', 8)
    } catch (e) {
      return e
    }
  })()
  expect(error).toBeInstanceOf(SafetensorsError)
  expect((error as SafetensorsError).code).toBe('UnsupportedConversion')
  expect((error as SafetensorsError).message).toContain('"bert"')
})
