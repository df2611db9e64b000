# Makes test/fixtures/gguf/: tiny random causal language models, as transformers' save_pretrained writes them,
# with the transformers float32 logits that test/integration/gguf-llama.test.ts compares llama.cpp's results against.
# Run once by hand, never in CI; its output is committed. Deterministic for one torch/transformers/tokenizers/
# sentencepiece version (the versions used are recorded in each reference.json).
#
#   python3 -m venv /work/venv-gguf && /work/venv-gguf/bin/pip install "torch==2.13.0+cpu" transformers tokenizers sentencepiece
#   /work/venv-gguf/bin/python scripts/make-gguf-models.py [--out FOLDER] [NAME ...]
#
# With names it makes only those models (each has its own seed, so one never changes another); with --out it writes
# under FOLDER instead of test/fixtures/gguf/, to check that a model comes out byte for byte as committed.
#
# The first set's tokenizer is a real byte-level BPE (GPT-2's pre-tokenizer regex, as llama.cpp's `gpt2` pre-tokenizer
# applies it), trained on the licence texts every Debian machine has in /usr/share/common-licenses, with
# <s> and </s> as special tokens. The first set:
#   llama-gqa  LlamaForCausalLM, 4 heads and 2 KV heads, an untied lm_head; float32, an index and 2 shards.
#   mistral    MistralForCausalLM, 8 heads of 8 and 2 KV heads; stored in bfloat16, one file.
#   qwen2      Qwen2ForCausalLM, q/k/v biases, tied embeddings (no lm_head); float32, one file; hidden size
#              48, so rows of 48 are not a multiple of Q8_0's block of 32 while the FFN's down rows (96) are.
# Every weight, norm and bias is drawn at random (GAIN below) so that the next-token distributions are far from
# uniform ("spread" in reference.json): a converter that leaves out llama's Q/K permutation, swaps two tensors or
# drops a bias is then visibly wrong.
#
# The second set (MODELS_2: RoPE scaling, SentencePiece tokenizers, more architectures) trains its tokenizers on
# the same texts: byte-level BPEs with Llama 3's and Qwen2's split regexes and GPT-2's, and SentencePiece BPE
# models with byte fallback in Llama 2's and Gemma's manner (tokenizer.json made from them by transformers):
#   llama3       rope_type llama3 (original context 16), Llama 3's tokenizer (llama-bpe)
#   llama-yarn   YaRN on llama (transformers 5's rope_parameters)
#   llama2-spm   tokenizer.model only, 500 pieces padded to 512
#   mistral-spm  tokenizer.json only (BPE + byte_fallback + Metaspace), linear RoPE scaling (old key `type`)
#   qwen3        q/k norms, head_dim 16 at hidden 48, YaRN, Qwen2's regex, 500 tokens padded to 512
#   qwen3moe     4 experts, 2 used, per-expert tensors to stack
#   mixtral      4 experts, 2 used, 3 shards each holding part of every layer's experts
#   gemma2       norms + 1, soft-capping, sliding window 8 on alternate layers, Gemma's SentencePiece
#   gemma3       6 layers (5 local, 1 global), local/global RoPE bases (100 and 1e6), linear scaling on the global layer
#   phi3         fused qkv and gate_up, longrope (long/short factors, attention factor), added tokens
#   gpt2         Conv1D weights, fused c_attn, learned positions
#   mistral-swa  Mistral's sliding window of 16 (llama.cpp's llama ignores it); a byte-fallback BPE trained by
#                `tokenizers` with the 256 <0xXX> byte tokens among its special tokens; the logits after every
#                position up to 16 of one sequence, and after 17, 33 and 64 (past the window)
# reference.json's `exercises` says each in full. Their id sequences are longer where RoPE scaling or a sliding
# window shows only past a few positions (up to 64 ids).
#
# The third set (MODELS_3: the architectures of GGUF issue 43) has byte-level BPEs of each family's pre-tokenizer
# (tokenizer.json as the family ships it) and config.json in the Hub's form, each 64 ids long at most:
#   smollm3 granite olmo2 gptneox phi2 stablelm falcon command-r qwen2moe deepseek-v2-lite deepseek-v3 gpt-oss llama4
# gpt-oss stores its experts in MXFP4 as OpenAI ships them; its reference logits are those of the plain model with
# the experts dequantized by transformers' own function. reference.json's `sentence_decoded` is the tokenizer's
# decode of the sentence's ids, which llama.cpp's detokenization must give back.
import glob
import json
import os
import shutil
import sys

import numpy as np
import tokenizers
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "fixtures", "gguf")
VOCAB_SIZE = 512
SPECIAL = ["<s>", "</s>"]
BOS, EOS = 0, 1
# Sentences llama.cpp must tokenize as the Hugging Face tokenizer does: contractions, digits, runs of spaces,
# punctuation, a newline and bytes the training text never had (é, an emoji), which byte-level BPE spells as bytes.
SENTENCE = "The café's 3 owners don't agree:  42 apples, 7 pears!\nIt'll be fine 🙂 (or not)."
# The id sequences whose next-token logits are the reference: lengths 5, 9, 14 and 20.
SEQUENCE_LENGTHS = [5, 9, 14, 20]
CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}\n{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


def training_text():
    """The licence texts of Debian's base system, in a fixed order."""
    texts = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    if not texts:
        sys.exit("no text under /usr/share/common-licenses to train the tokenizer on")
    return texts


def train_tokenizer():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_text(), trainer)
    assert tokenizer.get_vocab_size() == VOCAB_SIZE, tokenizer.get_vocab_size()
    assert [tokenizer.token_to_id(t) for t in SPECIAL] == [BOS, EOS]
    return tokenizer


