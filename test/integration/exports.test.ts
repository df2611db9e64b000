// One name for one thing, and no export without a user (docs/development.md, "Layout"): read from src/ by the
// TypeScript compiler, which resolves every import, re-export and dynamic import() to the declaration it names.
import { readdirSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, test } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SRC = join(ROOT, 'src/')

/** The package's entries: what they export is the public API. */
const ENTRIES = ['index.ts', 'node.ts', 'gguf.ts', 'gguf-node.ts']
/** The targets of `#platform` (package.json "imports"): each exports the Platform interface, by design the same names. */
const PLATFORMS = ['platform/node.ts', 'platform/portable.ts']
/** The targets of `#workers`, likewise: each exports `workers`. */
const WORKERS = ['platform/node-workers.ts', 'platform/web-workers.ts']
/** Each subpath import's targets, the Node one first. */
const SUBPATHS = [PLATFORMS, WORKERS]

/**
 * Exports that only tests and benchmarks use, each to reach what the API does not show: a test's hook, a threshold
 * a test sizes its data by, a table a test holds against the wasm contract. Un-exported, those tests would be weaker.
 */
const TEST_SEAMS = [
  'cache/cache.ts: rangeCache', // test/cache/cache.test.ts: a cache over a storage of the test's own
  'core/byte-order.ts: simulateHostByteOrder', // test/core/byte-order.test.ts: a big-endian host
  'core/convert.ts: KernelExports', // bench/convert.js: the kernels called directly
  'core/convert.ts: kernelModule', // test/core/convert.test.ts, test/integration/boundary.test.ts: the kernels called directly
  'core/convert.ts: DEDICATED_MIN_BYTES', // test/core/convert.test.ts, read-convert, byte-order: results either side of it
  'format/header.ts: scannerModule', // test/core/wasm.test.ts: the scanner's instances
  'format/header.ts: STATUS_ERRORS', // test/integration/boundary.test.ts: against the scanner's codes
  'format/header.ts: REASON_TEXT', // test/integration/boundary.test.ts: against the scanner's codes
  'format/json-values.ts: MAX_JSON_DEPTH', // test/format/json-values.test.ts: nesting either side of it
  'gguf/chunks.ts: GGUF_CHUNKS', // test/gguf/index.test.ts: pieces smaller than a head, as a tensor of gigabytes is cut
  'quant/target-pattern.ts: MAX_PATTERN', // test/quant/target-pattern.test.ts: patterns either side of it
  'sources/http/whole-file.ts: WHOLE_FILE', // test/sources/http/source.test.ts: files either side of it
  'sources/retry.ts: RETRY_DELAY', // test/integration/http-faults.test.ts: the delays a fault waits
]

/** Exports of src/gguf/ that nothing else uses, left to the rewrite of src/gguf/ under way beside this test. */
const GGUF_PENDING = [
  'gguf/dequantize.ts: GgmlDequantizer',
  'gguf/ggml-kernels.ts: GgmlExports',
  'gguf/index.ts: GgufPlan',
  'gguf/metadata.ts: ComputedTensor',
  'gguf/reader.ts: ggufError',
  'gguf/reader.ts: parseGgufHeader',
  'gguf/tokenizer.ts: TokenizerFiles',
]

const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
  .filter((file) => /\.ts$/.test(file) && !file.endsWith('.d.ts'))
  .map((file) => file.split('\\').join('/'))
  .sort()

const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile).config
const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT)
const program = ts.createProgram({ rootNames: files.map((file) => join(SRC, file)), options: { ...options, noEmit: true } })
const checker = program.getTypeChecker()

/** A src/ file's path from src/, or undefined for a file outside it. */
function srcPath(sourceFile: ts.SourceFile): string | undefined {
  const path = relative(SRC, sourceFile.fileName).split('\\').join('/')
  return path.startsWith('..') || sourceFile.isDeclarationFile ? undefined : path
}

const sourceOf = (file: string) => program.getSourceFile(join(SRC, file))!

/** The symbol a name finally stands for: through imports, re-exports and a local's export symbol. */
function resolved(symbol: ts.Symbol): ts.Symbol {
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol
  return checker.getExportSymbolOfSymbol(target)
}

/** The names a module declares with `export` (not re-exports from elsewhere), each once (overloads, merged declarations). */
function declaredExports(file: string): Map<string, ts.Symbol> {
  const moduleSymbol = checker.getSymbolAtLocation(sourceOf(file))
  const declared = new Map<string, ts.Symbol>()
  for (const symbol of moduleSymbol ? checker.getExportsOfModule(moduleSymbol) : []) {
    const target = resolved(symbol)
    if (target.declarations?.some((declaration) => declaration.getSourceFile() === sourceOf(file))) declared.set(symbol.name, target)
  }
  return declared
}

