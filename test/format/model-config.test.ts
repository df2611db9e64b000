// src/format/model-config.ts: config.json as convertModel copies it. Expected texts are written by hand from
// what transformers reads (torch_dtype, or dtype since 4.56, in the top-level object and in its *_config
// sub-configs) and from the rule that every other byte stays: JSON.parse and stringify would turn 10000.0 into
// 10000 and 1e-05 into 0.00001.
import { describe, expect, test } from 'vitest'
import { checkConfigSize, readJsonObject, withDtype, withoutQuantization } from '../../src/format/model-config.ts'
import { errorOf } from '../read-helpers.ts'

const utf8 = (text: string) => new TextEncoder().encode(text)
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

const CONFIG = `{
  "architectures": ["LlamaForCausalLM"],
  "rope_theta": 10000.0,
  "rms_norm_eps": 1e-05,
  "torch_dtype": "float32",
  "text_config": {"dtype" : "float32", "nested": {"dtype": "float32"}, "vision_config": {"torch_dtype": "float16"}},
  "list": [{"dtype": "float32"}, "dtype"],
  "note": "\\"torch_dtype\\": \\"float32\\"",
  "other": {"torch_dtype": "float32"},
  "dtype": "float32"
}
`

async function codeOf(run: () => unknown): Promise<[string, string]> {
  const error = await errorOf(run)
  return [error.code, error.message]
}

describe('withDtype', () => {
  test('the dtype of the top-level object and of its *_config sub-configs becomes the new one; every other byte stays', async () => {
    expect(text(withDtype(utf8(CONFIG), 'BF16', 'config.json'))).toBe(`{
  "architectures": ["LlamaForCausalLM"],
  "rope_theta": 10000.0,
  "rms_norm_eps": 1e-05,
  "torch_dtype": "bfloat16",
  "text_config": {"dtype" : "bfloat16", "nested": {"dtype": "float32"}, "vision_config": {"torch_dtype": "bfloat16"}},
  "list": [{"dtype": "float32"}, "dtype"],
  "note": "\\"torch_dtype\\": \\"float32\\"",
  "other": {"torch_dtype": "float32"},
  "dtype": "bfloat16"
}
`)
  })

  test("transformers' names of the three targets; a config without a dtype is its bytes", async () => {
    const one = utf8('{"torch_dtype":"bfloat16"}')
    expect([text(withDtype(one, 'F32', 'c')), text(withDtype(one, 'F16', 'c')), text(withDtype(one, 'BF16', 'c'))]).toEqual([
      '{"torch_dtype":"float32"}',
      '{"torch_dtype":"float16"}',
      '{"torch_dtype":"bfloat16"}',
    ])
    expect(text(withDtype(utf8('{"a": [1.50, "dtype"]}'), 'F16', 'c'))).toBe('{"a": [1.50, "dtype"]}')
  })

  test('a key written with an escape is the same key', async () => {
    expect(text(withDtype(utf8('{"torch\\u005fdtype": "float32"}'), 'F16', 'c'))).toBe('{"torch\\u005fdtype": "float16"}')
  })
})

describe('withoutQuantization', () => {
  const strip = (config: string) => text(withoutQuantization(utf8(config), 'config.json'))

  test('the quantization block goes, wherever it is; the other members keep their bytes and separators', async () => {
    expect(strip('{"a": 1.0, "quantization_config": {"bits": 4, "x": [1, {"y": "}"}]}, "b": 2e0}')).toBe('{"a": 1.0, "b": 2e0}')
    expect(strip('{\n  "quantization_config": {"bits": 4},\n  "a": 1.0\n}')).toBe('{\n  "a": 1.0\n}')
    expect(strip('{\n  "a": 1.0,\n  "quantization_config": {"bits": 4}\n}')).toBe('{\n  "a": 1.0\n}')
  })

  test("MLX's two blocks both go; a block only nested in a sub-config stays", async () => {
    expect(strip('{"quantization": {"group_size": 64}, "a": "b", "quantization_config": {"group_size": 64}}')).toBe('{"a": "b"}')
    expect(strip('{"text_config": {"quantization_config": {}}}')).toBe('{"text_config": {"quantization_config": {}}}')
  })

  test('nothing but the block: an empty object; no block: the same bytes', async () => {
    expect(strip('{ "quantization_config": {"bits": 8} }')).toBe('{}')
    const plain = utf8('{"a": 1}')
    expect(withoutQuantization(plain, 'c')).toBe(plain)
  })
})

describe('reading', () => {
  test('readJsonObject: the text and its value; not an object, not JSON, not UTF-8: InvalidHeaderDeserialization naming the file', async () => {
    const { text: read, value } = readJsonObject(utf8('{"hidden_size": 64}'), 'config.json')
    expect(read).toBe('{"hidden_size": 64}')
    expect(value.isObject).toBe(true)
    expect(await codeOf(() => readJsonObject(utf8('[1, 2]'), 'model/config.json'))).toEqual([
      'InvalidHeaderDeserialization',
      'model/config.json: not a JSON object',
    ])
    for (const bad of [utf8('{"a": }'), new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])]) {
      const [code, message] = await codeOf(() => withDtype(bad, 'F16', 'model/config.json'))
      expect(code).toBe('InvalidHeaderDeserialization')
      expect(message.startsWith('model/config.json: ')).toBe(true)
    }
  })

  test('checkConfigSize: up to 16 MiB, then InvalidHeaderDeserialization naming the file and the size', async () => {
    expect(() => checkConfigSize('config.json', 16 << 20)).not.toThrow()
    expect(await codeOf(() => checkConfigSize('m/config.json', (16 << 20) + 1))).toEqual([
      'InvalidHeaderDeserialization',
      `m/config.json: it is ${(16 << 20) + 1} bytes, above the limit of ${16 << 20} for a config.json`,
    ])
  })
})
