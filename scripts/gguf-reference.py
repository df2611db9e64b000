# A second GGUF writer, in Python with gguf-py, kept as the record of how the tolerances of
# test/integration/gguf-llama.test.ts were measured (docs/gguf.md, "How it is tested"). Run by hand; CI never runs it.
#
#   /work/venv-gguf/bin/python scripts/gguf-reference.py OUT_FOLDER [--no-permutation] [--cases N]
#   GGUF_DIR=OUT_FOLDER npx vitest run test/integration/gguf-llama.test.ts   # judges these files instead of the CLI's
#
# For every model under test/fixtures/gguf/ and every dtype it writes OUT_FOLDER/<model>.<dtype>.gguf as
# llama.cpp's convert_hf_to_gguf.py does for these architectures (read from its source, not copied): gguf-py's
# own tensor name map, the Q/K permutation for `llama` (rows of each head reordered from halves to interleaved
# pairs, which is how llama.cpp's RoPE pairs them), 1-D tensors in F32, F16 and BF16 rounded by numpy and
# gguf-py, Q8_0 by gguf-py's quants.quantize with F16 for rows that are not a multiple of 32, the
# hyperparameters from config.json and the tokenizer from tokenizer.json through gguf-py's SpecialVocab.
# --no-permutation leaves the permutation out: the negative control that llama.cpp must then fail.
# --cases N also writes OUT_FOLDER/<model>.cases.json: transformers' float32 logits after N more random id
# sequences (5 to 20 ids), which the test then judges instead of reference.json's four, to measure on more.
#
#   /work/venv-gguf/bin/python scripts/gguf-reference.py --llama-cpp LLAMA_CPP_SOURCE OUT_FOLDER [MODEL ...]
#
# --llama-cpp runs llama.cpp's own convert_hf_to_gguf.py (LLAMA_CPP_SOURCE: the llama.cpp source that node-llama-cpp
# 3.21.1 ships in node_modules/node-llama-cpp/llama/gitRelease.bundle, cloned; its gguf-py) on each model of the
# models (every folder with a reference.json, or those named) at F16 into OUT_FOLDER/<model>.F16.gguf, and
# writes what that file holds to test/fixtures/gguf/<model>/llama-cpp-f16.json: every metadata key with its type
# and value (arrays of more than 16 values as their length, first and last five values and a sha256), every tensor's
# name, type, shape and the sha256 of its data. The converter is run unchanged but for one thing: it names a byte-level BPE's
# pre-tokenizer by hashing the tokens of a test text, which only works for vocabularies it knows, so for the
# fixtures' trained ones it is given the name that their tokenizer.json's split regex has (PRE_TOKENIZERS).
import importlib.util
import json
import os
import sys

import gguf
import numpy as np
import torch
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "test", "fixtures", "gguf")
ARCHITECTURES = {
    "LlamaForCausalLM": gguf.MODEL_ARCH.LLAMA,
    "MistralForCausalLM": gguf.MODEL_ARCH.LLAMA,
    "Qwen2ForCausalLM": gguf.MODEL_ARCH.QWEN2,
}
DTYPES = {
    "F32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "F16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "BF16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "Q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}


