// @ts-check
// The inspector page: opens a SafeTensors file or a sharded model (picked, dropped, a folder, or by URL)
// through the built package, reading only the headers (and a model's index, which openModel checks
// against its shards); a click on a tensor reads that tensor alone, with a progress bar, and shows
// statistics computed in wasm. The library's onProgress counts every byte read, and a fetch of the
// page's own counts what came over the network, so the page can say how many bytes it really read and
// how many the cache saved. Everything shown from the files goes in through textContent: names,
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
/** Where the cache checkbox is remembered across visits. */
const CACHE_CHOICE = 'safetensors-inspector:cache'

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id))
const inputById = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ ($(id))
const tableById = (/** @type {string} */ id) => /** @type {HTMLTableElement} */ ($(id))
const numberFormat = new Intl.NumberFormat('en-US')
const collator = new Intl.Collator('en', { numeric: true })

/**
 * What an open has read so far: `bytes`, every byte read through the file or model (its onProgress):
 * the header (and index) reads, then each tensor read; `network`, for a URL, the bytes of the HTTP
 * response bodies that reached the page (countingFetch), which is more than `bytes` when the cache
 * fetches whole blocks and less when it supplies them; `cached`, whether the open uses the cache.
 * @typedef {{ bytes: number, network?: number, cached: boolean }} Counter
 */
/**
 * The open file or model.
 * @type {{ reader: Reader, label: string, counter: Counter, rows: Row[], selected?: string } | undefined}
 */
let current
/** Bumped by each open and each tensor click, so a slow older result never overwrites a newer one. */
let generation = 0
/** The open under way. @type {AbortController | undefined} */
let inFlight
/** The tensor read under way: Cancel, another tensor or another open stops it. @type {AbortController | undefined} */
let reading
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
 * A name (of a tensor, a file, a metadata key) as nodes that a line may break only after `.`, `_`, `-`
 * or `/`, never inside a word: each piece is a span that CSS keeps whole (white-space: nowrap), with a
 * <wbr> after it. textContent is still the name.
 */
function breakable(/** @type {string} */ name) {
  return name.split(/(?<=[._\-/])(?![._\-/])/).flatMap((piece, i) => (i === 0 ? [] : [el('wbr')]).concat(el('span', { class: 'piece' }, piece)))
}

/**
 * Where a read's `read` bytes came from, given the `fetched` bytes the network delivered meanwhile. The
 * bytes that did not come over the network came from the cache: at least read - fetched of them.
 * @param {number} read @param {number} fetched @param {boolean} cached
 */
function origin(read, fetched, cached) {
  if (!cached) return `${fmt(fetched)} bytes over the network`
  if (fetched === 0) return 'all from the cache, nothing over the network'
  if (fetched < read) return `${fmt(fetched)} bytes over the network, at least ${fmt(read - fetched)} from the cache`
  return `${fmt(fetched)} bytes over the network (the cache fetches whole blocks of up to 1 MiB to keep)`
}

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
 * @param {(options: OpenOptions, counter: Counter) => Promise<Reader>} opener open() or openModel() of what
 *   the user chose; a URL's opener sets counter.network and counter.cached
 * @param {string} [hint] what to suggest when the open fails with Io
 */
async function openReader(label, opener, hint) {
  const mine = ++generation
  inFlight?.abort()
  reading?.abort()
  inFlight = new AbortController()
  const previous = current
  current = undefined
  previous?.reader.close().catch(() => {})
  $('error').hidden = true
  $('file-view').hidden = true
  $('detail').hidden = true
  $('status').textContent = `Reading the headers of ${label}…`
  /** @type {Counter} */
  const counter = { bytes: 0, cached: false }
  const started = performance.now()
  try {
    const reader = await opener({ signal: inFlight.signal, onProgress: ({ loaded }) => void (counter.bytes = loaded) }, counter)
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
    const network = counter.network === undefined ? '' : `: ${origin(counter.bytes, counter.network, counter.cached)}`
    $('status').textContent = `Read the headers in ${Math.round(performance.now() - started)} ms${network}.`
  } catch (error) {
    if (mine !== generation) return
    // A hint for what failed without an answer: a missing file (an HTTP status) needs none.
    showError(label, error, error instanceof SafetensorsError && error.code === 'Io' && error.status === undefined ? hint : undefined)
  }
}

