// The inspector page (inspector/) in headless Chromium, driven by Playwright from Node: load real
// fixtures by the file picker and by drag and drop, check the table, totals and metadata against the
// header parsed here with JSON.parse, open a tensor's statistics, load an invalid file, open a 5 GiB
// sparse file by URL while counting the bytes on both sides, open the real sharded model as a folder,
// as several files and by its index URL (checked against the index and shard headers parsed here), and
// watch the progress bar of a tensor read that the server holds half-way, and cancel one. At a phone's
// width and a desktop's, measure that nothing sticks out of the page or is clipped and that names break
// only after . _ - /. Screenshots go to test/screenshots/ (gitignored) for a person to look at.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Browser, chromium, type Page } from 'playwright'
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { startInspectorServer } from '../../../scripts/inspector.js'
import { serveFiles, type TestServer } from '../../http-server.ts'
import { buildFile, headerOf } from '../../read-helpers.ts'
import { chromiumChoice } from './chromium.ts'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const REAL = join(ROOT, 'test/fixtures/real')
const SHARDED = join(REAL, 'sharded/fluxml__safetensors.jl')
/** A config.json beside a model served by URL, as real models have one: openModel reads it (a quantized model's says so). */
const CONFIG = join(mkdtempSync(join(tmpdir(), 'safetensors-inspector-config-')), 'config.json')
writeFileSync(CONFIG, '{"model_type": "llama"}')
const SCREENSHOTS = join(ROOT, 'test/screenshots')
const MiB = 1024 * 1024
const GiB = 1024 * MiB
/** A phone (an iPhone 12 to 15 in portrait) and a desktop. */
const SIZES = [
  { width: 390, height: 844 },
  { width: 1280, height: 800 },
]
/** Where the page may break a name across lines (inspector.js's breakable()). */
const NAME_BREAKS = '._-/'

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

/** The tensor table as the page shows it (`shard` only where the page shows that column). */
function tableRows(page: Page) {
  return page.$$eval('#tensors tbody tr', (trs) =>
    trs.map((tr) => {
      const cells = Array.from((tr as HTMLTableRowElement).cells)
      return {
        ...(cells.length > 5 ? { shard: cells[5].textContent } : {}),
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

async function screenshot(page: Page, name: string, fullPage = true) {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage, animations: 'disabled' })
}

/**
 * What sticks out or is clipped, measured in the page: every shown element inside the viewport's width,
 * and no element whose content is wider than its box (a cell whose text runs out of it, a scroller that
 * has to scroll sideways, the page itself). [] when all is well.
 */
function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const problems: string[] = []
    const width = document.documentElement.clientWidth
    const what = (e: Element) =>
      `<${e.tagName.toLowerCase()}${e.id ? ` id=${e.id}` : ''}${e.className ? ` class="${e.className}"` : ''}> "${(e.textContent ?? '').trim().slice(0, 30)}"`
    for (const e of [document.documentElement, ...document.body.querySelectorAll('*')]) {
      // The file inputs are hidden on purpose (a 1 px clipped box); hidden elements have no box.
      if (e.closest('.visually-hidden')) continue
      const rect = e.getBoundingClientRect()
      if (rect.width === 0 && rect.height === 0) continue
      if (rect.left < -0.5 || rect.right > width + 0.5) problems.push(`${what(e)} spans x ${rect.left}..${rect.right}, the viewport 0..${width}`)
      // An input's text scrolls inside it by design.
      if (e instanceof HTMLElement && !(e instanceof HTMLInputElement) && e.clientWidth > 0 && e.scrollWidth > e.clientWidth)
        problems.push(`${what(e)}: ${e.scrollWidth} px of content in ${e.clientWidth} px`)
    }
    return problems
  })
}

interface Lines {
  text: string
  lines: number
  /** Each line break as the two characters around it. */
  breaks: string[]
}

/**
 * Where the text of each element of `selector` breaks into lines, from the boxes the browser laid out:
 * a character whose box starts below the previous one's bottom begins a new line.
 */
function lineBreaks(page: Page, selector: string): Promise<Lines[]> {
  return page.$$eval(selector, (elements) =>
    elements.map((e) => {
      const boxes: Array<{ char: string; top: number; bottom: number }> = []
      const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT)
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node.textContent ?? ''
        for (let i = 0; i < text.length; i++) {
          const range = document.createRange()
          range.setStart(node, i)
          range.setEnd(node, i + 1)
          const [box] = range.getClientRects()
          if (box) boxes.push({ char: text[i], top: box.top, bottom: box.bottom })
        }
      }
      const breaks = boxes.slice(1).flatMap((b, i) => (b.top >= boxes[i].bottom - 1 ? [boxes[i].char + b.char] : []))
      return { text: e.textContent ?? '', lines: breaks.length + 1, breaks }
    }),
  )
}

