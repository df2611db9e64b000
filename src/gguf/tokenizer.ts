// tokenizer.json (with tokenizer_config.json and config.json) to the tokenizer.ggml.* keys, for byte-level
// BPE tokenizers (GPT-2, Llama 3, Qwen2, and those trained alike), as llama.cpp's convert_hf_to_gguf.py
// (get_vocab_base, _set_vocab_gpt2) and gguf-py's SpecialVocab write them.
import { SafetensorsError } from '../errors.ts'
import { jsonFileError } from '../format/model-config.ts'
import type { KeyValue } from './format.ts'
import type { ModelConfig } from './metadata.ts'

// biome-ignore lint/suspicious/noExplicitAny: JSON of a shape checked where it matters; any other shape fails in one place (tokenizerMetadata)
type Json = any

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

/** llama.cpp's token types (llama_token_type). */
const NORMAL = 1
const CONTROL = 3
const USER_DEFINED = 4
const UNUSED = 5

/** Tokens llama.cpp's converter types CONTROL though they are not marked special (does_token_look_special). */
const looksSpecial = (t: string) => /^(<pad>|<mask>|<2mass>|\[@BOS@\]|<\|.*\|>|<｜.*｜>|<unused.*>)$/s.test(t)

/** The special tokens of a causal model that gguf-py's SpecialVocab looks for, by their tokenizer.ggml key. */
const SPECIAL_KEYS = { bos: 'bos_token_id', eos: 'eos_token_id', unk: 'unknown_token_id', pad: 'padding_token_id' }

function unsupported(what: string): SafetensorsError {
  return new SafetensorsError('UnsupportedConversion', `tokenizer.json: ${what}; GGUF conversion supports byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2)`)
}

/** The tokenizer.ggml.* and tokenizer.chat_template keys, from tokenizer.json, tokenizer_config.json (if any) and chat_template.jinja (if any). */
export function tokenizerMetadata(tokenizer: Json, tokenizerConfig: Json, chatTemplate: string | undefined, config: ModelConfig): KeyValue[] {
  const { model, decoder } = tokenizer
  if (model?.type !== 'BPE' || model.byte_fallback || decoder?.type !== 'ByteLevel')
    throw unsupported(`its model is ${model?.type}${model?.byte_fallback ? ' with byte_fallback' : ''}, its decoder ${decoder?.type}`)
  const regex = splitRegex(tokenizer.pre_tokenizer)
  const pre = PRE_TOKENIZERS.get(regex!)
  if (!pre) throw unsupported(`its pre-tokenizer ${JSON.stringify(regex ?? tokenizer.pre_tokenizer).slice(0, 300)} is not one llama.cpp implements`)
  try {
    const size = config.vocabSize
    const tokens: string[] = []
    const types = new Int32Array(size).fill(UNUSED)
    const place = (token: string, id: unknown, type: number) => {
      if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= size)
        throw jsonFileError('tokenizer.json', `token ${JSON.stringify(token)} has the id ${id}, not below vocab_size ${size}`)
      tokens[id as number] = token
      types[id as number] = type
    }
    for (const [token, id] of Object.entries(model.vocab)) place(token, id, NORMAL)
    const added: Array<{ id: number; content: string; special: boolean }> = tokenizer.added_tokens ?? []
    for (const t of added) {
      if (t.special || looksSpecial(t.content)) place(t.content, t.id, CONTROL)
      else place(t.content.replaceAll('\u2581', ' '), t.id, USER_DEFINED)
    }
    for (let id = 0; id < size; id++) tokens[id] ??= `[PAD${id}]`
    // The [a, b] form of newer tokenizers, joined as "a b" with a space inside a part written as U+0120, as gguf-py does.
    const merges = (model.merges as Array<string | string[]>).map((m) =>
      typeof m === 'string' ? m : m.map((part) => part.replaceAll(' ', '\u0120')).join(' '),
    )
    const kv: KeyValue[] = [
      ['tokenizer.ggml.model', 'string', 'gpt2'],
      ['tokenizer.ggml.pre', 'string', pre],
      ['tokenizer.ggml.tokens', 'string[]', tokens],
      ['tokenizer.ggml.token_type', 'i32[]', types],
      ['tokenizer.ggml.merges', 'string[]', merges],
    ]
    // tokenizer_config.json's `<kind>_token` (a string, or an object with its content), found among the added tokens; else config.json's `<kind>_token_id`.
    const content = (kind: string): string | undefined => tokenizerConfig?.[`${kind}_token`]?.content ?? tokenizerConfig?.[`${kind}_token`] ?? undefined
    for (const [kind, key] of Object.entries(SPECIAL_KEYS)) {
      const fromConfig = config.values[`${kind}_token_id`]
      const id =
        added.find((t) => t.content === content(kind))?.id ??
        (Number.isInteger(fromConfig) && (fromConfig as number) >= 0 && (fromConfig as number) < size ? fromConfig : undefined)
      if (id !== undefined) kv.push([`tokenizer.ggml.${key}`, 'u32', id as number])
    }
    // add_bos_token and add_eos_token: tokenizer_config.json's, else whether a TemplateProcessing's single template starts with the BOS and ends with the EOS (gguf-py's reading).
    const post = tokenizer.post_processor
    const template: Json[] = (post?.processors ?? [post]).find((p: Json) => p?.type === 'TemplateProcessing' && p.single.length > 1)?.single ?? []
    for (const [kind, at] of [
      ['bos', 0],
      ['eos', template.length - 1],
    ] as const) {
      const stated = tokenizerConfig?.[`add_${kind}_token`]
      const special = template[at]?.SpecialToken?.id
      // Without tokenizer_config.json, the template's own tokens are the BOS and EOS.
      const add = typeof stated === 'boolean' ? stated : special === undefined ? undefined : special === (tokenizerConfig ? content(kind) : special)
      if (add !== undefined) kv.push([`tokenizer.ggml.add_${kind}_token`, 'bool', add])
    }
    // A list of named templates (as some models have) gives its "default" one.
    let chat = tokenizerConfig?.chat_template ?? chatTemplate
    if (Array.isArray(chat)) chat = chat.find((c) => c?.name === 'default')?.template
    if (typeof chat === 'string') kv.push(['tokenizer.chat_template', 'string', chat])
    return kv
  } catch (error) {
    if (error instanceof SafetensorsError) throw error
    throw jsonFileError('tokenizer.json', `not a tokenizer of the expected shape (${(error as Error).message})`)
  }
}
