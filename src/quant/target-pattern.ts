// compressed-tensors' "re:" targets (a config group's modules by pattern), which compressed-tensors matches with
// Python's re.match: from the name's start, a match of any length. A pattern comes from the file, so it is never
// compiled as a RegExp (a nested quantifier such as "(.|.)*X" backtracks for ever): it is read as one of the forms
// compressed-tensors' configs hold, anchors, literals and escapes, ".", classes ("[0-9]", "\d"), "*", "+" and "?"
// on them, and groups of alternatives of those ("(q|k|v)_proj", "(?:\..*)?"), and run as a Thompson automaton,
// in time linear in the name for a pattern of bounded length.

/** The longest pattern read. */
export const MAX_PATTERN = 1000

type Test = (c: number) => boolean
/** A step of the automaton: match a character, fork, jump, hold only at the name's end, or accept. */
type Step = { op: 'char'; test: Test } | { op: 'fork'; to: number } | { op: 'jump'; to: number } | { op: 'end' } | { op: 'accept' }

/** A character, a class, or (in a top-level piece) a group of alternatives; and how often it may come. */
interface Piece {
  test?: Test
  alternatives?: Piece[][]
  quantifier: '' | '*' | '+' | '?'
}

/** One alternative of the pattern: its pieces, and whether it ends with "$". */
interface Alternative {
  pieces: Piece[]
  atEnd: boolean
}

const NEWLINE = 0x0a
const isDigit: Test = (c) => /\p{Nd}/u.test(String.fromCodePoint(c))
const isWord: Test = (c) => c === 0x5f || /[\p{L}\p{N}]/u.test(String.fromCodePoint(c))
const isSpace: Test = (c) => /\s/u.test(String.fromCodePoint(c)) || (c >= 0x1c && c <= 0x1f)
const not =
  (test: Test): Test =>
  (c) =>
    !test(c)
/** Python's class escapes. */
const CLASSES: Record<string, Test> = { d: isDigit, D: not(isDigit), w: isWord, W: not(isWord), s: isSpace, S: not(isSpace) }

/** What the pattern holds that is not one of the forms read. */
class Unread extends Error {}

/** Reads a pattern, character by character (by code point, as Python's re). */
class Reader {
  readonly #chars: number[]
  #at = 0

  constructor(pattern: string) {
    this.#chars = Array.from(pattern, (c) => c.codePointAt(0)!)
  }

  get done(): boolean {
    return this.#at >= this.#chars.length
  }

  /** The character `ahead` characters on ('' past the end). */
  peek(ahead = 0): string {
    const at = this.#at + ahead
    return at >= this.#chars.length ? '' : String.fromCodePoint(this.#chars[at])
  }

  take(): number {
    if (this.done) throw new Unread('it ends in the middle of a form')
    return this.#chars[this.#at++]
  }

