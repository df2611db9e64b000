# A manual check, run once by hand and never in CI (issue 20): a model folder that this CLI converts loads
# in transformers as it is. A tiny random LlamaForCausalLM with a tokenizer, saved by transformers in
# several shards, is converted to BF16 and to F16 by `node dist/cli.js convert` (run `npm run build`
# first); from_pretrained on each output must report no missing, unexpected or mismatched weights and log
# no warning about them, the tokenizer must load, and every weight must equal torch's own conversion of the
# float32 original, bit for bit.
#
#   python3 -m venv /tmp/venv && /tmp/venv/bin/pip install "torch==2.13.0+cpu" transformers safetensors
#   /tmp/venv/bin/python scripts/check-transformers-load.py
import json
import logging
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "dist", "cli.js")


class Captured(logging.Handler):
    """Every warning transformers logs while loading."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def save_original(folder):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    # A small max_shard_size, so that the model is sharded with an index.
    model.save_pretrained(folder, max_shard_size="100KB")
    vocab = {f"t{i}": i for i in range(256)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="t1", eos_token="t2", unk_token="t0").save_pretrained(folder)
    return model.state_dict()


def check(original_folder, state, dtype, torch_dtype, *options):
    out = tempfile.mkdtemp(prefix=f"converted-{dtype}-")
    os.rmdir(out)
    run = subprocess.run(["node", CLI, "convert", original_folder, out, "--dtype", dtype, *options], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    print(f"{dtype}: converted into {out}: {sorted(os.listdir(out))}")
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    print(f"{dtype}: config.json says dtype={config.get('dtype')!r} torch_dtype={config.get('torch_dtype')!r}")

    captured = Captured()
    transformers.logging.get_logger().addHandler(captured)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    finally:
        transformers.logging.get_logger().removeHandler(captured)
    print(f"{dtype}: loaded {type(model).__name__} in {model.dtype}; loading info {info}")
    problems = {k: v for k, v in info.items() if v}
    assert not problems, problems
    about_weights = [m for m in captured.messages if "weight" in m.lower() or "missing" in m.lower() or "unexpected" in m.lower()]
    assert not about_weights, about_weights
    print(f"{dtype}: warnings logged while loading: {captured.messages}")
    assert model.dtype == torch_dtype, model.dtype

    loaded = model.state_dict()
    assert sorted(loaded) == sorted(state), (sorted(loaded), sorted(state))
    for name, original in state.items():
        expected = original.to(torch_dtype)
        got = loaded[name]
        assert got.dtype == torch_dtype, (name, got.dtype)
        assert torch.equal(got.view(torch.int16), expected.view(torch.int16)), f"{name} differs from torch's own float32 -> {torch_dtype}"
    print(f"{dtype}: all {len(state)} weights equal torch's float32 -> {torch_dtype} bit for bit")

    tokenizer = AutoTokenizer.from_pretrained(out)
    print(f"{dtype}: tokenizer loads: {tokenizer('t5 t7')['input_ids']}")


def main():
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    original = tempfile.mkdtemp(prefix="original-llama-")
    state = save_original(original)
    print(f"original: {sorted(os.listdir(original))}")
    with open(os.path.join(original, "config.json")) as f:
        saved = json.load(f)
    print(f"original config.json: dtype={saved.get('dtype')!r} torch_dtype={saved.get('torch_dtype')!r}")
    check(original, state, "BF16", torch.bfloat16)
    check(original, state, "F16", torch.float16)
    # Resharded into other shards than transformers wrote.
    check(original, state, "BF16", torch.bfloat16, "--max-shard-size", "40KB")
    print("OK")


if __name__ == "__main__":
    sys.exit(main())
