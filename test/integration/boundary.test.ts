// The facts the wasm core and src/ must agree on, which AssemblyScript cannot import from TypeScript:
// each module's contract (assembly/boundary/: codes, modes, descriptor layouts, named in src/ by a `?constants`
// import), the scanner's status and reason codes (named in src/format/header.ts), and which
// conversions the kernels, keyed by DTYPES indices (assembly/dtypes.ts), have. The float layouts the kernels
// are compiled with are checked by test/core/convert.test.ts, on every code of each format.
import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import * as dtypeNumbers from '../../assembly/boundary/dtypes.ts?constants'
import * as ggml from '../../assembly/boundary/ggml.ts?constants'
import * as boundary from '../../assembly/boundary/header.ts?constants'
import { kernelModule } from '../../src/core/convert.ts'
import { canConvert, DTYPES } from '../../src/core/dtypes.ts'
import { REASON_TEXT, STATUS_ERRORS } from '../../src/format/header.ts'
import { GGML_TYPES } from '../../src/gguf/ggml-types.ts'

const FIELD_BYTES: Record<string, number> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, u64: 8, i64: 8, f64: 8 }

/** Each exported function of a wasm binary with its number of parameters (its type, export and import sections). */
function exportedArities(wasm: Uint8Array): Record<string, number> {
  let at = 8
  const byte = () => wasm[at++]
  const leb = () => {
    let value = 0
    for (let shift = 0; ; shift += 7) {
      const b = byte()
      value += (b & 0x7f) * 2 ** shift
      if (b < 0x80) return value
    }
  }
  const name = () => {
    const length = leb()
    at += length
    return new TextDecoder().decode(wasm.subarray(at - length, at))
  }
  const types: number[] = []
  const functionTypes: number[] = []
  const exports: Record<string, number> = {}
  while (at < wasm.length) {
    const id = byte()
    const end = leb() + at
    if (id === 1) {
      for (let n = leb(); n > 0; n--) {
        byte() // 0x60, a function type
        const params = leb()
        at += params
        types.push(params)
        const results = leb()
        at += results
      }
    } else if (id === 2) {
      // An imported function takes a function index before the module's own (ours import only memory).
      for (let n = leb(); n > 0; n--) {
        name()
        name()
        if (byte() === 0) functionTypes.push(leb())
        else at = end
      }
    } else if (id === 3) {
      for (let n = leb(); n > 0; n--) functionTypes.push(leb())
    } else if (id === 7) {
      for (let n = leb(); n > 0; n--) {
        const exported = name()
        const kind = byte()
        const index = leb()
        if (kind === 0) exports[exported] = types[functionTypes[index]]
      }
    }
    at = end
  }
  return exports
}

// Every contract of assembly/boundary/, as the builds make it into a module (scripts/inline-wasm.js).
const BOUNDARIES = new URL('../../assembly/boundary/', import.meta.url)
const contracts = readdirSync(BOUNDARIES).map((file) => {
  const source = readFileSync(new URL(file, BOUNDARIES), 'utf8')
  const lines = [...source.matchAll(/^export const (\w+): \w+ = (0x[0-9a-f]+|\d+);(?: *\/\/ *(\w+))?/gim)]
  return {
    file,
    declared: lines.map(([, name]) => name),
    // A field of a struct in linear memory: a byte offset whose comment starts with the field's type.
    fields: lines.flatMap(([, name, value, type]) => (type && FIELD_BYTES[type] ? [{ name, offset: Number(value), bytes: FIELD_BYTES[type] }] : [])),
    values: Object.fromEntries(lines.map(([, name, value]) => [name, Number(value)])),
  }
})

/** Every `name.CONSTANT` that a file of src/ reads of a contract it imports as `* as name`, with the contract's file. */
function constantsRead(): { file: string; contract: string; name: string }[] {
  const src = new URL('../../src/', import.meta.url)
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'))
  return files.flatMap((file) => {
    const text = readFileSync(new URL(file, src), 'utf8')
    return [...text.matchAll(/import \* as (\w+) from '[./]*assembly\/boundary\/([\w-]+\.ts)\?constants'/g)].flatMap(([, binding, contract]) =>
      [...text.matchAll(new RegExp(`\\b${binding}\\.([A-Z]\\w*)`, 'g'))].map(([, name]) => ({ file, contract, name })),
    )
  })
}

