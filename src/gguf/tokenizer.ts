// A model's tokenizer as the tokenizer.ggml.* keys, as llama.cpp's convert_hf_to_gguf.py and gguf-py write them,
// in the two kinds llama.cpp has: SentencePiece (tokenizer.ggml.model "llama": pieces with scores, from
// tokenizer.model, or from tokenizer.json's BPE with byte fallback as transformers converts SentencePiece models)
// and byte-level BPE ("gpt2": tokens and merges from tokenizer.json, as GPT-2, Llama 3 and Qwen2 have). Then what
// both share: the special tokens, whether a BOS, SEP and EOS are added (gguf-py's SpecialVocab), the chat template.
import { SafetensorsError } from '../errors.ts'
import { excerpt, type JsonValue, jsonFileError } from '../format/json-values.ts'
import type { ArchitectureTable, ModelConfig } from './architectures.ts'
import type { KeyValue } from './format.ts'
import type { SentencePieceModel } from './sentencepiece.ts'

/** The tokenizer files of a model folder: tokenizer.json, tokenizer.model (read), tokenizer_config.json and chat_template.jinja, each if present. */
export interface TokenizerFiles {
  json?: JsonValue
  model?: SentencePieceModel
  config?: JsonValue
  chatTemplate?: string
}

/** A Split step (isolated, not inverted) by `regex`, its CR and LF written as \r and \n, as tokenizer.json files differ in writing them. */
function split(regex: string): string {
  return `Split ${regex.replaceAll('\r', '\\r').replaceAll('\n', '\\n')}`
}

/** tokenizer.json's pre-tokenizer as the table's PRE_TOKENIZERS has its steps, a line each; undefined for any other step or option. */
function steps(pre: JsonValue): string | undefined {
  const lines: string[] = []
  for (const step of pre.get('type').value === 'Sequence' ? pre.get('pretokenizers').items() : [pre]) {
    const type = step.get('type').value
    const regex = type === 'Split' && step.get('pattern').get('Regex').value
    if (type === 'ByteLevel' && !step.get('add_prefix_space').value)
      lines.push(step.get('use_regex').value === false ? 'ByteLevel' : 'ByteLevel with its regex')
    else if (type === 'Split' && step.get('behavior').value === 'Isolated' && !step.get('invert').value && typeof regex === 'string') lines.push(split(regex))
    else if (type === 'Digits') lines.push(step.get('individual_digits').value === true ? 'Digits one by one' : 'Digits')
    else if (type === 'Punctuation') lines.push(`Punctuation ${step.get('behavior').optional()?.string() ?? 'Isolated'}`)
    else return undefined
  }
  return lines.join('\n')
}

/**
 * llama.cpp's name of a byte-level BPE's pre-tokenizer: refact, whose detokenizer cleans up spaces before
 * punctuation, is command-r where tokenizer_config.json says not to (clean_up_tokenization_spaces false).
 */
function preTokenizerName(pre: JsonValue, config: JsonValue | undefined, { PRE_TOKENIZERS }: ArchitectureTable): string | undefined {
  const lines = steps(pre)
  const name = Object.keys(PRE_TOKENIZERS).find(
    (name) => PRE_TOKENIZERS[name].map((step) => (typeof step === 'string' ? step : split(step.split))).join('\n') === lines,
  )
  return name === 'refact' && config?.get('clean_up_tokenization_spaces').value === false ? 'command-r' : name
}

/** llama.cpp's token types (llama_token_type); SentencePiece's proto numbers them alike. */
export const TOKEN_TYPES = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const
const { NORMAL, CONTROL, USER_DEFINED, UNUSED, BYTE } = TOKEN_TYPES

/** A SentencePiece vocabulary's byte token: `<0x41>` is the byte 0x41, for text its pieces do not cover (byte fallback). */
const BYTE_TOKEN = /^<0x[0-9A-Fa-f]{2}>$/

/** Tokens llama.cpp's converter types CONTROL though they are not marked special (does_token_look_special). */
const looksSpecial = (t: string) => /^(<pad>|<mask>|<2mass>|\[@BOS@\]|<\|.*\|>|<｜.*｜>|<unused.*>)$/s.test(t)

