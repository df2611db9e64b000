// The format's dtypes with bits per element, in the format's order, written from DESIGN.md ("The
// format"): the one table the tests' own references use, never the library's DTYPE_INFO.
export const FORMAT_DTYPES: ReadonlyArray<readonly [dtype: string, bits: number]> = [
  ['BOOL', 8],
  ['F4', 4],
  ['F6_E2M3', 6],
  ['F6_E3M2', 6],
  ['U8', 8],
  ['I8', 8],
  ['F8_E5M2', 8],
  ['F8_E4M3', 8],
  ['F8_E8M0', 8],
  ['F8_E4M3FNUZ', 8],
  ['F8_E5M2FNUZ', 8],
  ['I16', 16],
  ['U16', 16],
  ['F16', 16],
  ['BF16', 16],
  ['I32', 32],
  ['U32', 32],
  ['F32', 32],
  ['C64', 64],
  ['F64', 64],
  ['I64', 64],
  ['U64', 64],
]

export const DTYPE_BITS: ReadonlyMap<string, number> = new Map(FORMAT_DTYPES)
