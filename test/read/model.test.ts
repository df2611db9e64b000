// openModel(): the real sharded FluxML model (index + 6 shards) from disk and over HTTP, every tensor
// equal to the single-file version of the same model; and broken indexes.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { openModel, SafetensorsError } from '../../src/node.ts'
import { entry, FIXTURES_REAL, makeFile, obj } from '../helpers.ts'
import { rangeHandler, startServer, type TestServer } from '../http-server.ts'
import { mulberry32 } from '../random.ts'
import { bytesOf, errorOf, expectError, expectSameBytes, headerOf } from '../read-helpers.ts'

const SHARDS = join(FIXTURES_REAL, 'sharded', 'fluxml__safetensors.jl')
const INDEX = join(SHARDS, 'model.safetensors.index.json')
const SINGLE = new Uint8Array(readFileSync(join(FIXTURES_REAL, 'fluxml__safetensors.jl__model.safetensors')))
const single = headerOf(SINGLE)
const NAMES = Object.keys(single.tensors).sort()
const indexJson = JSON.parse(readFileSync(INDEX, 'utf8')) as { metadata: Record<string, unknown>; weight_map: Record<string, string> }
const SHARD_FILES = [...new Set(Object.values(indexJson.weight_map))].sort()

function singleBytes(name: string): Uint8Array {
  const [b, e] = single.tensors[name].data_offsets
  return SINGLE.subarray(single.dataStart + b, single.dataStart + e)
}

interface ModelLike {
  metadata: unknown
  names(): string[]
  info(name: string): { dtype: string; shape: number[] }
  getTensor(name: string, options?: { dtype?: string }): Promise<{ name: string; dtype: string; shape: number[]; data: ArrayBufferView }>
  getSlice(name: string, ranges: unknown[], options?: { dtype?: string }): Promise<{ dtype: string; shape: number[]; data: ArrayBufferView }>
  tensors(options?: { dtype?: string }): AsyncIterable<{ name: string; dtype: string; shape: number[]; data: ArrayBufferView }>
  close(): Promise<void>
}

/** `metadata`: the index's (the sharded model's), or null for a model of one file, which has no index. */
async function expectSameAsSingleFile(model: ModelLike, metadata: unknown = { total_size: 4305 }): Promise<void> {
  expect([...model.names()].sort()).toEqual(NAMES)
  expect(model.metadata).toEqual(metadata)
  for (const name of NAMES) {
    const want = single.tensors[name]
    expect(model.info(name).dtype, name).toBe(want.dtype)
    expect(Array.from(model.info(name).shape), name).toEqual(want.shape)
    const t = await model.getTensor(name)
    expect(t.name, name).toBe(name)
    expect(t.dtype, name).toBe(want.dtype)
    expect(Array.from(t.shape), name).toEqual(want.shape)
    expectSameBytes(bytesOf(t.data), singleBytes(name), name)
  }
  const seen: string[] = []
  for await (const t of model.tensors()) {
    seen.push(t.name)
    expectSameBytes(bytesOf(t.data), singleBytes(t.name), t.name)
  }
  expect(seen.sort()).toEqual(NAMES)
  // A slice through the model: float32_357 is [3, 5, 7]; take [1, :, 2:4].
  const s = await model.getSlice('float32_357', [1, null, [2, 4]])
  expect(s.shape).toEqual([5, 2])
  const all = new Float32Array(singleBytes('float32_357').slice().buffer)
  const want: number[] = []
  for (let j = 0; j < 5; j++) for (let k = 2; k < 4; k++) want.push(all[35 + j * 7 + k])
  expect(Array.from(s.data as Float32Array)).toEqual(want)
  await expectError(() => model.getTensor('no_such_tensor'), 'TensorNotFound')
}

let tmp: string
let server: TestServer

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'safetensors-model-test-'))
  server = await startServer(
    rangeHandler((path) => {
      // /sharded/... serves the real folder; /tmp/... serves the temporary folder.
      try {
        if (path.startsWith('/sharded/')) return new Uint8Array(readFileSync(join(SHARDS, path.slice('/sharded/'.length))))
        if (path.startsWith('/tmp/')) return new Uint8Array(readFileSync(join(tmp, path.slice('/tmp/'.length))))
      } catch {
        return undefined
      }
      return undefined
    }),
  )
})

