// The values of a model's JSON files (config.json and its quantization block, tokenizer.json,
// tokenizer_config.json, a quant state), read where they are used: each getter checks its value's type and range
// and throws a coded error naming the file and the key, so that a wrong type, a null, an array for an object or an
// absurd number is never a TypeError, a RangeError or a silent value. Messages quote at most a short excerpt of a
// value, and nothing here recurses on the input's depth.
import { type ErrorCode, SafetensorsError } from '../errors.ts'

/** The deepest nesting of arrays and objects read (a header's limit too; the Hub's tokenizer.json files nest 7 deep). */
export const MAX_JSON_DEPTH = 64

/** The longest excerpt of a string or key a message quotes. */
const EXCERPT = 40

/** The error for a model's JSON file `file` that is not what it should be. */
export function jsonFileError(file: string, message: string, code: ErrorCode = 'InvalidHeaderDeserialization'): SafetensorsError {
  return new SafetensorsError(code, `${file}: ${message}`)
}

/** `text` as a message quotes it: JSON, at most EXCERPT characters of it, then an ellipsis. */
export function excerpt(text: string): string {
  return text.length > EXCERPT ? `${JSON.stringify(text.slice(0, EXCERPT))}…` : JSON.stringify(text)
}

/** What a message says a value is, never more than a short excerpt of it. */
function describe(value: unknown): string {
  if (value === undefined) return 'nothing'
  if (value === null || typeof value === 'boolean') return String(value)
  if (typeof value === 'number') return Number.isFinite(value) ? `the number ${value}` : 'a number beyond the range of a double'
  if (typeof value === 'string') return `the string ${excerpt(value)}`
  if (Array.isArray(value)) return `an array of ${value.length} item${value.length === 1 ? '' : 's'}`
  return 'an object'
}

/** The text of a JSON file's bytes: strict UTF-8, a byte order mark kept (JSON.parse refuses it, as Python's json.load does). */
export function jsonText(bytes: Uint8Array, file: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    throw jsonFileError(file, 'not UTF-8 text')
  }
}

/**
 * The value of JSON `text`, the file `file`'s, whose errors have `code`. The nesting is checked first: JSON.parse
 * copes with any depth, but takes seconds and hundreds of megabytes for a few million brackets.
 */