def save_tokenizer(trained, folder, add_bos):
    tokenizer = Tokenizer.from_str(trained.to_str())
    if add_bos:
        # What Llama's tokenizer.json does: <s> before every text.
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", BOS)]
        )
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>" if add_bos else None,
        eos_token="</s>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=256,
    )
    # The chat template in tokenizer_config.json, where most models on the Hub have it (transformers 5 would
    # write it to chat_template.jinja instead).
    wrapped.save_pretrained(folder, save_jinja_files=False)
    # transformers 5 writes add_bos_token only for some tokenizer classes; llama.cpp's converter reads it from
    # tokenizer_config.json, so it is stated here as Llama's and Qwen2's own files state it.
    config_path = os.path.join(folder, "tokenizer_config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["add_bos_token"] = add_bos
    config["add_eos_token"] = False
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")


# The spread of the random weights: queries and keys large enough that the pairing of RoPE matters (a GGUF
# without llama's Q/K permutation is off by 0.25 in probability), the output layer large enough that the next
# token is far from uniform (the most likely one has a probability from 0.12 to 0.97), the rest below unit gain
# so that the model stays well conditioned (Q8_0 moves a probability by 0.01 at most, not 0.1): measured with
# scripts/gguf-reference.py.
GAIN = {"q_proj": 1.5, "k_proj": 1.5, "lm_head": 3.0, "": 0.7}
EMBEDDING_STD = 1.0
BIAS_STD = 0.1


def randomize(model, seed):
    """Every parameter drawn anew: a matrix N(0, gain^2 / fan_in), the input embedding N(0, 1), a bias
    N(0, 0.1^2), a norm's weight 1 + N(0, 0.2^2)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if name.endswith("norm.weight"):
                parameter.copy_(1 + 0.2 * noise)
            elif name.endswith(".bias"):
                parameter.copy_(BIAS_STD * noise)
            elif "embed_tokens" in name and model.config.tie_word_embeddings:
                # Also the output layer.
                parameter.copy_(GAIN["lm_head"] / parameter.shape[1] ** 0.5 * noise)
            elif "embed_tokens" in name:
                parameter.copy_(EMBEDDING_STD * noise)
            else:
                gain = next(g for part, g in GAIN.items() if part in name)
                parameter.copy_(gain / parameter.shape[1] ** 0.5 * noise)


MODELS = [
    {
        "name": "llama-gqa",
        "class": LlamaForCausalLM,
        "config": LlamaConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=256,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            tie_word_embeddings=False,
            bos_token_id=BOS,
            eos_token_id=EOS,
        ),
        "add_bos": True,
        "dtype": torch.float32,
        "shards": 2,
    },
    {
        "name": "mistral",
        "class": MistralForCausalLM,
        "config": MistralConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=64,
            intermediate_size=160,
            num_hidden_layers=2,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=256,
            rms_norm_eps=1e-5,
            rope_theta=1000000.0,
            sliding_window=None,
            tie_word_embeddings=False,
            bos_token_id=BOS,
            eos_token_id=EOS,
        ),
        "add_bos": True,
        "dtype": torch.bfloat16,
        "shards": 1,
    },
    {
        "name": "qwen2",
        "class": Qwen2ForCausalLM,
        "config": Qwen2Config(
            vocab_size=VOCAB_SIZE,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=256,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            use_sliding_window=False,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=EOS,
        ),
        "add_bos": False,
        "dtype": torch.float32,
        "shards": 1,
    },
]


def sequences(seed, add_bos):
    rng = np.random.default_rng(seed)
    result = []
    for length in SEQUENCE_LENGTHS:
        ids = rng.integers(len(SPECIAL), VOCAB_SIZE, size=length).tolist()
        if add_bos:
            ids[0] = BOS
        result.append(ids)
    return result


def save_model(spec, seed):
    folder = os.path.join(OUT, spec["name"])
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    torch.manual_seed(seed)
    spec["config"]._attn_implementation = "eager"
    model = spec["class"](spec["config"]).eval()
    randomize(model, seed)
    model = model.to(spec["dtype"])
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    # A shard limit a little over half the model: save_pretrained then writes exactly two shards.
    max_shard_size = size if spec["shards"] == 1 else int(size * 0.6)
    model.save_pretrained(folder, max_shard_size=max_shard_size)
    shards = glob.glob(os.path.join(folder, "*.safetensors"))
    assert len(shards) == spec["shards"], shards
    return folder


def reference(spec, folder, cases_ids, sentence, versions, **fields):
    """The float32 next-token logits of the saved model after each id sequence, read back from its folder as a
    user loads it, and its tokenizer's ids of `sentence`; `fields` go after the stored dtype."""
    load_model = spec.get("load_model", lambda f: AutoModelForCausalLM.from_pretrained(f, dtype=torch.float32, attn_implementation="eager"))
    model = load_model(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    cases = []
    with torch.no_grad():
        for ids in cases_ids:
            logits = model(torch.tensor([ids])).logits[0, -1].to(torch.float32).numpy()
            probabilities = np.exp(logits - logits.max())
            probabilities /= probabilities.sum()
            top = np.sort(probabilities)[::-1]
            cases.append(
                {
                    "ids": ids,
                    "logits": [float(x) for x in logits],
                    "spread": {"top1": float(top[0]), "top2": float(top[1]), "uniform": 1 / len(logits)},
                }
            )
    return {
        "made_by": "scripts/make-gguf-models.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__, **versions},
        "architecture": spec["class"].__name__,
        "stored_dtype": str(spec["dtype"]).removeprefix("torch."),
        **fields,
        "cases": cases,
        "sentence": sentence,
        "sentence_ids": tokenizer(sentence)["input_ids"],
        "sentence_ids_without_special": tokenizer(sentence, add_special_tokens=False)["input_ids"],
        # What the tokenizer's decode makes of those ids (the third set's files have it: llama.cpp must detokenize to it).
        "sentence_decoded": tokenizer.decode(tokenizer(sentence, add_special_tokens=False)["input_ids"]),
    }


# ---------------------------------------------------------------------------------------------------------------
# The models of the second set (GGUF issue 2): RoPE scaling (llama3, linear, yarn, longrope), SentencePiece
# tokenizers (tokenizer.model, and tokenizer.json's BPE with byte fallback and Metaspace), and the architectures
# qwen3, qwen3moe, mixtral, gemma2, gemma3, phi3 and gpt2. Each has its own seed, tokenizer and id sequences, so
# that making one never changes another (the three models above keep their bytes). docs/gguf.md and the notes of
# the issue say what each exercises; EXERCISES below says it in one line, and reference.json repeats it.
# ---------------------------------------------------------------------------------------------------------------
import io  # noqa: E402

import sentencepiece  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from tokenizers import AddedToken, Regex, normalizers  # noqa: E402
from transformers import (  # noqa: E402
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    MixtralConfig,
    MixtralForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

# The split regexes of tokenizer.json's pre-tokenizers, as Meta's Llama 3 and Qwen2/Qwen3 ship them.
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# Longer than SEQUENCE_LENGTHS' 20: RoPE scaling (llama3 below 16 positions of "original" context, yarn, linear),
# sliding windows of 8 and longrope's long factors show only past a few positions.
LONG_SEQUENCES = [5, 14, 33, 64]
# Phi-3's long factors: llama.cpp takes them when its context (256 in the tests) exceeds the original 16 positions,
# transformers when the sequence does, so every sequence is longer than 16.
PHI3_SEQUENCES = [17, 24, 40, 64]


def training_lines():
    """The licence texts as non-empty lines, for sentencepiece's trainer (one sentence a line)."""
    return [line for text in training_text() for line in text.split("\n") if line.strip()]


def train_sentencepiece(vocab_size, style):
    """A SentencePiece BPE model with byte fallback, trained as Llama 2's (style "llama": <unk> <s> </s> first,
    a dummy prefix "▁" before a text) or Gemma's (style "gemma": <pad> <eos> <bos> <unk> first, two turn markers,
    no dummy prefix). Digits are split one by one, whitespace runs kept, no normalization: as both ship."""
    options = dict(
        model_type="bpe",
        vocab_size=vocab_size,
        byte_fallback=True,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
        max_sentence_length=100000,
        shuffle_input_sentence=False,
    )
    if style == "llama":
        options.update(add_dummy_prefix=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    else:
        options.update(
            add_dummy_prefix=False,
            pad_id=0,
            eos_id=1,
            bos_id=2,
            unk_id=3,
            pad_piece="<pad>",
            eos_piece="<eos>",
            bos_piece="<bos>",
            unk_piece="<unk>",
            user_defined_symbols=["<start_of_turn>", "<end_of_turn>"],
        )
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(training_lines()), model_writer=model, **options)
    return model.getvalue()


# Numbers added to the licence texts for the second set's byte-level BPEs, so that their vocabularies hold
# multi-digit tokens ("19", "199", " 2"...): how a pre-tokenizer splits digits (GPT-2's " ?\p{N}+", Llama 3's
# "\p{N}{1,3}", Qwen2's "\p{N}") then changes the ids of SENTENCE_2, and a GGUF naming the wrong one fails.
NUMBERS = [" ".join(str(n) for n in range(1980, 2030))] * 8 + [" ".join(str(n) for n in range(1000))]
# The second set's sentence: the first set's, then numbers and a full stop before a blank line (a token ".\n\n" in
# the Llama 3 and Qwen2 vocabularies, two pre-tokens for GPT-2's regex), so that llama.cpp's tokenization tells
# the pre-tokenizers gpt-2, llama-bpe and qwen2 apart on these vocabularies.
SENTENCE_2 = SENTENCE + " Since 1991, 2007 copies.\n\nEnd 12345."


def train_byte_level(vocab_size, pre_tokenizer, first, last, ignore_merges=False, train_pre=None):
    """A byte-level BPE of vocab_size tokens: `first` special tokens at ids 0.., the trained ones, then `last`
    special tokens at the end (where Llama 3 and Qwen keep theirs); trained on the licence texts and NUMBERS with
    `train_pre` (default `pre_tokenizer`), then kept with `pre_tokenizer`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = train_pre or pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(last),
        special_tokens=first,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_text() + NUMBERS, trainer)
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in last])
    tokenizer.model.ignore_merges = ignore_merges
    assert tokenizer.get_vocab_size() == vocab_size, tokenizer.get_vocab_size()
    return tokenizer


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def added_tokens_decoder(tokenizer_json):
    """tokenizer_config.json's added_tokens_decoder, as transformers writes it, from tokenizer.json's added tokens."""
    return {
        str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
        for t in tokenizer_json["added_tokens"]
    }


def tokenizer_gpt2(folder):
    """GPT-2's: ByteLevel with GPT-2's own regex (llama.cpp's `gpt-2`), <|endoftext|> last, nothing added."""
    trained = train_byte_level(
        VOCAB_SIZE, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), [], ["<|endoftext|>"]
    )
    trained.post_processor = processors.ByteLevel(trim_offsets=False)
    trained.save(os.path.join(folder, "tokenizer.json"))
    eot = "<|endoftext|>"
    write_json(
        os.path.join(folder, "tokenizer_config.json"),
        {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": added_tokens_decoder(json.loads(trained.to_str())),
            "bos_token": eot,
            "clean_up_tokenization_spaces": False,
            "eos_token": eot,
            "model_max_length": 256,
            "tokenizer_class": "GPT2Tokenizer",
            "unk_token": eot,
        },
    )


LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def tokenizer_llama3(folder):
    """Llama 3's shape: a Split by Llama 3's regex then ByteLevel without its own regex (llama.cpp's `llama-bpe`),
    ignore_merges, the special tokens at the end, <|begin_of_text|> added by the post-processor's template and not
    by an add_bos_token key (Llama 3.1's tokenizer_config.json has none): the converter reads it from the template."""
    pre = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    trained = train_byte_level(VOCAB_SIZE, pre, [], LLAMA3_SPECIALS, ignore_merges=True)
    bos = LLAMA3_SPECIALS[0]
    trained.post_processor = processors.Sequence(
        [
            processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
            processors.TemplateProcessing(
                single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, trained.token_to_id(bos))]
            ),
        ]
    )
    trained.save(os.path.join(folder, "tokenizer.json"))
    write_json(
        os.path.join(folder, "tokenizer_config.json"),
        {
            "added_tokens_decoder": added_tokens_decoder(json.loads(trained.to_str())),
            "bos_token": bos,
            "chat_template": LLAMA3_TEMPLATE,
            "clean_up_tokenization_spaces": True,
            "eos_token": "<|eot_id|>",
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 256,
            "tokenizer_class": "PreTrainedTokenizerFast",
        },
    )


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen's vocabularies are shorter than their embeddings (151,665 tokens, vocab_size 151,936): these 500 tokens
# go into embeddings of 512 rows, and the GGUF's vocabulary is padded with [PAD500] to [PAD511].
QWEN_TOKENS = 500


def tokenizer_qwen(folder):
    """Qwen2/Qwen3's: NFC, a Split by Qwen2's regex (digits one by one: llama.cpp's `qwen2`) then ByteLevel, the
    special tokens at the end, no BOS."""
    pre = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    # Trained with Llama 3's regex (digits in threes), kept with Qwen2's (one digit at a time): the vocabulary has
    # multi-digit tokens that Qwen2's pre-tokenizer never reaches, as Qwen's own vocabulary (from cl100k) has.
    llama3 = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    trained = train_byte_level(QWEN_TOKENS, pre, [], QWEN_SPECIALS, train_pre=llama3)
    trained.normalizer = normalizers.NFC()
    trained.post_processor = processors.ByteLevel(trim_offsets=False)
    trained.save(os.path.join(folder, "tokenizer.json"))
    write_json(
        os.path.join(folder, "tokenizer_config.json"),
        {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": added_tokens_decoder(json.loads(trained.to_str())),
            "bos_token": None,
            "chat_template": QWEN_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "model_max_length": 256,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
        },
    )


LLAMA2_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}[INST] {{ message['content'] }} [/INST]"
    "{% else %}{{ message['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
)


