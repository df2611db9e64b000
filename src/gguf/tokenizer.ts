// A model's tokenizer as the tokenizer.ggml.* keys, as llama.cpp's convert_hf_to_gguf.py and gguf-py write them,
// in the two kinds llama.cpp has: SentencePiece (tokenizer.ggml.model "llama": pieces with scores, from
// tokenizer.model, or from tokenizer.json's BPE with byte fallback as transformers converts SentencePiece models)
// and byte-level BPE ("gpt2": tokens and merges from tokenizer.json, as GPT-2, Llama 3 and Qwen2 have). Then what
// both share: the special tokens, whether a BOS, SEP and EOS are added (gguf-py's SpecialVocab), the chat template.
import { SafetensorsError } from '../errors.ts'
import { jsonFileError } from '../format/model-config.ts'
import type { KeyValue } from './format.ts'
import type { ModelConfig } from './metadata.ts'
import type { SentencePieceModel } from './sentencepiece.ts'

// biome-ignore lint/suspicious/noExplicitAny: JSON of a shape checked where it matters; any other shape fails in one place (tokenizerMetadata)
type Json = any

/** The tokenizer files of a model folder: tokenizer.json, tokenizer.model (read), tokenizer_config.json and chat_template.jinja, each if present. */
export interface TokenizerFiles {
  json?: Json
  model?: SentencePieceModel
  config?: Json
  chatTemplate?: string
}

/**
 * The pre-tokenizer regexes llama.cpp implements, by tokenizer.ggml.pre. llama.cpp's converter tells them
 * apart by hashing the tokens of a test text; this converter has no tokenizer to run, so it reads the
 * regex itself, and refuses one it does not know rather than guess.
 */
const PRE_TOKENIZERS = new Map([
  [String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, 'gpt-2'],
  [String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, 'llama-bpe'],
  [String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, 'qwen2'],
])

/** The regex of a pre-tokenizer: a ByteLevel one splits by GPT-2's; a Split by a regex may come before a ByteLevel one that does not split again. */
function splitRegex(pre: Json): string | undefined {
  const byteLevel = (p: Json, splits: boolean) => p?.type === 'ByteLevel' && !p.add_prefix_space && (p.use_regex !== false) === splits
  if (byteLevel(pre, true)) return [...PRE_TOKENIZERS.keys()][0]
  const [split, last, ...more] = pre?.type === 'Sequence' ? pre.pretokenizers : []
  if (split?.type === 'Split' && split.behavior === 'Isolated' && !split.invert && byteLevel(last, false) && more.length === 0) return split.pattern?.Regex
}

/** llama.cpp's token types (llama_token_type); SentencePiece's proto numbers them alike. */
const NORMAL = 1
const CONTROL = 3
const USER_DEFINED = 4
const UNUSED = 5
const BYTE = 6

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

function unsupported(what: string): SafetensorsError {
  return new SafetensorsError(
    'UnsupportedConversion',
    `tokenizer.json: ${what}; GGUF conversion supports SentencePiece tokenizers (tokenizer.model, or tokenizer.json's BPE with byte_fallback) and byte-level BPE ones (GPT-2, Llama 3, Qwen2)`,
  )
}

/** A vocabulary by id, as the GGUF lists it. */
class Vocabulary {
  readonly tokens: string[] = []
  readonly types: Int32Array
  readonly scores: Float32Array

  constructor(readonly size: number) {
    this.types = new Int32Array(size).fill(UNUSED)
    // SentencePiece's score for ids without a token, which llama.cpp's converter names [PAD<id>].
    this.scores = new Float32Array(size).fill(-10000)
  }

  /** Token `text` at `id`, an id below the size (config.json's vocab_size) when `required`, else dropped as llama.cpp's converter drops it. */
  place(text: string, id: unknown, type: number, score: number, required: boolean): void {
    if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= this.size) {
      if (required) throw jsonFileError('tokenizer.json', `token ${JSON.stringify(text)} has the id ${id}, not below vocab_size ${this.size}`)
      return
    }
    this.tokens[id as number] = text
    this.types[id as number] = type
    this.scores[id as number] = score
  }

  /**
   * An added token: CONTROL if special or looking special, else USER_DEFINED with SentencePiece's ▁ as a space; with
   * `bytes` (a SentencePiece vocabulary), a byte token BYTE however it is listed (tokenizers' BpeTrainer lists its
   * special tokens, the 256 bytes among them, as special added tokens), which llama.cpp's detokenizer gives back.
   */
  add(token: Json, id: unknown, required: boolean, bytes = false): void {
    if (bytes && BYTE_TOKEN.test(token.content)) {
      if (this.types[id as number] !== BYTE) this.place(token.content, id, BYTE, 0, required)
      return
    }
    const special = token.special || looksSpecial(token.content)
    this.place(special ? token.content : token.content.replaceAll('\u2581', ' '), id, special ? CONTROL : USER_DEFINED, -1000, required)
  }

  /** The token list, ids without a token as [PAD<id>]. */
  list(): string[] {
    for (let id = 0; id < this.size; id++) this.tokens[id] ??= `[PAD${id}]`
    return this.tokens
  }
}

