// @ts-check
// The inspector page: opens a SafeTensors file or a sharded model (picked, dropped, a folder, or by URL)
// through the built package, reading only the headers (and a model's index, which openModel checks
// against its shards); a click on a tensor reads that tensor alone, with a progress bar, and shows
// statistics computed in wasm. The library's onProgress counts every byte read, so the page can say how
// many bytes it really read. Everything shown from the files goes in through textContent: names,
// metadata and the index are untrusted text.
import { createCache, open, openModel, SafetensorsError, SafetensorsModel, tensorStats } from '../dist/index.js'

/** @typedef {import('../dist/types/index.d.ts').SafetensorsFile} SafetensorsFile */
/** @typedef {import('../dist/types/index.d.ts').OpenOptions} OpenOptions */
/** @typedef {SafetensorsFile | SafetensorsModel} Reader */
/**
 * A tensor as the table shows it; `order` is its place in the file (or the model: shard by shard, each
 * in data order), `shard` its shard's file name ('' for a single file).
 * @typedef {{ name: string, dtype: string, shape: number[], params: number, bytes: number, order: number, shard: string }} Row
 */

/** More rows than this make the table slow to build and useless to scroll; the filter narrows it. */
const MAX_ROWS = 2000
const BINS = 48
const PREVIEW_VALUES = 24
/** Tensors larger than this are read only after a second click. */
const LARGE_TENSOR = 256 * 1024 * 1024
/** Reads of at least this many bytes show a progress bar (smaller ones would only flash it). */
const PROGRESS_FROM = 1024 * 1024

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id))
const inputById = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ ($(id))
const tableById = (/** @type {string} */ id) => /** @type {HTMLTableElement} */ ($(id))
const numberFormat = new Intl.NumberFormat('en-US')
const collator = new Intl.Collator('en', { numeric: true })

/**
 * The open file or model. `counter.bytes` is every byte read through it so far (its onProgress): the
 * header (and index) reads, then each tensor read.
 * @type {{ reader: Reader, label: string, counter: { bytes: number }, rows: Row[], selected?: string } | undefined}
 */
let current
/** Bumped by each open and each tensor click, so a slow older result never overwrites a newer one. */
let generation = 0
/** @type {AbortController | undefined} */
let inFlight
/** @type {{ key: keyof Row, direction: 1 | -1 } | undefined} undefined: data order, as in the file */
let sortBy

// ---- formatting ----------------------------------------------------------------------------------

const fmt = (/** @type {number} */ n) => numberFormat.format(n)