/**
 * @param {string} label the file, model or URL that could not be read
 * @param {unknown} error
 * @param {string} [hint] what the user may do about it
 */
function showError(label, error, hint) {
  // A SafetensorsError is the file's fault and fully explained on the page; anything else is a bug here.
  if (!(error instanceof SafetensorsError)) console.error(error)
  $('status').textContent = ''
  $('file-view').hidden = true
  const code = error instanceof SafetensorsError ? error.code : error instanceof Error ? error.name : 'Error'
  $('error-file').replaceChildren(...breakable(label))
  $('error-code').textContent = code
  $('error-message').textContent = error instanceof Error ? error.message : String(error)
  $('error-hint').textContent = hint ?? ''
  $('error-hint').hidden = hint === undefined
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
  $('file-name').replaceChildren(...breakable(current.label))
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
  // A new file starts at the top of its list, wherever the last one was scrolled to (once shown: a hidden
  // element keeps its scroll position whatever is set).
  const list = /** @type {HTMLElement} */ (document.querySelector('.tensor-scroll'))
  list.scrollTop = 0
  list.scrollLeft = 0
  // Below the fold (a phone, under the pickers), the results come into view once read.
  if ($('file-view').getBoundingClientRect().top > innerHeight / 2) $('file-view').scrollIntoView({ block: 'start' })
}

