// A GGUF's tokenizer.ggml.* keys back to the files transformers loads a tokenizer from, the inverse of tokenizer.ts:
// a byte-level BPE ("gpt2") as tokenizer.json (its pre-tokenizer from tokenizer.ggml.pre, by tokenizer.ts's table
// of the regexes llama.cpp implements); a SentencePiece model ("llama") as tokenizer.model (SentencePiece's
// protobuf: pieces with their scores and types), which transformers' Llama and Gemma tokenizers convert as they
// convert the released ones. Both with tokenizer_config.json: the special tokens, add_bos/eos, the chat template.
import { SafetensorsError } from '../errors.ts'
import { excerpt } from '../format/json-values.ts'
import { TABLE } from './architectures.ts'
import type { GgufFile } from './file.ts'
import type { GgufValue } from './reader.ts'
import { TOKEN_TYPES } from './tokenizer.ts'

/** A tokenizer's files, by name, as bytes. */
type TokenizerFiles = Record<string, Uint8Array>

const encoder = new TextEncoder()
const jsonBytes = (value: unknown) => encoder.encode(`${JSON.stringify(value, null, 2)}\n`)

/** The tokenizer.ggml.* arrays and flags of a GGUF, checked for the types tokenizer.ts writes them with. */
interface GgufVocabulary {
  tokens: string[]
  types: ArrayLike<number>
  scores?: ArrayLike<number>
  merges?: string[]
  special: Record<string, number | undefined>
  flag(kind: string): boolean | undefined
}

function invalid(key: string, what: string): SafetensorsError {
  return new SafetensorsError('InvalidGguf', `GGUF: key ${JSON.stringify(key)} ${what}`)
}

function vocabularyOf(metadata: Record<string, GgufValue>): GgufVocabulary {
  const strings = (key: string) => {
    const value = metadata[key]
    if (value === undefined) return undefined
    if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) throw invalid(key, 'is not an array of strings')
    return value as string[]
  }
  const numbers = (key: string) => {
    const value = metadata[key]
    if (value === undefined) return undefined
    if (!ArrayBuffer.isView(value)) throw invalid(key, 'is not an array of numbers')
    return value as unknown as ArrayLike<number>
  }
  const tokens = strings('tokenizer.ggml.tokens')
  if (!tokens) throw invalid('tokenizer.ggml.tokens', 'is missing: the GGUF has no tokenizer to write')
  const types = numbers('tokenizer.ggml.token_type') ?? new Int32Array(tokens.length).fill(TOKEN_TYPES.NORMAL)
  const scores = numbers('tokenizer.ggml.scores')
  for (const [key, array] of [
    ['tokenizer.ggml.token_type', types],
    ['tokenizer.ggml.scores', scores],
  ] as const)
    if (array && array.length !== tokens.length) throw invalid(key, `has ${array.length} values for ${tokens.length} tokens`)
  const special: Record<string, number | undefined> = {}
  for (const kind of ['bos', 'eos', 'unknown', 'padding', 'seperator', 'cls', 'mask']) {
    const id = metadata[`tokenizer.ggml.${kind}_token_id`]
    special[kind] = typeof id === 'number' && id < tokens.length ? id : undefined
  }
  const flag = (kind: string) => {
    const value = metadata[`tokenizer.ggml.add_${kind}_token`]
    return typeof value === 'boolean' ? value : undefined
  }
  return { tokens, types, scores, merges: strings('tokenizer.ggml.merges'), special, flag }
}

/** An added token as tokenizer.json and tokenizer_config.json list them. */
const addedToken = (content: string, special: boolean) => ({
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: !special,
  special,
})

/** The ids of the tokens transformers lists as added: CONTROL and USER_DEFINED ones, and the unknown token. */
function addedIds(v: GgufVocabulary, unknown = -1): number[] {
  const ids: number[] = []
  for (let id = 0; id < v.tokens.length; id++)
    if (id === unknown || v.types[id] === TOKEN_TYPES.CONTROL || v.types[id] === TOKEN_TYPES.USER_DEFINED) ids.push(id)
  return ids
}

/** Whether an added token is special: CONTROL or unknown. */
const isSpecial = (v: GgufVocabulary, id: number, unknown = -1) => id === unknown || v.types[id] === TOKEN_TYPES.CONTROL