def load_tensors(folder):
    """Every tensor of the model as float32 (exact for F32, BF16 and F16 sources)."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for name in files:
        tensors.update({k: v.to(torch.float32).numpy() for k, v in load_file(os.path.join(folder, name)).items()})
    return tensors


def permute(weights, n_head):
    """Each head's rows from [first half, second half] (transformers' rotate_half) to interleaved pairs."""
    rows = weights.shape[0]
    return weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def encode(data, dtype):
    """(bytes-like array, ggml type) as convert_hf_to_gguf.py stores a tensor for the chosen file type."""
    qtype = DTYPES[dtype][0]
    if data.ndim <= 1 or qtype == gguf.GGMLQuantizationType.F32:
        return data.astype(np.float32), gguf.GGMLQuantizationType.F32
    if qtype == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % 32 != 0:
        qtype = gguf.GGMLQuantizationType.F16
    return gguf.quants.quantize(data, qtype), qtype


def add_vocabulary(writer, folder, vocab_size):
    with open(os.path.join(folder, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    by_id = {i: t for t, i in tokenizer["model"]["vocab"].items()}
    added = {t["id"]: t for t in tokenizer["added_tokens"]}
    by_id.update({i: t["content"] for i, t in added.items()})
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("gpt2")
    # The pre-tokenizer is ByteLevel with GPT-2's regex, which llama.cpp knows as "gpt-2".
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(folder, load_merges=True, n_vocab=vocab_size).add_to_gguf(writer, quiet=True)


def write(folder, out, dtype, with_permutation):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    arch = ARCHITECTURES[config["architectures"][0]]
    n_head, n_kv_head, n_layer = config["num_attention_heads"], config["num_key_value_heads"], config["num_hidden_layers"]
    head_dim = config.get("head_dim") or config["hidden_size"] // n_head
    rope = config.get("rope_parameters") or {"rope_theta": config["rope_theta"]}

    writer = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[arch])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(n_layer)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv_head)
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(DTYPES[dtype][1])
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    add_vocabulary(writer, folder, config["vocab_size"])

    names = gguf.get_tensor_name_map(arch, n_layer)
    for hf_name, data in load_tensors(folder).items():
        if arch == gguf.MODEL_ARCH.LLAMA and with_permutation:
            if hf_name.endswith("q_proj.weight"):
                data = permute(data, n_head)
            elif hf_name.endswith("k_proj.weight"):
                data = permute(data, n_kv_head)
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            sys.exit(f"{folder}: no GGUF name for {hf_name}")
        encoded, qtype = encode(data, dtype)
        writer.add_tensor(name, encoded, raw_dtype=qtype)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_cases(folder, out, count):
    """`count` random id sequences (a BOS first where the tokenizer adds one) and transformers' logits after each."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with open(os.path.join(folder, "tokenizer_config.json")) as f:
        add_bos = json.load(f).get("add_bos_token", False)
    rng = np.random.default_rng(1234)
    cases = []
    with torch.no_grad():
        for _ in range(count):
            ids = rng.integers(2, model.config.vocab_size, size=int(rng.integers(5, 21))).tolist()
            if add_bos:
                ids[0] = model.config.bos_token_id
            cases.append({"ids": ids, "logits": model(torch.tensor([ids])).logits[0, -1].tolist()})
    with open(out, "w") as f:
        json.dump({"cases": cases}, f)


def pre_tokenizer_steps(pre):
    """tokenizer.json's pre-tokenizer as a list of steps, each a line: "ByteLevel" (+ " regex" when it splits by
    GPT-2's regex), "Split <regex>" (isolated; CR and LF written as \\r and \\n), "Digits" (+ " individual"),
    "Punctuation <behavior>"; None for any other step or option."""
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    lines = []
    for step in steps:
        kind = step.get("type")
        if kind == "ByteLevel" and not step.get("add_prefix_space"):
            lines.append("ByteLevel regex" if step.get("use_regex", True) else "ByteLevel")
        elif kind == "Split" and step.get("behavior") == "Isolated" and not step.get("invert") and "Regex" in step.get("pattern", {}):
            lines.append("Split " + step["pattern"]["Regex"].replace("\r", "\\r").replace("\n", "\\n"))
        elif kind == "Digits":
            lines.append("Digits individual" if step.get("individual_digits") else "Digits")
        elif kind == "Punctuation":
            lines.append(f"Punctuation {step.get('behavior', 'Isolated')}")
        else:
            return None
    return lines


def pre_tokenizer_signatures():
    """llama.cpp's name of each pre-tokenizer the fixtures' tokenizer.json files have (what src/gguf/tokenizer.ts
    reads too), by its steps; the regexes are scripts/make-gguf-models.py's."""
    spec = importlib.util.spec_from_file_location("make_gguf_models", os.path.join(ROOT, "scripts", "make-gguf-models.py"))
    made = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(made)
    split = lambda *regexes: [f"Split {r}".replace("\r", "\\r").replace("\n", "\\n") for r in regexes]  # noqa: E731
    named = {
        "gpt-2": ["ByteLevel regex"],
        "llama-bpe": [*split(made.LLAMA3_REGEX), "ByteLevel"],
        "qwen2": [*split(made.QWEN2_REGEX), "ByteLevel"],
        # StarCoder's digits then GPT-2's regex: llama.cpp's refact and command-r differ only in cleaning spaces
        # when detokenizing, as tokenizer_config.json's clean_up_tokenization_spaces says (pre_tokenizer_name).
        "refact": ["Digits individual", "ByteLevel regex"],
        "falcon": ["Punctuation Contiguous", "ByteLevel regex", "Digits", *split("[0-9][0-9][0-9]")],
        "gpt-4o": [*split(made.O200K_REGEX), "ByteLevel"],
        "deepseek-v3": [*split(*made.DEEPSEEK3_REGEXES), "ByteLevel"],
        "deepseek-llm": [*split(*made.DEEPSEEK_LLM_REGEXES), "Digits individual", "ByteLevel"],
    }
    return {"\n".join(lines): name for name, lines in named.items()}


