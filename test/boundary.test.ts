// The facts the wasm core and src/ must agree on, which AssemblyScript cannot import from TypeScript:
// the scanner's status and reason codes (defined in assembly/boundary.ts, named in src/header.ts), and which
// conversions the kernels, keyed by DTYPES indices (assembly/dtypes.ts), have. The float layouts the kernels
// are compiled with are checked by test/convert.test.ts, on every code of each format.
import { readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import boundaryConstants from '../assembly/boundary.ts?constants'
import { kernelModule } from '../src/convert.ts'
import { canConvert, DTYPES } from '../src/dtypes.ts'
import { REASON_TEXT, STATUS_ERRORS } from '../src/header.ts'

describe('the wasm modules and src/', () => {
  const globals = (prefix: string): Record<string, number> => Object.fromEntries(Object.entries(boundaryConstants).filter(([name]) => name.startsWith(prefix)))

  test('the constants module holds every constant of assembly/boundary.ts', () => {
    const source = readFileSync(new URL('../assembly/boundary.ts', import.meta.url), 'utf8')
    const declared = [...source.matchAll(/^export const (\w+)/gm)].map(([, name]) => name)
    expect(Object.keys(boundaryConstants).sort()).toEqual(declared.sort())
    expect(boundaryConstants.ESCAPED).toBe(0x80000000)
  })

  test('every status the scanner returns has its error, and the codes are distinct', () => {
    const statuses = globals('STATUS_')
    expect(Object.keys(statuses).sort()).toEqual([...Object.keys(STATUS_ERRORS), 'STATUS_OK'].sort())
    expect(statuses.STATUS_OK).toBe(0)
    expect(new Set(Object.values(statuses)).size).toBe(Object.keys(statuses).length)
  })

  test('every reason the scanner reports has its text, and the codes are distinct', () => {
    const reasons = globals('R_')
    expect(Object.keys(reasons).sort()).toEqual(Object.keys(REASON_TEXT).sort())
    expect(new Set(Object.values(reasons)).size).toBe(Object.keys(reasons).length)
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