/** The special tokens gguf-py's SpecialVocab looks for, by their tokenizer.ggml key (`seperator` as gguf-py spells it). */
const SPECIAL_KEYS = {
  bos: 'bos_token_id',
  eos: 'eos_token_id',
  unk: 'unknown_token_id',
  sep: 'seperator_token_id',
  pad: 'padding_token_id',
  cls: 'cls_token_id',
  mask: 'mask_token_id',
}

function unsupported(what: string, { PRE_TOKENIZERS }: ArchitectureTable): SafetensorsError {
  return new SafetensorsError(
    'UnsupportedConversion',
    `tokenizer.json: ${what}; GGUF conversion supports SentencePiece tokenizers (tokenizer.model, or tokenizer.json's BPE with byte_fallback) and byte-level BPE ones with the pre-tokenizers ${[...Object.keys(PRE_TOKENIZERS), 'command-r'].join(', ')}`,
  )
}

/**
 * The ids past its tokenizer's a vocabulary may have (Qwen2 pads its 151,665 tokens to 151,936, DeepSeek-V2 its
 * 100,002 to 102,400): every one is a [PAD<id>] token in the GGUF, so config.json's vocab_size sets the memory.
 */
const paddingLimit = (tokens: number) => Math.max(4096, Math.ceil(tokens / 8))

/** A vocabulary by id, as the GGUF lists it: its tokens are gathered first, and the arrays of config.json's vocab_size made once it is checked. */
class Vocabulary {
  readonly #placed: Array<{ id: number; text: string; type: number; score: number }> = []
  /** The tokenizer's size: its highest id, plus one. */
  #known = 0
  /** The ids placed as byte tokens. */
  readonly #bytes = new Set<number>()

  constructor(readonly size: number) {}

  /** Token `text` at `id`, an id below the size (config.json's vocab_size) when `required`, else dropped as llama.cpp's converter drops it. */
  place(text: string, id: number, type: number, score: number, required: boolean): void {
    this.#known = Math.max(this.#known, id + 1)
    if (id >= this.size) {
      if (required) throw jsonFileError('tokenizer.json', `token ${excerpt(text)} has the id ${id}, not below vocab_size ${this.size}`)
      return
    }
    this.#placed.push({ id, text, type, score })
    if (type === BYTE) this.#bytes.add(id)
  }