/** The pre-tokenizers written back (of the architectures hf-model.ts maps): GPT-2's ByteLevel, and a Split by a regex then ByteLevel. */
const BYTE_LEVEL_BACK = ['gpt-2', 'llama-bpe', 'qwen2']

/** tokenizer.json of a byte-level BPE: the vocabulary and merges, the pre-tokenizer llama.cpp names, BOS/EOS by template. */
function byteLevelJson(v: GgufVocabulary, pre: string): unknown {
  if (!BYTE_LEVEL_BACK.includes(pre))
    throw new SafetensorsError(
      'UnsupportedConversion',
      `GGUF: tokenizer.ggml.pre ${excerpt(pre)} is not a pre-tokenizer this converts; it takes ${BYTE_LEVEL_BACK.join(', ')}`,
    )
  const [split] = TABLE.PRE_TOKENIZERS[pre]
  // As the released tokenizers have it (offsets only: the ids are the same).
  const byteLevel = (useRegex: boolean) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: pre !== 'qwen2', use_regex: useRegex })
  const added = addedIds(v)
  const vocab: Record<string, number> = {}
  for (const [id, token] of v.tokens.entries()) if (v.types[id] === TOKEN_TYPES.NORMAL) vocab[token] = id
  // GPT-2's ByteLevel splits by its own regex; the others split first, then map bytes.
  const preTokenizer =
    typeof split === 'string'
      ? byteLevel(true)
      : { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: split.split }, behavior: 'Isolated', invert: false }, byteLevel(false)] }
  const template = templateProcessor(v)
  const byteLevelPost = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added.map((id) => ({ id, ...addedToken(v.tokens[id], isSpecial(v, id)) })),
    // Qwen2's tokenizer composes Unicode first, as its released tokenizer.json does.
    normalizer: pre === 'qwen2' ? { type: 'NFC' } : null,
    pre_tokenizer: preTokenizer,
    post_processor: template ? { type: 'Sequence', processors: [byteLevelPost, template] } : byteLevelPost,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      // Llama 3's tokenizer takes a word that is a token as it is, whatever its merges.
      ignore_merges: pre === 'llama-bpe',
      vocab,
      merges: (v.merges ?? []).map((merge) => {
        const space = merge.indexOf(' ', 1)
        return [merge.slice(0, space), merge.slice(space + 1)]
      }),
    },
  }
}

/** The post-processor that adds the BOS before and the EOS after a sequence, as the GGUF's add_bos/add_eos say; none if neither. */
function templateProcessor(v: GgufVocabulary): unknown {
  const bos = v.flag('bos') && v.special.bos !== undefined ? v.tokens[v.special.bos] : undefined
  const eos = v.flag('eos') && v.special.eos !== undefined ? v.tokens[v.special.eos] : undefined
  if (bos === undefined && eos === undefined) return undefined
  const special = (token: string | undefined, typeId: number) => (token === undefined ? [] : [{ SpecialToken: { id: token, type_id: typeId } }])
  const sequence = (id: string, typeId: number) => [...special(bos, typeId), { Sequence: { id, type_id: typeId } }, ...special(eos, typeId)]
  const tokens = Object.fromEntries([bos, eos].filter((t) => t !== undefined).map((t) => [t, { id: t, ids: [v.tokens.indexOf(t)], tokens: [t] }]))
  return { type: 'TemplateProcessing', single: sequence('A', 0), pair: [...sequence('A', 0), ...sequence('B', 1)], special_tokens: tokens }
}

/** Protobuf's wire format, for the few fields a SentencePiece ModelProto needs. */
class Protobuf {
  readonly #bytes: number[] = []

  #varint(value: number): void {
    let rest = value
    while (rest >= 0x80) {
      this.#bytes.push((rest % 0x80) | 0x80)
      rest = Math.floor(rest / 0x80)
    }
    this.#bytes.push(rest)
  }

  /** A varint field (an enum, a bool, an int32 of at least 0; -1 as protobuf writes a negative int32). */
  varint(field: number, value: number): this {
    this.#varint(field * 8)
    this.#varint(value < 0 ? 2 ** 64 + value : value)
    return this
  }

  float(field: number, value: number): this {
    this.#varint(field * 8 + 5)
    const bytes = new Uint8Array(4)
    new DataView(bytes.buffer).setFloat32(0, value, true)
    this.#bytes.push(...bytes)
    return this
  }

  bytes(field: number, value: Uint8Array | Protobuf): this {
    const bytes = value instanceof Protobuf ? value.finish() : value
    this.#varint(field * 8 + 2)
    this.#varint(bytes.length)
    for (const byte of bytes) this.#bytes.push(byte)
    return this
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.#bytes)
  }
}

