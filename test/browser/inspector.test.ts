// The inspector page (inspector/) in headless Chromium, driven by Playwright from Node: load real
// fixtures by the file picker and by drag and drop, check the table, totals and metadata against the
// header parsed here with JSON.parse, open a tensor's statistics, load an invalid file, and open a 5 GiB
// sparse file by URL while counting the bytes on both sides. Screenshots go to test/screenshots/
// (gitignored) for a person to look at.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright'
import { chromiumChoice } from './chromium.ts'
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { startInspectorServer } from '../../scripts/inspector.js'
import { serveFiles, type TestServer } from '../http-server.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const REAL = join(ROOT, 'test/fixtures/real')
const SCREENSHOTS = join(ROOT, 'test/screenshots')
const MiB = 1024 * 1024
const GiB = 1024 * MiB

interface Entry {
  dtype: string
  shape: number[]
  data_offsets: [number, number]
}
interface Parsed {
  headerSize: number
  fileSize: number
  metadata: Record<string, string> | null
  tensors: Array<Entry & { name: string }>
}

/** A file's header, parsed here with JSON.parse: the expected values, independent of the library. */
function parse(bytes: Uint8Array): Parsed {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true))
  const json = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as Record<string, unknown>
  const { __metadata__: metadata = null, ...rest } = json
  const tensors = Object.entries(rest as Record<string, Entry>).map(([name, e]) => ({ name, ...e }))
  tensors.sort((a, b) => a.data_offsets[0] - b.data_offsets[0] || a.data_offsets[1] - b.data_offsets[1])
  return { headerSize: n, fileSize: bytes.length, metadata: metadata as Record<string, string> | null, tensors }
}

const product = (shape: number[]) => shape.reduce((a, b) => a * b, 1)

/** Per dtype: tensors, parameters, bytes. */
function totals(parsed: Parsed): Record<string, [number, number, number]> {
  const out: Record<string, [number, number, number]> = {}
  for (const t of parsed.tensors) {
    const row = (out[t.dtype] ??= [0, 0, 0])
    row[0]++
    row[1] += product(t.shape)
    row[2] += t.data_offsets[1] - t.data_offsets[0]
  }
  return out
}

/** The tensor table as the page shows it. */
function tableRows(page: Page) {
  return page.$$eval('#tensors tbody tr', (trs) =>
    trs.map((tr) => {
      const cells = Array.from((tr as HTMLTableRowElement).cells)
      return {
        name: (tr as HTMLElement).dataset.name!,
        shownName: cells[0].textContent,
        dtype: cells[1].textContent,
        shape: cells[2].textContent,
        params: Number(cells[3].dataset.value),
        paramsText: cells[3].textContent,
        bytes: Number(cells[4].dataset.value),
      }
    }),
  )
}

function totalsRows(page: Page) {
  return page.$$eval('#totals tbody tr, #totals tfoot tr', (trs) =>
    Object.fromEntries(
      trs.map((tr) => {
        const cells = Array.from((tr as HTMLTableRowElement).cells)
          .slice(1)
          .map((c) => Number((c as HTMLElement).dataset.value))
        return [(tr as HTMLElement).dataset.dtype!, cells]
      }),
    ),
  )
}

async function screenshot(page: Page, name: string) {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true, animations: 'disabled' })
}

/** Checks everything the page shows about a file against the header parsed here. */
async function expectFileShown(page: Page, parsed: Parsed, label: string) {
  await page.locator('#file-view').waitFor({ state: 'visible' })
  expect(await page.textContent('#file-name')).toBe(label)
  const rows = await tableRows(page)
  // Default order: data order, as in the file.
  expect(rows).toEqual(
    parsed.tensors.map((t) => ({
      name: t.name,
      shownName: t.name,
      dtype: t.dtype,
      shape: `[${t.shape.join(', ')}]`,
      params: product(t.shape),
      paramsText: product(t.shape).toLocaleString('en-US'),
      bytes: t.data_offsets[1] - t.data_offsets[0],
    })),
  )
  const expected = totals(parsed)
  const all = Object.values(expected).reduce((s, r) => [s[0] + r[0], s[1] + r[1], s[2] + r[2]], [0, 0, 0])
  expect(await totalsRows(page)).toEqual({ ...expected, all })
  expect(await page.textContent('#fact-tensors')).toBe(parsed.tensors.length.toLocaleString('en-US'))
  const metadata = await page.$$eval('#metadata tbody tr', (trs) => trs.map((tr) => Array.from((tr as HTMLTableRowElement).cells).map((c) => c.textContent)))
  expect(Object.fromEntries(metadata)).toEqual(parsed.metadata ?? {})
  expect(await page.isVisible('#metadata-empty')).toBe(parsed.metadata === null || Object.keys(parsed.metadata).length === 0)
  expect(await page.isVisible('#error')).toBe(false)
}