/** 1536 -> "1.50 KiB"; exact counts stay in titles and data attributes. */
function human(/** @type {number} */ bytes) {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${fmt(bytes)} bytes` : `${value.toFixed(2)} ${units[unit]}`
}

/** A statistic: integers in full, others to 6 significant digits; NaN (no finite values) as a dash. */
function stat(/** @type {number} */ x) {
  if (Number.isNaN(x)) return '—'
  if (Number.isInteger(x) && Math.abs(x) < 1e15) return fmt(x)
  return String(Number(x.toPrecision(6)))
}

const shapeText = (/** @type {number[]} */ shape) => `[${shape.join(', ')}]`

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, string>} attributes
 * @param {...(string | Node)} children
 */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value)
  node.append(...children)
  return node
}

// ---- opening -------------------------------------------------------------------------------------

/**
 * @param {string} label what to call the file or model on the page
 * @param {(options: OpenOptions) => Promise<Reader>} opener open() or openModel() of what the user chose
 */
async function openReader(label, opener) {
  const mine = ++generation
  inFlight?.abort()
  inFlight = new AbortController()
  const previous = current
  current = undefined
  previous?.reader.close().catch(() => {})
  $('error').hidden = true
  $('file-view').hidden = true
  $('detail').hidden = true
  $('status').textContent = `Reading the headers of ${label}…`
  const counter = { bytes: 0 }
  const started = performance.now()
  try {
    const reader = await opener({ signal: inFlight.signal, onProgress: ({ loaded }) => void (counter.bytes = loaded) })
    if (mine !== generation) return void reader.close().catch(() => {})
    const shardOf = (/** @type {string} */ name) => (reader instanceof SafetensorsModel ? reader.shardOf(name) : '')
    const rows = reader.names().map((name, order) => {
      const t = reader.info(name)
      return { name, dtype: t.dtype, shape: [...t.shape], params: t.shape.reduce((a, b) => a * b, 1), bytes: t.byteLength, order, shard: shardOf(name) }
    })
    current = { reader, label, counter, rows }
    sortBy = undefined
    inputById('filter').value = ''
    showFile()
    $('status').textContent = `Read the headers in ${Math.round(performance.now() - started)} ms.`
  } catch (error) {
    if (mine !== generation) return
    showError(error)
  }
}

function showError(/** @type {unknown} */ error) {
  // A SafetensorsError is the file's fault and fully explained on the page; anything else is a bug here.
  if (!(error instanceof SafetensorsError)) console.error(error)
  $('status').textContent = ''
  $('file-view').hidden = true
  const code = error instanceof SafetensorsError ? error.code : error instanceof Error ? error.name : 'Error'
  $('error-code').textContent = code
  $('error-message').textContent = error instanceof Error ? error.message : String(error)
  $('error').hidden = false
}

// ---- the file ------------------------------------------------------------------------------------

/** The headers of a file, or of each shard of a model. */
const headersOf = (/** @type {Reader} */ reader) => (reader instanceof SafetensorsModel ? [...reader.shards.values()].map((f) => f.header) : [reader.header])

function showFile() {
  if (!current) return
  const { reader, rows } = current
  const model = reader instanceof SafetensorsModel ? reader : undefined
  const headers = headersOf(reader)
  const fileSize = headers.reduce((sum, h) => sum + h.fileSize, 0)
  const headerSize = headers.reduce((sum, h) => sum + h.headerSize, 0)
  $('file-name').textContent = current.label
  $('fact-size-label').textContent = model ? 'Size' : 'File size'
  $('fact-size').textContent = human(fileSize) + (model ? ` in ${fmt(headers.length)} shards` : '')
  $('fact-size').title = `${fmt(fileSize)} bytes`
  $('fact-size').dataset.shards = String(headers.length)
  $('fact-header-label').textContent = model ? 'Headers' : 'Header'
  $('fact-header').textContent = `${fmt(headerSize)} bytes of JSON`
  $('fact-tensors').textContent = fmt(rows.length)
  $('fact-params').textContent = fmt(rows.reduce((sum, r) => sum + r.params, 0))
  $('bytes-read').dataset.headerBytes = String(current.counter.bytes)
  showBytesRead()
  showIndexCheck(model)
  showTotals(rows)
  showMetadata(reader.metadata)
  $('shard-column').hidden = !model
  showTensors()
  $('file-view').hidden = false
}

/** The header (and index) reads, fixed at open, then whatever tensor reads added since. */
function showBytesRead() {
  if (!current) return
  const headerBytes = Number($('bytes-read').dataset.headerBytes)
  const { reader } = current
  // A model's count includes its index, which is not part of the shards' size: no share for it.
  const what = reader instanceof SafetensorsModel ? 'the index and headers' : 'the header'
  const size = reader instanceof SafetensorsModel ? 0 : reader.header.fileSize
  const share = size > 0 ? ` (${Number(((100 * headerBytes) / size).toPrecision(3))}% of the file)` : ''
  const tensorBytes = current.counter.bytes - headerBytes
  $('bytes-read').textContent = `${fmt(headerBytes)} bytes for ${what}${share}${tensorBytes > 0 ? `, then ${fmt(tensorBytes)} for tensors` : ''}`
  $('bytes-read').dataset.bytes = String(current.counter.bytes)
}

/**
 * What checking the index against the shards found. openModel already refused an index that puts a
 * tensor in a shard without it (or is malformed); what is left to show: that every entry was found,
 * the index's total_size against the shards' tensor bytes, and tensors a shard holds that the index
 * does not list (they are not part of the model).
 */
function showIndexCheck(/** @type {SafetensorsModel | undefined} */ model) {
  const list = $('index-check')
  list.hidden = !model
  if (!model) return list.replaceChildren()
  const rows = current?.rows ?? []
  const bytes = rows.reduce((sum, r) => sum + r.bytes, 0)
  const totalSize = model.metadata?.total_size
  const unlisted = model.unlisted()
  const line = (/** @type {string} */ check, /** @type {boolean} */ ok, /** @type {string} */ text) =>
    el('li', { 'data-check': check, 'data-ok': String(ok) }, text)
  list.replaceChildren(
    line('weight-map', true, `The index lists ${fmt(rows.length)} tensors in ${fmt(model.shards.size)} shards; each is in the shard it names.`),
    typeof totalSize === 'number'
      ? line(
          'total-size',
          totalSize === bytes,
          totalSize === bytes
            ? `Its total_size (${fmt(totalSize)} bytes) is the tensors' size.`
            : `Its total_size says ${fmt(totalSize)} bytes; the tensors take ${fmt(bytes)}.`,
        )
      : line('total-size', false, `It states no numeric total_size; the tensors take ${fmt(bytes)} bytes.`),
    line(
      'unlisted',
      unlisted.length === 0,
      unlisted.length === 0
        ? 'No shard holds a tensor the index leaves out.'
        : `The shards hold ${fmt(unlisted.length)} tensors the index does not list (not part of the model): ${unlisted
            .slice(0, 5)
            .map((u) => `${u.tensor} in ${u.shard}`)
            .join(', ')}${unlisted.length > 5 ? ', …' : ''}`,
    ),
  )
}