/**
 * The SentencePiece model's own pieces: the vocabulary without the [PAD<id>] ids llama.cpp's converter pads it with
 * at its end, nor the added tokens after its last piece (Phi-3's <|endoftext|>...), which transformers appends.
 */
function pieceCount(v: GgufVocabulary): number {
  let count = v.tokens.length
  while (count > 0 && v.types[count - 1] === TOKEN_TYPES.UNUSED && v.tokens[count - 1] === `[PAD${count - 1}]`) count--
  while (count > 0 && (v.types[count - 1] === TOKEN_TYPES.CONTROL || v.types[count - 1] === TOKEN_TYPES.USER_DEFINED)) count--
  return count
}

/** SentencePiece needs an unknown piece: the GGUF's, else `<unk>`, which llama.cpp's converter may leave unnamed. */
const unknownOf = (v: GgufVocabulary) => v.special.unknown ?? v.tokens.indexOf('<unk>')

/**
 * BPE merges as transformers makes them from a SentencePiece model's pieces (generate_merges): for each piece in
 * id order, each split into two pieces, by the pieces' ids; then by the merged piece's id, the left's length, the right's.
 */
function mergesOfPieces(pieces: readonly string[]): Array<[string, string]> {
  const ids = new Map(pieces.map((piece, id) => [piece, id]))
  const merges: Array<{ left: string; right: string; id: number }> = []
  for (const [id, piece] of pieces.entries()) {
    const local: Array<{ left: string; right: string; id: number }> = []
    const chars = [...piece]
    for (let at = 1; at < chars.length; at++) {
      const left = chars.slice(0, at).join('')
      const right = chars.slice(at).join('')
      if (ids.has(left) && ids.has(right)) local.push({ left, right, id })
    }
    local.sort((a, b) => ids.get(a.left)! - ids.get(b.left)! || ids.get(a.right)! - ids.get(b.right)!)
    merges.push(...local)
  }
  const length = (text: string) => [...text].length
  merges.sort((a, b) => a.id - b.id || length(a.left) - length(b.left) || length(a.right) - length(b.right))
  return merges.map(({ left, right }) => [left, right])
}

/**
 * tokenizer.json of a SentencePiece vocabulary as transformers converts one (its BPE with byte fallback): with a
 * space prefix, Llama's Metaspace; without one, Gemma's spaces as ▁ split after each.
 */
function sentencePieceJson(v: GgufVocabulary, spacePrefix: boolean): unknown {
  const count = pieceCount(v)
  const unknown = unknownOf(v)
  const pieces = v.tokens.slice(0, count)
  const decoders = [{ type: 'Replace', pattern: { String: '\u2581' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }]
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedIds(v, unknown).map((id) => ({ id, ...addedToken(v.tokens[id], isSpecial(v, id, unknown)) })),
    normalizer: spacePrefix ? null : { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' },
    pre_tokenizer: spacePrefix
      ? { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false }
      : { type: 'Split', pattern: { String: ' ' }, behavior: 'MergedWithPrevious', invert: false },
    post_processor: templateProcessor(v) ?? null,
    decoder: { type: 'Sequence', decoders: spacePrefix ? [...decoders, { type: 'Strip', content: ' ', start: 1, stop: 0 }] : decoders },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: spacePrefix || unknown < 0 ? null : v.tokens[unknown],
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: Array.from(v.types).includes(TOKEN_TYPES.BYTE),
      ignore_merges: false,
      vocab: Object.fromEntries(pieces.map((piece, id) => [piece, id])),
      merges: mergesOfPieces(pieces),
    },
  }
}

/**
 * tokenizer.model of a SentencePiece vocabulary (sentencepiece_model.proto's ModelProto): each piece with its
 * score and type (field 1), a BPE trainer spec with byte fallback and the special ids (2), the normalizer's
 * add_dummy_prefix (3). The [PAD<id>] ids the converter padded the vocabulary with at its end are left out.
 */
