// Timing helpers: this machine is shared, so compare variants in one run, interleaved, by median.
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}

/** Runs each variant `rounds` times, interleaved; returns the median milliseconds per variant. */
export function compare(variants, rounds = 15) {
  /** @type {Record<string, number[]>} */
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
  for (const fn of Object.values(variants)) fn() // warm up
  for (let r = 0; r < rounds; r++) {
    for (const [name, fn] of Object.entries(variants)) {
      const start = performance.now()
      fn()
      times[name].push(performance.now() - start)
    }
  }
  return Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]))
}

export function table(rows) {
  const keys = Object.keys(rows[0])
  const widths = keys.map((k) => Math.max(k.length, ...rows.map((r) => String(r[k]).length)))
  const line = (cells) => cells.map((c, i) => String(c).padStart(widths[i])).join('  ')
  console.log(line(keys))
  for (const row of rows) console.log(line(keys.map((k) => row[k])))
}
