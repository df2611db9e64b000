// tokenizer.json (with tokenizer_config.json and config.json) to the tokenizer.ggml.* keys, for byte-level
// BPE tokenizers (GPT-2, Llama 3, Qwen2, and those trained alike), as llama.cpp's convert_hf_to_gguf.py
// (get_vocab_base, _set_vocab_gpt2) and gguf-py's SpecialVocab write them.
import { SafetensorsError } from '../errors.ts'
import type { KeyValue } from './format.ts'
import { jsonError, type ModelConfig } from './metadata.ts'

/** What the tokenizer is read from: the files' parsed JSON, and the chat template file's text if there is one. */
export interface TokenizerFiles {
  tokenizer: Record<string, unknown>
  tokenizerWhere: string
  tokenizerConfig: Record<string, unknown> | undefined
  chatTemplate: string | undefined
}

/** llama.cpp's token types (llama_token_type). */
const NORMAL = 1
const CONTROL = 3
const USER_DEFINED = 4
const UNUSED = 5

/**
 * The pre-tokenizer regexes llama.cpp implements, by tokenizer.ggml.pre. llama.cpp's converter tells them
 * apart by hashing the tokens of a test text; this converter has no tokenizer to run, so it reads the
 * regex itself, and refuses one it does not know rather than guess.
 */
const PRE_TOKENIZERS = new Map([
  [String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, 'gpt2'],
  [String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, 'llama-bpe'],
  [String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, 'qwen2'],
])

/** The GPT-2 regex: what a ByteLevel pre-tokenizer with use_regex splits by. */
const GPT2_REGEX = [...PRE_TOKENIZERS.keys()][0]

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)

function unsupported(where: string, what: string): SafetensorsError {
  return new SafetensorsError('UnsupportedConversion', `${where}: ${what}; GGUF conversion supports byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2 style)`)
}

/** The split regex of a pre-tokenizer: a ByteLevel one (GPT-2's), or a Split by a regex followed by a ByteLevel one that does not split again. */
function splitRegex(pre: unknown): string | undefined {
  if (!isObject(pre)) return undefined
  const byteLevel = (p: unknown, splits: boolean) => isObject(p) && p.type === 'ByteLevel' && p.add_prefix_space !== true && (p.use_regex !== false) === splits
  if (byteLevel(pre, true)) return GPT2_REGEX
  const steps = pre.type === 'Sequence' && Array.isArray(pre.pretokenizers) ? pre.pretokenizers : []
  const [split, last] = steps
  if (steps.length !== 2 || !isObject(split) || split.type !== 'Split' || split.behavior !== 'Isolated' || split.invert === true || !byteLevel(last, false))
    return undefined
  const pattern = split.pattern
  return isObject(pattern) && typeof pattern.Regex === 'string' ? pattern.Regex : undefined
}

function preTokenizerName(tokenizer: Json, where: string): string {
  const regex = splitRegex(tokenizer.pre_tokenizer)
  const name = regex === undefined ? undefined : PRE_TOKENIZERS.get(regex)
  if (name !== undefined) return name
  const shown = regex === undefined ? JSON.stringify(tokenizer.pre_tokenizer) : `the regex ${JSON.stringify(regex)}`
  throw unsupported(
    where,
    `its pre-tokenizer, ${shown.length > 300 ? `${shown.slice(0, 300)}...` : shown}, is not one llama.cpp implements (gpt2, llama-bpe, qwen2)`,
  )
}

/** Tokens llama.cpp's converter types CONTROL though they are not marked special (does_token_look_special). */
function looksSpecial(token: string): boolean {
  return (
    ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(token) ||
    (token.startsWith('<|') && token.endsWith('|>')) ||
    (token.startsWith('<｜') && token.endsWith('｜>')) ||
    (token.startsWith('<unused') && token.endsWith('>'))
  )
}

interface AddedToken {
  id: number
  content: string
  special: boolean
}

function addedTokens(tokenizer: Json, where: string): AddedToken[] {
  const list = tokenizer.added_tokens ?? []
  if (!Array.isArray(list)) throw jsonError(where, 'added_tokens must be a list')
  return list.map((t, i) => {
    if (!isObject(t) || !Number.isInteger(t.id) || (t.id as number) < 0 || typeof t.content !== 'string')
      throw jsonError(where, `added_tokens[${i}] must have a non-negative integer id and a string content`)
    return { id: t.id as number, content: t.content, special: t.special === true }
  })
}

