// Quantized models over HTTP (src/quant/, src/read/model.ts): openModel of a model.safetensors or index URL reads
// the config.json beside it, every logical tensor and its row slices are the golden values, and where a layout
// stores each row apart, a slice of 1/8 of the rows reads at most a quarter of the weight's stored bytes (counted
// by the tests' server). GPTQ and AWQ pack along the rows and are read whole.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type DType, openModel } from '../../src/index.ts'
import { serveFiles, type TestServer } from '../http-server.ts'
import { FOLDERS, QUANTIZED, quantizedNames, referenceOf, storedOf } from '../quant-fixtures.ts'
import { expectSameBytes, headerOf, tensorBytes } from '../read-helpers.ts'

let server: TestServer

beforeAll(async () => {
  const files: Record<string, string> = {}
  for (const folder of FOLDERS) for (const file of readdirSync(join(QUANTIZED, folder))) files[`${folder}/${file}`] = join(QUANTIZED, folder, file)
  server = await serveFiles(files)
})
afterAll(() => server.close())

/** The URL openModel takes for a fixture: its index, or its one file. */
function entryOf(folder: string): string {
  const index = join(QUANTIZED, folder, 'model.safetensors.index.json')
  return `${server.url}${folder}/${existsSync(index) ? 'model.safetensors.index.json' : 'model.safetensors'}`
}

/** Layouts whose rows are packed across each other: read whole. */
const PACKED_ALONG_ROWS = ['gptq', 'awq']

describe.each(FOLDERS)('%s', (folder) => {
  const goldenFile = new Uint8Array(readFileSync(join(QUANTIZED, folder, 'golden.safetensors')))
  const golden = headerOf(goldenFile).tensors
  const stored = storedOf(folder)

  test('openModel of its URL reads the config.json beside it; every logical tensor is its golden value', async () => {
    server.clear()
    const model = await openModel(entryOf(folder))
    try {
      await server.settled()
      expect(server.log.map((entry) => entry.path)).toContain(`/${folder}/config.json`)
      expect(model.quantization).not.toBeNull()
      for (const name of quantizedNames(folder)) {
        const tensor = await model.getTensor(name, { dtype: golden[name].dtype as DType })
        expectSameBytes(tensor.data, tensorBytes(goldenFile, name), name)
      }
    } finally {
      await model.close()
    }
  })

  test('a slice of 1/8 of the rows is its golden rows, reading at most a quarter of the stored bytes where rows are stored apart', async () => {
    const model = await openModel(entryOf(folder))
    try {
      // The quantized tensor of the most stored bytes.
      const [name, storedBytes] = quantizedNames(folder)
        .map((n) => [n, referenceOf(folder).tensors[n].stored!.reduce((sum, part) => sum + stored.get(part)!.byteLength, 0)] as const)
        .sort(([, a], [, b]) => b - a)[0]
      const { shape } = golden[name]
      const rows = Math.max(1, Math.floor(shape[0] / 8))
      const first = Math.floor(shape[0] / 2)
      server.clear()
      const slice = await model.getSlice(name, [[first, first + rows]])
      await server.settled()
      const rowBytes = tensorBytes(goldenFile, name).length / shape[0]
      expectSameBytes(slice.data, tensorBytes(goldenFile, name).subarray(first * rowBytes, (first + rows) * rowBytes), name)
      console.log(`${folder}: rows [${first}, ${first + rows}) of ${name} [${shape}] read ${server.bytesSent()} of its ${storedBytes} stored bytes`)
      if (!PACKED_ALONG_ROWS.includes(folder.split('-')[0]))
        expect(server.bytesSent(), `${name}: ${storedBytes} bytes stored`).toBeLessThanOrEqual(storedBytes / 4)
    } finally {
      await model.close()
    }
  })
})
