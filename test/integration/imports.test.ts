// The layout of src/ (docs/development.md, "Layout"): a few files at the top (the entries, the CLI, the errors)
// and folders of one concern each, whose imports run one way, from a folder to the ones below it. Read from
// the import statements themselves, type-only and dynamic imports included.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))

/** The folders of src/, lowest first: a module may import its own folder's modules and those of folders before it. */
const FOLDERS = ['core', 'format', 'sources', 'sources/http', 'platform', 'pool', 'cache', 'quant', 'read', 'write', 'gguf', 'node']
/** The files at the top: the errors (below everything), the entries and the CLI (above everything). */
const ERRORS = 'errors.ts'
const TOP = ['api.ts', 'cli.ts', 'errors.ts', 'gguf-node.ts', 'gguf.ts', 'index.ts', 'node.ts']
/** Where `node:` may be imported: the Node side (and the Node side of #platform). */
const NODE_SIDE = (file: string) =>
  file.startsWith('node/') || file.startsWith('platform/node') || file === 'node.ts' || file === 'gguf-node.ts' || file === 'cli.ts'
/** The modules `#platform` may be, by the package's conditions (package.json "imports"). */
const PLATFORMS = ['platform/node.ts', 'platform/portable.ts']
/** The modules `#workers` may be (the conversion pool's workers, which only src/pool/ imports). */
const WORKERS = ['platform/node-workers.ts', 'platform/web-workers.ts']
const SUBPATHS: Record<string, string[]> = { '#platform': PLATFORMS, '#workers': WORKERS }

const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
  .filter((file) => /\.ts$/.test(file) && !file.endsWith('.d.ts'))
  .map((file) => file.split('\\').join('/'))
  .sort()

/** Every module specifier a file names: `import … from`, `export … from`, `import '…'` and `import('…')`. */
function specifiers(file: string): string[] {
  const text = readFileSync(join(SRC, file), 'utf8')
  const found = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s*'([^']+)'|^\s*import\s*'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gm)]
  return found.map((match) => match[1] ?? match[2] ?? match[3])
}

/** The src/ files a file imports (relative specifiers that resolve inside src/). */
const graph = new Map(
  files.map((file) => {
    const targets = specifiers(file)
      .flatMap((s) => (SUBPATHS[s] ? SUBPATHS[s].map((target) => `./${relative(dirname(file), target)}`) : [s]))
      .filter((s) => s.startsWith('.'))
      .map((s) =>
        normalize(join(dirname(file), s.replace(/\?.*$/, '')))
          .split('\\')
          .join('/'),
      )
      .filter((target) => !target.startsWith('..') && files.includes(target))
    return [file, targets]
  }),
)

const folderOf = (file: string): string => (file.includes('/') ? dirname(file) : '.')
/** A file's place in the order: the errors lowest, then the folders, then the other top files. */
function rank(file: string): number {
  if (file === ERRORS) return -1
  const folder = folderOf(file)
  if (folder === '.') return FOLDERS.length
  return FOLDERS.indexOf(folder)
}

/** The cycles of a directed graph, as its strongly connected components of more than one node (or a node importing itself). */
function cycles(nodes: Map<string, string[]>): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (node: string) => {
    index.set(node, index.size)
    low.set(node, index.get(node)!)
    stack.push(node)
    onStack.add(node)
    for (const next of nodes.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!))
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = []
      for (let member = stack.pop()!; ; member = stack.pop()!) {
        onStack.delete(member)
        component.push(member)
        if (member === node) break
      }
      if (component.length > 1 || nodes.get(node)?.includes(node)) found.push(component.sort())
    }
  }
  for (const node of nodes.keys()) if (!index.has(node)) visit(node)
  return found
}