  /** Takes `text` if it comes next. */
  eat(text: string): boolean {
    const next = Array.from(text, (c) => c.codePointAt(0))
    if (!next.every((c, i) => this.#chars[this.#at + i] === c)) return false
    this.#at += next.length
    return true
  }

  /** An escape, after its backslash: a class (\d, \w, \s and their negations) or an escaped punctuation character. */
  escape(): Test {
    const c = this.take()
    const name = String.fromCodePoint(c)
    if (Object.hasOwn(CLASSES, name)) return CLASSES[name]
    if (c < 0x80 && /[^\p{L}\p{N}]/u.test(name)) return (d) => d === c
    throw new Unread(`the escape \\${name} is not read`)
  }

  /** A class, after its "[": characters, ranges and class escapes, negated by a first "^". */
  charClass(): Test {
    const negated = this.eat('^')
    const tests: Test[] = []
    // A "]" first is a character, as Python reads it.
    for (let first = true; first || !this.eat(']'); first = false) {
      const c = this.take()
      if (c === 0x5c) {
        tests.push(this.escape())
        continue
      }
      if (this.peek() === '-' && this.peek(1) !== ']' && this.peek(1) !== '') {
        this.take()
        const last = this.take()
        if (last === 0x5c || last < c) throw new Unread('a range of the class is not read')
        tests.push((d) => d >= c && d <= last)
      } else tests.push((d) => d === c)
    }
    const inClass: Test = (d) => tests.some((test) => test(d))
    return negated ? not(inClass) : inClass
  }

  /** A character form: ".", an escape, a class or a plain character. */
  atom(): Test {
    const c = this.take()
    if (c === 0x2e) return (d) => d !== NEWLINE
    if (c === 0x5c) return this.escape()
    if (c === 0x5b) return this.charClass()
    if ('()|*+?{}^$'.includes(String.fromCodePoint(c))) throw new Unread(`${String.fromCodePoint(c)} is not read where it stands`)
    return (d) => d === c
  }

  quantifier(): Piece['quantifier'] {
    const next = this.peek()
    if (next !== '*' && next !== '+' && next !== '?') return ''
    this.take()
    // A lazy quantifier matches the same names.
    this.eat('?')
    return next
  }

  /** Pieces up to a "|", a ")" or the end (or a "$" that ends the pattern, at the top level). */
  pieces(inGroup: boolean): Piece[] {
    const pieces: Piece[] = []
    while (!this.done && this.peek() !== '|' && this.peek() !== ')' && !(this.peek() === '$' && !inGroup)) {
      if (!inGroup && this.eat('(')) {
        this.eat('?:')
        const alternatives = [this.pieces(true)]
        while (this.eat('|')) alternatives.push(this.pieces(true))
        if (!this.eat(')')) throw new Unread('a group is not closed')
        const quantifier = this.quantifier()
        if (quantifier === '*' || quantifier === '+') throw new Unread(`a group repeated with ${quantifier} is not read`)
        pieces.push({ alternatives, quantifier })
      } else pieces.push({ test: this.atom(), quantifier: this.quantifier() })
    }
    return pieces
  }

  alternative(): Alternative {
    this.eat('^')
    const pieces = this.pieces(false)
    const atEnd = this.eat('$')
    if (!this.done && this.peek() !== '|') throw new Unread(`${this.peek()} is not read where it stands`)
    return { pieces, atEnd }
  }
}

/** The automaton's steps of `pieces`, appended to `steps`. */
function emit(steps: Step[], pieces: readonly Piece[]): void {
  for (const piece of pieces) {
    const body = () => (piece.test ? steps.push({ op: 'char', test: piece.test }) : emitAlternatives(steps, piece.alternatives!))
    const fork = steps.length
    if (piece.quantifier === '' || piece.quantifier === '+') body()
    if (piece.quantifier === '+') steps.push({ op: 'fork', to: fork })
    else if (piece.quantifier === '?' || piece.quantifier === '*') {
      // fork: past the piece, or into it (and back, for "*").
      steps.push({ op: 'fork', to: -1 })
      body()
      if (piece.quantifier === '*') steps.push({ op: 'jump', to: fork })
      steps[fork] = { op: 'fork', to: steps.length }
    }
  }
}

/** The steps of alternatives: each but the last forks to the next, and each jumps past the others once matched. */
function emitAlternatives(steps: Step[], alternatives: readonly Piece[][], ends?: readonly boolean[]): void {
  const jumps: number[] = []
  alternatives.forEach((pieces, i) => {
    const fork = steps.length
    if (i < alternatives.length - 1) steps.push({ op: 'fork', to: -1 })
    emit(steps, pieces)
    if (ends?.[i]) steps.push({ op: 'end' })
    if (i < alternatives.length - 1) {
      jumps.push(steps.length)
      steps.push({ op: 'jump', to: -1 })
      steps[fork] = { op: 'fork', to: steps.length }
    }
  })
  for (const jump of jumps) steps[jump] = { op: 'jump', to: steps.length }
}

/** Whether `steps` accept a prefix of `name`: every thread at once, one step of the name at a time. */
function accepts(steps: readonly Step[], name: string): boolean {
  const chars = Array.from(name, (c) => c.codePointAt(0)!)
  // Where re's "$" holds: at the end, or before a newline that ends the name.
  const atEnd = (at: number) => at === chars.length || (at === chars.length - 1 && chars[at] === NEWLINE)
  const seen = new Int32Array(steps.length).fill(-1)
  let threads: number[] = []
  /** Adds the thread at `start` and those it forks to without a character; true where one accepts. */
  const add = (into: number[], start: number, at: number): boolean => {
    const stack = [start]
    while (stack.length > 0) {
      const pc = stack.pop()!
      if (seen[pc] === at) continue
      seen[pc] = at
      const step = steps[pc]
      if (step.op === 'accept') return true
      if (step.op === 'char') into.push(pc)
      else if (step.op === 'jump') stack.push(step.to)
      else if (step.op === 'fork') stack.push(step.to, pc + 1)
      else if (atEnd(at)) stack.push(pc + 1)
    }
    return false
  }
  if (add(threads, 0, 0)) return true
  for (let at = 0; at < chars.length && threads.length > 0; at++) {
    const next: number[] = []
    for (const pc of threads) if ((steps[pc] as { test: Test }).test(chars[at]) && add(next, pc + 1, at + 1)) return true
    threads = next
  }
  return false
}

/**
 * A matcher of names for the pattern of a "re:" target (without the "re:"), as re.match reads it; or why the
 * pattern is not one of the forms read.
 */
export function targetPattern(pattern: string): ((name: string) => boolean) | { unread: string } {
  if (pattern.length > MAX_PATTERN) return { unread: `it is longer than ${MAX_PATTERN} characters` }
  try {
    const reader = new Reader(pattern)
    const alternatives = [reader.alternative()]
    while (reader.eat('|')) alternatives.push(reader.alternative())
    const steps: Step[] = []
    emitAlternatives(
      steps,
      alternatives.map((a) => a.pieces),
      alternatives.map((a) => a.atEnd),
    )
    steps.push({ op: 'accept' })
    return (name) => accepts(steps, name)
  } catch (error) {
    if (error instanceof Unread) return { unread: error.message }
    throw error
  }
}