def spm_fast(folder, tokenizer_config, extra_tokens=()):
    """tokenizer.json as transformers converts the folder's tokenizer.model (BPE with byte fallback; Metaspace for
    Llama's, a Replace of " " by "▁" for Gemma's), with `extra_tokens` added after the SentencePiece pieces."""
    scratch = os.path.join(folder, ".convert")
    os.makedirs(scratch)
    shutil.copy(os.path.join(folder, "tokenizer.model"), scratch)
    write_json(os.path.join(scratch, "tokenizer_config.json"), tokenizer_config)
    fast = AutoTokenizer.from_pretrained(scratch)
    if extra_tokens:
        fast.add_tokens([AddedToken(t, special=True, normalized=False) for t in extra_tokens], special_tokens=True)
    fast.backend_tokenizer.save(os.path.join(folder, "tokenizer.json"))
    shutil.rmtree(scratch)
    with open(os.path.join(folder, "tokenizer.json")) as f:
        return json.load(f)


def tokenizer_llama_spm(model_proto, folder, files, add_bos=True, config_extra=None, extra_tokens=()):
    """Llama 2's and Mistral v0.x's SentencePiece tokenizer: `files` is which of tokenizer.model and tokenizer.json
    the folder ships (both, as the Hub's Llama 2 and Mixtral; one, as some conversions)."""
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(model_proto)
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    converted = spm_fast(
        folder, {"tokenizer_class": "LlamaTokenizer", "add_bos_token": add_bos, "add_eos_token": False, **special}, extra_tokens
    )
    # <s> before a text, from the post-processor's template, or nothing (Phi-3's add_bos_token false).
    single = [{"SpecialToken": {"id": "<s>", "type_id": 0}}] if add_bos else []
    assert converted["post_processor"]["single"] == [*single, {"Sequence": {"id": "A", "type_id": 0}}], converted["post_processor"]
    config = {
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "added_tokens_decoder": added_tokens_decoder(converted),
        "bos_token": "<s>",
        "chat_template": LLAMA2_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "legacy": False,
        "model_max_length": 256,
        "pad_token": None,
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
        "use_default_system_prompt": False,
    }
    config.update(config_extra or {})
    write_json(os.path.join(folder, "tokenizer_config.json"), config)
    if "tokenizer.json" not in files:
        os.remove(os.path.join(folder, "tokenizer.json"))
    if "tokenizer.model" not in files:
        os.remove(os.path.join(folder, "tokenizer.model"))


GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\n{{ message['content'] }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def tokenizer_gemma(model_proto, folder):
    """Gemma's: SentencePiece with <pad> <eos> <bos> <unk> first, no dummy prefix, turn markers; shipped as
    tokenizer.model and tokenizer.json, as Gemma 2 and 3 are."""
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(model_proto)
    special = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}
    converted = spm_fast(folder, {"tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False, **special})
    write_json(
        os.path.join(folder, "tokenizer_config.json"),
        {
            "add_bos_token": True,
            "add_eos_token": False,
            "added_tokens_decoder": added_tokens_decoder(converted),
            "bos_token": "<bos>",
            "chat_template": GEMMA_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<eos>",
            "model_max_length": 256,
            "pad_token": "<pad>",
            "sp_model_kwargs": {},
            "spaces_between_special_tokens": False,
            "tokenizer_class": "GemmaTokenizer",
            "unk_token": "<unk>",
            "use_default_system_prompt": False,
        },
    )


BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
# What the byte tokens must give back through llama.cpp's detokenizer: letters the (ASCII) training text never had.
BYTE_TEXT = "déjà"


def tokenizer_bpe_trainer_bytes(folder):
    """A SentencePiece-style tokenizer.json made by `tokenizers` alone, as a tokenizer trained from scratch is: BPE
    with byte fallback, Metaspace, and the 256 byte tokens given to BpeTrainer as special tokens, so that they are
    both in the vocabulary and among tokenizer.json's special added tokens (transformers' conversion of a
    tokenizer.model lists them in the vocabulary only)."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<unk>", "<s>", "</s>", *BYTE_TOKENS], show_progress=False)
    tokenizer.train_from_iterator(training_lines(), trainer)
    assert tokenizer.get_vocab_size() == VOCAB_SIZE, tokenizer.get_vocab_size()
    assert [tokenizer.token_to_id(t) for t in ("<unk>", "<s>", "</s>", "<0x00>")] == [0, 1, 2, 3]
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer.json")) as f:
        saved = json.load(f)
    assert [t["content"] for t in saved["added_tokens"] if t["special"]][3:] == BYTE_TOKENS
    write_json(
        os.path.join(folder, "tokenizer_config.json"),
        {
            "add_bos_token": True,
            "add_eos_token": False,
            "added_tokens_decoder": added_tokens_decoder(saved),
            "bos_token": "<s>",
            "chat_template": LLAMA2_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "</s>",
            "model_max_length": 256,
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": "<unk>",
        },
    )


# The spread of the second set's weights: GAIN as above, with the router of a mixture of experts large enough
# that the experts chosen stand clearly apart (rounding to F16 or Q8_0 must not change which two are used), and
# Phi-3's fused qkv_proj given the gain of q_proj and k_proj in its query and key rows.
GAIN_2 = {"q_proj": 1.5, "k_proj": 1.5, "lm_head": 3.0, "gate.weight": 4.0, "": 0.7}
# GPT-2's Conv1D layers store [in, out]: their fan-in is the first dimension.
CONV1D = ("c_attn", "c_proj", "c_fc")


def randomize_2(model, seed, spec):
    """As randomize() for the first set, for any of the second set's parameters: norms 1 + N(0, 0.2^2) (Gemma's,
    which transformers applies as 1 + weight, N(0, 0.2^2), so that a converter without llama.cpp's +1 is far off),
    biases N(0, 0.1^2), input embeddings N(0, 1) (GPT-2's positions N(0, 0.5^2)), a tied embedding with the output
    layer's gain, a matrix (or a stack of experts' matrices) N(0, gain^2 / fan_in)."""
    generator = torch.Generator().manual_seed(seed)
    custom = spec.get("gain", {})
    # Parts GAIN_2 does not name come first: GAIN_2's "" matches every name.
    gains = {**{k: g for k, g in custom.items() if k not in GAIN_2}, **GAIN_2, **{k: g for k, g in custom.items() if k in GAIN_2}}
    norm_base = 0.0 if spec.get("norm_offset") else 1.0
    tied = model.config.tie_word_embeddings
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if name.endswith((".bias", "_bias")):
                parameter.copy_(BIAS_STD * noise)
            elif parameter.ndim == 1 or (parameter.ndim == 2 and name.endswith("norm.weight")):
                base = spec.get("qk_norm", norm_base) if name.endswith(("q_norm.weight", "k_norm.weight")) else norm_base
                parameter.copy_(base + 0.2 * noise)
            elif name.endswith(("embed_tokens.weight", "wte.weight", "embed_in.weight", "word_embeddings.weight")):
                parameter.copy_((gains["lm_head"] / parameter.shape[-1] ** 0.5 if tied else EMBEDDING_STD) * noise)
            elif name.endswith("wpe.weight"):
                parameter.copy_(0.5 * noise)
            else:
                conv1d = any(part in name for part in CONV1D) and isinstance(model, GPT2LMHeadModel)
                # Experts stored [E, in, out] (GptOssExperts, Llama4TextExperts) have their fan-in in the middle.
                in_out = spec.get("experts_in_out") and parameter.ndim == 3
                fan_in = parameter.shape[0] if conv1d else parameter.shape[-2] if in_out else parameter.shape[-1]
                gain = next(g for part, g in gains.items() if part in name)
                scale = torch.full(parameter.shape, gain / fan_in**0.5)
                if name.endswith("qkv_proj.weight"):
                    # Phi-3: rows of q, then k, then v.
                    c = model.config
                    qk = (c.num_attention_heads + c.num_key_value_heads) * (c.hidden_size // c.num_attention_heads)
                    scale[:qk] = gains["q_proj"] / fan_in**0.5
                elif name.endswith("c_attn.weight"):
                    # GPT-2: columns of q, then k, then v.
                    scale[:, : 2 * model.config.n_embd] = gains["q_proj"] / fan_in**0.5
                parameter.copy_(scale * noise)


def ordinary_ids(tokenizer_folder, vocab_size):
    """The ids the cases draw from: every id of the tokenizer's vocabulary that is not an added or special token
    (nor a padding id beyond it)."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    added = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    return [i for i in range(min(len(tokenizer), vocab_size)) if i not in added]


def sequences_2(seed, lengths, pool, bos):
    rng = np.random.default_rng(seed)
    result = []
    for length in lengths:
        ids = [pool[i] for i in rng.integers(0, len(pool), size=length)]
        if bos is not None:
            ids[0] = bos
        result.append(ids)
    return result


def to_transformers4(folder, keep_rope_in_scaling=True):
    """Rewrites a saved config.json in transformers 4's form, as most configs on the Hub still are: rope_theta at
    the top level, the scaling (if any) as rope_scaling; rope_parameters gone."""

    def change(config):
        rope = config.pop("rope_parameters")
        config["rope_theta"] = rope.pop("rope_theta")
        keep = rope.get("rope_type", "default") != "default" and keep_rope_in_scaling
        config["rope_scaling"] = rope if keep else None

    edit_config(folder, change)


def edit_config(folder, change):
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        config = json.load(f)
    change(config)
    write_json(path, dict(sorted(config.items())))


def small(**kwargs):
    """The hyperparameters every model of the second set shares unless it says otherwise."""
    base = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    base.update(kwargs)
    return base


SPM_LLAMA = "spm-llama-500"
SPM_LLAMA_FULL = "spm-llama-512"
SPM_GEMMA = "spm-gemma-512"
PHI3_ADDED = ["<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>"]
PHI3_LONG = [1.0, 1.5, 2.25, 3.5, 5.0, 8.0, 12.0, 16.0]
PHI3_SHORT = [1.0, 1.02, 1.05, 1.1, 1.2, 1.3, 1.5, 1.8]

MODELS_2 = [
    {
        "name": "llama3",
        "seed": 11,
        "class": LlamaForCausalLM,
        "config": LlamaConfig(
            **small(),
            rms_norm_eps=1e-5,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
            bos_token_id=VOCAB_SIZE - len(LLAMA3_SPECIALS),
            eos_token_id=VOCAB_SIZE - len(LLAMA3_SPECIALS) + 4,
        ),
        "tokenizer": tokenizer_llama3,
        "bos": VOCAB_SIZE - len(LLAMA3_SPECIALS),
        "transformers4": True,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Llama 3.1's RoPE (rope_type llama3: llama.cpp's rope_freqs tensor) with an original context of 16 "
        "positions, in transformers 4's rope_scaling form; a byte-level BPE with Llama 3's split regex (llama-bpe), "
        "ignore_merges, the BOS from the post-processor's template",
    },
    {
        "name": "llama-yarn",
        "seed": 12,
        "class": LlamaForCausalLM,
        "config": LlamaConfig(
            **small(num_attention_heads=4, num_key_value_heads=4),
            rms_norm_eps=1e-5,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            bos_token_id=BOS,
            eos_token_id=EOS,
        ),
        "tokenizer": "gpt2-bos",
        "bos": BOS,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "YaRN on llama (rope.scaling.type yarn, factor 4, original context 64, beta_fast 32 and "
        "beta_slow 1 by default), in transformers 5's rope_parameters form; no grouped-query attention",
    },
    {
        "name": "llama2-spm",
        "seed": 13,
        "class": LlamaForCausalLM,
        "config": LlamaConfig(**small(), rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=1, eos_token_id=2),
        "tokenizer": ("llama-spm", SPM_LLAMA, ["tokenizer.model"]),
        "bos": 1,
        "transformers4": True,
        "lengths": SEQUENCE_LENGTHS,
        "dtype": torch.float16,
        "exercises": "Llama 2's SentencePiece tokenizer shipped as tokenizer.model only (BPE, byte fallback, <0xXX> "
        "pieces, scores), 500 pieces in embeddings of 512 rows ([PAD500] to [PAD511]); stored in float16",
    },
    {
        "name": "mistral-spm",
        "seed": 14,
        "class": MistralForCausalLM,
        "config": MistralConfig(
            **small(num_attention_heads=8, num_key_value_heads=2, head_dim=8),
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "linear", "rope_theta": 1000000.0, "factor": 4.0},
            sliding_window=None,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "tokenizer": ("llama-spm", SPM_LLAMA_FULL, ["tokenizer.json"]),
        "bos": 1,
        "transformers4": "type",
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Mistral v0.x's SentencePiece tokenizer shipped as tokenizer.json only (BPE with byte_fallback, "
        "Metaspace, the ByteFallback decoder); linear RoPE scaling (factor 4) in transformers 4's rope_scaling form "
        "with the old key `type`",
    },
    {
        "name": "qwen3",
        "seed": 15,
        "class": Qwen3ForCausalLM,
        "config": Qwen3Config(
            **small(hidden_size=48, intermediate_size=96, head_dim=16, tie_word_embeddings=True),
            rms_norm_eps=1e-6,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 1000000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 32,
            },
            bos_token_id=None,
            eos_token_id=QWEN_TOKENS - 1,
        ),
        "tokenizer": tokenizer_qwen,
        "bos": None,
        "gain": {"lm_head": 1.5},
        "transformers4": True,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Qwen3: q_norm and k_norm, head_dim 16 with hidden size 48 (4 heads of 16 = 64 != 48), tied "
        "embeddings; YaRN (factor 4, original context 32) in transformers 4's rope_scaling form; Qwen2's split regex "
        "(qwen2); 500 tokens in embeddings of 512 rows",
    },
    {
        "name": "qwen3moe",
        "seed": 16,
        "class": Qwen3MoeForCausalLM,
        "config": Qwen3MoeConfig(
            **small(intermediate_size=128, head_dim=16),
            moe_intermediate_size=32,
            num_experts=4,
            num_experts_per_tok=2,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            bos_token_id=None,
            eos_token_id=QWEN_TOKENS - 1,
        ),
        "tokenizer": tokenizer_qwen,
        "bos": None,
        "lengths": SEQUENCE_LENGTHS,
        "dtype": torch.bfloat16,
        "exercises": "Qwen3-MoE: 4 experts, 2 used, normalized top-k weights, expert FFN of 32; per-expert "
        "gate/up/down tensors stacked into ffn_*_exps, the router as ffn_gate_inp (F32); q/k norms",
    },
    {
        "name": "mixtral",
        "seed": 17,
        "class": MixtralForCausalLM,
        "config": MixtralConfig(
            **small(intermediate_size=64),
            num_local_experts=4,
            num_experts_per_tok=2,
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            sliding_window=None,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "tokenizer": ("llama-spm", SPM_LLAMA_FULL, ["tokenizer.model", "tokenizer.json"]),
        "bos": 1,
        "lengths": SEQUENCE_LENGTHS,
        "dtype": torch.bfloat16,
        "shards": 3,
        "reshard": True,
        "exercises": "Mixtral: llama with 4 experts (w1/w2/w3 of block_sparse_moe stacked into ffn_gate/down/up_exps, "
        "the router as ffn_gate_inp), 2 used; 3 shards, each layer's experts spread over all three; Q/K permutation; tokenizer.model "
        "and tokenizer.json both present (the converter takes tokenizer.model)",
    },
    {
        "name": "gemma2",
        "seed": 18,
        "class": Gemma2ForCausalLM,
        "config": Gemma2Config(
            **small(head_dim=16, tie_word_embeddings=True),
            rms_norm_eps=1e-6,
            query_pre_attn_scalar=16,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=10.0,
            sliding_window=8,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=1,
        ),
        "tokenizer": ("gemma", SPM_GEMMA),
        "bos": 2,
        "norm_offset": True,
        # Queries and keys twice GAIN_2's: attention scores well past the soft-cap of 5, so that a GGUF with
        # llama.cpp's default cap (50) instead is clearly off.
        "gain": {"q_proj": 3.0, "k_proj": 3.0},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Gemma 2: norms stored as w (llama.cpp's GGUF holds 1 + w), pre- and post-norms around attention "
        "and FFN, embeddings scaled by sqrt(hidden), attention soft-capping 5 and final soft-capping 10, a sliding "
        "window of 8 on layer 0 (layer 1 global), tied embeddings; Gemma's SentencePiece tokenizer (no dummy prefix)",
    },
    {
        "name": "gemma3",
        "seed": 19,
        "class": Gemma3ForCausalLM,
        "config": Gemma3TextConfig(
            **small(
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=6,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=16,
                tie_word_embeddings=True,
            ),
            rms_norm_eps=1e-6,
            query_pre_attn_scalar=16,
            sliding_window=8,
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                # Not Gemma 3's 10,000, which is also llama.cpp's default: a GGUF without rope.freq_base_swa must fail.
                "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
            },
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=1,
        ),
        "tokenizer": ("gemma", SPM_GEMMA),
        "bos": 2,
        "norm_offset": True,
        # Less peaked than GAIN_2's output layer gives here (a top token of 0.994 made Q8_0's logit measure 0.67).
        "gain": {"lm_head": 4.5},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Gemma 3 (text): 6 layers, 5 local with a sliding window of 8 and RoPE base 100, the 6th global "
        "with base 1e6 and linear scaling 8 (llama.cpp's default pattern of 6); q/k norms; norms + 1; embeddings "
        "scaled by sqrt(hidden); tied embeddings; Gemma's SentencePiece tokenizer",
    },
    {
        "name": "phi3",
        "seed": 20,
        "class": Phi3ForCausalLM,
        "config": Phi3Config(
            **small(num_attention_heads=4, num_key_value_heads=4),
            rms_norm_eps=1e-5,
            original_max_position_embeddings=16,
            rope_parameters={
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "long_factor": PHI3_LONG,
                "short_factor": PHI3_SHORT,
                "original_max_position_embeddings": 16,
            },
            pad_token_id=500,
            bos_token_id=1,
            eos_token_id=500,
        ),
        "tokenizer": ("llama-spm-phi3", SPM_LLAMA, ["tokenizer.model", "tokenizer.json"]),
        "bos": None,
        "transformers4": True,
        "lengths": PHI3_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Phi-3: fused qkv_proj (attn_qkv) and gate_up_proj (ffn_up of 2 x 128) kept fused; longrope "
        "(rope_factors_long and rope_factors_short, the attention factor sqrt(1 + ln(256/16) / ln 16)) with an original "
        "context of 16 in transformers 4's form (rope_scaling type longrope, original_max_position_embeddings at the "
        "top); Llama 2's tokenizer with 4 added tokens (500 to 503) and padding to 512; no BOS added",
    },
    {
        "name": "gpt2",
        "seed": 21,
        "class": GPT2LMHeadModel,
        "config": GPT2Config(
            vocab_size=VOCAB_SIZE,
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=256,
            n_inner=None,
            activation_function="gelu_new",
            layer_norm_epsilon=1e-5,
            bos_token_id=VOCAB_SIZE - 1,
            eos_token_id=VOCAB_SIZE - 1,
            tie_word_embeddings=True,
        ),
        "tokenizer": tokenizer_gpt2,
        "bos": None,
        "lengths": SEQUENCE_LENGTHS,
        "dtype": torch.float16,
        "gpt2": True,
        "exercises": "GPT-2: Conv1D weights ([in, out], transposed by the converter), fused c_attn (attn_qkv) with "
        "biases, LayerNorms with biases, learned position embeddings (position_embd, F32), tied output; GPT-2's "
        "byte-level BPE (gpt-2); stored in float16",
    },
    {
        "name": "mistral-swa",
        "seed": 22,
        "class": MistralForCausalLM,
        "config": MistralConfig(
            **small(num_attention_heads=8, num_key_value_heads=2, head_dim=8),
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            sliding_window=16,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "tokenizer": tokenizer_bpe_trainer_bytes,
        "bos": 1,
        # One sequence of 64 ids: its logits after each of the first 16 positions, then after 17, 33 and 64.
        "prefixes": [*range(1, 17), 17, 33, 64],
        "byte_text": True,
        # llama.cpp's llama graph has no sliding window: the reference must show the window's effect.
        "window_ignored": True,
        "dtype": torch.bfloat16,
        "exercises": "Mistral with a sliding window of 16, which llama.cpp's llama graph does not apply (the GGUF's "
        "context_length is the window); the logits after every position up to the window and past it; a byte-fallback "
        "BPE trained by tokenizers whose 256 <0xXX> tokens are also special added tokens (llama.cpp must type them "
        "BYTE, 6, to give back text such as déjà)",
    },
]


def write_tokenizer_2(spec, folder, spm_models, first_tokenizer):
    kind = spec["tokenizer"]
    if kind == "gpt2-bos":
        # The first set's tokenizer, with <s> before every text, as llama-gqa's.
        save_tokenizer(first_tokenizer(), folder, True)
    elif callable(kind):
        kind(folder)
    elif kind[0] == "llama-spm":
        tokenizer_llama_spm(spm_models(kind[1]), folder, kind[2])
    elif kind[0] == "llama-spm-phi3":
        tokenizer_llama_spm(
            spm_models(kind[1]),
            folder,
            kind[2],
            add_bos=False,
            config_extra={"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
            extra_tokens=PHI3_ADDED,
        )
    elif kind[0] == "gemma":
        tokenizer_gemma(spm_models(kind[1]), folder)
    else:
        raise ValueError(kind)


def reshard_experts(folder, shards):
    """Rewrites a sharded model so that every layer's experts are spread over the shards (save_pretrained keeps a
    layer's experts together): expert x of layer L goes to shard (x + L) % shards, the other tensors of layer L to
    shard (L + 1) % shards, the embeddings to the first, lm_head and the final norm to the last. A converter must
    then gather each stack of experts from several files."""
    index_path = os.path.join(folder, "model.safetensors.index.json")
    with open(index_path) as f:
        index = json.load(f)
    tensors = {}
    for name in sorted(set(index["weight_map"].values())):
        tensors.update(load_file(os.path.join(folder, name)))
        os.remove(os.path.join(folder, name))
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    parts = [{} for _ in range(shards)]
    for key, tensor in tensors.items():
        fields = key.split(".")
        if "experts" in fields:
            shard = (int(fields[fields.index("experts") + 1]) + int(fields[2])) % shards
        elif fields[:2] == ["model", "layers"]:
            shard = (int(fields[2]) + 1) % shards
        elif key == "model.embed_tokens.weight":
            shard = 0
        else:
            shard = shards - 1
        parts[shard][key] = tensor
    for name, part in zip(names, parts):
        save_file(part, os.path.join(folder, name), metadata={"format": "pt"})
    index["weight_map"] = {key: names[i] for i, part in enumerate(parts) for key in part}
    index["weight_map"] = dict(sorted(index["weight_map"].items()))
    with open(index_path, "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)
        f.write("\n")


def save_model_2(spec, folder):
    torch.manual_seed(spec["seed"])
    config = spec["config"]
    config._attn_implementation = "eager"
    model = spec["class"](config).eval()
    randomize_2(model, spec["seed"], spec)
    model = model.to(spec["dtype"])
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    shards = spec.get("shards", 1)
    # A shard limit of a little over 1/shards of the model: save_pretrained then writes `shards` shards.
    # (One shard: a limit no model here reaches; the parameters' size leaves out buffers that are saved, such as
    # DeepSeek-V3's e_score_correction_bias.)
    model.save_pretrained(folder, max_shard_size="1GB" if shards == 1 else int(size / shards * 1.1))
    written = glob.glob(os.path.join(folder, "*.safetensors"))
    assert len(written) == shards, written
    if spec.get("reshard"):
        reshard_experts(folder, shards)
    if spec.get("transformers4"):
        to_transformers4(folder)
        if spec["transformers4"] == "type":
            # The key of transformers before 4.45: rope_scaling {"type": "linear", "factor": ...}.
            edit_config(folder, lambda c: c["rope_scaling"].update(type=c["rope_scaling"].pop("rope_type")))
    if spec["name"] == "phi3":
        # Phi-3's own form: original_max_position_embeddings at the top and not in rope_scaling, type longrope.
        def phi3_form(c):
            c["rope_scaling"] = {"long_factor": PHI3_LONG, "short_factor": PHI3_SHORT, "type": "longrope"}

        edit_config(folder, phi3_form)
    if spec.get("gpt2"):
        # GPT-2's config.json on the Hub has n_ctx (llama.cpp's converter reads its context length from it).
        edit_config(folder, lambda c: c.update(n_ctx=c["n_positions"]))
    if spec.get("hub_form"):
        hub_form(folder)
    if "drop_keys" in spec:
        # Keys transformers 5 adds that the Hub's config.json does not have.
        edit_config(folder, lambda c: [c.pop(key) for key in spec["drop_keys"]])
    if "hub_keys" in spec:
        # Keys the Hub's config.json has that transformers' config class does not write.
        edit_config(folder, lambda c: c.update(spec["hub_keys"]))
    if "model_max_length" in spec:
        # Cohere's config.json on the Hub names the trained context model_max_length (llama.cpp's converter prefers it).
        edit_config(folder, lambda c: c.update(model_max_length=spec["model_max_length"]))
    if spec.get("after_save"):
        spec["after_save"](folder)


def check_tokenizer(spec, folder, ref):
    """The reference tokenization is the Hugging Face tokenizer's as a user loads the folder; it must also be what
    the folder's own files say: tokenizer.json run by `tokenizers`, and tokenizer.model run by sentencepiece."""
    plain = ref["sentence_ids_without_special"]
    if os.path.exists(os.path.join(folder, "tokenizer.json")):
        raw = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        assert raw.encode(SENTENCE_2, add_special_tokens=False).ids == plain, spec["name"]
    if os.path.exists(os.path.join(folder, "tokenizer.model")):
        processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
        assert processor.encode(SENTENCE_2) == plain, (spec["name"], processor.encode(SENTENCE_2), plain)
    bos = spec["bos"]
    assert ref["sentence_ids"] == ([bos] if bos is not None else []) + plain, (spec["name"], ref["sentence_ids"][:3])


def make_2(spec, spm_models, first_tokenizer):
    folder = os.path.join(OUT, spec["name"])
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    save_model_2(spec, folder)
    write_tokenizer_2(spec, folder, spm_models, first_tokenizer)
    pool = ordinary_ids(folder, spec["config"].vocab_size)
    if "prefixes" in spec:
        [sequence] = sequences_2(spec["seed"], [max(spec["prefixes"])], pool, spec["bos"])
        cases_ids = [sequence[:n] for n in spec["prefixes"]]
    else:
        cases_ids = sequences_2(spec["seed"], spec["lengths"], pool, spec["bos"])
    fields = {"exercises": spec["exercises"]}
    if spec.get("byte_text"):
        ids = AutoTokenizer.from_pretrained(folder)(BYTE_TEXT, add_special_tokens=False)["input_ids"]
        # é and à are not in the vocabulary: they are spelled in bytes, <0xC3> <0xA9> and <0xC3> <0xA0>.
        assert [3 + 0xC3, 3 + 0xA9] == [i for i in ids if 3 <= i < 259][:2], ids
        fields.update(byte_text=BYTE_TEXT, byte_text_ids=ids)
    ref = reference(spec, folder, cases_ids, SENTENCE_2, {"sentencepiece": sentencepiece.__version__}, **fields)
    check_tokenizer(spec, folder, ref)
    if spec.get("window_ignored"):
        window_effect(spec, folder, ref)
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    return ref


def window_effect(spec, folder, ref):
    """The sliding window must change the logits past it clearly (else a GGUF that ignores it would pass), and
    nowhere up to it: the same model without the window, on the same cases."""
    window = spec["config"].sliding_window
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager", sliding_window=None).eval()
    moved = []
    with torch.no_grad():
        for case in ref["cases"]:
            logits = model(torch.tensor([case["ids"]])).logits[0, -1].numpy()
            p = np.exp(logits - logits.max())
            q = np.exp(np.array(case["logits"]) - max(case["logits"]))
            moved.append((len(case["ids"]), float(np.abs(p / p.sum() - q / q.sum()).max())))
    assert all(m < 1e-5 for n, m in moved if n <= window), moved
    past = max(m for n, m in moved if n > window)
    assert past > 0.1, moved
    print(f"{spec['name']}: without the window, |p - p_ref| up to {past:.3f} past position {window}")


# ---------------------------------------------------------------------------------------------------------------
# The models of the third set (GGUF issue 43): SmolLM3, Granite 3, OLMo 2, GPT-NeoX, Phi-2, StableLM 2, Falcon (the
# new decoder), Command-R, Qwen2-MoE, DeepSeek-V2-Lite, DeepSeek-V3, GPT-OSS and Llama 4 (text), each with a byte-level
# BPE of its family's pre-tokenizer (tokenizer.json as the family ships it, trained here on the licence texts) and
# its config.json as the Hub has it (transformers 4's form: rope_theta at the top) but for GPT-NeoX, kept as
# transformers 5 saves it (partial_rotary_factor in rope_parameters, where llama.cpp's converter looks for
# rotary_pct). tokenizer_config.json names the family's tokenizer class; for OLMo 2, StableLM and DeepSeek that class
# is not what their tokenizer.json holds (GPT2Tokenizer's regex, LlamaTokenizerFast's SentencePiece), and transformers
# 5 reads their tokenizer.json as it is (TokenizersBackend), as a converter must.
# ---------------------------------------------------------------------------------------------------------------
import importlib.util  # noqa: E402

from transformers import (  # noqa: E402
    CohereConfig,
    CohereForCausalLM,
    DeepseekV2Config,
    DeepseekV2ForCausalLM,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    FalconConfig,
    FalconForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    GptOssConfig,
    GptOssForCausalLM,
    GraniteConfig,
    GraniteForCausalLM,
    Llama4ForCausalLM,
    Llama4TextConfig,
    Olmo2Config,
    Olmo2ForCausalLM,
    PhiConfig,
    PhiForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    SmolLM3Config,
    SmolLM3ForCausalLM,
    StableLmConfig,
    StableLmForCausalLM,
)

# The split regexes of the families' tokenizer.json files (OpenAI's o200k as gpt-oss and Llama 4 ship it; DeepSeek's).
O200K_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
DEEPSEEK3_REGEXES = [
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
]
# Escaped: some of the ranges' ends have canonical decompositions that an editor may normalize away.
DEEPSEEK_LLM_REGEXES = [
    "[\u000d\u000a]",
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
]


def split(regex):
    return pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False)


def byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=use_regex)


# Each family's pre-tokenizer, as its tokenizer.json has it.
PRE_TOKENIZERS_3 = {
    "gpt-2": byte_level(True),
    "llama3": pre_tokenizers.Sequence([split(LLAMA3_REGEX), byte_level(False)]),
    "qwen2": pre_tokenizers.Sequence([split(QWEN2_REGEX), byte_level(False)]),
    "digits": pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level(True)]),
    "falcon": pre_tokenizers.Sequence(
        [
            pre_tokenizers.Punctuation(behavior="contiguous"),
            byte_level(True),
            pre_tokenizers.Digits(individual_digits=False),
            split("[0-9][0-9][0-9]"),
        ]
    ),
    "o200k": pre_tokenizers.Sequence([split(O200K_REGEX), byte_level(False)]),
    "deepseek3": pre_tokenizers.Sequence([*map(split, DEEPSEEK3_REGEXES), byte_level(False)]),
    "deepseek-llm": pre_tokenizers.Sequence(
        [*map(split, DEEPSEEK_LLM_REGEXES), pre_tokenizers.Digits(individual_digits=True), byte_level(False)]
    ),
}