function showTotals(/** @type {Row[]} */ rows) {
  /** @type {Map<string, { tensors: number, params: number, bytes: number }>} */
  const totals = new Map()
  for (const r of rows) {
    const t = totals.get(r.dtype) ?? { tensors: 0, params: 0, bytes: 0 }
    t.tensors++
    t.params += r.params
    t.bytes += r.bytes
    totals.set(r.dtype, t)
  }
  const line = (/** @type {string} */ dtype, /** @type {{ tensors: number, params: number, bytes: number }} */ t, /** @type {boolean} */ all) =>
    el(
      'tr',
      { 'data-dtype': dtype },
      el('td', {}, all ? 'all' : el('span', { class: 'dtype' }, dtype)),
      el('td', { class: 'num', 'data-value': String(t.tensors) }, fmt(t.tensors)),
      el('td', { class: 'num', 'data-value': String(t.params) }, fmt(t.params)),
      el('td', { class: 'num', 'data-value': String(t.bytes), title: `${fmt(t.bytes)} bytes` }, human(t.bytes)),
    )
  const body = tableById('totals').tBodies[0]
  body.replaceChildren(...[...totals].sort((a, b) => b[1].bytes - a[1].bytes).map(([dtype, t]) => line(dtype, t, false)))
  const sum = { tensors: rows.length, params: rows.reduce((s, r) => s + r.params, 0), bytes: rows.reduce((s, r) => s + r.bytes, 0) }
  tableById('totals').tFoot?.replaceChildren(line('all', sum, true))
}

/** A file's __metadata__ (strings), or a model index's metadata (any JSON values, shown as JSON). */
function showMetadata(/** @type {Record<string, unknown> | null} */ metadata) {
  const entries = Object.entries(metadata ?? {}).map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)])
  $('metadata-empty').hidden = entries.length > 0
  $('metadata').hidden = entries.length === 0
  tableById('metadata').tBodies[0].replaceChildren(...entries.map(([key, value]) => el('tr', {}, el('td', {}, key), el('td', {}, value))))
}

// ---- the tensor table ----------------------------------------------------------------------------

/** @param {Row} a @param {Row} b @param {keyof Row} key */
function compare(a, b, key) {
  switch (key) {
    case 'name':
      return collator.compare(a.name, b.name)
    case 'dtype':
      return collator.compare(a.dtype, b.dtype)
    case 'shard':
      return collator.compare(a.shard, b.shard)
    case 'shape': {
      // By rank, then dimension by dimension.
      if (a.shape.length !== b.shape.length) return a.shape.length - b.shape.length
      for (let i = 0; i < a.shape.length; i++) if (a.shape[i] !== b.shape[i]) return a.shape[i] - b.shape[i]
      return 0
    }
    default:
      return /** @type {number} */ (a[key]) - /** @type {number} */ (b[key])
  }
}

function visibleRows() {
  if (!current) return []
  const query = inputById('filter').value.trim().toLowerCase()
  const rows = query ? current.rows.filter((r) => r.name.toLowerCase().includes(query) || r.dtype.toLowerCase() === query) : [...current.rows]
  const order = sortBy
  // Ties keep data order, so every sort is deterministic.
  if (order) rows.sort((a, b) => order.direction * compare(a, b, order.key) || a.order - b.order)
  return rows
}

