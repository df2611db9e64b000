// The shared core's lifetime (src/wasm.ts): reused across calls, but not kept once a call made it huge.
import { expect, test } from 'vitest'
import { parseHeader } from '../src/index.ts'
import { sharedCore } from '../src/wasm.ts'
import { makeFile } from './helpers.ts'

const small = makeFile('{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', 2)

test('small calls reuse one shared core', () => {
  parseHeader(small)
  const core = sharedCore()
  parseHeader(small)
  expect(sharedCore()).toBe(core)
})

test('after a huge header the shared core is dropped, so its memory can be collected', () => {
  parseHeader(small)
  const before = sharedCore()
  const keys = Array.from({ length: 2_000_000 }, (_, i) => `"k${i}":0`).join(',')
  const huge = makeFile(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":{${keys}}}}`, 2)
  expect(parseHeader(huge).tensors.map((t) => t.name)).toEqual(['w'])
  const after = sharedCore()
  expect(after).not.toBe(before)
  expect(after.memory.buffer.byteLength).toBeLessThan(1 << 20)
  expect(parseHeader(small).tensors).toHaveLength(1)
})