const exportsOf = new Map(files.map((file) => [file, declaredExports(file)]))

/** Every symbol of src/ that a module of src/ names outside the module declaring it. */
function usedElsewhere(): Set<ts.Symbol> {
  const used = new Set<ts.Symbol>()
  for (const file of files) {
    const sourceFile = sourceOf(file)
    const use = (symbol: ts.Symbol | undefined) => {
      const target = symbol && resolved(symbol)
      if (target?.declarations?.some((declaration) => declaration.getSourceFile() !== sourceFile)) used.add(target)
    }
    const visit = (node: ts.Node) => {
      if (ts.isIdentifier(node)) use(checker.getSymbolAtLocation(node))
      // `const { name } = await import('…')`: the name is a property of the module's namespace.
      if (ts.isBindingElement(node) && ts.isObjectBindingPattern(node.parent)) {
        const property = node.propertyName ?? node.name
        if (ts.isIdentifier(property)) use(checker.getTypeAtLocation(node.parent).getProperty(property.text))
      }
      ts.forEachChild(node, visit)
    }
    visit(sourceFile)
  }
  return used
}

/** What the entries export, resolved to where it is declared. */
function publicApi(): Set<ts.Symbol> {
  const api = new Set<ts.Symbol>()
  for (const entry of ENTRIES) {
    const moduleSymbol = checker.getSymbolAtLocation(sourceOf(entry))!
    for (const symbol of checker.getExportsOfModule(moduleSymbol)) api.add(resolved(symbol))
  }
  return api
}

describe('exports of src/', () => {
  test('the compiler read the modules', () => {
    expect(files.length).toBeGreaterThan(40)
    expect(files.every((file) => sourceOf(file) !== undefined && srcPath(sourceOf(file)) === file)).toBe(true)
    expect([...exportsOf.values()].reduce((sum, names) => sum + names.size, 0)).toBeGreaterThan(300)
    // A re-export is not a declaration: api.ts declares nothing, and the entries' exports come from below.
    expect([...exportsOf.get('api.ts')!.keys()]).toEqual([])
    expect(exportsOf.get('core/convert.ts')!.has('convert')).toBe(true)
    expect(publicApi().size).toBeGreaterThan(80)
  })

  test('no name is declared by an export in two modules (the targets of #platform, and of #workers, share theirs by design)', () => {
    const modulesOf = new Map<string, string[]>()
    for (const [file, names] of exportsOf) {
      if (SUBPATHS.some((targets) => file === targets[1])) continue
      for (const name of names.keys()) modulesOf.set(name, [...(modulesOf.get(name) ?? []), file])
    }
    const twice = [...modulesOf].filter(([, modules]) => modules.length > 1).map(([name, modules]) => `${name}: ${modules.join(', ')}`)
    expect(twice).toEqual([])
    for (const targets of SUBPATHS) expect([...exportsOf.get(targets[1])!.keys()].sort()).toEqual([...exportsOf.get(targets[0])!.keys()].sort())
  })

  test('every export is imported by another module of src/ or is public API (tests do not count)', () => {
    const used = usedElsewhere()
    const api = publicApi()
    const subpathFiles = SUBPATHS.flat()
    const platformNames = new Set(subpathFiles.flatMap((file) => [...exportsOf.get(file)!].filter(([, symbol]) => used.has(symbol)).map(([name]) => name)))
    const unused = [...exportsOf].flatMap(([file, names]) =>
      [...names]
        // The portable targets are what `#platform` and `#workers` are outside Node; the compiler resolves them to the Node ones.
        .filter(([name, symbol]) => !used.has(symbol) && !api.has(symbol) && !(subpathFiles.includes(file) && platformNames.has(name)))
        .map(([name]) => `${file}: ${name}`),
    )
    expect(unused.filter((entry) => !TEST_SEAMS.includes(entry) && !GGUF_PENDING.includes(entry))).toEqual([])
    // Each exception is still an export of its module.
    const declared = [...exportsOf].flatMap(([file, names]) => [...names.keys()].map((name) => `${file}: ${name}`))
    expect([...TEST_SEAMS, ...GGUF_PENDING].filter((entry) => !declared.includes(entry))).toEqual([])
  })
})
