// saveModel()'s files (src/node/save-model.ts), split from the writer's tests (issue 5): shards and index as the
// real FluxML sharded set and transformers write them, re-saves, and round trips through openModel. Failures
// and races of saves are in test/node/save-model.test.ts.

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { open, openModel, saveModel, type TensorInput } from '../../src/node.ts'
import { prng } from '../random.ts'
import { bytesOfView, expectBytes, f32, scratchFolders, toInput } from '../write-helpers.ts'
import { byteSize, ls, pythonJsonDumps, type RefTensor, randomBytes, referenceFile } from '../writer-reference.ts'

const REAL = fileURLToPath(new URL('../fixtures/real/', import.meta.url))
const scratch = scratchFolders()

// ------------------------------------------------------------------------------------------------------
// 6. saveModel

const FLUX = join(REAL, 'sharded', 'fluxml__safetensors.jl')

describe('saveModel', () => {
  test('reproduces the real FluxML sharded set: same shard names and assignment, byte-identical shards', async () => {
    const index = JSON.parse(readFileSync(join(FLUX, 'model.safetensors.index.json'), 'utf8')) as {
      metadata: { total_size: number }
      weight_map: Record<string, string>
    }
    // weight_map keeps the state-dict order the shards were planned in (huggingface_hub, max_shard_size=1000)
    const model = await openModel(join(FLUX, 'model.safetensors.index.json'))
    const tensors: Array<TensorInput & { name: string }> = []
    for (const name of Object.keys(index.weight_map)) {
      const t = await model.getTensor(name)
      tensors.push({ name, dtype: t.dtype, shape: t.shape, data: t.data })
    }
    await model.close()
    const dir = join(scratch(), 'flux')
    const written = await saveModel(dir, tensors, { maxShardSize: 1000, metadata: { format: 'pt' } })
    const shardNames = [1, 2, 3, 4, 5, 6].map((i) => `model-0000${i}-of-00006.safetensors`)
    expect(ls(dir)).toEqual([...shardNames, 'model.safetensors.index.json'])
    expect([...written].sort()).toEqual(ls(dir))
    for (const shard of shardNames) expectBytes(new Uint8Array(readFileSync(join(dir, shard))), new Uint8Array(readFileSync(join(FLUX, shard))))
    const text = readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')
    const ours = JSON.parse(text)
    expect(ours.weight_map).toEqual(index.weight_map)
    expect(ours.metadata).toEqual({ total_size: 4305 })
    expect(index.metadata.total_size).toBe(4305)
    expect(text).toBe(`${pythonJsonDumps({ metadata: { total_size: 4305 }, weight_map: index.weight_map })}\n`)
  })

  test("saving again with another shard count removes the earlier save's files, and only those", async () => {
    const dir = join(scratch(), 'resave')
    const tensors = [
      { name: 'a', dtype: 'F32' as const, shape: [4], data: f32(4) },
      { name: 'b', dtype: 'F32' as const, shape: [4], data: f32(4) },
      { name: 'c', dtype: 'F32' as const, shape: [4], data: f32(4) },
    ]
    await saveModel(dir, tensors, { maxShardSize: 16 })
    expect(ls(dir)).toEqual([
      'model-00001-of-00003.safetensors',
      'model-00002-of-00003.safetensors',
      'model-00003-of-00003.safetensors',
      'model.safetensors.index.json',
    ])
    writeFileSync(join(dir, 'config.json'), '{}')
    await saveModel(dir, tensors, { maxShardSize: 32 })
    expect(ls(dir)).toEqual(['config.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors', 'model.safetensors.index.json'])
    await saveModel(dir, tensors)
    expect(ls(dir)).toEqual(['config.json', 'model.safetensors'])
    // no index any more: the folder is a model of one file now
    const back = await openModel(dir)
    expect([...back.shards.keys()]).toEqual(['model.safetensors'])
    await back.close()
    const file = await open(join(dir, 'model.safetensors'))
    expect(file.names()).toEqual(['a', 'b', 'c'])
    await file.close()
  })

  test('index text as transformers writes it (hand-written): indent 2, keys sorted, trailing newline', async () => {
    const dir = join(scratch(), 'm')
    await saveModel(
      dir,
      [
        { name: 'z.weight', dtype: 'F32', shape: [4], data: f32(4) },
        { name: 'a.bias', dtype: 'F32', shape: [3], data: f32(3) },
        { name: 'B', dtype: 'U8', shape: [2], data: new Uint8Array(2) },
      ],
      { maxShardSize: 16 },
    )
    expect(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')).toBe(
      [
        '{',
        '  "metadata": {',
        '    "total_size": 30',
        '  },',
        '  "weight_map": {',
        '    "B": "model-00002-of-00002.safetensors",',
        '    "a.bias": "model-00002-of-00002.safetensors",',
        '    "z.weight": "model-00001-of-00002.safetensors"',
        '  }',
        '}',
        '',
      ].join('\n'),
    )
  })

  test('index text for non-ASCII names is json.dumps(indent=2, sort_keys=True): \\u escapes, code point order', async () => {
    // integer-like names ('10' before '9' as strings; a JS object would put 9 first) and DEL (escaped by ensure_ascii)
    const names = ['é', '\u{10000}', '\uffff', 'a"\\', 'z', '10', '9', 'del\x7f', 'ctl\x1f']
    const dir = join(scratch(), 'm')
    await saveModel(
      dir,
      names.map((name) => ({ name, dtype: 'U8' as const, shape: [5], data: new Uint8Array(5) })),
      { maxShardSize: 10 },
    )
    const weightMap = Object.fromEntries(names.map((n, i) => [n, `model-0000${Math.floor(i / 2) + 1}-of-00005.safetensors`]))
    expect(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')).toBe(
      `${pythonJsonDumps({ metadata: { total_size: 45 }, weight_map: weightMap })}\n`,
    )
  })

  test('everything in one shard: model.safetensors only, no index (as transformers)', async () => {
    const next = prng(71)
    const tensors: RefTensor[] = [
      { name: 'b', dtype: 'BF16', shape: [10], bytes: randomBytes(20, next) },
      { name: 'a', dtype: 'F32', shape: [5], bytes: randomBytes(20, next) },
    ]
    const dir = join(scratch(), 'single')
    const written = await saveModel(
      dir,
      tensors.map((t) => toInput(t, true)),
      { metadata: { format: 'pt' } },
    )
    expect(ls(dir)).toEqual(['model.safetensors'])
    expect(written).toEqual(['model.safetensors'])
    expectBytes(new Uint8Array(readFileSync(join(dir, 'model.safetensors'))), referenceFile(tensors, [['format', 'pt']]))
    // exactly at the limit still fits one shard
    const dir2 = join(scratch(), 'limit')
    await saveModel(
      dir2,
      tensors.map((t) => toInput(t, false)),
      { maxShardSize: 40 },
    )
    expect(ls(dir2)).toEqual(['model.safetensors'])
  })

  test('sharded round trip through openModel; total_size is the sum of tensor bytes; a tensor over the limit gets a shard alone', async () => {
    const next = prng(81)
    const spec: Array<[string, string, number[]]> = [
      ['embed', 'BF16', [64, 8]],
      ['l0.w', 'F32', [8, 8]],
      ['l0.b', 'F32', [8]],
      ['huge', 'F32', [40, 8]],
      ['l1.w', 'F16', [8, 8]],
      ['l1.b', 'F16', [8]],
      ['count', 'I64', []],
      ['mask', 'BOOL', [7]],
      ['empty', 'F32', [0]],
      ['q', 'F4', [10]],
      ['head', 'F64', [8, 4]],
    ]
    const tensors: RefTensor[] = spec.map(([name, dtype, shape]) => ({ name, dtype, shape, bytes: randomBytes(byteSize(dtype, shape), next) }))
    const maxShardSize = 1024
    const dir = join(scratch(), 'sharded')
    await saveModel(
      dir,
      tensors.map((t, i) => toInput(t, i % 2 === 1)),
      { maxShardSize, metadata: { format: 'pt' } },
    )
    const files = ls(dir)
    const index = JSON.parse(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8')) as {
      metadata: Record<string, unknown>
      weight_map: Record<string, string>
    }
    const shards = files.filter((f) => f.endsWith('.safetensors'))
    const n = shards.length
    expect(n).toBeGreaterThan(1)
    expect(shards).toEqual(Array.from({ length: n }, (_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`))
    expect(files).toEqual([...shards, 'model.safetensors.index.json'].sort())
    expect(index.metadata).toEqual({ total_size: tensors.reduce((s, t) => s + t.bytes.length, 0) })
    expect(Object.keys(index.weight_map).sort()).toEqual(tensors.map((t) => t.name).sort())
    // shard sizes: within the limit, except a shard holding one tensor larger than it
    for (const shard of shards) {
      const inShard = tensors.filter((t) => index.weight_map[t.name] === shard)
      expect(inShard.length, `${shard} is not empty`).toBeGreaterThan(0)
      const size = inShard.reduce((s, t) => s + t.bytes.length, 0)
      if (size > maxShardSize) expect(inShard.map((t) => t.name)).toEqual(['huge'])
      // every shard carries the metadata and is laid out like the reference writer
      expectBytes(new Uint8Array(readFileSync(join(dir, shard))), referenceFile(inShard, [['format', 'pt']]))
    }
    expect(tensors.find((t) => t.name === 'huge')!.bytes.length).toBeGreaterThan(maxShardSize)
    // tensors go to shards in the order given
    const shardIndex = tensors.map((t) => shards.indexOf(index.weight_map[t.name]))
    expect([...shardIndex].sort((a, b) => a - b)).toEqual(shardIndex)
    const model = await openModel(dir)
    expect([...model.names()].sort()).toEqual(tensors.map((t) => t.name).sort())
    for (const t of tensors) {
      const got = await model.getTensor(t.name)
      expect(got.dtype).toBe(t.dtype)
      expect(got.shape).toEqual(t.shape)
      expectBytes(bytesOfView(got.data), t.bytes)
    }
    await model.close()
  })
})

// From a review of the code (issue 11).
test('saveModel writes its index under a unique temporary name: a stale fixed-name .tmp does not break it', async () => {
  const folder = join(scratch(), 'model')
  // What the old writeIndex used as its fixed temporary name; a folder there made the rename fail.
  mkdirSync(join(folder, 'model.safetensors.index.json.tmp'), { recursive: true })
  const tensors = { a: { dtype: 'U8' as const, shape: [4], data: new Uint8Array(4) }, b: { dtype: 'U8' as const, shape: [4], data: new Uint8Array(4) } }
  const names = await saveModel(folder, tensors, { maxShardSize: 4 })
  expect(names).toContain('model.safetensors.index.json')
  expect(readdirSync(folder).filter((f) => f.endsWith('.tmp') && f !== 'model.safetensors.index.json.tmp')).toEqual([])
})
