// The GGUF reader's fixtures (test/fixtures/gguf/reader/: files written by gguf-py and llama.cpp's converter)
// and their golden JSON, what gguf-py's GGUFReader reads from each (scripts/make-gguf-reader-fixtures.py).
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const FIXTURES = fileURLToPath(new URL('./fixtures/gguf/reader', import.meta.url))
export const NAMES = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.gguf'))
  .sort()

export interface GoldenTensor {
  name: string
  type: string
  ne: number[]
  shape: number[]
  elements: number
  bytes: number
  offset: number
  sha256: string
  valuesSha256?: string
}
export interface Golden {
  version: number
  byteOrder: 'little' | 'big'
  alignment: number
  dataOffset: number
  fileSize: number
  fields: Array<{ key: string; types: string[]; value: unknown; written?: unknown }>
  tensors: GoldenTensor[]
}

export const golden = (name: string): Golden => JSON.parse(readFileSync(join(FIXTURES, name.replace(/\.gguf$/, '.json')), 'utf8'))
export const fileBytes = (name: string) => new Uint8Array(readFileSync(join(FIXTURES, name)))