  /**
   * An added token (an object with its content, as tokenizer.json and tokenizer_config.json list them): CONTROL if
   * special or looking special, else USER_DEFINED with SentencePiece's ▁ as a space; with `bytes` (a SentencePiece
   * vocabulary), a byte token BYTE however it is listed (tokenizers' BpeTrainer lists its special tokens, the 256
   * bytes among them, as special added tokens), which llama.cpp's detokenizer gives back.
   */
  add(token: JsonValue, id: number, required: boolean, bytes = false): void {
    const content = token.get('content').string()
    if (bytes && BYTE_TOKEN.test(content)) {
      if (!this.#bytes.has(id)) this.place(content, id, BYTE, 0, required)
      return
    }
    const special = (token.get('special').optional()?.boolean() ?? false) || looksSpecial(content)
    this.place(special ? content : content.replaceAll('\u2581', ' '), id, special ? CONTROL : USER_DEFINED, -1000, required)
  }

  /** The tokens, types and scores by id, ids without a token [PAD<id>], UNUSED, scored as SentencePiece scores them. */
  finish(): { tokens: string[]; types: Int32Array; scores: Float32Array } {
    const padding = this.size - this.#known
    if (padding > paddingLimit(this.#known))
      throw jsonFileError(
        'config.json',
        `vocab_size ${this.size} pads the tokenizer's ${this.#known} tokens with ${padding} ids, more than the ${paddingLimit(this.#known)} a vocabulary of that size is padded with`,
      )
    const tokens = new Array<string>(this.size)
    const types = new Int32Array(this.size).fill(UNUSED)
    // SentencePiece's score for ids without a token, which llama.cpp's converter names [PAD<id>].
    const scores = new Float32Array(this.size).fill(-10000)
    for (const { id, text, type, score } of this.#placed) {
      tokens[id] = text
      types[id] = type
      scores[id] = score
    }
    for (let id = 0; id < this.size; id++) tokens[id] ??= `[PAD${id}]`
    return { tokens, types, scores }
  }
}

/** A token id of a tokenizer file: an integer, at least 0. */
const idOf = (value: JsonValue) => value.integer(0)

/** The vocabulary of tokenizer.json's model: each token and its id. */
function vocabOf(json: JsonValue): Array<[string, number]> {
  return json
    .get('model')
    .get('vocab')
    .mapMembers((token, id) => [token, idOf(id)])
}

/** The merges of tokenizer.json's BPE model: "a b", or the [a, b] form of newer tokenizers. */
function mergesOf(json: JsonValue): Array<string | string[]> {
  return json
    .get('model')
    .get('merges')
    .mapItems((merge) => (Array.isArray(merge.value) ? merge.mapItems((part) => part.string()) : merge.string()))
}

/** tokenizer.json's added tokens, each with its id. */
function addedTokens(json: JsonValue | undefined): Array<{ token: JsonValue; id: number }> {
  return (json?.get('added_tokens').optional()?.items() ?? []).map((token) => ({ token, id: idOf(token.get('id')) }))
}

/** The tokenizer.ggml.* keys of a byte-level BPE tokenizer.json: tokens, types, merges and the pre-tokenizer's name. */
function byteLevel(json: JsonValue, config: JsonValue | undefined, size: number, table: ArchitectureTable): KeyValue[] {
  const preTokenizer = json.get('pre_tokenizer')
  const pre = preTokenizerName(preTokenizer, config, table)
  if (!pre) throw unsupported(`its pre-tokenizer ${describeType(preTokenizer)} is not one llama.cpp implements`, table)
  const vocabulary = new Vocabulary(size)
  for (const [token, id] of vocabOf(json)) vocabulary.place(token, id, NORMAL, 0, true)
  for (const { token, id } of addedTokens(json)) vocabulary.add(token, id, true)
  // The [a, b] form joined as "a b" with a space inside a part written as U+0120, as gguf-py does.
  const merges = mergesOf(json).map((m) => (typeof m === 'string' ? m : m.map((part) => part.replaceAll(' ', '\u0120')).join(' ')))
  const { tokens, types } = vocabulary.finish()
  return [
    ['tokenizer.ggml.model', 'string', 'gpt2'],
    ['tokenizer.ggml.pre', 'string', pre],
    ['tokenizer.ggml.tokens', 'string[]', tokens],
    ['tokenizer.ggml.token_type', 'i32[]', types],
    ['tokenizer.ggml.merges', 'string[]', merges],
  ]
}

/** A pre-tokenizer's type as a message names it (a Split's, its pattern; a Sequence's, its steps'). */
function describeType(pre: JsonValue): string {
  const type = pre.get('type').optional()?.string()
  if (type === undefined) return 'none'
  const pattern = pre.get('pattern').get('Regex').value ?? pre.get('pattern').get('String').value
  if (type === 'Split' && typeof pattern === 'string') return `Split by ${excerpt(pattern)}`
  if (type !== 'Sequence') return excerpt(type)
  return `Sequence of ${(pre.get('pretokenizers').optional()?.items() ?? []).map(describeType).join(', ')}`
}

/**
 * A SentencePiece vocabulary from tokenizer.model (llama.cpp's converter's _create_vocab_sentencepiece): each
 * piece with its score and type (USER_DEFINED pieces NORMAL, as the converter types them); and whether a space
 * goes before the text.
 */
function fromSentencePiece({ pieces, addDummyPrefix }: SentencePieceModel, vocabulary: Vocabulary): boolean {
  for (const [id, { text, score, type }] of pieces.entries()) vocabulary.place(text, id, type === USER_DEFINED ? NORMAL : type, score, false)
  return addDummyPrefix
}

/**
 * A SentencePiece vocabulary from tokenizer.json's BPE with byte fallback (Llama 2 or Mistral v0.x as transformers
 * converts them), and whether a space goes before the text (Metaspace's prepend_scheme, or a normalizer's Prepend).
 * llama.cpp's SentencePiece tokenizer merges the adjacent pair whose result scores highest: a token made by merge
 * r scores -r, so that it merges in BPE's order (llama.cpp's converter scores every token -1000, and llama.cpp then
 * merges left to right, not as transformers does); a token no merge makes scores 0, as its score is never read.
 */
function fromBpeWithByteFallback(json: JsonValue, vocabulary: Vocabulary): boolean {
  const rank = new Map<string, number>()
  for (const [r, merge] of mergesOf(json).entries()) {
    const joined = typeof merge === 'string' ? merge.replace(' ', '') : merge.join('')
    if (!rank.has(joined)) rank.set(joined, r)
  }
  for (const [text, id] of vocabOf(json)) vocabulary.place(text, id, BYTE_TOKEN.test(text) ? BYTE : NORMAL, -(rank.get(text) ?? 0), false)
  const steps = (x: JsonValue): JsonValue[] => (!x.present ? [] : x.get('type').value === 'Sequence' ? x.first('normalizers', 'pretokenizers').items() : [x])
  const metaspace = steps(json.get('pre_tokenizer')).find((p) => p.get('type').value === 'Metaspace')
  if (metaspace) {
    const scheme = metaspace.get('prepend_scheme').optional()?.string() ?? (metaspace.get('add_prefix_space').value === false ? 'never' : 'always')
    return scheme !== 'never'
  }
  return steps(json.get('normalizer')).some((n) => n.get('type').value === 'Prepend' && n.get('prepend').value === '\u2581')
}

/** The tokenizer.ggml.* keys of a SentencePiece tokenizer: pieces, scores, types and whether a space goes before the text. */
function sentencePiece({ json, model, config }: TokenizerFiles, size: number): KeyValue[] {
  const vocabulary = new Vocabulary(size)
  let spacePrefix = model ? fromSentencePiece(model, vocabulary) : fromBpeWithByteFallback(json!, vocabulary)
  // The added tokens, as transformers lists them: tokenizer.json's, then tokenizer_config.json's added_tokens_decoder.
  for (const { token, id } of addedTokens(json)) vocabulary.add(token, id, false, true)
  for (const [key, token] of config?.get('added_tokens_decoder').optional()?.members() ?? []) {
    const id = Number(key)
    if (!/^\d+$/.test(key) || !Number.isSafeInteger(id)) throw token.error('is not keyed by a token id')
    vocabulary.add(token, id, false, true)
  }
  spacePrefix = config?.get('add_prefix_space').optional()?.boolean() ?? spacePrefix
  const { tokens, types, scores } = vocabulary.finish()
  return [
    ['tokenizer.ggml.model', 'string', 'llama'],
    ['tokenizer.ggml.pre', 'string', 'default'],
    ['tokenizer.ggml.tokens', 'string[]', tokens],
    ['tokenizer.ggml.scores', 'f32[]', scores],
    ['tokenizer.ggml.token_type', 'i32[]', types],
    // llama.cpp puts a space before the text unless told not to.
    ...(spacePrefix ? [] : [['tokenizer.ggml.add_space_prefix', 'bool', false] as KeyValue]),
  ]
}

/** The special token's id that a post-processor's template step names (`{"SpecialToken": {"id": ...}}`), if it is one. */
const specialIn = (step: JsonValue | undefined): string | undefined => step?.get('SpecialToken').get('id').optional()?.string()

/**
 * The tokenizer.ggml.* and tokenizer.chat_template keys of a model: SentencePiece from tokenizer.model if there
 * is one, else from tokenizer.json, whose model says which kind it is.
 */
export function tokenizerMetadata(files: TokenizerFiles, config: ModelConfig): KeyValue[] {
  const { json, config: tokenizerConfig } = files
  const size = config.vocabSize
  const model = json?.get('model')
  const type = model?.get('type').optional()?.string()
  const byteFallback = model?.get('byte_fallback').optional()?.boolean() ?? false
  const spm = files.model !== undefined || (type === 'BPE' && byteFallback)
  const decoder = json?.get('decoder').get('type').optional()?.string()
  if (!spm && (type !== 'BPE' || decoder !== 'ByteLevel'))
    throw unsupported(
      `its model is ${type === undefined ? 'none' : excerpt(type)}${byteFallback ? ' with byte_fallback' : ''}, its decoder ${decoder === undefined ? 'none' : excerpt(decoder)}`,
      config.table,
    )
  const kv = spm ? sentencePiece(files, size) : byteLevel(json!, tokenizerConfig, size, config.table)
  // gguf-py's SpecialVocab. The post-processor's TemplateProcessing: a single template that starts with a
  // special token adds the BOS, one that ends with one adds the EOS.
  const post = json?.get('post_processor').optional()
  const processors = post ? (post.get('processors').optional()?.items() ?? [post]) : []
  const template = processors.find((p) => p.get('type').value === 'TemplateProcessing' && p.get('single').items().length > 1)
  const single = template?.get('single').items() ?? []
  const first = specialIn(single[0])
  const last = specialIn(single.at(-1))
  // Each special token's text: tokenizer_config.json's `<kind>_token` (a string, or an object with its
  // content); the template's first token is the BOS where it names none, its last one the EOS.
  const named = (kind: string): string | undefined => {
    const token = tokenizerConfig?.get(`${kind}_token`).optional()
    return token?.isObject ? token.get('content').string() : token?.string()
  }
  const content = (kind: string) => (kind === 'bos' ? (named(kind) ?? first) : kind === 'eos' ? (last ?? named(kind)) : named(kind))
  const is = (kind: string, id: string | undefined) => id !== undefined && id === content(kind)
  // Each special token's id: that of tokenizer.json's added token of that text, else config.json's `<kind>_token_id`
  // (which may be a list, as Llama 3.1's EOS is: then it names none).
  const added = addedTokens(json)
  for (const [kind, key] of Object.entries(SPECIAL_KEYS)) {
    const text = content(kind)
    const id = added.find(({ token }) => token.get('content').value === text)?.id ?? config.values.get(`${kind}_token_id`).value
    if (Number.isInteger(id) && (id as number) >= 0 && (id as number) < size) kv.push([`tokenizer.ggml.${key}`, 'u32', id as number])
  }
  // add_bos_token, add_sep_token, add_eos_token: tokenizer_config.json's, else read from the templates: the
  // single one's first and last tokens, and a SEP or EOS token between A and B in the pair template.
  let pair = template?.get('pair').optional()?.items() ?? []
  if (first !== undefined && specialIn(pair[0]) === first) pair = pair.slice(1)
  if (last !== undefined && specialIn(pair.at(-1)) === last) pair = pair.slice(0, -1)
  const sequence = (step: JsonValue | undefined) => step?.get('Sequence').get('id').value
  const between = sequence(pair[0]) === 'A' && sequence(pair.at(-1)) === 'B' ? pair.slice(1, -1).map(specialIn) : []
  const separates = (id: string | undefined) => is('sep', id) || is('eos', id)
  const read = {
    bos: first === undefined ? undefined : is('bos', first) || is('cls', first),
    sep: between.length === 0 ? undefined : (separates(between[0]) && last === undefined) || (between.length === 2 && separates(between[1])),
    eos: last === undefined ? undefined : is('eos', last),
  }
  for (const [kind, fromTemplate] of Object.entries(read)) {
    const add = tokenizerConfig?.get(`add_${kind}_token`).optional()?.boolean() ?? fromTemplate
    if (add !== undefined) kv.push([`tokenizer.ggml.add_${kind}_token`, 'bool', add])
  }
  // A list of named templates (as some models have) gives its "default" one.
  const stated = tokenizerConfig?.get('chat_template').optional()
  const chat = !stated
    ? files.chatTemplate
    : Array.isArray(stated.value)
      ? stated
          .items()
          .find((c) => c.get('name').value === 'default')
          ?.get('template')
          .string()
      : stated.string()
  if (chat !== undefined) kv.push(['tokenizer.chat_template', 'string', chat])
  return kv
}
