// The one table of ggml's types (src/gguf/ggml-types.ts) against ggml itself: its ids (test/ggml.ts, from ggml.h)
// and the block sizes and type sizes its library reports.
import { beforeAll, describe, expect, test } from 'vitest'
import { GGML_TYPES as TABLE } from '../../src/gguf/ggml-types.ts'
import { GGML_TYPES, type Ggml, ggmlUnsupported, loadGgml } from '../ggml.ts'

const unsupported = ggmlUnsupported()
if (unsupported) console.log(`ggml-types: ${unsupported}; the table is checked against ggml's ids only`)

describe('the ggml type table', () => {
  test('every type ggml.h numbers is in the table with its id', () => {
    for (const [name, id] of Object.entries(GGML_TYPES)) expect(TABLE[name as keyof typeof TABLE]?.id, name).toBe(id)
  })

  describe.skipIf(unsupported)('against libggml-base', () => {
    let ggml: Ggml
    beforeAll(() => {
      ggml = loadGgml()
    }, 300_000)

    test.each(Object.keys(GGML_TYPES) as (keyof typeof GGML_TYPES)[])('%s: values and bytes per block', (name) => {
      expect([TABLE[name].block, TABLE[name].bytes]).toEqual([ggml.blockSize(name), ggml.typeSize(name)])
    })
  })
})
