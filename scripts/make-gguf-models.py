# Makes test/fixtures/gguf/: tiny random causal language models, as transformers' save_pretrained writes them,
# with the transformers float32 logits that test/gguf-llama.test.ts compares llama.cpp's results against.
# Run once by hand, never in CI; its output is committed. Deterministic for one torch/transformers/tokenizers
# version (the versions used are recorded in each reference.json).
#
#   python3 -m venv /work/venv-gguf && /work/venv-gguf/bin/pip install "torch==2.13.0+cpu" transformers tokenizers
#   /work/venv-gguf/bin/python scripts/make-gguf-models.py
#
# The tokenizer is a real byte-level BPE (GPT-2's pre-tokenizer regex, as llama.cpp's `gpt2` pre-tokenizer
# applies it), trained on the licence texts every Debian machine has in /usr/share/common-licenses, with
# <s> and </s> as special tokens. The models:
#   llama-gqa  LlamaForCausalLM, 4 heads and 2 KV heads, an untied lm_head; float32, an index and 2 shards.
#   mistral    MistralForCausalLM, 8 heads of 8 and 2 KV heads; stored in bfloat16, one file.
#   qwen2      Qwen2ForCausalLM, q/k/v biases, tied embeddings (no lm_head); float32, one file; hidden size
#              48, so rows of 48 are not a multiple of Q8_0's block of 32 while the FFN's down rows (96) are.
# Every weight, norm and bias is drawn at random (GAIN below) so that the next-token distributions are far from
# uniform ("spread" in reference.json): a converter that leaves out llama's Q/K permutation, swaps two tensors or
# drops a bias is then visibly wrong.
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


def reference(spec, folder, seed):
    """The float32 next-token logits of the saved model, read back from its folder as a user loads it."""
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    cases = []
    with torch.no_grad():
        for ids in sequences(seed, spec["add_bos"]):
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
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
        "architecture": spec["class"].__name__,
        "stored_dtype": str(spec["dtype"]).removeprefix("torch."),
        "cases": cases,
        "sentence": SENTENCE,
        "sentence_ids": tokenizer(SENTENCE)["input_ids"],
        "sentence_ids_without_special": tokenizer(SENTENCE, add_special_tokens=False)["input_ids"],
    }


def main():
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}")
    trained = train_tokenizer()
    for seed, spec in enumerate(MODELS, start=1):
        folder = save_model(spec, seed)
        save_tokenizer(trained, folder, spec["add_bos"])
        ref = reference(spec, folder, seed)
        with open(os.path.join(folder, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
        spreads = ", ".join(f"top1 {c['spread']['top1']:.3f}" for c in ref["cases"])
        print(f"{spec['name']}: {sorted(os.listdir(folder))}; {spreads}; sentence {len(ref['sentence_ids'])} ids")


if __name__ == "__main__":
    main()