/** The header (and index) reads, fixed at open, then whatever tensor reads added since; for a URL, what the network delivered. */
function showBytesRead() {
  if (!current) return
  const headerBytes = Number($('bytes-read').dataset.headerBytes)
  const { reader, counter } = current
  // A model's count includes its index, which is not part of the shards' size: no share for it.
  const what = reader instanceof SafetensorsModel ? 'the index and headers' : 'the header'
  const size = reader instanceof SafetensorsModel ? 0 : reader.header.fileSize
  const share = size > 0 ? ` (${Number(((100 * headerBytes) / size).toPrecision(3))}% of the file)` : ''
  const tensorBytes = counter.bytes - headerBytes
  $('bytes-read').textContent = `${fmt(headerBytes)} bytes for ${what}${share}${tensorBytes > 0 ? `, then ${fmt(tensorBytes)} for tensors` : ''}`
  $('bytes-read').dataset.bytes = String(counter.bytes)
  $('fact-network').hidden = counter.network === undefined
  if (counter.network === undefined) return
  $('bytes-network').textContent = `${fmt(counter.network)} bytes`
  $('bytes-network').dataset.bytes = String(counter.network)
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
  tableById('metadata').tBodies[0].replaceChildren(...entries.map(([key, value]) => el('tr', {}, el('td', {}, ...breakable(key)), el('td', {}, value))))
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
        el('td', { class: 'name' }, el('button', { type: 'button' }, ...breakable(r.name))),
        el('td', {}, el('span', { class: 'dtype' }, r.dtype)),
        el('td', { class: 'shape' }, shapeText(r.shape)),
        el('td', { class: 'num params', 'data-value': String(r.params) }, fmt(r.params)),
        el('td', { class: 'num', 'data-value': String(r.bytes), title: `${fmt(r.bytes)} bytes` }, human(r.bytes)),
      )
      if (r.shard) tr.append(el('td', { class: 'shard' }, ...breakable(r.shard)))
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
  reading?.abort()
  reading = undefined
  $('read-progress').hidden = true
  $('detail').hidden = false
  $('detail-name').replaceChildren(...breakable(name))
  $('detail-info').textContent = `${info.dtype} · ${shapeText(info.shape)} · ${human(info.byteLength)}`
  $('detail-status').textContent = `Reading ${human(info.byteLength)}…`
  delete $('detail-status').dataset.bytes
  delete $('detail-status').dataset.network
  $('stats').hidden = true
  $('histogram').hidden = true
  $('preview').hidden = true
  bringIntoView()
  if (info.byteLength > LARGE_TENSOR && !confirmed) {
    // A click should not start a multi-gigabyte download (or exhaust a tab's memory) unasked.
    const button = el('button', { type: 'button', id: 'read-anyway' }, 'Read it anyway')
    button.addEventListener('click', () => showTensor(name, true))
    $('detail-status').replaceChildren(`This tensor is ${human(info.byteLength)}; reading it fetches all of it. `, button)
    return
  }

  const before = { bytes: counter.bytes, network: counter.network ?? 0 }
  const controller = new AbortController()
  reading = controller
  const progress = info.byteLength >= PROGRESS_FROM ? readProgress(() => mine === generation) : undefined
  const options = { signal: controller.signal, onProgress: progress }
  let tensor
  try {
    try {
      tensor = await reader.getTensor(name, { ...options, dtype: 'F32' })
    } catch (error) {
      // C64 has no F32 form: show its raw values, without statistics.
      if (!(error instanceof SafetensorsError && error.code === 'UnsupportedConversion')) throw error
      tensor = await reader.getTensor(name, options)
    }
  } catch (error) {
    if (mine !== generation) return
    $('read-progress').hidden = true
    showBytesRead()
    const code = error instanceof SafetensorsError ? error.code : 'Error'
    $('detail-status').textContent =
      code === 'Aborted'
        ? `Cancelled after ${human(counter.bytes - before.bytes)} of ${human(info.byteLength)}. Click the tensor to read it again.`
        : `${code}: ${error instanceof Error ? error.message : String(error)}`
    return
  } finally {
    if (reading === controller) reading = undefined
  }
  if (mine !== generation) return
  $('read-progress').hidden = true
  showBytesRead()
  void showCacheUsage()
  const read = counter.bytes - before.bytes
  const converted = tensor.dtype !== info.dtype ? `, converted ${info.dtype} → ${tensor.dtype} in wasm` : ''
  const network = counter.network === undefined ? '' : `; ${origin(read, counter.network - before.network, counter.cached)}`
  $('detail-status').textContent = `Read ${fmt(read)} bytes for this tensor${converted}${network}.`
  $('detail-status').dataset.bytes = String(read)
  if (counter.network !== undefined) $('detail-status').dataset.network = String(counter.network - before.network)

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
  // Taller now: its statistics may reach below the window.
  bringIntoView()
}

/**
 * The tensor's details in view, and its row. On a wide screen the panel sits beside the table: the page
 * scrolls no more than it takes to show it, then the row, which moves when the table narrows for the
 * panel. On a narrow screen the CSS puts the panel over the lower part of the page (position: fixed),
 * always in view: the row goes to the top, above it.
 */
function bringIntoView() {
  const overlay = getComputedStyle($('detail')).position === 'fixed'
  if (!overlay) $('detail').scrollIntoView({ block: 'nearest' })
  document.querySelector('#tensors tbody tr[aria-current]')?.scrollIntoView({ block: overlay ? 'start' : 'nearest' })
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
  // What is open now is not the URL of before: neither the address nor the URL box may say so.
  history.replaceState(null, '', location.pathname)
  inputById('url-input').value = ''
  const index = files.find((f) => f.name.endsWith('.index.json'))
  const weights = files.filter((f) => f.name.endsWith('.safetensors'))
  // One file, or a folder of one model.safetensors (the commonest layout on the Hub) beside its config.
  const single = files.length === 1 && !files[0].name.endsWith('.json') ? files[0] : !index && weights.length === 1 ? weights[0] : undefined
  if (single) return openReader(folder ? `${folder}/${single.name}` : single.name, (options) => open(single, options))
  openReader(
    folder ? `${folder}/` : (index?.name ?? `${fmt(files.length)} files`),
    (options) => openModel(files, options),
    // Io here is a file that is not among those given (or cannot be read): most often an index picked alone.
    folder
      ? 'Every shard the index names must be in this folder, beside it.'
      : 'A model index needs its shards: choose the model’s folder (“Choose a model folder…”), or pick or drop the index together with every shard it names.',
  )
}