/** tokens and token_type by id, for ids 0 to vocab_size - 1; an id with no token is "[PAD<id>]", UNUSED (as llama.cpp's converter fills them). */
function vocabulary(model: Json, added: AddedToken[], vocabSize: number, where: string): { tokens: string[]; types: Int32Array } {
  const tokens = new Array<string | undefined>(vocabSize)
  const types = new Int32Array(vocabSize)
  const place = (token: string, id: unknown, type: number) => {
    if (!Number.isInteger(id) || (id as number) < 0) throw jsonError(where, `token ${JSON.stringify(token)} has the id ${JSON.stringify(id)}`)
    if ((id as number) >= vocabSize) throw jsonError(where, `token ${JSON.stringify(token)} has the id ${id}, but config.json's vocab_size is ${vocabSize}`)
    tokens[id as number] = token
    types[id as number] = type
  }
  if (!isObject(model.vocab)) throw jsonError(where, 'model.vocab must be an object of tokens and ids')
  for (const [token, id] of Object.entries(model.vocab)) place(token, id, NORMAL)
  for (const t of added) {
    if (t.special || looksSpecial(t.content)) place(t.content, t.id, CONTROL)
    else place(t.content.replaceAll('\u2581', ' '), t.id, USER_DEFINED)
  }
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] !== undefined) continue
    tokens[id] = `[PAD${id}]`
    types[id] = UNUSED
  }
  return { tokens: tokens as string[], types }
}

/** Merges as "a b": the array form of newer tokenizers ([a, b]) joined, a space inside a part written as U+0120, as gguf-py does. */
function mergesOf(model: Json, where: string): string[] {
  const merges = model.merges ?? []
  if (!Array.isArray(merges)) throw jsonError(where, 'model.merges must be a list')
  return merges.map((merge, i) => {
    if (typeof merge === 'string') return merge
    if (Array.isArray(merge) && merge.length === 2 && typeof merge[0] === 'string' && typeof merge[1] === 'string')
      return merge.map((part: string) => part.replaceAll(' ', '\u0120')).join(' ')
    throw jsonError(where, `model.merges[${i}] is neither "a b" nor ["a", "b"]`)
  })
}

/** The special token kinds gguf-py's SpecialVocab looks for, with their tokenizer.ggml keys. */
const SPECIAL_KEYS = {
  bos: 'bos_token_id',
  eos: 'eos_token_id',
  unk: 'unknown_token_id',
  sep: 'seperator_token_id',
  pad: 'padding_token_id',
  cls: 'cls_token_id',
  mask: 'mask_token_id',
} as const

type Special = keyof typeof SPECIAL_KEYS

/** tokenizer_config.json's `<kind>_token`: a string, or an object with its content. */
function specialContent(config: Json | undefined, kind: Special): string | undefined {
  const entry = config?.[`${kind}_token`]
  if (typeof entry === 'string') return entry
  return isObject(entry) && typeof entry.content === 'string' ? entry.content : undefined
}

/** Whether the post-processor adds a BOS and an EOS: the first and last special tokens of a TemplateProcessing's single template (gguf-py's crude reading). */
function addedByTemplate(tokenizer: Json, bos: string | undefined, eos: string | undefined): { bos?: boolean; eos?: boolean } {
  const post = tokenizer.post_processor
  if (!isObject(post)) return {}
  const processors = Array.isArray(post.processors) ? post.processors : [post]
  const adds: { bos?: boolean; eos?: boolean } = {}
  for (const p of processors) {
    if (!isObject(p) || p.type !== 'TemplateProcessing' || !Array.isArray(p.single) || p.single.length < 2) continue
    const special = (step: unknown) => (isObject(step) && isObject(step.SpecialToken) ? step.SpecialToken.id : undefined)
    const first = special(p.single[0])
    const last = special(p.single[p.single.length - 1])
    if (first !== undefined) adds.bos = first === bos
    if (last !== undefined) adds.eos = last === eos
  }
  return adds
}