ROLE_TEMPLATE = (
    "{% for message in messages %}{{ start }}{{ message['role'] }}{{ middle }}{{ message['content'] }}{{ end }}{% endfor %}"
)


def chat_template(start, middle, end):
    """A chat template in a family's markers (each a literal in the template)."""
    return ROLE_TEMPLATE.replace("{{ start }}", start).replace("{{ middle }}", middle).replace("{{ end }}", end)


def tokenizer_family(pre, first, last, config, bos=None, normalizer=None, added=(), train_pre=None):
    """A maker of a family's tokenizer: a byte-level BPE of VOCAB_SIZE tokens with the pre-tokenizer `pre`
    (PRE_TOKENIZERS_3), `first` special tokens at ids 0.., `last` ones at the end, then `added` ordinary added
    tokens; `bos` put before every text by the post-processor's template (add_bos_token says so too);
    tokenizer_config.json is `config` with the added tokens, add_bos_token and add_eos_token."""

    def write(folder):
        trained = train_byte_level(
            VOCAB_SIZE - len(added), PRE_TOKENIZERS_3[pre], first, last, train_pre=train_pre and PRE_TOKENIZERS_3[train_pre]
        )
        trained.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
        if normalizer:
            trained.normalizer = normalizer
        if bos:
            special = [(bos, trained.token_to_id(bos))]
            trained.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=special)
        else:
            trained.post_processor = processors.ByteLevel(trim_offsets=False)
        trained.save(os.path.join(folder, "tokenizer.json"))
        tokenizer_config = {
            "add_bos_token": bos is not None,
            "add_eos_token": False,
            "added_tokens_decoder": added_tokens_decoder(json.loads(trained.to_str())),
            "bos_token": bos,
            "model_max_length": 256,
            **config,
        }
        write_json(os.path.join(folder, "tokenizer_config.json"), dict(sorted(tokenizer_config.items())))

    return write