export function parseJson(text: string, file: string, code: ErrorCode = 'InvalidHeaderDeserialization'): JsonValue {
  // The start and end of the last string at each depth: a key, where an object's member is too deep.
  const keys: number[] = []
  let depth = 0
  for (let at = 0; at < text.length; at++) {
    const c = text.charCodeAt(at)
    if (c === 0x22) {
      // A string, to its closing quote: brackets inside it are text.
      const start = at
      for (at++; at < text.length && text.charCodeAt(at) !== 0x22; at++) if (text.charCodeAt(at) === 0x5c) at++
      keys[2 * depth] = start
      keys[2 * depth + 1] = at + 1
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_JSON_DEPTH) throw jsonFileError(file, `${deepKey(text, keys)} nests deeper than ${MAX_JSON_DEPTH} levels`, code)
      keys[2 * depth] = -1
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  try {
    return new JsonValue(JSON.parse(text), file, code)
  } catch (error) {
    throw jsonFileError(file, `not JSON: ${(error as Error).message}`, code)
  }
}

/** The top-level key of a nesting too deep (at most the value of one member of the file's object), as a message names it. */
function deepKey(text: string, keys: readonly number[]): string {
  if (text.trimStart()[0] !== '{' || keys[2] === -1 || keys[2] === undefined) return 'the top level'
  try {
    return excerpt(JSON.parse(text.slice(keys[2], keys[3])))
  } catch {
    return 'a member of the top level'
  }
}

/**
 * A value of a JSON file, and where it is (the file, the keys and indexes leading to it), by which its errors
 * name it: `config.json: "architectures"[0] must be a string, got an object`. A missing value and `null`
 * (transformers writes null for an unset option) are both absent: the getters of a value that must be there
 * refuse them, `optional()` tells them apart from the rest. Errors have the value's code, its file's by default.
 */
export class JsonValue {
  readonly #parent: JsonValue | undefined
  readonly #key: string | number | undefined

  constructor(
    /** The value, as JSON.parse made it (undefined where the file has none). */
    readonly value: unknown,
    /** The file, as messages name it. */
    readonly file: string,
    readonly code: ErrorCode = 'InvalidHeaderDeserialization',
    parent?: JsonValue,
    key?: string | number,
  ) {
    this.#parent = parent
    this.#key = key
  }

  /** The keys and indexes from the file's top to this value, as messages write them: `"rope_scaling"."factor"`, `"architectures"[0]`. */
  get path(): string {
    const keys: Array<string | number> = []
    for (let at: JsonValue | undefined = this; at !== undefined && at.#key !== undefined; at = at.#parent) keys.push(at.#key)
    let path = ''
    for (const key of keys.reverse()) path += typeof key === 'number' ? `[${key}]` : `${path ? '.' : ''}${excerpt(key)}`
    return path || 'the top level'
  }

  /** A coded error about this value: `<file>: <path> <message>`. */
  error(message: string): SafetensorsError {
    return jsonFileError(this.file, `${this.path} ${message}`, this.code)
  }

  /** The error for a value that is not `expected` (what the file should have: "a string", "one of 2, 4, 8"). */
  mustBe(expected: string): SafetensorsError {
    return this.value === undefined ? this.error(`is missing: it must be ${expected}`) : this.error(`must be ${expected}, got ${describe(this.value)}`)
  }

  /** The same value, its errors of code `code` (a quantization block's: UnsupportedQuantization). */
  withCode(code: ErrorCode): JsonValue {
    return new JsonValue(this.value, this.file, code, this.#parent, this.#key)
  }

  /** Whether the file has a value here, not null. */
  get present(): boolean {
    return this.value !== undefined && this.value !== null
  }

  /** This value, or undefined where it is missing or null. */
  optional(): JsonValue | undefined {
    return this.present ? this : undefined
  }

  get isObject(): boolean {
    return typeof this.value === 'object' && this.value !== null && !Array.isArray(this.value)
  }

  /** This value, which must be an object. */
  object(): JsonValue {
    if (!this.isObject) throw this.mustBe('an object')
    return this
  }

  /** Member `key` of this object (absent where this value is); an error where this value is not an object. */
  get(key: string): JsonValue {
    if (this.present && !this.isObject) throw this.mustBe('an object')
    const value = this.isObject && Object.hasOwn(this.value as object, key) ? (this.value as Record<string, unknown>)[key] : undefined
    return new JsonValue(value, this.file, this.code, this, key)
  }

  /** The first of members `keys` (aliases, as configs of several families name one value) that is present, else the first. */
  first(...keys: string[]): JsonValue {
    const members = keys.map((key) => this.get(key))
    return members.find((member) => member.present) ?? members[0]
  }

  /** The members of this object, in the file's order; an error where it is not an object. */
  members(): Array<[string, JsonValue]> {
    return this.mapMembers((key, value) => [key, value])
  }

  /**
   * `read` of each member of this object, in the file's order; an error where it is not an object. Only what `read`
   * keeps of a member outlives its call: no JsonValue of each of 10^5 members (a vocabulary) at once.
   */
  mapMembers<T>(read: (key: string, value: JsonValue) => T): T[] {
    if (!this.isObject) throw this.mustBe('an object')
    return Object.keys(this.value as object).map((key) => read(key, this.get(key)))
  }

  /** The items of this array; an error where it is not an array. */
  items(): JsonValue[] {
    return this.mapItems((item) => item)
  }

  /** `read` of each item of this array, as mapMembers reads an object's members; an error where it is not an array. */
  mapItems<T>(read: (item: JsonValue) => T): T[] {
    if (!Array.isArray(this.value)) throw this.mustBe('an array')
    return this.value.map((item, i) => read(new JsonValue(item, this.file, this.code, this, i)))
  }

  string(): string {
    if (typeof this.value !== 'string') throw this.mustBe('a string')
    return this.value
  }

  boolean(): boolean {
    if (typeof this.value !== 'boolean') throw this.mustBe('true or false')
    return this.value
  }

  /** A finite number, within [min, max]. */
  number(min = -Number.MAX_VALUE, max = Number.MAX_VALUE): number {
    if (typeof this.value !== 'number' || !(this.value >= min && this.value <= max))
      throw this.mustBe(min === -Number.MAX_VALUE && max === Number.MAX_VALUE ? 'a finite number' : `a number from ${min} to ${max}`)
    return this.value
  }

  /** An integer within [min, max] (by default, any a double holds exactly). */
  integer(min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): number {
    if (!Number.isInteger(this.value) || !((this.value as number) >= min && (this.value as number) <= max)) {
      const range = max === Number.MAX_SAFE_INTEGER ? (min === Number.MIN_SAFE_INTEGER ? '' : ` of at least ${min}`) : ` from ${min} to ${max}`
      throw this.mustBe(`an integer${range}`)
    }
    return this.value as number
  }

  /** One of `choices`, which a message lists. */
  oneOf<T extends string | number | boolean>(choices: readonly T[]): T {
    if (!choices.includes(this.value as T)) throw this.mustBe(`one of ${choices.map((choice) => JSON.stringify(choice)).join(', ')}`)
    return this.value as T
  }
}