afterAll(async () => {
  await server?.close()
  if (tmp) rmSync(tmp, { recursive: true, force: true })
})

beforeEach(() => server.clear())

test('the fixture set is what the test expects', () => {
  expect(NAMES.length).toBe(36)
  expect(SHARD_FILES.length).toBe(6)
  expect(Object.keys(indexJson.weight_map).sort()).toEqual(NAMES)
})

describe('from disk', () => {
  test('through the index path, every tensor equals the single-file model', async () => {
    const model = await openModel(INDEX)
    try {
      await expectSameAsSingleFile(model as unknown as ModelLike)
    } finally {
      await model.close()
    }
  })

  test.each([
    ['the folder', SHARDS],
    ['the folder with a trailing slash', `${SHARDS}/`],
  ])('through %s', async (_, folder) => {
    const model = await openModel(folder)
    try {
      await expectSameAsSingleFile(model as unknown as ModelLike)
    } finally {
      await model.close()
    }
  })

  test('F32 conversion through the model gives the right values (BF16 decoded by definition)', async () => {
    const model = await openModel(INDEX)
    try {
      const t = await model.getTensor('bfloat16_35', { dtype: 'F32' })
      const bits = new Uint16Array(singleBytes('bfloat16_35').slice().buffer)
      expect(t.dtype).toBe('F32')
      expect(Array.from(t.data as Float32Array)).toEqual(Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]))
    } finally {
      await model.close()
    }
  })
})

describe('from File objects (a folder picked or dropped in a page)', () => {
  /** The fixture folder's files as a page gets them, plus one that is neither index nor shard. */
  const files = () => [...readdirSync(SHARDS).map((name) => new File([readFileSync(join(SHARDS, name))], name)), new File(['# notes'], 'README.md')]

  test('every tensor equals the single-file model; a FileList-like iterable works too', async () => {
    const model = await openModel(files())
    try {
      await expectSameAsSingleFile(model as unknown as ModelLike)
      expect([...model.shards.keys()].sort()).toEqual(SHARD_FILES)
    } finally {
      await model.close()
    }
    const iterable = {
      *[Symbol.iterator]() {
        yield* files()
      },
    }
    await (await openModel(iterable)).close()
  })

  test('an index by another name, when it is the only one', async () => {
    const renamed = files().map((f) => (f.name === 'model.safetensors.index.json' ? new File([f], 'diffusion_pytorch_model.safetensors.index.json') : f))
    await (await openModel(renamed)).close()
  })

  test('no index, or two candidates: Io naming what was found; a missing shard: Io naming it; checks as from disk', async () => {
    const withoutIndex = files().filter((f) => !f.name.endsWith('.json'))
    expect((await expectError(() => openModel(withoutIndex), 'Io')).message).toContain('found none')
    const two = [...files().filter((f) => f.name !== 'model.safetensors.index.json'), new File(['{}'], 'a.index.json'), new File(['{}'], 'b.index.json')]
    expect((await expectError(() => openModel(two), 'Io')).message).toContain('"a.index.json", "b.index.json"')
    const missing = files().filter((f) => f.name !== SHARD_FILES[2])
    expect((await expectError(() => openModel(missing), 'Io')).message).toContain(SHARD_FILES[2])
    const ghost = [
      ...files().filter((f) => !f.name.endsWith('.json')),
      new File([JSON.stringify({ ...indexJson, weight_map: { ...indexJson.weight_map, ghost_tensor: SHARD_FILES[0] } })], 'model.safetensors.index.json'),
    ]
    expect((await expectError(() => openModel(ghost), 'TensorNotFound')).message).toContain('ghost_tensor')
  })

  test('misuse is a TypeError: not Files, two files of one name, not iterable', async () => {
    await expect(openModel([new Uint8Array(4)] as unknown as File[])).rejects.toThrow(TypeError)
    await expect(openModel([...files(), new File([], 'README.md')])).rejects.toThrow(/two files are named "README.md"/)
    await expect(openModel({} as unknown as File[])).rejects.toThrow(TypeError)
  })
})