def hub_form(folder):
    """config.json in the form of the Hub's checkpoints, saved by transformers 4: rope_theta and the partial rotary
    factor at the top level, rope_scaling null or the scaling dict."""

    def change(config):
        rope = config.pop("rope_parameters")
        config["rope_theta"] = rope.pop("rope_theta")
        if "partial_rotary_factor" in rope:
            config["partial_rotary_factor"] = rope.pop("partial_rotary_factor")
        config["rope_scaling"] = rope if rope.get("rope_type", "default") != "default" else None

    edit_config(folder, change)


def mxfp4_experts(folder):
    """gpt-oss as OpenAI ships it: each layer's experts (gate_up_proj [E, in, 2 ff] and down_proj [E, ff, in], in
    GptOssExperts' orientation) stored as MXFP4 `_blocks` U8 [E, out, in / 32, 16] and `_scales` U8 [E, out, in / 32]
    (E8M0), the scale of each block of 32 the power of two that brings its largest value to E2M1's 6 or below, each
    value its nearest E2M1 code (scripts/make-quantized-models.py's e2m1_codes); config.json with openai/gpt-oss-20b's
    quantization block."""
    spec = importlib.util.spec_from_file_location("make_quantized_models", os.path.join(ROOT, "scripts", "make-quantized-models.py"))
    quantized = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quantized)
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    for name in [n for n in tensors if n.endswith((".mlp.experts.gate_up_proj", ".mlp.experts.down_proj"))]:
        w = tensors.pop(name).float().transpose(1, 2).contiguous()
        experts, rows, cols = w.shape
        blocks = w.reshape(experts, rows, cols // 32, 32)
        exponent = torch.ceil(torch.log2(blocks.abs().amax(dim=-1).clamp(min=2.0**-120) / 6.0)).to(torch.int64)
        scales = (exponent + 127).clamp(1, 254)
        codes = quantized.e2m1_codes(blocks / torch.pow(2.0, (scales - 127).float())[..., None]).to(torch.uint8)
        pairs = codes.reshape(experts, rows, cols // 32, 16, 2)
        tensors[f"{name}_blocks"] = (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous()
        tensors[f"{name}_scales"] = scales.to(torch.uint8).contiguous()
    save_file(dict(sorted(tensors.items())), path, metadata={"format": "pt"})
    quantization = {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4",
    }
    edit_config(folder, lambda c: c.update(quantization_config=quantization))


def dequantized_gpt_oss(folder):
    """The float32 gpt-oss of the folder as transformers computes it on a CPU: its MXFP4 experts dequantized by
    transformers' own convert_moe_packed_tensors (to bfloat16, exact: E2M1 times a power of two), in the plain model
    of config.json without its quantization block."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    tensors = load_file(os.path.join(folder, "model.safetensors"))
    for name in [n.removesuffix("_blocks") for n in tensors if n.endswith("_blocks")]:
        tensors[name] = convert_moe_packed_tensors(tensors.pop(f"{name}_blocks"), tensors.pop(f"{name}_scales"), dtype=torch.bfloat16)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    del config["quantization_config"]
    plain = GptOssConfig.from_dict(config)
    plain._attn_implementation = "eager"
    model = GptOssForCausalLM(plain).eval()
    model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=True)
    return model.float()


def small3(**kwargs):
    """The hyperparameters the third set shares unless a model says otherwise."""
    merged = small(**{"bos_token_id": None, "eos_token_id": None, "pad_token_id": None, **kwargs})
    # `...` leaves out a key the config class does not take (Falcon has no intermediate_size, Phi-2 no GQA).
    return {k: v for k, v in merged.items() if v is not ...}


LLAMA3_BPE = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]
GRANITE_SPECIALS = ["<|end_of_text|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<|start_of_role|>", "<|end_of_role|>"]
NEOX_SPECIALS = ["<|endoftext|>", "<|padding|>"]
FALCON_SPECIALS = [">>TITLE<<", ">>ABSTRACT<<", ">>INTRODUCTION<<", ">>SUMMARY<<", "<|endoftext|>"]
COHERE_SPECIALS = ["<PAD>", "<UNK>", "<CLS>", "<SEP>", "<MASK_TOKEN>", "<BOS_TOKEN>", "<EOS_TOKEN>", "<EOP_TOKEN>"]
COHERE_TURNS = ["<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>"]
DEEPSEEK_SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
HARMONY_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>"]
LLAMA4_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|header_start|>", "<|header_end|>", "<|eot|>"]
# Phi-2's tokenizer (CodeGen's) adds runs of spaces as ordinary tokens after <|endoftext|>.
PHI2_SPACES = [" " * n for n in (4, 3, 2)]
last_id = lambda specials, name: VOCAB_SIZE - len(specials) + specials.index(name)  # noqa: E731

def deepseek(name, seed, model_class, config_class, routing, pre, template, hub_keys, gain, exercises):
    """DeepSeek-V2-Lite's or V3's test model: multi-head latent attention, the first layer dense, then 4 routed experts
    (2 used, `routing` says how) and a shared one; the family's tokenizer with its pre-tokenizer `pre`."""
    return {
        "name": name,
        "seed": seed,
        "class": model_class,
        "config": config_class(
            **small3(num_key_value_heads=4, eos_token_id=1, bos_token_id=0),
            moe_intermediate_size=32,
            n_routed_experts=4,
            n_shared_experts=1,
            num_experts_per_tok=2,
            first_k_dense_replace=1,
            kv_lora_rank=32,
            qk_nope_head_dim=16,
            qk_rope_head_dim=8,
            v_head_dim=16,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            **routing,
        ),
        "tokenizer": tokenizer_family(
            pre,
            DEEPSEEK_SPECIALS,
            [],
            {
                "eos_token": "<｜end▁of▁sentence｜>",
                "chat_template": template,
                "clean_up_tokenization_spaces": False,
                "legacy": True,
                "tokenizer_class": "LlamaTokenizerFast",
            },
            bos="<｜begin▁of▁sentence｜>",
        ),
        "bos": 0,
        "hub_form": True,
        "drop_keys": ["head_dim", "qk_head_dim"],
        "hub_keys": hub_keys,
        "gain": gain,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": exercises,
    }


MODELS_3 = [
    {
        "name": "smollm3",
        "seed": 31,
        "class": SmolLM3ForCausalLM,
        "config": SmolLM3Config(
            **small3(num_hidden_layers=4, tie_word_embeddings=True, eos_token_id=last_id(LLAMA3_BPE, "<|im_end|>")),
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 5000000.0},
        ),
        "tokenizer": tokenizer_family(
            "llama3",
            [],
            LLAMA3_BPE,
            {"eos_token": "<|im_end|>", "chat_template": chat_template("<|im_start|>", "\n", "<|im_end|>\n"), "tokenizer_class": "PreTrainedTokenizerFast"},
        ),
        "bos": None,
        "hub_form": True,
        # Queries and keys smaller than GAIN_2's: with 1.5, Q8_0 moved a logit by 1.19 against another (0.75 allowed).
        "gain": {"q_proj": 1.0, "k_proj": 1.0},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "SmolLM3: llama's layout with Q/K permutation, 4 layers of which the 4th has no RoPE (no_rope_layers, "
        "llama.cpp's fixed step of 4), tied embeddings; Llama 3's split regex (llama-bpe), no BOS",
    },
    {
        "name": "granite",
        "seed": 32,
        "class": GraniteForCausalLM,
        "config": GraniteConfig(
            **small3(tie_word_embeddings=True, bos_token_id=0, eos_token_id=0),
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            # Granite 3's embeddings are small and scaled up by 12; these random ones are scaled by 4 to the size of
            # what attention and the FFN add (with 12 they drowned it: no step of the conversion showed), and the
            # logits doubled (logits_scaling 0.5) so that the next token stands out.
            embedding_multiplier=4.0,
            residual_multiplier=0.5,
            attention_multiplier=0.125,
            logits_scaling=0.5,
        ),
        "tokenizer": tokenizer_family(
            "digits",
            GRANITE_SPECIALS,
            [],
            {
                "eos_token": "<|end_of_text|>",
                "pad_token": "<|end_of_text|>",
                "unk_token": "<|end_of_text|>",
                "chat_template": chat_template("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>\n"),
                "clean_up_tokenization_spaces": True,
                "tokenizer_class": "GPT2Tokenizer",
            },
        ),
        "bos": None,
        "hub_form": True,
        "gain": {"lm_head": 0.5},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Granite 3: llama's layout with Q/K permutation and the four multipliers (embedding 4, residual "
        "0.5, attention 0.125 instead of 1/sqrt(16), logits divided by 0.5), tied embeddings; StarCoder's pre-tokenizer "
        "(digits one by one, then GPT-2's regex), no BOS",
    },
    {
        "name": "olmo2",
        "seed": 33,
        "class": Olmo2ForCausalLM,
        "config": Olmo2Config(
            **small3(eos_token_id=last_id(["<|endoftext|>", "<|pad|>"], "<|endoftext|>"), pad_token_id=VOCAB_SIZE - 1),
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        ),
        "tokenizer": tokenizer_family(
            "llama3",
            [],
            ["<|endoftext|>", "<|pad|>"],
            {
                "eos_token": "<|endoftext|>",
                "pad_token": "<|pad|>",
                "unk_token": "<|endoftext|>",
                "chat_template": chat_template("<|", "|>\n", "\n"),
                "clean_up_tokenization_spaces": False,
                "tokenizer_class": "GPT2Tokenizer",
            },
        ),
        "bos": None,
        "hub_form": True,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.float32,
        "exercises": "OLMo 2: norms after attention and after the FFN (post_attention_norm, post_ffw_norm) and none "
        "before, q/k RMS norms over all heads, no Q/K permutation (NeoX RoPE); cl100k's split regex (Llama 3's: "
        "llama-bpe) under tokenizer_class GPT2Tokenizer, which transformers 5 rebuilds with GPT-2's regex; float32",
    },
    {
        "name": "gptneox",
        "seed": 34,
        "class": GPTNeoXForCausalLM,
        "config": GPTNeoXConfig(
            **small3(intermediate_size=256, num_key_value_heads=..., eos_token_id=0, bos_token_id=0),
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
            use_parallel_residual=True,
            layer_norm_eps=1e-5,
            hidden_act="gelu",
        ),
        "tokenizer": tokenizer_family(
            "gpt-2",
            NEOX_SPECIALS,
            [],
            {
                "eos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "clean_up_tokenization_spaces": True,
                "tokenizer_class": "GPTNeoXTokenizer",
            },
            normalizer=normalizers.NFC(),
        ),
        "bos": None,
        "gain": {"query_key_value": 1.2},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.float16,
        "exercises": "GPT-NeoX (Pythia): fused query_key_value with q, k, v interleaved per head (llama.cpp wants all "
        "q rows, then k, then v) and its bias, LayerNorms with biases, parallel residual, partial rotary 0.25 written by "
        "transformers 5 as rope_parameters.partial_rotary_factor; GPT-2's pre-tokenizer with NFC; float16",
    },
    {
        "name": "phi2",
        "seed": 35,
        "class": PhiForCausalLM,
        "config": PhiConfig(
            **small3(intermediate_size=256, num_key_value_heads=..., eos_token_id=last_id(["<|endoftext|>"], "<|endoftext|>") - len(PHI2_SPACES)),
            partial_rotary_factor=0.4,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.4},
            layer_norm_eps=1e-5,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
        ),
        "tokenizer": tokenizer_family(
            "gpt-2",
            [],
            ["<|endoftext|>"],
            {
                "eos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "clean_up_tokenization_spaces": True,
                "tokenizer_class": "CodeGenTokenizer",
            },
            added=PHI2_SPACES,
        ),
        "bos": None,
        "hub_form": True,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.float16,
        "exercises": "Phi-2: attention and MLP in parallel from one LayerNorm, q/k/v/dense and fc1/fc2 with biases, "
        "lm_head with a bias, partial rotary 0.4 of heads of 16 (6 dimensions: int(0.4 * 64) // 4); CodeGen's "
        "tokenizer (GPT-2's regex) with runs of 4, 3 and 2 spaces as ordinary added tokens; float16",
    },
    {
        "name": "stablelm",
        "seed": 36,
        "class": StableLmForCausalLM,
        "config": StableLmConfig(
            **small3(eos_token_id=last_id(QWEN_SPECIALS, "<|endoftext|>")),
            partial_rotary_factor=0.25,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
            layer_norm_eps=1e-5,
            use_qkv_bias=True,
            qk_layernorm=True,
            use_parallel_residual=True,
        ),
        "tokenizer": tokenizer_family(
            "qwen2",
            [],
            QWEN_SPECIALS,
            {
                "eos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "chat_template": QWEN_TEMPLATE,
                "clean_up_tokenization_spaces": True,
                "tokenizer_class": "GPT2TokenizerFast",
            },
            train_pre="llama3",
        ),
        "bos": None,
        "hub_form": True,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "StableLM 2 (12B's features): per-head q/k LayerNorms stored one tensor per head (stacked into "
        "attn_q_norm [heads, head_dim]), q/k/v biases, parallel residual (no post-attention norm), partial rotary 0.25, "
        "LayerNorms with biases; Arcade100k's split regex (Qwen2's) under tokenizer_class GPT2TokenizerFast",
    },
    {
        "name": "falcon",
        "seed": 37,
        "class": FalconForCausalLM,
        "config": FalconConfig(
            **small3(
                num_key_value_heads=..., intermediate_size=..., max_position_embeddings=2048, eos_token_id=FALCON_SPECIALS.index("<|endoftext|>")
            ),
            num_kv_heads=2,
            new_decoder_architecture=True,
            parallel_attn=True,
            bias=False,
            alibi=False,
            layer_norm_epsilon=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        "tokenizer": tokenizer_family(
            "falcon",
            FALCON_SPECIALS,
            [],
            {"eos_token": "<|endoftext|>", "clean_up_tokenization_spaces": True, "tokenizer_class": "PreTrainedTokenizerFast"},
        ),
        "bos": None,
        "hub_form": True,
        "gain": {"query_key_value": 1.2},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Falcon's new decoder (40B/180B): ln_attn and ln_mlp, fused query_key_value of 2 KV groups each "
        "[2 q heads, k, v] (llama.cpp wants all q, then k, then v), parallel attention and MLP, no biases; Falcon's "
        "pre-tokenizer (punctuation runs, GPT-2's regex, digits in threes)",
    },
    {
        "name": "command-r",
        "seed": 38,
        "class": CohereForCausalLM,
        "config": CohereConfig(
            **small3(tie_word_embeddings=True, bos_token_id=5, eos_token_id=COHERE_SPECIALS.index("<EOS_TOKEN>"), pad_token_id=0),
            layer_norm_eps=1e-5,
            logit_scale=0.25,
            # Command R+'s per-head q/k norms: llama.cpp reads them only from a model of 64 layers or more.
            use_qk_norm=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        "tokenizer": tokenizer_family(
            "digits",
            COHERE_SPECIALS + COHERE_TURNS,
            [],
            {
                "eos_token": "<|END_OF_TURN_TOKEN|>",
                "pad_token": "<PAD>",
                "unk_token": "<UNK>",
                "chat_template": chat_template("<|START_OF_TURN_TOKEN|>", "", "<|END_OF_TURN_TOKEN|>"),
                "clean_up_tokenization_spaces": False,
                "tokenizer_class": "CohereTokenizer",
            },
            bos="<BOS_TOKEN>",
            normalizer=normalizers.NFC(),
        ),
        "bos": COHERE_SPECIALS.index("<BOS_TOKEN>"),
        "hub_form": True,
        "model_max_length": 256,
        "gain": {"lm_head": 4.0},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.float16,
        "exercises": "Command-R (Cohere): attention and MLP in parallel from one LayerNorm without bias, logits times "
        "0.25, tied embeddings, the context from model_max_length; Cohere's pre-tokenizer (digits one by one, then "
        "GPT-2's regex) with NFC, <BOS_TOKEN> added",
    },
    {
        "name": "qwen2moe",
        "seed": 39,
        "class": Qwen2MoeForCausalLM,
        "config": Qwen2MoeConfig(
            **small3(eos_token_id=last_id(QWEN_SPECIALS, "<|im_end|>")),
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=96,
            norm_topk_prob=False,
            decoder_sparse_step=1,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            use_sliding_window=False,
        ),
        "tokenizer": tokenizer_qwen,
        "bos": None,
        "hub_form": True,
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Qwen2-MoE: 4 experts, 2 used, weights not renormalized; a shared expert of 96 behind a sigmoid gate "
        "(ffn_*_shexp, ffn_gate_inp_shexp); q/k/v biases; Qwen2's tokenizer",
    },
    deepseek(
        "deepseek-v2-lite",
        40,
        DeepseekV2ForCausalLM,
        DeepseekV2Config,
        dict(topk_method="greedy", n_group=1, topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=False, q_lora_rank=None),
        "deepseek-llm",
        chat_template("", ": ", "\n\n"),
        {"scoring_func": "softmax"},
        {"q_proj": 1.5, "kv_b_proj": 1.5},
        "DeepSeek-V2-Lite's shape: multi-head latent attention without q_lora_rank (q_proj, kv_a_proj_with_mqa, "
        "kv_b_proj split into attn_k_b, transposed, and attn_v_b), 2 layers (llama.cpp tells Lite by 26 or 27), the first "
        "dense, then 4 routed experts (2 used, softmax, not renormalized) and a shared one; DeepSeek-LLM's pre-tokenizer "
        "under tokenizer_class LlamaTokenizerFast, which transformers 5 rebuilds as SentencePiece-like",
    ),
    deepseek(
        "deepseek-v3",
        41,
        DeepseekV3ForCausalLM,
        DeepseekV3Config,
        dict(n_group=2, topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True, q_lora_rank=32),
        "deepseek3",
        chat_template("<｜", "｜>", ""),
        {"scoring_func": "sigmoid", "topk_method": "noaux_tc"},
        {"q_b_proj": 1.5, "kv_b_proj": 1.5},
        "DeepSeek-V3: multi-head latent attention with q_lora_rank (q_a_proj, q_a_layernorm, q_b_proj), "
        "kv_b_proj split; the first layer dense, then 4 routed experts in 2 groups (1 group kept), 2 used, sigmoid scores "
        "with e_score_correction_bias, renormalized, times 2.5, and a shared expert; DeepSeek-V3's pre-tokenizer under "
        "tokenizer_class LlamaTokenizerFast",
    ),
    {
        "name": "gpt-oss",
        "seed": 42,
        "class": GptOssForCausalLM,
        "config": GptOssConfig(
            **small3(intermediate_size=64, head_dim=16, eos_token_id=last_id(HARMONY_SPECIALS, "<|return|>")),
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
            rms_norm_eps=1e-5,
            # gpt-oss's own RoPE, which GptOssConfig also assumes for a config.json without one.
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 150000.0,
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 4096,
            },
        ),
        "tokenizer": tokenizer_family(
            "o200k",
            [],
            HARMONY_SPECIALS,
            {
                "eos_token": "<|return|>",
                "pad_token": "<|endoftext|>",
                "chat_template": chat_template("<|start|>", "<|message|>", "<|end|>"),
                "clean_up_tokenization_spaces": False,
                "tokenizer_class": "PreTrainedTokenizerFast",
            },
        ),
        "bos": None,
        "hub_form": True,
        "after_save": mxfp4_experts,
        "load_model": dequantized_gpt_oss,
        "experts_in_out": True,
        # A flatter output layer than GAIN_2's: with 3.0 Q8_0 (on top of MXFP4) moved a logit by 0.93 (0.75 allowed).
        "gain": {"router.weight": 4.0, "lm_head": 2.0},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "GPT-OSS: MXFP4 experts (_blocks and _scales, gate and up interleaved by rows) with biases, a "
        "router with a bias, attention sinks, q/k/v/o biases, a sliding window of 8 on layer 0 (layer 1 global), "
        "gpt-oss's YaRN (factor 32 over 4096 positions, not truncated), bfloat16 elsewhere; o200k's split regex (gpt-4o)",
    },
    {
        "name": "llama4",
        "seed": 43,
        "class": Llama4ForCausalLM,
        "config": Llama4TextConfig(
            **small3(
                intermediate_size=32,
                num_hidden_layers=4,
                head_dim=16,
                bos_token_id=last_id(LLAMA4_SPECIALS, "<|begin_of_text|>"),
                eos_token_id=last_id(LLAMA4_SPECIALS, "<|eot|>"),
            ),
            intermediate_size_mlp=128,
            num_local_experts=4,
            num_experts_per_tok=1,
            interleave_moe_layer_step=2,
            use_qk_norm=True,
            attention_chunk_size=8192,
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        ),
        "tokenizer": tokenizer_family(
            "o200k",
            [],
            LLAMA4_SPECIALS,
            {
                "eos_token": "<|eot|>",
                "chat_template": chat_template("<|header_start|>", "<|header_end|>\n\n", "<|eot|>"),
                "clean_up_tokenization_spaces": False,
                "tokenizer_class": "PreTrainedTokenizerFast",
            },
            bos="<|begin_of_text|>",
        ),
        "bos": last_id(LLAMA4_SPECIALS, "<|begin_of_text|>"),
        "hub_form": True,
        "experts_in_out": True,
        "gain": {"router.weight": 4.0},
        "lengths": LONG_SEQUENCES,
        "dtype": torch.bfloat16,
        "exercises": "Llama 4 (text): MoE on every 2nd layer (4 experts, 1 used, sigmoid, fused gate_up_proj [E, in, "
        "2 ff] split and transposed) with a shared expert, dense FFN of 128 elsewhere, chunked attention on 3 layers "
        "of 4 and the 4th without RoPE, L2 norms of q and k; o200k's split regex, <|begin_of_text|> added",
    },
]


SPM_VOCAB = {SPM_LLAMA: (500, "llama"), SPM_LLAMA_FULL: (512, "llama"), SPM_GEMMA: (512, "gemma")}


def main():
    """python3 scripts/make-gguf-models.py [--out FOLDER] [NAME ...]: makes the named models (all without a name)
    under test/fixtures/gguf/ (or FOLDER, to check that a model comes out as committed)."""
    global OUT
    args = sys.argv[1:]
    if "--out" in args:
        at = args.index("--out")
        OUT = os.path.abspath(args[at + 1])
        del args[at : at + 2]
    known = [spec["name"] for spec in MODELS + MODELS_2 + MODELS_3]
    unknown = [a for a in args if a not in known]
    if unknown:
        sys.exit(f"unknown model {unknown}; the models are {', '.join(known)}")
    wanted = set(args or known)
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
        f"sentencepiece {sentencepiece.__version__}"
    )
    cache = {}

    def first_tokenizer():
        if "bpe" not in cache:
            cache["bpe"] = train_tokenizer()
        return cache["bpe"]

    def spm_models(key):
        if key not in cache:
            cache[key] = train_sentencepiece(*SPM_VOCAB[key])
        return cache[key]

    for seed, spec in enumerate(MODELS, start=1):
        if spec["name"] not in wanted:
            continue
        trained = first_tokenizer()
        folder = save_model(spec, seed)
        save_tokenizer(trained, folder, spec["add_bos"])
        ref = reference(spec, folder, sequences(seed, spec["add_bos"]), SENTENCE, {})
        with open(os.path.join(folder, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
        spreads = ", ".join(f"top1 {c['spread']['top1']:.3f}" for c in ref["cases"])
        print(f"{spec['name']}: {sorted(os.listdir(folder))}; {spreads}; sentence {len(ref['sentence_ids'])} ids")
    for spec in MODELS_2 + MODELS_3:
        if spec["name"] not in wanted:
            continue
        ref = make_2(spec, spm_models, first_tokenizer)
        folder = os.path.join(OUT, spec["name"])
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
        spreads = ", ".join(f"top1 {c['spread']['top1']:.3f}" for c in ref["cases"])
        print(f"{spec['name']}: {sorted(os.listdir(folder))} {size:,} bytes; {spreads}; sentence {len(ref['sentence_ids'])} ids")


if __name__ == "__main__":
    main()