const headerBytes = async (page: Page) => Number(await page.getAttribute('#bytes-read', 'data-header-bytes'))

describe('inspector', () => {
  let browser: Browser
  let page: Page
  let inspector: Awaited<ReturnType<typeof startInspectorServer>>
  const pageErrors: string[] = []

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true })
    inspector = await startInspectorServer()
    const { executablePath, args } = await chromiumChoice()
    browser = await chromium.launch({ executablePath, args })
  }, 30_000)

  afterAll(async () => {
    await browser?.close()
    await inspector?.close()
  })

  beforeEach(async () => {
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
    page.on('pageerror', (error) => pageErrors.push(String(error)))
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text())
    })
    await page.goto(inspector.url)
    return async () => {
      await page.close()
      // Any script error or CSP violation on the page fails the test that caused it.
      expect(pageErrors.splice(0)).toEqual([])
    }
  })

  test('a real fixture from the file picker: rows, totals, metadata, sorting, filtering, a tensor histogram', async () => {
    const name = 'fluxml__safetensors.jl__model.with_metadata.safetensors'
    const bytes = new Uint8Array(readFileSync(join(REAL, name)))
    const parsed = parse(bytes)
    await page.setInputFiles('#file-input', join(REAL, name))
    await expectFileShown(page, parsed, name)
    // The header and nothing past the file; a small file may be read whole by the first read.
    expect(await headerBytes(page)).toBeGreaterThanOrEqual(8 + parsed.headerSize)
    expect(await headerBytes(page)).toBeLessThanOrEqual(parsed.fileSize)
    await screenshot(page, 'inspector-file')

    // Sorting: bytes ascending, then descending; names in natural order.
    await page.click('#tensors th[data-key="bytes"] button')
    expect(await page.getAttribute('#tensors th[data-key="bytes"]', 'aria-sort')).toBe('ascending')
    const ascending = (await tableRows(page)).map((r) => r.bytes)
    expect(ascending).toEqual([...ascending].sort((a, b) => a - b))
    await page.click('#tensors th[data-key="bytes"] button')
    expect(await page.getAttribute('#tensors th[data-key="bytes"]', 'aria-sort')).toBe('descending')
    const descending = (await tableRows(page)).map((r) => r.bytes)
    expect(descending).toEqual([...ascending].sort((a, b) => b - a))
    expect(descending[0]).toBeGreaterThan(descending.at(-1)!)
    await page.click('#tensors th[data-key="name"] button')
    expect((await tableRows(page)).slice(0, 3).map((r) => r.name)).toEqual(['bfloat16_3', 'bfloat16_35', 'bfloat16_357'])

    // Filtering by name, then by dtype.
    await page.fill('#filter', 'float16')
    expect((await tableRows(page)).map((r) => r.name)).toEqual(
      parsed.tensors
        .map((t) => t.name)
        .filter((n) => n.includes('float16'))
        .sort(),
    )
    await page.fill('#filter', 'f8_e5m2')
    expect((await tableRows(page)).map((r) => r.name).sort()).toEqual(
      parsed.tensors
        .filter((t) => t.dtype === 'F8_E5M2')
        .map((t) => t.name)
        .sort(),
    )
    await page.fill('#filter', '')

    // A BF16 tensor: read alone, converted to F32, statistics and histogram from wasm.
    const tensor = parsed.tensors.find((t) => t.name === 'bfloat16_357')!
    await page.click('#tensors tbody tr[data-name="bfloat16_357"] button')
    await page.locator('#histogram').waitFor({ state: 'visible' })
    const size = tensor.data_offsets[1] - tensor.data_offsets[0]
    expect(Number(await page.getAttribute('#detail-status', 'data-bytes'))).toBe(size)
    const start = 8 + parsed.headerSize + tensor.data_offsets[0]
    const bits = new Uint16Array(bytes.slice(start, start + size).buffer)
    const values = Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0])
    const finite = values.filter(Number.isFinite)
    const stats = Object.fromEntries(
      await page.$$eval('#stats [data-stat] dd', (dds) => dds.map((dd) => [dd.parentElement!.dataset.stat, Number((dd as HTMLElement).dataset.value)])),
    )
    expect(stats.elements).toBe(values.length)
    expect(stats.finite).toBe(finite.length)
    expect(stats.min).toBe(Math.min(...finite))
    expect(stats.max).toBe(Math.max(...finite))
    expect(stats.mean).toBeCloseTo(finite.reduce((a, b) => a + b, 0) / finite.length, 6)
    const bars = await page.$$eval('#histogram rect.bar', (rects) => rects.map((r) => Number(r.getAttribute('data-count'))))
    expect(bars.reduce((a, b) => a + b, 0)).toBe(finite.length)
    expect(await page.getAttribute('#tensors tbody tr[data-name="bfloat16_357"]', 'aria-current')).toBe('true')
    await screenshot(page, 'inspector-histogram')
    await page.emulateMedia({ colorScheme: 'dark' })
    await screenshot(page, 'inspector-histogram-dark')
  })

  test('drag and drop of a real model file; a tensor of real weights', async () => {
    const name = 'catundchat__stable-diffusion-v1.5-lora__pytorch_lora_weights.safetensors'
    const bytes = readFileSync(join(REAL, name))
    const parsed = parse(new Uint8Array(bytes))
    // A drop event carrying the file, as the browser makes one when a file is dropped on the page.
    const transfer = await page.evaluateHandle(
      ({ data, fileName }) => {
        const dt = new DataTransfer()
        dt.items.add(new File([Uint8Array.from(atob(data), (c) => c.charCodeAt(0))], fileName))
        return dt
      },
      { data: bytes.toString('base64'), fileName: name },
    )
    await page.dispatchEvent('#drop-zone', 'drop', { dataTransfer: transfer })
    await expectFileShown(page, parsed, name)
    // 256 tensors, 3 MB: the header (and at most the first 64 KiB read) is all the page took.
    expect(await headerBytes(page)).toBeLessThan(128 * 1024)

    const tensor = parsed.tensors.reduce((a, b) => (product(b.shape) > product(a.shape) ? b : a))
    await page.click(`#tensors tbody tr[data-name="${tensor.name}"]`)
    await page.locator('#histogram').waitFor({ state: 'visible' })
    expect(Number(await page.getAttribute('#detail-status', 'data-bytes'))).toBe(tensor.data_offsets[1] - tensor.data_offsets[0])
    const start = 8 + parsed.headerSize + tensor.data_offsets[0]
    const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + start + product(tensor.shape) * 4))
    const elements = await page.getAttribute('#stats [data-stat="elements"] dd', 'data-value')
    const max = await page.getAttribute('#stats [data-stat="max"] dd', 'data-value')
    expect(Number(elements)).toBe(values.length)
    expect(Number(max)).toBe(values.reduce((a, b) => Math.max(a, b), -Infinity))
    await screenshot(page, 'inspector-lora')
  })

  test('an invalid file shows its error code and message', async () => {
    const path = join(REAL, 'invalid/syoyo__safetensors-cpp__safetensors_abuse_attempt_1.safetensors')
    const bytes = readFileSync(path)
    // The prefix claims a header longer than the rest of the file: InvalidHeaderLength by the format's rules.
    expect(Number(bytes.readBigUInt64LE(0))).toBeGreaterThan(bytes.length - 8)
    await page.setInputFiles('#file-input', path)
    await page.locator('#error').waitFor({ state: 'visible' })
    expect(await page.textContent('#error-code')).toBe('InvalidHeaderLength')
    expect(await page.textContent('#error-message')).toMatch(/\d+/)
    expect(await page.isVisible('#file-view')).toBe(false)
    await screenshot(page, 'inspector-invalid')
  })

  describe('a 5 GiB sparse file by URL', () => {
    let dir: string
    let server: TestServer
    let parsed: Parsed

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'safetensors-inspector-'))
      const path = join(dir, 'model-5GiB.safetensors')
      parsed = writeSparseModel(path, 5 * GiB)
      server = await serveFiles({ 'model-5GiB.safetensors': path }, { cors: true })
    })

    afterAll(async () => {
      await server?.close()
      if (dir) rmSync(dir, { recursive: true, force: true })
    })

    test("the table appears after reading less than 1 MiB, by the page's count and by the server's", async () => {
      const url = `${server.url}model-5GiB.safetensors`
      await page.fill('#url-input', url)
      await page.click('#url-form button[type="submit"]')
      await expectFileShown(page, parsed, url)
      expect(parsed.fileSize).toBe(5 * GiB)
      expect(parsed.headerSize).toBeGreaterThan(64 * 1024) // more than one read's worth of header
      const pageCount = await headerBytes(page)
      expect(pageCount).toBeGreaterThanOrEqual(8 + parsed.headerSize)
      expect(pageCount).toBeLessThan(MiB)
      expect(server.bytesSent()).toBeLessThan(MiB)
      expect(server.bytesSent()).toBe(pageCount)
      expect(
        server.ranges().every((r) => /^bytes=\d+-\d+$/.test(r)),
        server.ranges().join(', '),
      ).toBe(true)
      await screenshot(page, 'inspector-5gib')

      // One small tensor of it: exactly its bytes come over the wire.
      const small = parsed.tensors.find((t) => t.name.endsWith('input_layernorm.weight'))!
      const before = server.bytesSent()
      await page.click(`#tensors tbody tr[data-name="${small.name}"] button`)
      await page.locator('#histogram').waitFor({ state: 'visible' })
      expect(server.bytesSent() - before).toBe(small.data_offsets[1] - small.data_offsets[0])
      expect(await page.getAttribute('#stats [data-stat="max"] dd', 'data-value')).toBe('0')

      // A tensor above 256 MiB is not read on the first click: the page asks first.
      const big = parsed.tensors.find((t) => t.data_offsets[1] - t.data_offsets[0] > 256 * MiB)!
      const beforeBig = server.bytesSent()
      await page.click(`#tensors tbody tr[data-name="${big.name}"] button`)
      await page.locator('#read-anyway').waitFor({ state: 'visible' })
      expect(server.bytesSent()).toBe(beforeBig)
      expect(await page.isHidden('#histogram')).toBe(true)

      // The page's address keeps the URL, so a link opens the same view.
      expect(new URL(page.url()).searchParams.get('url')).toBe(url)
      const linked = await browser.newPage()
      await linked.goto(page.url())
      await expectFileShown(linked, parsed, url)
      await linked.close()
    })
  })
})