/**
 * Names break only after . _ - or /, and are not squeezed: at least 20 characters a line on average
 * (the report that started this: nine at 390 px). Returns how many names broke at all, so a caller can
 * check that the measure met some breaks.
 */
async function expectNamesBreakWell(page: Page, selector: string): Promise<number> {
  const measured = await lineBreaks(page, selector)
  expect(measured.length, selector).toBeGreaterThan(0)
  for (const { text, lines, breaks } of measured) {
    expect(
      breaks.filter((pair) => !NAME_BREAKS.includes(pair[0])),
      `${text} breaks mid-word`,
    ).toEqual([])
    expect(lines, `${text} in ${lines} lines`).toBeLessThanOrEqual(Math.max(1, Math.ceil(text.length / 20)))
  }
  return measured.filter((m) => m.lines > 1).length
}

/** At each of SIZES: nothing sticks out or is clipped, names break well; a screenshot of each. */
async function expectLaidOut(page: Page, name: string, names = '#file-name, #tensors td.name button, #tensors td.shard, #metadata td:first-child') {
  for (const size of SIZES) {
    await page.setViewportSize(size)
    expect(await layoutProblems(page), `${name} at ${size.width} px`).toEqual([])
    await expectNamesBreakWell(page, names)
    // A panel over the page (a phone's) would land mid-page in a full-page picture: what is in view, then.
    await screenshot(page, `${name}-${size.width}`, !(await page.isVisible('#detail')))
  }
}

/**
 * Clicks a tensor's row at each of SIZES: its details come into view, all of them (the panel is never
 * taller than the window), the row stays visible (on a phone, above them), names keep their width, and
 * the layout holds. A screenshot of what is in view.
 */
async function expectDetailInView(page: Page, tensor: string, name: string, ready = '#histogram') {
  for (const size of SIZES) {
    await page.setViewportSize(size)
    // From the table alone, as a reader comes to it (on a phone an open panel covers rows).
    if (await page.isVisible('#detail')) await page.click('#detail-close')
    await page.click(`#tensors tbody tr[data-name="${tensor}"] button`)
    await page.locator(ready).waitFor({ state: 'visible' })
    const view = await page.evaluate((tensor) => {
      const { top, bottom } = document.getElementById('detail')!.getBoundingClientRect()
      const row = document.querySelector(`#tensors tbody tr[data-name="${CSS.escape(tensor)}"] td.name`)!
      const box = row.getBoundingClientRect()
      const seen = document.elementFromPoint(box.left + 4, box.top + box.height / 2)
      return { top, bottom, height: innerHeight, rowSeen: row.contains(seen) }
    }, tensor)
    expect(view.top, `${name} at ${size.width} px: the details' top`).toBeGreaterThanOrEqual(0)
    expect(view.bottom, `${name} at ${size.width} px: the details' bottom`).toBeLessThanOrEqual(view.height + 0.5)
    expect(view.rowSeen, `${name} at ${size.width} px: the clicked row is not hidden`).toBe(true)
    expect(await layoutProblems(page), `${name} at ${size.width} px`).toEqual([])
    await expectNamesBreakWell(page, '#tensors td.name button, #detail-name')
    await screenshot(page, `${name}-${size.width}`, false)
  }
}

/** The rows the page must show for these tensors, in this order. */
const expectedRows = (tensors: Array<Entry & { name: string; shard?: string }>) =>
  tensors.map((t) => ({
    ...(t.shard === undefined ? {} : { shard: t.shard }),
    name: t.name,
    shownName: t.name,
    dtype: t.dtype,
    shape: `[${t.shape.join(', ')}]`,
    params: product(t.shape),
    paramsText: product(t.shape).toLocaleString('en-US'),
    bytes: t.data_offsets[1] - t.data_offsets[0],
  }))

/** The totals, tensor count, metadata and error box the page must show for `parsed`. */
async function expectSummaryShown(page: Page, parsed: Parsed, metadata: Record<string, string> | null) {
  const expected = totals(parsed)
  const all = Object.values(expected).reduce((s, r) => [s[0] + r[0], s[1] + r[1], s[2] + r[2]], [0, 0, 0])
  expect(await totalsRows(page)).toEqual({ ...expected, all })
  expect(await page.textContent('#fact-tensors')).toBe(parsed.tensors.length.toLocaleString('en-US'))
  const shown = await page.$$eval('#metadata tbody tr', (trs) => trs.map((tr) => Array.from((tr as HTMLTableRowElement).cells).map((c) => c.textContent)))
  expect(Object.fromEntries(shown)).toEqual(metadata ?? {})
  expect(await page.isVisible('#metadata-empty')).toBe(metadata === null || Object.keys(metadata).length === 0)
  expect(await page.isVisible('#error')).toBe(false)
}