describe('src/', () => {
  test('holds at most 8 files at its top: the entries, the CLI and the errors', () => {
    const top = readdirSync(SRC, { withFileTypes: true }).filter((entry) => entry.isFile())
    expect(top.length).toBeLessThanOrEqual(8)
    expect(top.map((entry) => entry.name).sort()).toEqual(TOP)
  })

  test('every folder is one of the layout', () => {
    const folders = [...new Set(files.map(folderOf))].filter((folder) => folder !== '.')
    expect(folders.filter((folder) => !FOLDERS.includes(folder))).toEqual([])
  })

  test('the graph is read: every specifier of src/ resolves to a module', () => {
    expect(files.length).toBeGreaterThan(40)
    expect([...graph.values()].flat().length).toBeGreaterThan(150)
    const unresolved = files.flatMap((file) =>
      specifiers(file)
        .filter((s) => s.startsWith('.') && !/\.(wasm|ts\?constants)$/.test(s))
        .filter(
          (s) =>
            !graph.get(file)!.includes(
              normalize(join(dirname(file), s))
                .split('\\')
                .join('/'),
            ),
        )
        .map((s) => `${file}: ${s}`),
    )
    expect(unresolved).toEqual([])
  })

  test('no circle of files', () => {
    expect(cycles(graph)).toEqual([])
  })

  test('no circle of folders: each imports only its own folder and those below it', () => {
    const upward = [...graph].flatMap(([file, targets]) => targets.filter((target) => rank(target) > rank(file)).map((target) => `${file} -> ${target}`))
    expect(upward).toEqual([])
    // The errors are a room of their own here: every folder imports them.
    const roomOf = (file: string) => (file === ERRORS ? ERRORS : folderOf(file))
    const rooms = new Map<string, string[]>()
    for (const [file, targets] of graph) {
      const room = roomOf(file)
      rooms.set(
        room,
        [...new Set([...(rooms.get(room) ?? []), ...targets.map(roomOf)])].filter((other) => other !== room),
      )
    }
    expect(rooms.size).toBeGreaterThan(8)
    expect(cycles(rooms)).toEqual([])
  })

  test('only the Node side imports node: (node/, the Node entries, the CLI)', () => {
    const offenders = files.filter((file) => !NODE_SIDE(file) && specifiers(file).some((s) => s.startsWith('node:')))
    expect(offenders).toEqual([])
    expect(files.filter((file) => specifiers(file).some((s) => s.startsWith('node:'))).length).toBeGreaterThan(3)
  })

  // What differs by runtime comes through #platform; nothing registers itself when imported, so no import order
  // matters. The one import for its effect puts the wasm first in a bundle (src/core/wasm-code.ts).
  test('no module is imported for its side effects, but the wasm code that bundles put first', () => {
    const bare = files.flatMap((file) =>
      [...readFileSync(join(SRC, file), 'utf8').matchAll(/^import\s*'([^']+)'/gm)].map(([, specifier]) => `${file}: ${specifier}`),
    )
    expect(bare.filter((line) => !line.endsWith(': ./core/wasm-code.ts'))).toEqual([])
    expect(bare.length).toBeGreaterThan(0)
  })

  test('#platform: every target the package names exports what the Platform interface has, and nothing else', async () => {
    const { imports } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
    const named = new Set(Object.values(imports['#platform']).map((target) => (target as string).replace(/^\.\/dist\/(.*)\.js$/, '$1.ts')))
    expect([...named].sort()).toEqual(PLATFORMS)
    const exported = await Promise.all(PLATFORMS.map(async (target) => Object.keys(await import(`../../src/${target}`)).sort()))
    expect(exported[0]).toEqual(['folderStorage', 'localFiles'])
    for (const names of exported) expect(names).toEqual(exported[0])
  })

  test('the layout rule is the one docs/development.md states', () => {
    const doc = readFileSync(new URL('../../docs/development.md', import.meta.url), 'utf8')
    const existing = new Set(files.map(folderOf))
    for (const folder of FOLDERS.filter((f) => existing.has(f))) expect(doc, folder).toContain(`${folder}/`)
  })
})