/** tokenizer.chat_template (and named templates) from tokenizer_config.json's chat_template, else chat_template.jinja. */
function chatTemplates(config: Json | undefined, jinja: string | undefined): KeyValue[] {
  const value = config?.chat_template ?? jinja
  if (typeof value === 'string') return [{ key: 'tokenizer.chat_template', type: 'string', value }]
  if (!Array.isArray(value)) return []
  const kv: KeyValue[] = []
  const names: string[] = []
  let fallback: string | undefined
  for (const choice of value) {
    if (!isObject(choice) || typeof choice.template !== 'string' || typeof choice.name !== 'string' || choice.name === '') continue
    const name = choice.name.replace(/[^A-Za-z0-9]/g, '_')
    if (name === 'default') fallback = choice.template
    else {
      names.push(name)
      kv.push({ key: `tokenizer.chat_template.${name}`, type: 'string', value: choice.template })
    }
  }
  if (names.length > 0) kv.push({ key: 'tokenizer.chat_templates', type: 'string[]', value: names })
  if (fallback !== undefined) kv.push({ key: 'tokenizer.chat_template', type: 'string', value: fallback })
  return kv
}

/** The tokenizer.ggml.* and tokenizer.chat_template keys. */
export function tokenizerMetadata(files: TokenizerFiles, config: ModelConfig): KeyValue[] {
  const { tokenizer, tokenizerWhere: where, tokenizerConfig } = files
  const model = tokenizer.model
  if (!isObject(model)) throw jsonError(where, 'it has no "model" object')
  if (model.type !== 'BPE') throw unsupported(where, `its model is ${JSON.stringify(model.type)}, not BPE`)
  if (model.byte_fallback === true) throw unsupported(where, 'it is a SentencePiece-style BPE (byte_fallback), not a byte-level one')
  if (!isObject(tokenizer.decoder) || tokenizer.decoder.type !== 'ByteLevel')
    throw unsupported(where, `its decoder is ${JSON.stringify(isObject(tokenizer.decoder) ? tokenizer.decoder.type : tokenizer.decoder)}, not ByteLevel`)
  const pre = preTokenizerName(tokenizer, where)
  const added = addedTokens(tokenizer, where)
  const { tokens, types } = vocabulary(model, added, config.vocabSize, where)
  const kv: KeyValue[] = [
    { key: 'tokenizer.ggml.model', type: 'string', value: 'gpt2' },
    { key: 'tokenizer.ggml.pre', type: 'string', value: pre },
    { key: 'tokenizer.ggml.tokens', type: 'string[]', value: tokens },
    { key: 'tokenizer.ggml.token_type', type: 'i32[]', value: types },
    { key: 'tokenizer.ggml.merges', type: 'string[]', value: mergesOf(model, where) },
  ]
  // First from tokenizer_config.json's tokens, found among the added tokens; else config.json's ids.
  for (const [kind, key] of Object.entries(SPECIAL_KEYS) as Array<[Special, string]>) {
    const content = specialContent(tokenizerConfig, kind)
    const fromTokenizer = content === undefined ? undefined : added.find((t) => t.content === content)?.id
    const fromConfig = config.values[`${kind}_token_id`]
    const id =
      fromTokenizer ?? (Number.isInteger(fromConfig) && (fromConfig as number) >= 0 && (fromConfig as number) < config.vocabSize ? fromConfig : undefined)
    if (id !== undefined) kv.push({ key: `tokenizer.ggml.${key}`, type: 'u32', value: id as number })
  }
  const adds = addedByTemplate(tokenizer, specialContent(tokenizerConfig, 'bos'), specialContent(tokenizerConfig, 'eos'))
  for (const kind of ['bos', 'eos'] as const) {
    const stated = tokenizerConfig?.[`add_${kind}_token`]
    const add = typeof stated === 'boolean' ? stated : adds[kind]
    if (add !== undefined) kv.push({ key: `tokenizer.ggml.add_${kind}_token`, type: 'bool', value: add })
  }
  const prefix = tokenizerConfig?.add_prefix_space
  if (config.architecture.name === 'llama' && typeof prefix === 'boolean') kv.push({ key: 'tokenizer.ggml.add_space_prefix', type: 'bool', value: prefix })
  kv.push(...chatTemplates(tokenizerConfig, files.chatTemplate))
  return kv
}