function showTensors() {
  if (!current) return
  const rows = visibleRows()
  const shown = rows.slice(0, MAX_ROWS)
  const body = tableById('tensors').tBodies[0]
  body.replaceChildren(
    ...shown.map((r) => {
      const tr = el(
        'tr',
        { 'data-name': r.name },
        el('td', { class: 'name' }, el('button', { type: 'button' }, r.name)),
        el('td', {}, el('span', { class: 'dtype' }, r.dtype)),
        el('td', { class: 'shape' }, shapeText(r.shape)),
        el('td', { class: 'num', 'data-value': String(r.params) }, fmt(r.params)),
        el('td', { class: 'num', 'data-value': String(r.bytes), title: `${fmt(r.bytes)} bytes` }, human(r.bytes)),
      )
      if (r.shard) tr.append(el('td', { class: 'shard' }, r.shard))
      if (r.name === current?.selected) tr.setAttribute('aria-current', 'true')
      return tr
    }),
  )
  const total = current.rows.length
  $('shown').textContent =
    rows.length > MAX_ROWS
      ? `showing the first ${fmt(MAX_ROWS)} of ${fmt(rows.length)} matching; filter to narrow`
      : rows.length === total
        ? `${fmt(total)} tensors`
        : `${fmt(rows.length)} of ${fmt(total)} tensors`
  for (const th of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll('#tensors th[data-key]'))) {
    const active = sortBy?.key === th.dataset.key
    th.setAttribute('aria-sort', active ? (sortBy?.direction === 1 ? 'ascending' : 'descending') : 'none')
  }
}

// ---- one tensor ----------------------------------------------------------------------------------

/**
 * @param {string} name
 * @param {boolean} confirmed the user asked to read a tensor above LARGE_TENSOR anyway
 */
async function showTensor(name, confirmed = false) {
  if (!current) return
  const mine = ++generation
  const { reader, counter } = current
  const info = reader.info(name)
  current.selected = name
  for (const tr of document.querySelectorAll('#tensors tbody tr')) {
    if (/** @type {HTMLElement} */ (tr).dataset.name === name) tr.setAttribute('aria-current', 'true')
    else tr.removeAttribute('aria-current')
  }
  $('detail').hidden = false
  $('detail-name').textContent = name
  $('detail-info').textContent = `${info.dtype} · ${shapeText(info.shape)} · ${human(info.byteLength)}`
  $('detail-status').textContent = `Reading ${human(info.byteLength)}…`
  $('stats').hidden = true
  $('histogram').hidden = true
  $('preview').hidden = true
  if (info.byteLength > LARGE_TENSOR && !confirmed) {
    // A click should not start a multi-gigabyte download (or exhaust a tab's memory) unasked.
    const button = el('button', { type: 'button', id: 'read-anyway' }, 'Read it anyway')
    button.addEventListener('click', () => showTensor(name, true))
    $('detail-status').replaceChildren(`This tensor is ${human(info.byteLength)}; reading it fetches all of it. `, button)
    return
  }

  const before = counter.bytes
  const progress = info.byteLength >= PROGRESS_FROM ? readProgress(() => mine === generation) : undefined
  let tensor
  try {
    try {
      tensor = await reader.getTensor(name, { dtype: 'F32', onProgress: progress })
    } catch (error) {
      // C64 has no F32 form: show its raw values, without statistics.
      if (!(error instanceof SafetensorsError && error.code === 'UnsupportedConversion')) throw error
      tensor = await reader.getTensor(name, { onProgress: progress })
    }
  } catch (error) {
    if (mine !== generation) return
    $('read-progress').hidden = true
    const code = error instanceof SafetensorsError ? error.code : 'Error'
    $('detail-status').textContent = `${code}: ${error instanceof Error ? error.message : String(error)}`
    return
  }
  if (mine !== generation) return
  $('read-progress').hidden = true
  showBytesRead()
  void showCacheUsage()
  const converted = tensor.dtype !== info.dtype ? `, converted ${info.dtype} → ${tensor.dtype} in wasm` : ''
  $('detail-status').textContent = `Read ${fmt(counter.bytes - before)} bytes for this tensor${converted}.`
  $('detail-status').dataset.bytes = String(counter.bytes - before)

  if (tensor.dtype === 'F32' && info.dtype !== 'C64') {
    const s = tensorStats(/** @type {Float32Array} */ (tensor.data), { bins: BINS })
    showStats(s)
    showHistogram(s)
  }
  const data = /** @type {ArrayLike<number | bigint>} */ (tensor.data)
  const values = []
  for (let i = 0; i < Math.min(data.length, PREVIEW_VALUES); i++) {
    const v = data[i]
    values.push(typeof v === 'bigint' ? v.toString() : stat(v))
  }
  $('preview-values').textContent = values.length ? values.join('  ') + (data.length > PREVIEW_VALUES ? '  …' : '') : '(no elements)'
  $('preview').hidden = false
}