# Run in a child Python: llama.cpp's converter, its get_vocab_base_pre falling back to argv[4] for an unknown hash.
CONVERTER = """
import json, os, runpy, sys
source, folder, out, pre = sys.argv[1:5]
sys.path.insert(0, source)
import conversion.base as base
known = base.TextModel.get_vocab_base_pre
def named(self, tokenizer):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        if pre:
            return pre
        raise
base.TextModel.get_vocab_base_pre = named
extra = json.loads(sys.argv[5])
load_hparams = base.ModelBase.load_hparams
base.ModelBase.load_hparams = staticmethod(lambda *args, **kwargs: {**load_hparams(*args, **kwargs), **extra})
import conversion.stablelm as stablelm
stacking = stablelm.StableLMModel.modify_tensors
def modify_tensors(self, data, name, bid):
    returned = yield from stacking(self, data, name, bid)
    if returned is not None:
        yield from returned
stablelm.StableLMModel.modify_tensors = modify_tensors
sys.argv = [os.path.join(source, "convert_hf_to_gguf.py"), folder, "--outfile", out, "--outtype", "f16"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def pre_tokenizer_name(folder):
    """The llama.cpp name of a byte-level BPE's pre-tokenizer, from its steps; "" for another tokenizer."""
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        steps = pre_tokenizer_steps(json.load(f)["pre_tokenizer"] or {})
    name = pre_tokenizer_signatures().get("\n".join(steps or []), "")
    config_path = os.path.join(folder, "tokenizer_config.json")
    if name == "refact" and os.path.exists(config_path):
        with open(config_path) as f:
            if json.load(f).get("clean_up_tokenization_spaces") is False:
                name = "command-r"
    return name


def summary(values, sub_type):
    """An array of more than 16 values as its length, first and last five and a sha256: of each string's UTF-8
    bytes followed by a 0 byte, or of the numbers' little-endian bytes as the GGUF stores them."""
    import hashlib

    if len(values) <= 16:
        return values
    T = gguf.GGUFValueType
    if sub_type == T.STRING:
        digest = hashlib.sha256(b"".join(v.encode("utf-8") + b"\0" for v in values)).hexdigest()
    else:
        dtype = {T.FLOAT32: "<f4", T.INT32: "<i4", T.UINT32: "<u4"}[sub_type]
        digest = hashlib.sha256(np.array(values, dtype=dtype).tobytes()).hexdigest()
    return {"length": len(values), "first": values[:5], "last": values[-5:], "sha256": digest}


# What the converter is given besides the folder, for models it cannot convert as it is: hyperparameters added to
# those it reads (through transformers' AutoConfig, so in transformers 5's form), and a note for the golden.
CONVERTER_HELP = {
    "gptneox": (
        {"rotary_pct": 0.25},
        "The converter was given rotary_pct 0.25 (the Hub's key; rope_parameters.partial_rotary_factor in config.json): "
        "it reads rotary_pct alone, which transformers 5 turns into partial_rotary_factor even from the Hub's config.json, "
        "and fails without it.",
    ),
    "stablelm": (
        {},
        "The converter's StableLMModel.modify_tensors returns the generator of the stacked q/k norms where it should yield "
        "from it, and fails with 'Unprocessed norms'; it was run yielding from what it returns.",
    ),
}