/** Checks everything the page shows about a file against the header parsed here. */
async function expectFileShown(page: Page, parsed: Parsed, label: string) {
  await page.locator('#file-view').waitFor({ state: 'visible' })
  expect(await page.textContent('#file-name')).toBe(label)
  // Default order: data order, as in the file.
  expect(await tableRows(page)).toEqual(expectedRows(parsed.tensors))
  expect(await page.isVisible('#shard-column')).toBe(false)
  expect(await page.isVisible('#index-check')).toBe(false)
  await expectSummaryShown(page, parsed, parsed.metadata)
}

interface Sharded {
  index: { metadata: Record<string, unknown>; weight_map: Record<string, string> }
  /** Every tensor the index lists, with its shard, read from that shard's own header. */
  tensors: Array<Entry & { name: string; shard: string }>
  shardFiles: string[]
}

/** The sharded fixture, from its index and shard headers parsed here. */
function readSharded(): Sharded {
  const index = JSON.parse(readFileSync(join(SHARDED, 'model.safetensors.index.json'), 'utf8')) as Sharded['index']
  const shardFiles = [...new Set(Object.values(index.weight_map))]
  const tensors = shardFiles.flatMap((shard) =>
    parse(new Uint8Array(readFileSync(join(SHARDED, shard))))
      .tensors.filter((t) => index.weight_map[t.name] === shard)
      .map((t) => ({ ...t, shard })),
  )
  return { index, tensors, shardFiles }
}