/**
 * Shows the progress bar, and returns the onProgress of a tensor read that moves it while `live()`
 * (no newer click or open since). The bar goes away when the read ends.
 * @param {() => boolean} live
 * @returns {(p: { loaded: number, total: number }) => void}
 */
function readProgress(live) {
  const bar = /** @type {HTMLProgressElement} */ ($('read-progress-bar'))
  bar.value = 0
  $('read-progress-text').textContent = ''
  $('read-progress').hidden = false
  return ({ loaded, total }) => {
    if (!live()) return
    bar.value = total > 0 ? loaded / total : 1
    bar.dataset.loaded = String(loaded)
    bar.dataset.total = String(total)
    $('read-progress-text').textContent = `${human(loaded)} of ${human(total)}`
  }
}

/** @param {ReturnType<typeof tensorStats>} s */
function showStats(s) {
  const items = [
    ['elements', s.count],
    ['finite', s.finite],
    ['NaN', s.nan],
    ['min', s.min],
    ['max', s.max],
    ['mean', s.mean],
    ['std', s.std],
    ['+Inf', s.posInf],
    ['−Inf', s.negInf],
  ]
  $('stats').replaceChildren(
    ...items.map(([label, value]) =>
      el('div', { 'data-stat': String(label) }, el('dt', {}, String(label)), el('dd', { 'data-value': String(value) }, stat(Number(value)))),
    ),
  )
  $('stats').hidden = false
}

const SVG = 'http://www.w3.org/2000/svg'

function svg(/** @type {string} */ tag, /** @type {Record<string, string | number>} */ attributes = {}, /** @type {string} */ text = '') {
  const node = document.createElementNS(SVG, tag)
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value))
  if (text) node.textContent = text
  return node
}

/** Bars of the finite values' histogram, as inline SVG: it scales with the panel and needs no canvas. */
function showHistogram(/** @type {ReturnType<typeof tensorStats>} */ s) {
  const { lo, hi, counts } = s.histogram
  const plot = $('histogram-plot')
  if (s.finite === 0) {
    plot.replaceChildren()
    $('histogram-caption').textContent = 'No finite values: no histogram.'
    $('histogram').hidden = false
    return
  }
  const width = 380
  const height = 170
  const left = 44
  const bottom = 20
  const top = 8
  const plotWidth = width - left - 4
  const plotHeight = height - top - bottom
  const peak = Math.max(...counts)
  const step = (hi - lo) / counts.length
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-labelledby': 'histogram-caption' })
  chart.append(
    svg('line', { class: 'axis', x1: left, x2: left + plotWidth, y1: top + plotHeight + 0.5, y2: top + plotHeight + 0.5 }),
    svg('text', { x: left - 6, y: top + 9, 'text-anchor': 'end' }, fmt(peak)),
    svg('text', { x: left - 6, y: top + plotHeight, 'text-anchor': 'end' }, '0'),
    svg('text', { x: left, y: height - 4 }, stat(lo)),
    svg('text', { x: left + plotWidth, y: height - 4, 'text-anchor': 'end' }, stat(hi)),
  )
  const barWidth = plotWidth / counts.length
  counts.forEach((count, i) => {
    if (count === 0) return
    const barHeight = Math.max(1, (count / peak) * plotHeight)
    const bar = svg('rect', {
      class: 'bar',
      x: (left + i * barWidth + 0.5).toFixed(2),
      y: (top + plotHeight - barHeight).toFixed(2),
      width: Math.max(1, barWidth - 1).toFixed(2),
      height: barHeight.toFixed(2),
      'data-count': count,
    })
    bar.append(svg('title', {}, `${stat(lo + i * step)} to ${stat(lo + (i + 1) * step)}: ${fmt(count)}`))
    chart.append(bar)
  })
  plot.replaceChildren(chart)
  $('histogram-caption').textContent =
    lo === hi
      ? `All ${fmt(s.finite)} finite values equal ${stat(lo)}.`
      : `${fmt(s.finite)} finite values in ${counts.length} bins from ${stat(lo)} to ${stat(hi)}, computed in wasm.`
  $('histogram').hidden = false
}

// ---- wiring --------------------------------------------------------------------------------------

/**
 * Opens what the user picked or dropped: one file, or a model (its shards and index, or a folder).
 * @param {File[]} files
 * @param {string} [folder] the folder they came from
 */