def llama_cpp_golden(source, model, out_folder):
    import hashlib
    import subprocess

    folder = os.path.join(MODELS, model)
    out = os.path.join(out_folder, f"{model}.F16.gguf")
    pre = pre_tokenizer_name(folder)
    extra, _ = CONVERTER_HELP.get(model, ({}, ""))
    run = subprocess.run([sys.executable, "-c", CONVERTER, source, folder, out, pre, json.dumps(extra)], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{model}: llama.cpp's converter failed, no golden:\n{run.stderr[-2000:]}", file=sys.stderr)
        return False
    reader = gguf.GGUFReader(out)
    metadata = []
    for field in reader.fields.values():
        if field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        value = field.contents()
        if kind == gguf.GGUFValueType.ARRAY:
            metadata.append({"key": field.name, "type": f"ARRAY[{field.types[-1].name}]", "value": summary(value, field.types[-1])})
        else:
            metadata.append({"key": field.name, "type": kind.name, "value": value})
    notes = [
        "Written by llama.cpp's convert_hf_to_gguf.py --outtype f16 (node-llama-cpp 3.21.1's llama.cpp source and "
        "its gguf-py), read back with gguf-py's GGUFReader; made by scripts/gguf-reference.py --llama-cpp.",
        "general.name and general.size_label come from the folder's name and the parameter count; llama.cpp does "
        "not use them. Tensor order is the converter's; shapes are in ggml's order (a row's length first); a tensor's "
        "sha256 is of its data as the file stores it.",
    ]
    if model in CONVERTER_HELP:
        notes.append(CONVERTER_HELP[model][1])
    if pre:
        notes.append(
            f"tokenizer.ggml.pre: the converter knows pre-tokenizers only by hashing known vocabularies; it was given "
            f"{pre!r}, the name of tokenizer.json's split regex (llama.cpp then tokenizes reference.json's sentence "
            "as transformers does, and does not with either other name)."
        )
    if os.path.exists(os.path.join(folder, "tokenizer.json")) and not os.path.exists(os.path.join(folder, "tokenizer.model")):
        if pre == "":
            notes.append(
                "tokenizer.ggml.scores: from tokenizer.json alone the converter (gguf-py's LlamaHfVocab) gives every "
                "token the score -1000, and llama.cpp's SentencePiece tokenizer, which merges by score, then "
                "tokenizes reference.json's sentence differently from transformers. Scores from the merges' ranks "
                "(a token made by merge r: -r) tokenize it as transformers does."
            )
    golden = {
        "notes": notes,
        "metadata": metadata,
        "tensors": [
            {"name": t.name, "type": t.tensor_type.name, "shape": [int(n) for n in t.shape], "sha256": hashlib.sha256(t.data.tobytes()).hexdigest()}
            for t in reader.tensors
        ],
    }
    with open(os.path.join(folder, "llama-cpp-f16.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(os.path.join(folder, "llama-cpp-f16.json"), len(metadata), "keys", len(golden["tensors"]), "tensors")
    return True


def main():
    if "--llama-cpp" in sys.argv:
        at = sys.argv.index("--llama-cpp")
        source, out_folder, *models = sys.argv[at + 1 :]
        os.makedirs(out_folder, exist_ok=True)

        # qwen2 has none: the converter's get_vocab_base asserts on its tokenizer (transformers' Qwen2Tokenizer adds
        # <|endoftext|> at 512, past vocab_size).
        every = sorted(m for m in os.listdir(MODELS) if os.path.exists(os.path.join(MODELS, m, "reference.json")))
        made = [llama_cpp_golden(source, model, out_folder) for model in models or every]
        sys.exit(0 if all(made) else 1)
    args = [a for a in sys.argv[1:] if not a.startswith("--") and not a.isdigit()]
    if len(args) != 1:
        sys.exit("usage: gguf-reference.py OUT_FOLDER [--no-permutation] [--cases N]")
    with_permutation = "--no-permutation" not in sys.argv
    cases = int(sys.argv[sys.argv.index("--cases") + 1]) if "--cases" in sys.argv else 0
    os.makedirs(args[0], exist_ok=True)
    # Every folder with a reference.json is a model (q8_0/ holds the Q8_0 kernel's vectors); this writer covers the
    # first set (llama-gqa, mistral, qwen2), whose reference.json has no `exercises`.
    def first(model):
        path = os.path.join(MODELS, model, "reference.json")
        return os.path.exists(path) and "exercises" not in json.load(open(path))

    for model in sorted(m for m in os.listdir(MODELS) if first(m)):
        for dtype in DTYPES:
            out = os.path.join(args[0], f"{model}.{dtype}.gguf")
            write(os.path.join(MODELS, model), out, dtype, with_permutation)
            print(out, os.path.getsize(out))
        if cases:
            write_cases(os.path.join(MODELS, model), os.path.join(args[0], f"{model}.cases.json"), cases)


if __name__ == "__main__":
    main()
