// compressed-tensors' "re:" targets (src/quant/target-pattern.ts), judged by Python's re.match (a table of its
// answers for targets of real configs) and, over random patterns of the forms read, by the platform's RegExp on
// names where the two engines agree (ASCII, no newline); forms outside them are refused at once.
import { expect, test } from 'vitest'
import { MAX_PATTERN, targetPattern } from '../../src/quant/target-pattern.ts'
import { prng } from '../random.ts'

const matcher = (pattern: string) => {
  const made = targetPattern(pattern)
  if (typeof made !== 'function') throw new Error(`${pattern}: ${made.unread}`)
  return made
}

// [pattern, name, re.match(pattern, name) is not None], from Python 3.12's re.
const PYTHON: Array<[string, string, boolean]> = [
  ['.*gate$', 'model.layers.0.mlp.gate', true],
  ['.*gate$', 'model.layers.0.mlp.gate_proj', false],
  [String.raw`.*mlp\.experts(?:\..*)?$`, 'model.layers.3.mlp.experts.12.down_proj', true],
  [String.raw`.*mlp\.experts(?:\..*)?$`, 'model.layers.3.mlp.expertsX', false],
  [String.raw`.*mlp\.experts(?:\..*)?$`, 'model.layers.3.mlp.experts', true],
  [String.raw`^mtp\..*`, 'mtp.layers.0', true],
  [String.raw`^mtp\..*`, 'model.mtp.x', false],
  ['.*self_attn.(q|k|v)_proj$', 'model.layers.0.self_attn.k_proj', true],
  ['.*self_attn.(q|k|v)_proj$', 'model.layers.0.self_attn.o_proj', false],
  [String.raw`model.layers.\d+.mlp.gate`, 'model.layers.12.mlp.gate_proj', true],
  [String.raw`model.layers.\d+.mlp.gate`, 'model.layers.x.mlp.gate', false],
  [String.raw`.*layers\.[0-9]+\.mlp`, 'model.layers.7.mlp.up_proj', true],
  ['.*lm_head', 'lm_head', true],
  [String.raw`.*\.mlp\.experts\.`, 'model.layers.0.mlp.experts.0.w1', true],
  [String.raw`[^.]*\.weight$|lm_head`, 'lm_head.bias', true],
  [String.raw`[^.]*\.weight$|lm_head`, 'a.b.weight', false],
  ['.*down_proj$', 'x.down_proj\n', true],
  ['.*down_proj$', 'x.down_proj\n\n', false],
  ['a.c', 'a\nc', false],
  ['[]a]+b', ']a]b', true],
  ['[a-]x', '-x', true],
  [String.raw`\w+\.\d`, 'é_1.٣', true],
  ['x*?y', 'xxy', true],
  ['', 'anything', true],
]

test.each(PYTHON)('re.match(%j, %j) is %s', (pattern, name, expected) => {
  expect(matcher(pattern)(name)).toBe(expected)
})

test('a form not read is refused at once, saying what: a repeated group, an open group, a backreference, a brace', () => {
  for (const [pattern, why] of [
    ['(.|.)*X', 'a group repeated with * is not read'],
    ['(a|b)+', 'a group repeated with + is not read'],
    ['(', 'a group is not closed'],
    ['((a))', '( is not read where it stands'],
    [String.raw`(a)\1`, String.raw`the escape \1 is not read`],
    ['a{2}', '{ is not read where it stands'],
    ['*a', '* is not read where it stands'],
    ['a$b', 'b is not read where it stands'],
    ['[a-', 'it ends in the middle of a form'],
    ['[z-a]', 'a range of the class is not read'],
    ['x'.repeat(MAX_PATTERN + 1), `it is longer than ${MAX_PATTERN} characters`],
  ]) {
    expect(targetPattern(pattern), pattern).toEqual({ unread: why })
  }
})

test('time linear in the name: the patterns that backtrack for ever in a RegExp take one pass', () => {
  // A backtracking engine takes 2^n steps on these; a thread per automaton step takes n.
  const name = `${'a'.repeat(100_000)}!`
  expect(matcher('.*.*.*.*.*.*.*.*b')(name)).toBe(false)
  expect(matcher('(?:a|a)?(?:a|a)?(?:a|a)?a*b')(name)).toBe(false)
  expect(matcher('[a-z]*[a-z]*[a-z]*!')(name)).toBe(true)
})

/** A random pattern of the forms read, over the alphabet a, b, 1, "." and "_". */
function randomPattern(next: () => number): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]
  const atom = () => pick(['a', 'b', '1', '_', '.', '.', String.raw`\.`, String.raw`\d`, String.raw`\w`, '[ab]', '[^a]', '[a-b1]', '[.]'])
  const quantified = () => atom() + pick(['', '', '*', '+', '?', '*?'])
  const run = (max: number) => Array.from({ length: Math.floor(next() * max) }, quantified).join('')
  const piece = () =>
    next() < 0.2 ? `(${pick(['', '?:'])}${Array.from({ length: 1 + Math.floor(next() * 3) }, () => run(3)).join('|')})${pick(['', '?'])}` : quantified()
  const alternative = () => `${next() < 0.2 ? '^' : ''}${Array.from({ length: Math.floor(next() * 5) }, piece).join('')}${next() < 0.4 ? '$' : ''}`
  return Array.from({ length: 1 + Math.floor(next() * 2) }, alternative).join('|')
}

test('10,000 random patterns of the forms read match as RegExp does, from the name start', () => {
  const next = prng(20260901)
  for (let i = 0; i < 10_000; i++) {
    const pattern = randomPattern(next)
    const reference = new RegExp(`^(?:${pattern})`)
    const matches = matcher(pattern)
    for (let k = 0; k < 8; k++) {
      const name = Array.from({ length: Math.floor(next() * 10) }, () => 'ab1._'[Math.floor(next() * 5)]).join('')
      expect(matches(name), `${pattern} on ${JSON.stringify(name)}`).toBe(reference.test(name))
    }
  }
})
