// The saves test/node/save-model.test.ts kills and races, run as a child process (node test/save-child.js) on the
// built package (dist/node.js, or the module SAVE_LIBRARY names), and the models they save. Every save
// is one generation g: six I32 tensors t0..t5 of ELEMENTS elements, each element equal to g, in 1, 2 or
// 3 shards as g decides, so that every transition between a single file and an index comes up.
//   node test/save-child.js loop <folder> <first g>   saves g, g+1, ... forever, printing "start g" and "done g"
//   node test/save-child.js serve <folder>            saves the g of each line of stdin, answering "ok g" or
//                                                     "error <the error as JSON>"
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'

export const TENSORS = 6
export const ELEMENTS = 4096

/** How many shards generation `g` is saved in: 1, 2 or 3, scattered so that each follows each. */
export function shardCount(g) {
  return 1 + ((Math.imul(g, 0x9e3779b1) >>> 0) % 3)
}

/** The tensors of generation `g`. */
export function generation(g) {
  return Array.from({ length: TENSORS }, (_, i) => ({ name: `t${i}`, dtype: 'I32', shape: [ELEMENTS], data: new Int32Array(ELEMENTS).fill(g) }))
}

/** saveModel's options for generation `g`: a shard limit that splits its six equal tensors into shardCount(g) shards. */
export function saveOptions(g) {
  return { maxShardSize: (TENSORS / shardCount(g)) * ELEMENTS * 4 }
}

async function main([mode, folder, first]) {
  const { saveModel } = await import(process.env.SAVE_LIBRARY ? pathToFileURL(process.env.SAVE_LIBRARY).href : '../dist/node.js')
  if (mode === 'loop') {
    for (let g = Number(first); ; g++) {
      process.stdout.write(`start ${g}\n`)
      await saveModel(folder, generation(g), saveOptions(g))
      process.stdout.write(`done ${g}\n`)
    }
  }
  for await (const line of createInterface({ input: process.stdin })) {
    const g = Number(line)
    const answer = await saveModel(folder, generation(g), saveOptions(g)).then(
      () => `ok ${g}`,
      (error) => `error ${JSON.stringify({ name: error.name, code: error.code, message: error.message })}`,
    )
    process.stdout.write(`${answer}\n`)
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main(process.argv.slice(2))