describe('over HTTP', () => {
  test.each([
    ['the index URL', () => `${server.origin}/sharded/model.safetensors.index.json`],
    ['the index as a URL object', () => new URL(`${server.origin}/sharded/model.safetensors.index.json`)],
    ['the folder URL', () => `${server.origin}/sharded/`],
  ] as const)('through %s, every tensor equals the single-file model', async (_, where) => {
    const model = await openModel(where())
    try {
      // The index once, then each shard's header once.
      const paths = server.log.map((e) => e.path)
      expect(paths.filter((p) => p.endsWith('.index.json'))).toEqual(['/sharded/model.safetensors.index.json'])
      expect(paths.filter((p) => p.endsWith('.safetensors')).sort()).toEqual(SHARD_FILES.map((f) => `/sharded/${f}`))
      await expectSameAsSingleFile(model as unknown as ModelLike)
    } finally {
      await model.close()
    }
  })

  test('custom headers reach the index and shard requests', async () => {
    const model = await openModel(`${server.origin}/sharded/model.safetensors.index.json`, { headers: { Authorization: 'Bearer m0del' } })
    await model.getTensor('int16_357')
    expect(server.log.length).toBeGreaterThanOrEqual(8)
    for (const e of server.log) expect(e.headers.authorization, e.path).toBe('Bearer m0del')
    await model.close()
  })

  test('a missing index is an Io error', async () => {
    await expectError(() => openModel(`${server.origin}/sharded/nothing.safetensors.index.json`), 'Io')
  })

  test("a shard's failure keeps its facts through the model's context: its URL and HTTP status, after one request", async () => {
    const index = JSON.parse(readFileSync(join(SHARDS, 'model.safetensors.index.json'), 'utf8'))
    const folder = join(tmp, 'lost-shard')
    mkdirSync(folder, { recursive: true })
    const [gone, ...kept] = SHARD_FILES
    writeFileSync(join(folder, 'model.safetensors.index.json'), JSON.stringify(index))
    for (const shard of kept) copyFileSync(join(SHARDS, shard), join(folder, shard))
    const e = await expectError(() => openModel(`${server.origin}/tmp/lost-shard/model.safetensors.index.json`), 'Io')
    const url = `${server.origin}/tmp/lost-shard/${gone}`
    expect({ status: e.status, url: e.url }).toEqual({ status: 404, url })
    expect(e.message).toMatch(new RegExp(`^shard ${gone}: .*HTTP 404`))
    expect(server.log.filter((entry) => entry.path.endsWith(gone)).length).toBe(1)
  })
})

describe('the local path of a failure, as a field', () => {
  test('a missing file: path', async () => {
    const missing = join(tmp, 'no-such-folder', 'model.safetensors')
    const e = await expectError(() => openModel(missing), 'Io')
    expect(e.path).toBe(missing)
    expect(e.url).toBeUndefined()
  })

  test('a missing shard of a local model: its path, in the model context', async () => {
    const folder = join(tmp, 'lost-local-shard')
    mkdirSync(folder, { recursive: true })
    copyFileSync(join(SHARDS, 'model.safetensors.index.json'), join(folder, 'model.safetensors.index.json'))
    const e = await expectError(() => openModel(folder), 'Io')
    expect(e.path).toMatch(new RegExp(`^${folder}/model-\\d{5}-of-\\d{5}\\.safetensors$`))
  })

  test('a folder with no model in it: the folder', async () => {
    const folder = join(tmp, 'empty-folder')
    mkdirSync(folder, { recursive: true })
    const e = await expectError(() => openModel(folder), 'Io')
    expect(e.path).toBe(folder)
  })
})