/** The tokenizer.ggml.* keys of a byte-level BPE tokenizer.json: tokens, types, merges and the pre-tokenizer's name. */
function byteLevel(json: Json, size: number): KeyValue[] {
  const regex = splitRegex(json.pre_tokenizer)
  const pre = PRE_TOKENIZERS.get(regex!)
  if (!pre) throw unsupported(`its pre-tokenizer ${JSON.stringify(regex ?? json.pre_tokenizer).slice(0, 300)} is not one llama.cpp implements`)
  const vocabulary = new Vocabulary(size)
  for (const [token, id] of Object.entries(json.model.vocab)) vocabulary.place(token, id, NORMAL, 0, true)
  for (const token of json.added_tokens ?? []) vocabulary.add(token, token.id, true)
  // The [a, b] form of newer tokenizers, joined as "a b" with a space inside a part written as U+0120, as gguf-py does.
  const merges = (json.model.merges as Array<string | string[]>).map((m) =>
    typeof m === 'string' ? m : m.map((part) => part.replaceAll(' ', '\u0120')).join(' '),
  )
  return [
    ['tokenizer.ggml.model', 'string', 'gpt2'],
    ['tokenizer.ggml.pre', 'string', pre],
    ['tokenizer.ggml.tokens', 'string[]', vocabulary.list()],
    ['tokenizer.ggml.token_type', 'i32[]', vocabulary.types],
    ['tokenizer.ggml.merges', 'string[]', merges],
  ]
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
function fromBpeWithByteFallback(json: Json, vocabulary: Vocabulary): boolean {
  const rank = new Map<string, number>()
  for (const [r, merge] of (json.model.merges as Array<string | string[]>).entries()) {
    const joined = typeof merge === 'string' ? merge.replace(' ', '') : merge.join('')
    if (!rank.has(joined)) rank.set(joined, r)
  }
  for (const [text, id] of Object.entries(json.model.vocab))
    vocabulary.place(text, id, BYTE_TOKEN.test(text) ? BYTE : NORMAL, -(rank.get(text) ?? 0), false)
  const steps = (x: Json): Json[] => (x?.type === 'Sequence' ? (x.normalizers ?? x.pretokenizers) : x ? [x] : [])
  const metaspace = steps(json.pre_tokenizer).find((p) => p.type === 'Metaspace')
  if (metaspace) return (metaspace.prepend_scheme ?? (metaspace.add_prefix_space === false ? 'never' : 'always')) !== 'never'
  return steps(json.normalizer).some((n) => n.type === 'Prepend' && n.prepend === '\u2581')
}

/** The tokenizer.ggml.* keys of a SentencePiece tokenizer: pieces, scores, types and whether a space goes before the text. */
function sentencePiece({ json, model, config }: TokenizerFiles, size: number): KeyValue[] {
  const vocabulary = new Vocabulary(size)
  let spacePrefix = model ? fromSentencePiece(model, vocabulary) : fromBpeWithByteFallback(json, vocabulary)
  // The added tokens, as transformers lists them: tokenizer.json's, then tokenizer_config.json's added_tokens_decoder.
  for (const token of json?.added_tokens ?? []) vocabulary.add(token, token.id, false, true)
  for (const [id, token] of Object.entries<Json>(config?.added_tokens_decoder ?? {})) vocabulary.add(token, Number(id), false, true)
  spacePrefix = config?.add_prefix_space ?? spacePrefix
  return [
    ['tokenizer.ggml.model', 'string', 'llama'],
    ['tokenizer.ggml.pre', 'string', 'default'],
    ['tokenizer.ggml.tokens', 'string[]', vocabulary.list()],
    ['tokenizer.ggml.scores', 'f32[]', vocabulary.scores],
    ['tokenizer.ggml.token_type', 'i32[]', vocabulary.types],
    // llama.cpp puts a space before the text unless told not to.
    ...(spacePrefix ? [] : [['tokenizer.ggml.add_space_prefix', 'bool', false] as KeyValue]),
  ]
}

/**
 * The tokenizer.ggml.* and tokenizer.chat_template keys of a model: SentencePiece from tokenizer.model if there
 * is one, else from tokenizer.json, whose model says which kind it is.
 */
export function tokenizerMetadata(files: TokenizerFiles, config: ModelConfig): KeyValue[] {
  const { json, config: tokenizerConfig } = files
  const size = config.vocabSize
  const model = json?.model
  const spm = files.model || (model?.type === 'BPE' && model.byte_fallback)
  if (!spm && (model?.type !== 'BPE' || json.decoder?.type !== 'ByteLevel'))
    throw unsupported(`its model is ${model?.type}${model?.byte_fallback ? ' with byte_fallback' : ''}, its decoder ${json.decoder?.type}`)
  try {
    const kv = spm ? sentencePiece(files, size) : byteLevel(json, size)
    // gguf-py's SpecialVocab. The post-processor's TemplateProcessing: a single template that starts with a
    // special token adds the BOS, one that ends with one adds the EOS.
    const post = json?.post_processor
    const template = (post?.processors ?? [post]).find((p: Json) => p?.type === 'TemplateProcessing' && p.single.length > 1)
    const special = (part: Json): string | undefined => part?.SpecialToken?.id
    const first = special(template?.single[0])
    const last = special(template?.single.at(-1))
    // Each special token's text: tokenizer_config.json's `<kind>_token` (a string, or an object with its
    // content); the template's first token is the BOS where it names none, its last one the EOS.
    const named = (kind: string): string | undefined => tokenizerConfig?.[`${kind}_token`]?.content ?? tokenizerConfig?.[`${kind}_token`] ?? undefined
    const content = (kind: string) => (kind === 'bos' ? (named(kind) ?? first) : kind === 'eos' ? (last ?? named(kind)) : named(kind))
    const is = (kind: string, id: string | undefined) => id !== undefined && id === content(kind)
    // Each special token's id: that of tokenizer.json's added token of that text, else config.json's `<kind>_token_id`.
    const added: Array<{ id: number; content: string }> = json?.added_tokens ?? []
    for (const [kind, key] of Object.entries(SPECIAL_KEYS)) {
      const id = added.find((t) => t.content === content(kind))?.id ?? config.values[`${kind}_token_id`]
      if (Number.isInteger(id) && (id as number) >= 0 && (id as number) < size) kv.push([`tokenizer.ggml.${key}`, 'u32', id as number])
    }
    // add_bos_token, add_sep_token, add_eos_token: tokenizer_config.json's, else read from the templates: the
    // single one's first and last tokens, and a SEP or EOS token between A and B in the pair template.
    let pair: Json[] = template?.pair ?? []
    if (first !== undefined && special(pair[0]) === first) pair = pair.slice(1)
    if (last !== undefined && special(pair.at(-1)) === last) pair = pair.slice(0, -1)
    const between = pair[0]?.Sequence?.id === 'A' && pair.at(-1)?.Sequence?.id === 'B' ? pair.slice(1, -1).map(special) : []
    const separates = (id: string | undefined) => is('sep', id) || is('eos', id)
    const read = {
      bos: first === undefined ? undefined : is('bos', first) || is('cls', first),
      sep: between.length === 0 ? undefined : (separates(between[0]) && last === undefined) || (between.length === 2 && separates(between[1])),
      eos: last === undefined ? undefined : is('eos', last),
    }
    for (const [kind, fromTemplate] of Object.entries(read)) {
      const stated = tokenizerConfig?.[`add_${kind}_token`]
      const add = typeof stated === 'boolean' ? stated : fromTemplate
      if (add !== undefined) kv.push([`tokenizer.ggml.add_${kind}_token`, 'bool', add])
    }
    // A list of named templates (as some models have) gives its "default" one.
    let chat = tokenizerConfig?.chat_template ?? files.chatTemplate
    if (Array.isArray(chat)) chat = chat.find((c) => c?.name === 'default')?.template
    if (typeof chat === 'string') kv.push(['tokenizer.chat_template', 'string', chat])
    return kv
  } catch (error) {
    if (error instanceof SafetensorsError) throw error
    throw jsonFileError('tokenizer.json', `not a tokenizer of the expected shape (${(error as Error).message})`)
  }
}