function openLocal(files, folder) {
  if (files.length === 0) return
  history.replaceState(null, '', location.pathname)
  const [first] = files
  if (files.length === 1 && !first.name.endsWith('.json')) return openReader(first.name, (options) => open(first, options))
  const index = files.find((f) => f.name.endsWith('.index.json'))
  openReader(folder ? `${folder}/` : (index?.name ?? `${fmt(files.length)} files`), (options) => openModel(files, options))
}

// ---- the cache for URLs (opt in: it reads whole 1 MiB blocks, more than a first visit needs) -------

/** @type {Promise<import('../dist/index.js').RangeCache> | undefined} */
let cachePromise

/** The cache when the box is ticked and this browser has one (OPFS), else undefined. */
async function urlCache() {
  if (!inputById('cache-enabled').checked) return undefined
  cachePromise ??= createCache({ name: 'safetensors-inspector' })
  try {
    return await cachePromise
  } catch (error) {
    cachePromise = undefined
    $('cache-usage').textContent = `No cache here: ${error instanceof Error ? error.message : String(error)}`
    return undefined
  }
}

/** Shows how much the cache holds (when it is on), with the button to clear it. */
async function showCacheUsage() {
  const cache = await urlCache()
  const usage = cache ? await cache.usage() : undefined
  $('cache-clear').hidden = usage === undefined
  if (usage === undefined) return
  $('cache-usage').dataset.bytes = String(usage)
  $('cache-usage').textContent = `The cache holds ${fmt(usage)} bytes.`
}

$('cache-enabled').addEventListener('change', () => {
  $('cache-usage').textContent = ''
  void showCacheUsage()
})

$('cache-clear').addEventListener('click', async () => {
  await (await urlCache())?.clear()
  await showCacheUsage()
})

function openUrl(/** @type {string} */ text) {
  let url
  try {
    url = new URL(text, location.href)
  } catch {
    return showError(new TypeError(`not a URL: ${text}`))
  }
  history.replaceState(null, '', `${location.pathname}?url=${encodeURIComponent(url.href)}`)
  // A model's index (its shards are beside it), else one file.
  const model = url.pathname.endsWith('.index.json')
  openReader(url.href, async (options) => {
    const cache = await urlCache()
    const reader = await (model ? openModel(url, { ...options, cache }) : open(url, { ...options, cache }))
    void showCacheUsage()
    return reader
  })
}

$('file-input').addEventListener('change', (event) => {
  const input = /** @type {HTMLInputElement} */ (event.target)
  openLocal([...(input.files ?? [])])
  input.value = '' // picking the same file again opens it again
})

// A folder: the files directly in it (a model's shards sit beside its index; subfolders are other things).
$('folder-input').addEventListener('change', (event) => {
  const input = /** @type {HTMLInputElement} */ (event.target)
  const files = [...(input.files ?? [])]
  const top = files.filter((f) => f.webkitRelativePath.split('/').length === 2)
  openLocal(top, files[0]?.webkitRelativePath.split('/')[0])
  input.value = ''
})

// A drop anywhere on the page opens the files (and keeps the browser from navigating to them).
const dropZone = $('drop-zone')
document.addEventListener('dragover', (event) => {
  event.preventDefault()
  if (event.dataTransfer) event.dataTransfer.dropEffect = 'copy'
  dropZone.classList.add('dragging')
})
document.addEventListener('dragleave', (event) => {
  if (!event.relatedTarget) dropZone.classList.remove('dragging')
})
document.addEventListener('drop', (event) => {
  event.preventDefault()
  dropZone.classList.remove('dragging')
  openLocal([...(event.dataTransfer?.files ?? [])])
})

$('url-form').addEventListener('submit', (event) => {
  event.preventDefault()
  openUrl(inputById('url-input').value)
})

$('filter').addEventListener('input', () => showTensors())

for (const th of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll('#tensors th[data-key]'))) {
  th.querySelector('button')?.addEventListener('click', () => {
    const key = /** @type {keyof Row} */ (th.dataset.key)
    sortBy = { key, direction: sortBy?.key === key && sortBy.direction === 1 ? -1 : 1 }
    showTensors()
  })
}

// One listener for every row: the name is a button (keyboard users), the whole row is a click target.
tableById('tensors').tBodies[0].addEventListener('click', (event) => {
  const row = /** @type {HTMLElement} */ (event.target).closest('tr')
  if (row?.dataset.name !== undefined) showTensor(row.dataset.name)
})

// ?url=… opens that URL on load, so a link can point at a model.
const initial = new URLSearchParams(location.search).get('url')
if (initial) {
  inputById('url-input').value = initial
  openUrl(initial)
}