// A folder holding only model.safetensors is the commonest layout on the Hub; transformers loads it before
// any index (modeling_utils: SAFE_WEIGHTS_NAME, then SAFE_WEIGHTS_INDEX_NAME), and so must openModel.
describe('a model of one file', () => {
  /** A new folder in tmp with `files` (name -> bytes). */
  let folders = 0
  function folderOf(files: Record<string, Uint8Array | string>): string {
    const dir = join(tmp, `single${++folders}`)
    mkdirSync(dir, { recursive: true })
    for (const [name, bytes] of Object.entries(files)) writeFileSync(join(dir, name), bytes)
    return dir
  }
  const onlyFile = () => folderOf({ 'model.safetensors': SINGLE, 'config.json': '{}' })

  test.each([
    ['a folder holding model.safetensors', () => onlyFile()],
    ['that folder with a trailing slash', () => `${onlyFile()}/`],
    ['a .safetensors file by its path', () => join(folderOf({ 'x.safetensors': SINGLE }), 'x.safetensors')],
    ['a .safetensors file as a file: URL', () => pathToFileURL(join(folderOf({ 'x.safetensors': SINGLE }), 'x.safetensors'))],
  ])('%s opens as a model of one shard, every tensor equal to the file', async (_, where) => {
    const location = where()
    const model = await openModel(location)
    try {
      await expectSameAsSingleFile(model as unknown as ModelLike, null)
      const shard = /x\.safetensors$/.test(String(location)) ? 'x.safetensors' : 'model.safetensors'
      expect([...model.shards.keys()]).toEqual([shard])
      expect(model.shardOf('float32_357')).toBe(shard)
      expect(model.unlisted()).toEqual([])
      await expectError(() => model.shardOf('no_such_tensor'), 'TensorNotFound')
    } finally {
      await model.close()
    }
  })

  test('a .safetensors URL over HTTP: one request for the header and one for the config.json beside it, no index asked for', async () => {
    const dir = folderOf({ 'x.safetensors': SINGLE })
    const model = await openModel(`${server.origin}/tmp/${dir.slice(tmp.length + 1)}/x.safetensors`)
    try {
      expect(server.log.map((e) => e.path).sort()).toEqual([`/tmp/${dir.slice(tmp.length + 1)}/config.json`, `/tmp/${dir.slice(tmp.length + 1)}/x.safetensors`])
      await expectSameAsSingleFile(model as unknown as ModelLike, null)
    } finally {
      await model.close()
    }
  })

  test('File objects: model.safetensors among other files, or one .safetensors file alone', async () => {
    for (const files of [
      [new File([SINGLE], 'model.safetensors'), new File(['{}'], 'config.json'), new File(['# notes'], 'README.md')],
      [new File([SINGLE], 'adapter.safetensors')],
    ]) {
      const model = await openModel(files)
      try {
        await expectSameAsSingleFile(model as unknown as ModelLike, null)
        expect([...model.shards.keys()]).toEqual([files[0].name])
      } finally {
        await model.close()
      }
    }
  })

  test('model.safetensors beside an index: the file wins, as in transformers (from disk and from File objects)', async () => {
    const other = makeFile(obj(entry('only', 'U8', [2], 0, 2)), 2)
    const dir = folderWith(indexJson)
    writeFileSync(join(dir, 'model.safetensors'), other)
    const fromDisk = await openModel(dir)
    expect(fromDisk.names()).toEqual(['only'])
    await fromDisk.close()
    // The index by its own path is still the sharded model.
    const indexed = await openModel(join(dir, 'model.safetensors.index.json'))
    await expectSameAsSingleFile(indexed as unknown as ModelLike)
    await indexed.close()
    const picked = await openModel(readdirSync(dir).map((name) => new File([readFileSync(join(dir, name))], name)))
    expect(picked.names()).toEqual(['only'])
    await picked.close()
  })

  test('a folder with neither model.safetensors nor an index: Io naming the folder and both names', async () => {
    const dir = folderOf({ 'config.json': '{}', 'weights.bin': 'x' })
    const error = await expectError(() => openModel(dir), 'Io')
    expect(error.message).toContain(dir)
    expect(error.message).toContain('model.safetensors.index.json')
    // model.safetensors on its own too, not only as the start of the index's name
    expect(error.message.replaceAll('model.safetensors.index.json', '')).toContain('model.safetensors')
  })

  test('a broken single file is the error open() gives for it, naming the file', async () => {
    const dir = folderOf({ 'model.safetensors': SINGLE.subarray(0, SINGLE.length - 1) })
    const error = await expectError(() => openModel(dir), 'MetadataIncompleteBuffer')
    expect(error.message).toContain('model.safetensors')
  })
})