// ---- the cache for URLs (opt in: it reads whole 1 MiB blocks, more than a first visit needs) -------

/** @type {Promise<import('../dist/index.js').RangeCache> | undefined} */
let cachePromise

/**
 * The page's own fetch, counting the response body bytes that reach the page in counter.network: what
 * the network delivered, whatever the library or its cache make of it.
 * @param {Counter} counter
 * @returns {typeof fetch}
 */
function countingFetch(counter) {
  let total = 0
  counter.network = total
  return async (input, init) => {
    const response = await fetch(input, init)
    if (!response.body) return response
    const counting = new TransformStream({
      transform(chunk, controller) {
        total += chunk.byteLength
        counter.network = total
        controller.enqueue(chunk)
      },
    })
    return new Response(response.body.pipeThrough(counting), { status: response.status, statusText: response.statusText, headers: response.headers })
  }
}

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
  try {
    localStorage.setItem(CACHE_CHOICE, inputById('cache-enabled').checked ? 'on' : 'off')
  } catch {
    // Storage refused (a private window, a policy): the choice lasts for this visit only.
  }
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
    return showError(text, new TypeError(`not a URL: ${text}`))
  }
  history.replaceState(null, '', `${location.pathname}?url=${encodeURIComponent(url.href)}`)
  inputById('url-input').value = url.href
  // A model's index (its shards are beside it), else one file.
  const model = url.pathname.endsWith('.index.json')
  // A read of another origin that fails without a word may be the server refusing it to this page (CORS).
  const hint =
    url.origin === location.origin
      ? undefined
      : `The server at ${url.origin} may not allow this page to read it (CORS): a page reads a file of another origin only when its server answers with Access-Control-Allow-Origin (and, for range reads, Access-Control-Expose-Headers: Content-Range, Content-Length, ETag). Or download the file and open it with the file picker.`
  openReader(
    url.href,
    async (options, counter) => {
      const cache = await urlCache()
      counter.cached = cache !== undefined
      const urlOptions = { ...options, cache, fetch: countingFetch(counter) }
      const reader = await (model ? openModel(url, urlOptions) : open(url, urlOptions))
      void showCacheUsage()
      return reader
    },
    hint,
  )
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

$('read-cancel').addEventListener('click', () => reading?.abort())

/** Closes the tensor's details (stopping its read); the keyboard focus goes back to its row. */
function closeDetail() {
  reading?.abort()
  $('detail').hidden = true
  if (current) current.selected = undefined
  const row = document.querySelector('#tensors tbody tr[aria-current]')
  row?.removeAttribute('aria-current')
  row?.querySelector('button')?.focus({ preventScroll: true })
}
$('detail-close').addEventListener('click', closeDetail)
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape' && !$('detail').hidden) closeDetail()
})

// The cache choice of the last visit (off until the user turns it on).
try {
  inputById('cache-enabled').checked = localStorage.getItem(CACHE_CHOICE) === 'on'
} catch {
  // No storage: off, as on a first visit.
}
if (inputById('cache-enabled').checked) void showCacheUsage()

// ?url=… opens that URL on load, so a link can point at a model. Without one, the URL box starts empty
// even where the browser would restore what it held before a reload.
const initial = new URLSearchParams(location.search).get('url')
inputById('url-input').value = initial ?? ''
if (initial) openUrl(initial)