function sentencePieceModel(v: GgufVocabulary, spacePrefix: boolean): Uint8Array {
  const count = pieceCount(v)
  const unknown = unknownOf(v)
  const model = new Protobuf()
  for (let id = 0; id < count; id++) {
    // The converter types the unknown token as the added token it also is (CONTROL), and scores added tokens
    // -1000: SentencePiece's own control, unknown and user-defined pieces score 0, which its encoder never reads.
    const type = id === unknown ? TOKEN_TYPES.UNKNOWN : v.types[id]
    const scored = type === TOKEN_TYPES.NORMAL || type === TOKEN_TYPES.BYTE || type === TOKEN_TYPES.UNUSED
    const piece = new Protobuf().bytes(1, encoder.encode(v.tokens[id])).float(2, scored ? (v.scores?.[id] ?? 0) : 0)
    if (type !== TOKEN_TYPES.NORMAL) piece.varint(3, type)
    model.bytes(1, piece)
  }
  const byteFallback = Array.from(v.types).includes(TOKEN_TYPES.BYTE)
  const trainer = new Protobuf().varint(3, 2) // model_type BPE
  if (byteFallback) trainer.varint(35, 1)
  const id = (kind: string) => v.special[kind] ?? -1
  trainer.varint(40, unknown).varint(41, id('bos')).varint(42, id('eos')).varint(43, id('padding'))
  model.bytes(2, trainer)
  // name "identity", add_dummy_prefix, remove_extra_whitespaces false, escape_whitespaces true: Llama 2's and Gemma's.
  model.bytes(
    3,
    new Protobuf()
      .bytes(1, encoder.encode('identity'))
      .varint(3, spacePrefix ? 1 : 0)
      .varint(4, 0)
      .varint(5, 1),
  )
  return model.finish()
}

/**
 * tokenizer.json (byte-level BPE) or tokenizer.model (SentencePiece), and tokenizer_config.json, from a GGUF's
 * tokenizer.ggml.* keys and chat template. `contextLength`: the model's, as model_max_length.
 * @throws SafetensorsError `UnsupportedConversion` for a tokenizer model or pre-tokenizer it does not write;
 * `InvalidGguf` for arrays of the wrong type or length.
 */
export function tokenizerFiles(file: GgufFile, architecture: string, contextLength: number | undefined): TokenizerFiles {
  const { metadata } = file
  const kind = metadata['tokenizer.ggml.model']
  const v = vocabularyOf(metadata)
  const files: TokenizerFiles = {}
  const token = (kind: string) => (v.special[kind] === undefined ? null : v.tokens[v.special[kind]!])
  const config: Record<string, unknown> = {
    add_bos_token: v.flag('bos') ?? false,
    add_eos_token: v.flag('eos') ?? false,
    bos_token: token('bos'),
    eos_token: token('eos'),
    unk_token: token('unknown'),
    pad_token: token('padding'),
    clean_up_tokenization_spaces: false,
    model_max_length: contextLength,
  }
  if (kind === 'gpt2') {
    const pre = metadata['tokenizer.ggml.pre']
    files['tokenizer.json'] = jsonBytes(byteLevelJson(v, typeof pre === 'string' ? pre : 'gpt-2'))
    config.tokenizer_class = 'PreTrainedTokenizerFast'
  } else if (kind === 'llama') {
    // Both: transformers reads tokenizer.json (which some classes, Mixtral's and Phi-3's, need), SentencePiece tokenizer.model.
    const spacePrefix = metadata['tokenizer.ggml.add_space_prefix'] !== false
    files['tokenizer.json'] = jsonBytes(sentencePieceJson(v, spacePrefix))
    files['tokenizer.model'] = sentencePieceModel(v, spacePrefix)
    config.tokenizer_class = architecture.startsWith('gemma') ? 'GemmaTokenizer' : 'LlamaTokenizer'
    config.legacy = false
  } else
    throw new SafetensorsError(
      'UnsupportedConversion',
      `GGUF: tokenizer.ggml.model ${typeof kind === 'string' ? excerpt(kind) : 'missing'} is not a tokenizer this converts; it takes gpt2 (byte-level BPE) and llama (SentencePiece)`,
    )
  const unknown = kind === 'llama' ? unknownOf(v) : -1
  config.added_tokens_decoder = Object.fromEntries(addedIds(v, unknown).map((id) => [id, addedToken(v.tokens[id], isSpecial(v, id, unknown))]))
  const chat = metadata['tokenizer.chat_template']
  if (typeof chat === 'string') config.chat_template = chat
  files['tokenizer_config.json'] = jsonBytes(Object.fromEntries(Object.entries(config).filter(([, value]) => value !== undefined)))
  return files
}