/** A folder in tmp holding the six shards and an index with `weightMap` (serialised as given). */
let dirs = 0
function folderWith(index: string | object): string {
  const dir = join(tmp, `m${++dirs}`, 'model')
  mkdirSync(dir, { recursive: true })
  for (const f of SHARD_FILES) copyFileSync(join(SHARDS, f), join(dir, f))
  writeFileSync(join(dir, 'model.safetensors.index.json'), typeof index === 'string' ? index : JSON.stringify(index))
  // Where an escaping name would land, put a copy of the shard that really holds float32_3 (the entry the
  // tests change): if a name were not refused, the model would open without any error at all. Names
  // that are plain file names on POSIX but escape elsewhere (C:\x, ..\x, %2e%2e%2fx) get one too.
  const holder = join(SHARDS, indexJson.weight_map.float32_3)
  const parent = join(tmp, `m${dirs}`)
  copyFileSync(holder, join(parent, 'x.safetensors'))
  copyFileSync(holder, join(parent, 'b'))
  for (const plain of ['C:\\x', '..\\x.safetensors', '%2e%2e%2fx']) copyFileSync(holder, join(dir, plain))
  return dir
}

describe('index errors', () => {
  test('a weight_map entry naming a tensor its shard lacks: TensorNotFound', async () => {
    const ghost = folderWith({ ...indexJson, weight_map: { ...indexJson.weight_map, ghost_tensor: SHARD_FILES[0] } })
    const e1 = await expectError(() => openModel(join(ghost, 'model.safetensors.index.json')), 'TensorNotFound')
    expect(e1.message).toContain('ghost_tensor')
    // A real tensor, but put in the wrong shard.
    const wrongShard = indexJson.weight_map.bool_3 === SHARD_FILES[0] ? SHARD_FILES[1] : SHARD_FILES[0]
    const moved = folderWith({ ...indexJson, weight_map: { ...indexJson.weight_map, bool_3: wrongShard } })
    const e2 = await expectError(() => openModel(moved), 'TensorNotFound')
    expect(e2.message).toContain('bool_3')
  })

  test('a shard that does not exist: a SafetensorsError', async () => {
    const dir = folderWith({ ...indexJson, weight_map: { ...indexJson.weight_map, int8_3: 'model-00009-of-00009.safetensors' } })
    const error = await errorOf(() => openModel(dir))
    expect(error.message).toContain('model-00009-of-00009.safetensors')
  })

  const escaping = [
    '../x.safetensors',
    '/etc/passwd',
    'a/../../b',
    '%2e%2e%2fx',
    '%2E%2E/x.safetensors',
    'C:\\x',
    '..\\x.safetensors',
    '..',
    '',
    'file:///etc/passwd',
    // ORIGIN becomes this test's server (host:port), so a request there would show in its log.
    'http://ORIGIN/tmp/x.safetensors',
    '//ORIGIN/tmp/x.safetensors',
  ]
  const real = (bad: string) => bad.replace('ORIGIN', server.origin.slice('http://'.length))

  test.each(escaping)('a shard name that escapes the folder (%j) is refused from disk', async (name) => {
    const bad = real(name)
    const dir = folderWith({ ...indexJson, weight_map: { ...indexJson.weight_map, float32_3: bad } })
    const error = await errorOf(() => openModel(join(dir, 'model.safetensors.index.json')))
    expect(error.message.includes(bad) || error.message.includes(JSON.stringify(bad).slice(1, -1)), error.message).toBe(true)
  })

  test.each(escaping)('a shard name that escapes the folder (%j) is refused over HTTP before any shard is requested', async (name) => {
    const bad = real(name)
    const dir = folderWith({ ...indexJson, weight_map: { ...indexJson.weight_map, float32_3: bad } })
    const rel = dir
      .slice(tmp.length + 1)
      .split('\\')
      .join('/')
    await errorOf(() => openModel(`${server.origin}/tmp/${rel}/model.safetensors.index.json`))
    expect(server.log.map((e) => e.path)).toEqual([`/tmp/${rel}/model.safetensors.index.json`])
  })

  test.each([
    ['not JSON', 'this is not json'],
    ['empty', ''],
    ['truncated JSON', JSON.stringify(indexJson).slice(0, 100)],
    ['no weight_map', JSON.stringify({ metadata: { total_size: 4305 } })],
    ['weight_map null', JSON.stringify({ weight_map: null })],
    ['weight_map an array', JSON.stringify({ weight_map: ['model-00001-of-00006.safetensors'] })],
    ['a weight_map value not a string', JSON.stringify({ weight_map: { float32_3: 1 } })],
    ['an array', '[]'],
    ['null', 'null'],
  ])('a malformed index (%s) is a SafetensorsError', async (_, text) => {
    const dir = folderWith(text)
    const error = await errorOf(() => openModel(join(dir, 'model.safetensors.index.json')))
    expect(error).toBeInstanceOf(SafetensorsError)
    expect(error.message.length).toBeGreaterThan(10)
  })

  // The index is checked for repeated keys by counting (keys against ':' outside strings), with the full
  // scan where the count differs or the text has escapes: each of these must still be found.
  const entries = JSON.stringify(indexJson.weight_map).slice(1, -1)
  const home = indexJson.weight_map.float32_3
  test.each([
    ['a tensor listed twice', `{"weight_map":{${entries},"float32_3":"${home}"}}`, 'float32_3'],
    ['a repeated key with ":" in it', `{"weight_map":{${entries}},"metadata":{"a:b":"1","a:b":"2"}}`, 'a:b'],
    ['a repeated key beside a value holding ":"', `{"metadata":{"x":"1:2:3"},"weight_map":{${entries},"float32_3":"${home}"}}`, 'float32_3'],
    ['a repeated key written with an escape', `{"weight_map":{${entries}},"metadata":{"k":"v","\u006b":"w"}}`, 'k'],
    ['an escaped ":" that would hide one repeat from a count', `{"metadata":{"a\u003ab":"1","c":"2","c":"3"},"weight_map":{${entries}}}`, 'c'],
  ])('an index with %s: InvalidHeaderDeserialization naming the key', async (_, text, key) => {
    const dir = folderWith(text)
    const error = await expectError(() => openModel(dir), 'InvalidHeaderDeserialization')
    expect(error.message).toContain(`${JSON.stringify(key)} appears twice`)
  })

  // The check compares names in order where a shard's entries are one run of the index in the shard's
  // own order, and looks each name up otherwise: random models, index orders and defects, each verdict
  // against the definition (every entry's shard has it; unlisted() is what no entry names there).
  test('random indexes over random shards: the verdict and unlisted() follow the definition, whatever the order', async () => {
    const next = mulberry32(0x5eed13)
    const pick = (n: number) => next() % n
    const shuffle = <T>(items: T[]) => {
      for (let i = items.length - 1; i > 0; i--) {
        const j = pick(i + 1)
        ;[items[i], items[j]] = [items[j], items[i]]
      }
      return items
    }
    const verdicts = { opened: 0, refused: 0 }
    for (let round = 0; round < 300; round++) {
      const shardCount = 1 + pick(4)
      const shardNames = Array.from({ length: shardCount }, (_, i) => `model-${i + 1}-of-${shardCount}.safetensors`)
      // Each shard's tensors in data order: names t0..tn, dealt out in runs or at random.
      const held: string[][] = shardNames.map(() => [])
      const total = 1 + pick(12)
      for (let t = 0; t < total; t++) held[pick(2) ? Math.min(shardCount - 1, Math.floor((t * shardCount) / total)) : pick(shardCount)].push(`t${t}`)
      if (pick(3) === 0) for (const names of held) shuffle(names)
      let entries: Array<[string, string]> = held.flatMap((names, s) => names.map((name): [string, string] => [name, shardNames[s]]))
      const order = pick(4)
      if (order === 1) shuffle(entries)
      if (order === 2) entries.sort(([a], [b]) => (a < b ? -1 : 1))
      if (order === 3 && entries.length > 1) entries.push(entries.splice(pick(entries.length), 1)[0])
      const defect = pick(5)
      if (defect === 1 && entries.length > 0) entries.splice(pick(entries.length), 1) // an unlisted tensor
      if (defect === 2) entries.splice(pick(entries.length + 1), 0, ['ghost', shardNames[pick(shardCount)]])
      if (defect === 3 && entries.length > 0) {
        const i = pick(entries.length)
        entries[i] = [entries[i][0], shardNames[pick(shardCount)]] // perhaps its own shard, perhaps another
      }
      if (defect === 4 && entries.length > 1) {
        const [i, j] = [pick(entries.length), pick(entries.length)]
        ;[entries[i], entries[j]] = [
          [entries[i][0], entries[j][1]],
          [entries[j][0], entries[i][1]],
        ]
      }
      entries = entries.filter(([name], i) => entries.findIndex(([other]) => other === name) === i)
      const files = held.map((names, s) => {
        const header = obj(...names.map((name, i) => entry(name, 'U8', [1], i, i + 1)))
        return new File([makeFile(header, names.length) as Uint8Array<ArrayBuffer>], shardNames[s])
      })
      const weightMap = Object.fromEntries(entries)
      const listedShards = new Set(entries.map(([, shard]) => shard))
      // Some names and shard names written with escapes: the same strings, other bytes.
      const text = JSON.stringify({ weight_map: weightMap })
        .replace(/"t(\d+)":/g, (plain, digits) => (pick(3) === 0 ? `"\\u0074${digits}":` : plain))
        .replace(/:"model-/g, (plain) => (pick(4) === 0 ? ':"model\\u002d' : plain))
      const index = new File([text], 'model.safetensors.index.json')
      const valid = entries.every(([name, shard]) => held[shardNames.indexOf(shard)].includes(name))
      const where = `round ${round}: ${JSON.stringify({ held, text })}`
      if (!valid) {
        await expectError(() => openModel([index, ...files]), 'TensorNotFound')
        verdicts.refused++
        continue
      }
      const model = await openModel([index, ...files])
      try {
        const unlisted = held.flatMap((names, s) =>
          listedShards.has(shardNames[s]) ? names.filter((name) => weightMap[name] !== shardNames[s]).map((tensor) => ({ tensor, shard: shardNames[s] })) : [],
        )
        expect(model.unlisted(), where).toEqual(unlisted)
        expect([...model.names()].sort(), where).toEqual(entries.map(([name]) => name).sort())
        for (const [name, shard] of entries) expect(model.shardOf(name), where).toBe(shard)
      } finally {
        await model.close()
      }
      verdicts.opened++
    }
    // Both verdicts, many times each: the cases reach both paths of the check with and without defects.
    expect(verdicts.opened).toBeGreaterThan(100)
    expect(verdicts.refused).toBeGreaterThan(50)
  })

  test('the temporary folders only hold what the tests wrote', () => {
    // Sanity: the decoys exist, so "refused" above cannot be a missing-file accident.
    expect(readdirSync(join(tmp, 'm1'))).toEqual(expect.arrayContaining(['x.safetensors', 'b', 'model']))
    expect(readdirSync(join(tmp, 'm1', 'model'))).toEqual(expect.arrayContaining(['C:\\x', '..\\x.safetensors', '%2e%2e%2fx']))
  })
})

describe('a local model, however it is named', () => {
  test('a file: URL as a string opens the folder it names; Symbol.asyncDispose closes every shard', async () => {
    const model = await openModel(pathToFileURL(SHARDS).href)
    expect(model.names().length).toBe(NAMES.length)
    await model[Symbol.asyncDispose]()
    await expectError(() => model.getTensor(NAMES[0]), 'Io')
  })
})