/**
 * Writes a sparse file of exactly `size` bytes: a header shaped like a decoder-only model's (BF16
 * matrices, F32 norms, many layers so the header outgrows a first 64 KiB read), then a hole. The last
 * tensor takes up whatever is left, so the file size is exact.
 */
function writeSparseModel(path: string, size: number): Parsed {
  const hidden = 1536
  const intermediate = 4096
  const vocab = 32000
  const layer = (i: number): Array<[string, string, number[]]> => [
    [`model.layers.${i}.input_layernorm.weight`, 'F32', [hidden]],
    [`model.layers.${i}.self_attn.q_proj.weight`, 'BF16', [hidden, hidden]],
    [`model.layers.${i}.self_attn.k_proj.weight`, 'BF16', [hidden, hidden]],
    [`model.layers.${i}.self_attn.v_proj.weight`, 'BF16', [hidden, hidden]],
    [`model.layers.${i}.self_attn.o_proj.weight`, 'BF16', [hidden, hidden]],
    [`model.layers.${i}.post_attention_layernorm.weight`, 'F32', [hidden]],
    [`model.layers.${i}.mlp.gate_proj.weight`, 'BF16', [intermediate, hidden]],
    [`model.layers.${i}.mlp.up_proj.weight`, 'BF16', [intermediate, hidden]],
    [`model.layers.${i}.mlp.down_proj.weight`, 'BF16', [hidden, intermediate]],
  ]
  const bytesOf = (dtype: string, shape: number[]) => product(shape) * ({ F32: 4, BF16: 2, U8: 1 } as Record<string, number>)[dtype]
  // lm_head is F32 and so above the page's 256 MiB read-on-second-click threshold.
  const fixed: Array<[string, string, number[]]> = [
    ['model.embed_tokens.weight', 'BF16', [vocab, hidden]],
    ['model.norm.weight', 'F32', [hidden]],
    ['lm_head.weight', 'F32', [2 * vocab, hidden]],
  ]
  const tensors = [...fixed]
  const budget = size - 200_000 // leaves room for the header and the filler tensor
  let used = fixed.reduce((s, [, d, sh]) => s + bytesOf(d, sh), 0)
  for (let i = 0; ; i++) {
    const next = layer(i)
    const more = next.reduce((s, [, d, sh]) => s + bytesOf(d, sh), 0)
    if (used + more > budget) break
    tensors.push(...next)
    used += more
  }
  const metadata = { format: 'pt', note: 'sparse test file: the tensor data is a hole' }
  // The filler's size depends on the header's length and the other way round: repeat until they agree.
  let filler = 0
  let header = ''
  for (;;) {
    const entries: Record<string, unknown> = { __metadata__: metadata }
    let offset = 0
    for (const [name, dtype, shape] of [...tensors, ['extra.padding', 'U8', [filler]] as [string, string, number[]]]) {
      entries[name] = { dtype, shape, data_offsets: [offset, offset + bytesOf(dtype, shape)] }
      offset += bytesOf(dtype, shape)
    }
    header = JSON.stringify(entries)
    header += ' '.repeat((8 - (header.length % 8)) % 8)
    const fits = size - 8 - header.length - used
    if (fits === filler) break
    filler = fits
  }
  const prefix = Buffer.alloc(8 + header.length)
  prefix.writeBigUInt64LE(BigInt(header.length))
  prefix.write(header, 8, 'utf8')
  writeFileSync(path, prefix)
  truncateSync(path, size)
  const parsed = parse(new Uint8Array(prefix))
  parsed.fileSize = size
  return parsed
}