/** Checks what the page shows about the sharded fixture: rows with their shard, totals, the index checks. */
async function expectModelShown(page: Page, model: Sharded, label: string) {
  await page.locator('#file-view').waitFor({ state: 'visible' })
  expect(await page.textContent('#file-name')).toBe(label)
  expect(await page.isVisible('#shard-column')).toBe(true)
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1)
  // Every tensor of the weight_map once, in the shard the index names.
  expect((await tableRows(page)).sort(byName)).toEqual(expectedRows(model.tensors).sort(byName))
  expect(model.tensors.map((t) => t.name).sort()).toEqual(Object.keys(model.index.weight_map).sort())
  expect(await page.getAttribute('#fact-size', 'data-shards')).toBe(String(model.shardFiles.length))
  // The index's metadata is shown as JSON values; totals are those of the listed tensors.
  const metadata = Object.fromEntries(Object.entries(model.index.metadata).map(([k, v]) => [k, JSON.stringify(v)]))
  await expectSummaryShown(page, { headerSize: 0, fileSize: 0, metadata: null, tensors: model.tensors }, metadata)
  const checks = Object.fromEntries(
    await page.$$eval('#index-check li', (lis) => lis.map((li) => [(li as HTMLElement).dataset.check, (li as HTMLElement).dataset.ok])),
  )
  const bytes = model.tensors.reduce((s, t) => s + t.data_offsets[1] - t.data_offsets[0], 0)
  expect(checks).toEqual({ 'weight-map': 'true', 'total-size': String(model.index.metadata.total_size === bytes), unlisted: 'true' })
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
    // A local file: nothing came over the network, and the page does not pretend otherwise.
    expect(await page.isVisible('#fact-network')).toBe(false)
    await expectLaidOut(page, 'inspector-file')

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
    await expectDetailInView(page, 'bfloat16_357', 'inspector-histogram')
    // × (or Esc) closes the details and unmarks the row.
    await page.click('#detail-close')
    expect(await page.isVisible('#detail')).toBe(false)
    expect(await page.getAttribute('#tensors tbody tr[data-name="bfloat16_357"]', 'aria-current')).toBeNull()
    expect(await page.evaluate(() => document.activeElement?.closest('tr')?.dataset.name)).toBe('bfloat16_357')
    await page.click('#tensors tbody tr[data-name="bfloat16_357"] button')
    await page.locator('#histogram').waitFor({ state: 'visible' })
    await page.keyboard.press('Escape')
    expect(await page.isVisible('#detail')).toBe(false)
    await page.click('#tensors tbody tr[data-name="bfloat16_357"] button')
    await page.locator('#histogram').waitFor({ state: 'visible' })
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
    // Its names are long (down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_k_lora.down.weight):
    // on a phone every one of them wraps, at . and _ only.
    await expectLaidOut(page, 'inspector-lora')
    await page.setViewportSize(SIZES[0])
    expect(await expectNamesBreakWell(page, '#tensors td.name button')).toBe(parsed.tensors.length)

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
    await expectDetailInView(page, tensor.name, 'inspector-lora-detail')
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
    expect(await page.textContent('#error-file')).toBe(basename(path))
    expect(await page.isVisible('#error-hint')).toBe(false)
    expect(await page.isVisible('#file-view')).toBe(false)
    await expectLaidOut(page, 'inspector-invalid', '#error-file')
  })

  test('a folder of one model.safetensors beside its config.json (the commonest layout on the Hub) opens that file', async () => {
    const name = 'fluxml__safetensors.jl__model.with_metadata.safetensors'
    const dir = mkdtempSync(join(tmpdir(), 'safetensors-inspector-'))
    try {
      const folder = join(dir, 'tiny-model')
      mkdirSync(folder)
      writeFileSync(join(folder, 'model.safetensors'), readFileSync(join(REAL, name)))
      writeFileSync(join(folder, 'config.json'), '{"model_type": "llama"}')
      await page.setInputFiles('#folder-input', folder)
      await expectFileShown(page, parse(new Uint8Array(readFileSync(join(REAL, name)))), 'tiny-model/model.safetensors')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('the URL box is emptied when a file is picked: it never shows a URL of something else', async () => {
    const name = 'fluxml__safetensors.jl__model.safetensors'
    // A URL that is not a SafeTensors file (the page's own style sheet).
    const other = `${inspector.url}inspector.css`
    await page.goto(`${inspector.url}?url=${encodeURIComponent(other)}`)
    await page.locator('#error').waitFor({ state: 'visible' })
    expect(await page.inputValue('#url-input')).toBe(other)
    expect(await page.textContent('#error-file')).toBe(other)
    await page.setInputFiles('#file-input', join(REAL, name))
    await expectFileShown(page, parse(new Uint8Array(readFileSync(join(REAL, name)))), name)
    expect(await page.inputValue('#url-input')).toBe('')
    expect(new URL(page.url()).search).toBe('')
    // Typed but not opened, then a reload: the box starts empty, as the address has no ?url=.
    await page.fill('#url-input', 'https://example.org/typed.safetensors')
    await page.reload()
    expect(await page.inputValue('#url-input')).toBe('')
  })

  describe('the real sharded model', () => {
    const model = readSharded()
    const files = [...model.shardFiles, 'model.safetensors.index.json'].map((name) => join(SHARDED, name))
    let server: TestServer

    beforeAll(async () => {
      server = await serveFiles(
        { ...Object.fromEntries(readdirSync(SHARDED).map((name) => [name, join(SHARDED, name)])), 'config.json': CONFIG },
        { cors: true },
      )
    })

    afterAll(async () => {
      await server?.close()
    })

    test('the fixture is what this test expects: 6 shards, an index that matches its total_size', () => {
      expect(model.shardFiles).toHaveLength(6)
      expect(model.index.metadata.total_size).toBe(model.tensors.reduce((s, t) => s + t.data_offsets[1] - t.data_offsets[0], 0))
    })

    test('as a folder (directory picker): rows with their shard, totals, the index checked; a tensor from a shard', async () => {
      await page.setInputFiles('#folder-input', SHARDED)
      await expectModelShown(page, model, 'fluxml__safetensors.jl/')
      // Sorting by shard groups the tensors of each shard, shards in name order.
      await page.click('#tensors th[data-key="shard"] button')
      const shards = (await tableRows(page)).map((r) => r.shard!)
      expect(shards).toEqual([...shards].sort())
      await expectLaidOut(page, 'inspector-model-folder')

      const tensor = model.tensors.find((t) => t.name === 'float64_357')!
      await page.click('#tensors tbody tr[data-name="float64_357"]')
      await page.locator('#histogram').waitFor({ state: 'visible' })
      expect(Number(await page.getAttribute('#detail-status', 'data-bytes'))).toBe(tensor.data_offsets[1] - tensor.data_offsets[0])
      expect(Number(await page.getAttribute('#stats [data-stat="elements"] dd', 'data-value'))).toBe(product(tensor.shape))
    })

    test('as several files (the shards and the index picked together)', async () => {
      await page.setInputFiles('#file-input', files)
      await expectModelShown(page, model, 'model.safetensors.index.json')
    })

    test('the index picked alone: Io, the file named, and a hint to pick the folder or the shards with it', async () => {
      await page.setInputFiles('#file-input', join(SHARDED, 'model.safetensors.index.json'))
      await page.locator('#error').waitFor({ state: 'visible' })
      expect(await page.textContent('#error-code')).toBe('Io')
      expect(await page.textContent('#error-file')).toBe('model.safetensors.index.json')
      expect(await page.textContent('#error-message')).toContain(model.shardFiles[0])
      expect(await page.isVisible('#error-hint')).toBe(true)
      expect(await page.textContent('#error-hint')).toMatch(/folder.*shard/)
      await expectLaidOut(page, 'inspector-index-alone', '#error-file')
    })

    test('an index that puts a tensor in the wrong shard shows TensorNotFound; a missing shard shows Io', async () => {
      const moved = { ...model.index, weight_map: { ...model.index.weight_map, float64_357: model.shardFiles[0] } }
      const index = { name: 'model.safetensors.index.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(moved)) }
      await page.setInputFiles('#file-input', [
        ...files.slice(0, -1).map((path) => ({ name: basename(path), mimeType: 'application/octet-stream', buffer: readFileSync(path) })),
        index,
      ])
      await page.locator('#error').waitFor({ state: 'visible' })
      expect(await page.textContent('#error-code')).toBe('TensorNotFound')
      expect(await page.textContent('#error-file')).toBe('model.safetensors.index.json')
      expect(await page.textContent('#error-message')).toContain('float64_357')
      // Not an Io error: the files are all there, so no hint about picking them.
      expect(await page.isVisible('#error-hint')).toBe(false)
      await screenshot(page, 'inspector-model-bad-index')
      await page.setInputFiles(
        '#file-input',
        files.filter((f) => !f.endsWith(model.shardFiles[3])),
      )
      await page.locator('#error-code:text("Io")').waitFor()
      expect(await page.textContent('#error-message')).toContain(model.shardFiles[3])
    })

    test('by the URL of its index: the same, read over HTTP', async () => {
      const url = `${server.url}model.safetensors.index.json`
      await page.fill('#url-input', url)
      await page.click('#url-form button[type="submit"]')
      await expectModelShown(page, model, url)
      // The index, each shard's header and the config.json beside them: no more than the files hold.
      const sizes = [...files, CONFIG].reduce((s, path) => s + statSync(path).size, 0)
      expect(server.bytesSent()).toBeLessThanOrEqual(sizes)
      expect(Number(await page.getAttribute('#bytes-read', 'data-header-bytes'))).toBe(server.bytesSent())
      // Without the cache, the network delivered what was read.
      expect(Number(await page.getAttribute('#bytes-network', 'data-bytes'))).toBe(server.bytesSent())
      await screenshot(page, 'inspector-model-url')
    })
  })

  describe('the cache for URLs', () => {
    const model = readSharded()
    const lora = 'catundchat__stable-diffusion-v1.5-lora__pytorch_lora_weights.safetensors'
    let server: TestServer

    beforeAll(async () => {
      const files = Object.fromEntries(readdirSync(SHARDED).map((name) => [name, join(SHARDED, name)]))
      server = await serveFiles({ ...files, [lora]: join(REAL, lora), 'config.json': CONFIG }, { cors: true })
    })

    afterAll(async () => {
      await server?.close()
    })

    const usage = async () => {
      await page.locator('#cache-usage[data-bytes]').waitFor()
      return Number(await page.getAttribute('#cache-usage', 'data-bytes'))
    }

    /** What the page says came over the network: the open's total, and the status line's account. */
    const network = async () => Number(await page.getAttribute('#bytes-network', 'data-bytes'))

    test('off by default; on, a second visit revalidates each file with one byte, shows the usage, and Clear empties it', async () => {
      const url = `${server.url}model.safetensors.index.json`
      expect(await page.isChecked('#cache-enabled')).toBe(false)
      expect(await page.isHidden('#cache-clear')).toBe(true)
      await page.check('#cache-enabled')
      await page.locator('#cache-clear').waitFor({ state: 'visible' })
      await page.click('#cache-clear') // whatever an earlier run left
      await page.locator('#cache-usage:text("holds 0 bytes")').waitFor()

      // A 3 MB file: the header takes one 64 KiB read, and the cache fetches the whole first 1 MiB
      // block to keep. The page says both, the second as the server counted it.
      server.clear()
      await page.fill('#url-input', `${server.url}${lora}`)
      await page.click('#url-form button[type="submit"]')
      await page.locator('#file-view').waitFor({ state: 'visible' })
      await server.settled()
      expect(await headerBytes(page)).toBe(64 * 1024)
      expect(server.bytesSent()).toBe(MiB)
      expect(await network()).toBe(MiB)
      expect(await page.textContent('#status')).toContain('1,048,576 bytes over the network (the cache fetches whole blocks')

      server.clear()
      await page.fill('#url-input', url)
      await page.click('#url-form button[type="submit"]')
      await expectModelShown(page, model, url)
      await page.locator('#cache-usage:not(:text("holds 0 bytes"))').waitFor()
      const stored = await usage()
      expect(stored).toBeGreaterThan(0)
      await server.settled()
      expect(await network()).toBe(server.bytesSent())

      // A second visit: the box is still ticked, and only the revalidations reach the server.
      await page.goto(inspector.url)
      expect(await page.isChecked('#cache-enabled')).toBe(true)
      server.clear()
      await page.fill('#url-input', url)
      await page.click('#url-form button[type="submit"]')
      await expectModelShown(page, model, url)
      // The index, each shard and the config.json beside them.
      expect(server.ranges()).toEqual(Array(model.shardFiles.length + 2).fill('bytes=0-0'))
      expect(server.bytesSent()).toBe(model.shardFiles.length + 2)
      expect(await network()).toBe(model.shardFiles.length + 2)
      const read = await headerBytes(page)
      expect(await page.textContent('#status')).toContain(
        `${server.bytesSent()} bytes over the network, at least ${(read - server.bytesSent()).toLocaleString('en-US')} from the cache`,
      )
      // A tensor read wholly from the cache: nothing over the network, and the page says so.
      await page.click('#tensors tbody tr[data-name="float64_357"] button')
      await page.locator('#histogram').waitFor({ state: 'visible' })
      expect(server.bytesSent()).toBe(model.shardFiles.length + 2)
      expect(await page.getAttribute('#detail-status', 'data-network')).toBe('0')
      expect(await page.textContent('#detail-status')).toContain('all from the cache, nothing over the network')
      await expectLaidOut(page, 'inspector-cache')

      // Turned off, and off after a reload too.
      await page.uncheck('#cache-enabled')
      await page.reload()
      expect(await page.isChecked('#cache-enabled')).toBe(false)
      await page.check('#cache-enabled')
      await page.click('#cache-clear')
      await page.locator('#cache-usage:text("holds 0 bytes")').waitFor()
      expect(await usage()).toBe(0)
    })
  })

  describe('a tensor read that the server holds half-way', () => {
    let dir: string
    let server: TestServer
    /** Holds the big tensor's request half-way until release(): each test sets its own. */
    let held: Promise<void> | undefined
    let release: () => void = () => {}
    const hold = () => (held = new Promise<void>((resolve) => (release = resolve)))
    const elements = 4 * MiB // 16 MiB of F32
    const values = Float32Array.from({ length: elements }, (_, i) => Math.sin(i / 1000))
    const file = buildFile([
      { name: 'big', dtype: 'F32', shape: [1024, elements / 1024], bytes: new Uint8Array(values.buffer) },
      { name: 'small', dtype: 'F32', shape: [4], bytes: new Uint8Array(16) },
    ])
    const { dataStart, tensors } = headerOf(file)
    const [begin, end] = tensors.big.data_offsets
    /** Whether a request's Range lies in the big tensor: the tensor is read in parallel chunks. */
    const inBig = (range: string | undefined) => {
      const [first, last] = (/^bytes=(\d+)-(\d+)$/.exec(range ?? '') ?? []).slice(1).map(Number)
      return first >= dataStart + begin && last <= dataStart + end - 1
    }

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'safetensors-inspector-'))
      writeFileSync(join(dir, 'slow.safetensors'), file)
      // Only the big tensor's requests (its parallel chunks) are held, each half-way through its body.
      server = await serveFiles(
        { 'slow.safetensors': join(dir, 'slow.safetensors') },
        { cors: true, fault: (_n, log) => (held && inBig(log.range) ? { kind: 'pause', at: 0.5, until: held } : undefined) },
      )
    })

    afterAll(async () => {
      release()
      await server?.close()
      if (dir) rmSync(dir, { recursive: true, force: true })
    })

    test('the progress bar shows the bytes so far, then gives way to the statistics', async () => {
      hold()
      await page.goto(`${inspector.url}?url=${encodeURIComponent(`${server.url}slow.safetensors`)}`)
      await page.locator('#file-view').waitFor({ state: 'visible' })
      await page.click('#tensors tbody tr[data-name="big"]')
      const bar = page.locator('#read-progress-bar')
      await bar.waitFor({ state: 'visible' })
      // Held at half the body: the page has seen part of it, and no more than the server sent.
      await expect.poll(async () => Number(await bar.getAttribute('data-loaded')), { timeout: 10_000 }).toBeGreaterThanOrEqual((end - begin) / 4)
      // One snapshot of the bar: bytes keep arriving until the server's pause, so separate reads could disagree.
      const { loaded, total, value } = await bar.evaluate((b: HTMLProgressElement) => ({
        loaded: Number(b.dataset.loaded),
        total: Number(b.dataset.total),
        value: b.value,
      }))
      expect(loaded).toBeLessThanOrEqual((end - begin) / 2)
      expect(total).toBe(end - begin)
      expect(value).toBeCloseTo(loaded / (end - begin), 6)
      expect(await page.textContent('#read-progress-text')).toMatch(/MiB of 16\.00 MiB$/)
      expect(await page.isVisible('#histogram')).toBe(false)
      for (const size of SIZES) {
        await page.setViewportSize(size)
        expect(await layoutProblems(page), `at ${size.width} px`).toEqual([])
        await screenshot(page, `inspector-progress-${size.width}`, false)
      }

      release()
      await page.locator('#histogram').waitFor({ state: 'visible' })
      expect(await page.isVisible('#read-progress')).toBe(false)
      expect(Number(await page.getAttribute('#stats [data-stat="elements"] dd', 'data-value'))).toBe(elements)
      expect(Number(await page.getAttribute('#stats [data-stat="max"] dd', 'data-value'))).toBe(values.reduce((a, b) => Math.max(a, b), -Infinity))
      // A small tensor reads without a bar.
      await page.click('#tensors tbody tr[data-name="small"]')
      await page.locator('#detail-status[data-bytes="16"]').waitFor()
      expect(await page.isVisible('#read-progress')).toBe(false)
    })

    test('Cancel stops the read (the server sees its connection closed) and leaves the page usable', async () => {
      hold()
      server.clear()
      await page.goto(`${inspector.url}?url=${encodeURIComponent(`${server.url}slow.safetensors`)}`)
      await page.locator('#file-view').waitFor({ state: 'visible' })
      await page.click('#tensors tbody tr[data-name="big"]')
      const bar = page.locator('#read-progress-bar')
      await expect.poll(async () => Number(await bar.getAttribute('data-loaded')), { timeout: 10_000 }).toBeGreaterThanOrEqual((end - begin) / 4)
      await page.click('#read-cancel')
      await page.locator('#detail-status:text("Cancelled after")').waitFor()
      expect(await page.isVisible('#read-progress')).toBe(false)
      expect(await page.isVisible('#histogram')).toBe(false)
      // Still held by the server, yet over: the page closed the connection.
      await server.settled()
      const requests = server.log.filter((e) => inBig(e.range))
      expect(requests.length).toBeGreaterThan(0)
      expect(requests.reduce((sent, e) => sent + e.bytesSent, 0)).toBeLessThan(end - begin)
      expect(await page.textContent('#detail-status')).toMatch(/^Cancelled after \d+\.\d\d MiB of 16\.00 MiB\./)
      await expectLaidOut(page, 'inspector-cancelled')

      // The page goes on: another tensor reads, and the same one again, to the end this time.
      held = undefined
      await page.click('#tensors tbody tr[data-name="small"]')
      await page.locator('#detail-status[data-bytes="16"]').waitFor()
      await page.click('#tensors tbody tr[data-name="big"]')
      await page.locator('#histogram').waitFor({ state: 'visible' })
      expect(Number(await page.getAttribute('#stats [data-stat="elements"] dd', 'data-value'))).toBe(elements)
    })
  })

  describe.each(SIZES)('at $width px', (size) => {
    beforeEach(() => page.setViewportSize(size))

    test('a new file starts at the top of its list, however far the last one was scrolled', async () => {
      const first = 'fluxml__safetensors.jl__model.with_metadata.safetensors'
      const second = 'fluxml__safetensors.jl__model.numpy.safetensors'
      await page.setInputFiles('#file-input', join(REAL, first))
      await page.locator('#file-view').waitFor({ state: 'visible' })
      const scrolled = await page.$eval('.tensor-scroll', (list) => {
        list.scrollTop = list.scrollHeight
        return list.scrollTop
      })
      expect(scrolled, 'the list of 36 tensors scrolls').toBeGreaterThan(0)
      await page.setInputFiles('#file-input', join(REAL, second))
      await page.waitForFunction((name) => document.querySelector('#file-name')?.textContent === name, second)
      expect(await page.$eval('.tensor-scroll', (list) => list.scrollTop)).toBe(0)
    })

    test('once read, the results are in view, and no column title wraps under the sticky header', async () => {
      // Scrolled to the top first, as a visitor who just picked a file is.
      await page.evaluate(() => window.scrollTo(0, 0))
      await page.setInputFiles('#file-input', join(REAL, 'fluxml__safetensors.jl__model.safetensors'))
      await page.locator('#file-view').waitFor({ state: 'visible' })
      const view = await page.$eval('#file-view', (e) => ({ top: e.getBoundingClientRect().top, height: innerHeight }))
      expect(view.top, 'the results start in the window').toBeGreaterThanOrEqual(0)
      expect(view.top, 'the results start in the upper half of the window').toBeLessThan(view.height / 2)
      // Each title's text on one line: its text is laid out in one box.
      const lines = await page.$$eval('#tensors thead th:not([hidden]) button', (buttons) =>
        buttons.map((button) => {
          const range = document.createRange()
          range.selectNodeContents(button)
          return [button.textContent, new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size]
        }),
      )
      expect(lines.length).toBe(5)
      expect(lines.filter(([, n]) => n !== 1)).toEqual([])
    })

    test('a URL of another origin that does not allow this page to read it: the error says CORS, and what to do', async () => {
      const other = await serveFiles({ 'model.safetensors': join(REAL, 'fluxml__safetensors.jl__model.safetensors') })
      try {
        const url = `${other.url}model.safetensors`
        expect(new URL(url).origin).not.toBe(new URL(inspector.url).origin)
        await page.fill('#url-input', url)
        await page.click('#url-form button[type="submit"]')
        await page.locator('#error').waitFor({ state: 'visible', timeout: 30_000 })
        expect(await page.textContent('#error-code')).toBe('Io')
        const hint = await page.textContent('#error-hint')
        expect(hint).toContain(`The server at ${new URL(url).origin} may not allow this page to read it (CORS)`)
        expect(hint).toContain('Access-Control-Allow-Origin')
        expect(hint).toContain('open it with the file picker')
      } finally {
        await other.close()
        // The browser's own reports of the blocked reads are what this test makes happen.
        const blocked = pageErrors.filter((e) => /CORS|Failed to load resource/.test(e))
        pageErrors.splice(0, pageErrors.length, ...pageErrors.filter((e) => !blocked.includes(e)))
      }
    }, 60_000)
  })

  describe('a 5 GiB sparse file by URL', () => {
    let dir: string
    let server: TestServer
    let parsed: Parsed
    /** While set, every request for bytes at or past `heldFrom` stops half-way until it resolves. */
    let held: Promise<void> | undefined
    let release: () => void = () => {}
    let heldFrom = Infinity

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'safetensors-inspector-'))
      const path = join(dir, 'model-5GiB.safetensors')
      parsed = writeSparseModel(path, 5 * GiB)
      const from = (range: string | undefined) => Number(/^bytes=(\d+)-/.exec(range ?? '')?.[1] ?? -1)
      server = await serveFiles(
        { 'model-5GiB.safetensors': path },
        { cors: true, fault: (_n, log) => (held && from(log.range) >= heldFrom ? { kind: 'pause', at: 0.5, until: held } : undefined) },
      )
    })

    afterAll(async () => {
      release()
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
      expect(Number(await page.getAttribute('#bytes-network', 'data-bytes'))).toBe(server.bytesSent())
      // Totals in the billions, a 5 GiB file: still nothing clipped on a phone.
      await expectLaidOut(page, 'inspector-5gib')

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

      // Read anyway, then cancelled part-way (the server holds each of its requests half-way): every
      // connection of the read closes, far short of the tensor, and the page reads on.
      const bigBytes = big.data_offsets[1] - big.data_offsets[0]
      expect(bigBytes).toBeGreaterThan(320 * MiB)
      heldFrom = 8 + parsed.headerSize + big.data_offsets[0]
      held = new Promise<void>((resolve) => (release = resolve))
      await page.click('#read-anyway')
      await page.locator('#read-progress-bar[data-loaded]').waitFor()
      await page.click('#read-cancel')
      await page.locator('#detail-status:text("Cancelled after")').waitFor()
      // Every request of the read stopped half-way by the server: settled() returns only because the page
      // closed them.
      await server.settled()
      expect(server.bytesSent() - beforeBig).toBeLessThanOrEqual(bigBytes / 2)
      held = undefined
      await page.click(`#tensors tbody tr[data-name="${small.name}"] button`)
      await page.locator('#histogram').waitFor({ state: 'visible' })

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
