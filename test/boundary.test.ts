// The facts the wasm core and src/ must agree on, which AssemblyScript cannot import from TypeScript:
// the scanner's status and reason codes (defined in assembly/boundary.ts, named in src/format/header.ts), and which
// conversions the kernels, keyed by DTYPES indices (assembly/dtypes.ts), have. The float layouts the kernels
// are compiled with are checked by test/convert.test.ts, on every code of each format.
import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import * as boundary from '../assembly/boundary.ts?constants'
import { kernelModule } from '../src/core/convert.ts'
import { canConvert, DTYPES } from '../src/core/dtypes.ts'
import { REASON_TEXT, STATUS_ERRORS } from '../src/format/header.ts'

describe('the wasm modules and src/', () => {
  const source = readFileSync(new URL('../assembly/boundary.ts', import.meta.url), 'utf8')
  const declared = [...source.matchAll(/^export const (\w+)/gm)].map(([, name]) => name)
  // A copy to look names up in: src/ reads the namespace by static names only, so that bundlers inline them.
  const byName: Record<string, number> = { ...boundary }
  const valuesOf = (prefix: string): number[] => declared.filter((name) => name.startsWith(prefix)).map((name) => byName[name])

  test('the constants module holds every constant of assembly/boundary.ts', () => {
    expect(Object.keys(byName).sort()).toEqual([...declared].sort())
    expect(boundary.ESCAPED).toBe(0x80000000)
  })

  // The namespace is typed as any name to a number: a name that src/ reads and boundary.ts lacks would be undefined.
  test('every constant src/ reads is declared in assembly/boundary.ts', () => {
    const src = new URL('../src/', import.meta.url)
    // src/gguf/ and any other folder included.
    const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'))
    const read = files.flatMap((file) => [...readFileSync(new URL(file, src), 'utf8').matchAll(/\bboundary\.([A-Z]\w*)/g)].map(([, name]) => name))
    expect(read.length).toBeGreaterThan(20)
    expect(read.filter((name) => !declared.includes(name))).toEqual([])
  })

  test('every status the scanner returns has its error, and the codes are distinct', () => {
    const statuses = valuesOf('STATUS_')
    expect(boundary.STATUS_OK).toBe(0)
    expect(new Set(statuses).size).toBe(statuses.length)
    expect(
      Object.keys(STATUS_ERRORS)
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual(statuses.filter((status) => status !== boundary.STATUS_OK).sort((a, b) => a - b))
  })

  test('every reason the scanner reports has its text, and the codes are distinct', () => {
    const reasons = valuesOf('R_')
    expect(new Set(reasons).size).toBe(reasons.length)
    expect(
      Object.keys(REASON_TEXT)
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual([...reasons].sort((a, b) => a - b))
  })

  test('convertKernel has a kernel for exactly the pairs canConvert accepts', () => {
    const { exports } = kernelModule.instantiate(0, false)
    for (const [from, fromIndex] of DTYPES.map((d, i) => [d, i] as const)) {
      for (const [to, toIndex] of DTYPES.map((d, i) => [d, i] as const)) {
        expect(exports.convertKernel(fromIndex, toIndex, 0, 0, 0) === 1, `${from} -> ${to}`).toBe(canConvert(from, to))
      }
    }
    expect(canConvert('F8_E8M0', 'BF16') && canConvert('U64', 'F32') && !canConvert('C64', 'F32') && !canConvert('I8', 'F16')).toBe(true)
  })
})