describe("each wasm module's contract", () => {
  // More than a few numbers go in a descriptor struct of the module's contract, not in a list of parameters.
  test.each(readdirSync(new URL('../../build/', import.meta.url)).filter((file) => file.endsWith('.wasm')))(
    '%s: no export takes more than 6 parameters',
    (file) => {
      const arities = exportedArities(readFileSync(new URL(`../../build/${file}`, import.meta.url)))
      expect(Object.keys(arities).length).toBeGreaterThan(1)
      expect(Object.entries(arities).filter(([, params]) => params > 6)).toEqual([])
    },
  )

  test.each(contracts)('the constants module of $file holds every constant it declares, each once', async ({ file, declared }) => {
    const constants = await import(/* @vite-ignore */ `../assembly/boundary/${file}?constants`)
    expect(Object.keys(constants).sort()).toEqual([...declared].sort())
    expect(new Set(declared).size).toBe(declared.length)
  })

  // A struct is the fields of one prefix (DEQUANT_CODES, DEQUANT_COLS...) and its size, PREFIX_SIZE: each field
  // aligned to its type, inside the struct, overlapping no other.
  test.each(contracts)('the structs of $file: fields aligned, inside their size, apart', ({ fields, values }) => {
    const structs = Object.keys(values).filter((name) => /^[A-Z0-9]+_SIZE$/.test(name) && fields.some((f) => f.name.startsWith(name.slice(0, -4))))
    for (const size of structs) {
      const members = fields.filter((f) => f.name.startsWith(size.slice(0, -4)) && f.name !== size).sort((a, b) => a.offset - b.offset)
      for (const [i, f] of members.entries()) {
        expect(f.offset % f.bytes, `${f.name} is aligned`).toBe(0)
        expect(f.offset + f.bytes, `${f.name} is inside ${size}`).toBeLessThanOrEqual(values[size])
        if (i > 0) expect(f.offset, `${f.name} starts after ${members[i - 1].name}`).toBeGreaterThanOrEqual(members[i - 1].offset + members[i - 1].bytes)
      }
    }
  })

  // The namespaces are typed as any name to a number: a name that src/ reads and its contract lacks would be undefined.
  test('every constant src/ reads is declared in the contract it imports', () => {
    const read = constantsRead()
    expect(read.length).toBeGreaterThan(20)
    const declaredIn = Object.fromEntries(contracts.map(({ file, declared }) => [file, new Set(declared)]))
    expect(read.filter(({ contract, name }) => !declaredIn[contract]?.has(name))).toEqual([])
  })
})

test('the dtype numbers of the wasm modules are the indices of DTYPES', () => {
  expect({ ...dtypeNumbers }).toEqual(Object.fromEntries(DTYPES.map((dtype, index) => [dtype, index])))
})

test("the ggml module's type numbers are ggml's, one for each type but Q8_1 (which ggml does not dequantize), its other codes distinct", () => {
  const named = (prefix: string) => Object.entries(ggml).filter(([name]) => name.startsWith(prefix))
  expect(Object.fromEntries(named('TYPE_'))).toEqual(
    Object.fromEntries(
      Object.entries(GGML_TYPES)
        .filter(([name]) => name !== 'Q8_1')
        .map(([name, { id }]) => [`TYPE_${name}`, id]),
    ),
  )
  expect(ggml.STATUS_OK).toBe(0)
  for (const prefix of ['STATUS_', 'TO_', 'ORDER_']) expect(new Set(named(prefix).map(([, value]) => value)).size).toBe(named(prefix).length)
})

describe('the header scanner and src/', () => {
  const declared = contracts.find(({ file }) => file === 'header.ts')!.declared
  // A copy to look names up in: src/ reads the namespace by static names only, so that bundlers inline them.
  const byName: Record<string, number> = { ...boundary }
  const valuesOf = (prefix: string): number[] => declared.filter((name) => name.startsWith(prefix)).map((name) => byName[name])

  test('ESCAPED is the top bit', () => {
    expect(boundary.ESCAPED).toBe(0x80000000)
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
