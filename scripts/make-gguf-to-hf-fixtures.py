# Makes test/fixtures/gguf-to-hf/: GGUFs of the tiny models of test/fixtures/gguf/ as llama.cpp's own converter
# (convert_hf_to_gguf.py of the llama.cpp that node-llama-cpp 3.21.1 ships, release v0.4.0) writes them, and the
# golden data test/node/gguf-model.test.ts holds `convert x.gguf out/` to. Run once by hand, never in CI; its output
# is committed.
#
#   /work/venv-gguf/bin/python scripts/make-gguf-to-hf-fixtures.py [--llama-cpp /work/llama.cpp-src] [--wide] [NAME ...]
#
# For each model, the original is the fixture loaded by transformers in float32 and saved again with
# save_pretrained (its values are the stored bfloat16 or float16 ones, exactly): llama.cpp's converter then does
# its arithmetic (Gemma's norms + 1) in float32, and an F32 GGUF holds every value the original has. From that
# folder the converter writes <name>-f32.gguf, <name>-f16.gguf and <name>-q8_0.gguf. golden.json holds, for each
# parameter transformers saves (its name as saved), its shape, the sha256 of its float32 little-endian bytes and
# the GGUF tensor llama.cpp's converter maps it to (gguf-py's TensorNameMap; an expert's index in its stack), and
# the original's config.json; the logits and token ids are the fixture's reference.json. --golden-only makes
# golden.json again from the GGUFs already there.
#
# --wide makes test/fixtures/gguf-to-hf-wide/ instead: the same nine architectures, made anew by
# scripts/make-gguf-models.py's recipes (its weights' spread, its tokenizers: the fixture's own files, copied) with
# rows of 256 values or more (WIDE below), so that llama.cpp's quantizer writes its K types rather than falling
# back to the 32-value ones as it does on the fixtures' rows of 32 to 128. The original is stored as its kind of
# checkpoint ships (bfloat16; float16 for llama2-spm and gpt2) and only the converter's GGUF of that same dtype is
# kept (<name>-bf16.gguf or <name>-f16.gguf: every value the original's), from which the test makes the K-quant
# GGUFs with llama.cpp's own quantizer. golden.json then also holds the original's float32 logits after its id
# sequences and its tokenizer's ids (`reference`, as make-gguf-models.py's reference.json has them), since the
# original itself is not kept.
import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import gguf
import numpy as np
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ['llama3', 'llama2-spm', 'qwen3', 'qwen3moe', 'mixtral', 'gemma2', 'gemma3', 'phi3', 'gpt2']
TYPES = ['f32', 'f16', 'q8_0']


def load_script(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# llama.cpp's converter, naming the pre-tokenizer of a vocabulary it does not know by hash from its regex.
gguf_reference = load_script('gguf_reference', 'gguf-reference.py')
# The fixtures' recipes: their specs, weights and id sequences.
gguf_models = load_script('gguf_models', 'make-gguf-models.py')

# The wide models' sizes: every matrix's rows (what llama.cpp quantizes in blocks) 256 values or a multiple (the
# attention's output 4 heads of 64, Phi-3's 16 of 16; GPT-2's FFN is 4 x 256 by the converter's rule), one layer,
# 4 experts of 256 for the MoEs, tied embeddings as the fixture has them (and for the MoEs, to stay small).
WIDE_SIZE = dict(hidden_size=256, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2)
WIDE = {
    'llama3': {**WIDE_SIZE, 'head_dim': 64},
    'llama2-spm': {**WIDE_SIZE, 'head_dim': 64},
    'qwen3': {**WIDE_SIZE, 'head_dim': 64},
    'qwen3moe': {**WIDE_SIZE, 'head_dim': 64, 'moe_intermediate_size': 256, 'tie_word_embeddings': True},
    'mixtral': {**WIDE_SIZE, 'tie_word_embeddings': True},
    'gemma2': {**WIDE_SIZE, 'head_dim': 64, 'query_pre_attn_scalar': 64},
    'gemma3': {**WIDE_SIZE, 'head_dim': 64, 'query_pre_attn_scalar': 64},
    # 16 heads of 16: longrope's 8 factors still fit a head.
    'phi3': {**WIDE_SIZE, 'num_attention_heads': 16, 'num_key_value_heads': 16},
    'gpt2': dict(n_embd=256, n_layer=1, n_head=4, n_positions=64),
}
# Each wide model's seed: its fixture's plus WIDE_SEED, so that its weights are not the fixture's.
WIDE_SEED = 100
# What a config's to_dict() holds that its class derives from the rest (the layer types from the layer count).
DERIVED = {'layer_types', 'architectures', 'model_type', 'transformers_version', '_name_or_path', 'id2label', 'label2id', 'dtype'}
TOKENIZER_FILES = ['tokenizer.json', 'tokenizer.model', 'tokenizer_config.json', 'chat_template.jinja', 'special_tokens_map.json']


def original(name, folder):
    """The fixture, saved again by transformers in float32, with its tokenizer files."""
    source = os.path.join(ROOT, 'test', 'fixtures', 'gguf', name)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    model.save_pretrained(folder)
    for file in TOKENIZER_FILES:
        if os.path.exists(os.path.join(source, file)):
            shutil.copy(os.path.join(source, file), folder)
    return model


def wide_original(name, folder):
    """The wide model of `name` saved by transformers in its stored dtype, with the fixture's tokenizer files; its
    reference (logits, token ids) and the converter's --outtype of that dtype."""
    spec = dict(next(s for s in gguf_models.MODELS_2 if s['name'] == name))
    config = spec['config']
    fields = {k: v for k, v in config.to_dict().items() if k not in DERIVED}
    spec.update(config=type(config)(**{**fields, **WIDE[name]}), seed=spec['seed'] + WIDE_SEED, shards=1, reshard=False)
    gguf_models.save_model_2(spec, folder)
    source = os.path.join(ROOT, 'test', 'fixtures', 'gguf', name)
    for file in TOKENIZER_FILES:
        if os.path.exists(os.path.join(source, file)):
            shutil.copy(os.path.join(source, file), folder)
    pool = gguf_models.ordinary_ids(folder, spec['config'].vocab_size)
    cases = gguf_models.sequences_2(spec['seed'], spec['lengths'], pool, spec['bos'])
    sentence = json.load(open(os.path.join(source, 'reference.json')))['sentence']
    reference = gguf_models.reference(spec, folder, cases, sentence, {})
    return reference, {torch.bfloat16: 'bf16', torch.float16: 'f16'}[spec['dtype']]


def parameters(folder):
    """Every tensor of the saved model, as float32 (exact from bfloat16 and float16), by name."""
    tensors = {}
    for file in sorted(os.listdir(folder)):
        if file.endswith('.safetensors'):
            tensors.update(load_file(os.path.join(folder, file)))
    return {name: np.ascontiguousarray(t.to(torch.float32).numpy().astype('<f4')) for name, t in tensors.items()}


def gguf_names(path, names):
    """Each parameter's GGUF tensor as llama.cpp's converter maps it (gguf-py's TensorNameMap), and its expert in a stack."""
    reader = gguf.GGUFReader(path)
    arch_name = reader.fields['general.architecture'].contents()
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch_name)
    tensor_map = gguf.get_tensor_name_map(arch, reader.fields[f'{arch_name}.block_count'].contents())
    mapped = {}
    for name in names:
        expert = re.search(r'\.experts\.(\d+)\.', name)
        stacked = re.sub(r'\.experts\.\d+\.', '.experts.', name)
        mapped[name] = {'gguf': tensor_map.get_name(stacked, try_suffixes=('.weight', '.bias'))}
        if expert:
            mapped[name]['expert'] = int(expert.group(1))
    return mapped


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--llama-cpp', default='/work/llama.cpp-src')
    parser.add_argument('--out', default=os.path.join(ROOT, 'test', 'fixtures', 'gguf-to-hf'))
    parser.add_argument('--golden-only', action='store_true', help="golden.json from the GGUFs already there")
    parser.add_argument('--wide', action='store_true', help='the wide models, into test/fixtures/gguf-to-hf-wide')
    parser.add_argument('names', nargs='*', default=MODELS)
    args = parser.parse_args()
    if args.wide and args.out == parser.get_default('out'):
        args.out += '-wide'
    for name in args.names:
        out = os.path.join(args.out, name)
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryDirectory() as scratch:
            # The converter names the model (general.name) after its folder.
            folder = os.path.join(scratch, name)
            os.makedirs(folder)
            reference = None
            types = TYPES
            if args.wide:
                reference, outtype = wide_original(name, folder)
                types = [outtype]
            else:
                original(name, folder)
            for outtype in [] if args.golden_only else types:
                target = os.path.join(out, f'{name}-{outtype}.gguf')
                converter = gguf_reference.CONVERTER.replace('"--outtype", "f16"', '"--outtype", sys.argv[5]')
                pre = gguf_reference.pre_tokenizer_name(os.path.join(ROOT, 'test', 'fixtures', 'gguf', name))
                run = subprocess.run([sys.executable, '-c', converter, args.llama_cpp, folder, target, pre, outtype], capture_output=True, text=True)
                if run.returncode != 0:
                    sys.exit(f'{name}: llama.cpp\'s converter failed:\n{run.stderr[-3000:]}')
            golden = {
                'made_by': 'scripts/make-gguf-to-hf-fixtures.py',
                'versions': {'torch': torch.__version__, 'transformers': transformers.__version__},
                'config': json.load(open(os.path.join(folder, 'config.json'))),
                'parameters': {
                    key: {'shape': list(t.shape), 'sha256': hashlib.sha256(t.tobytes()).hexdigest()}
                    for key, t in sorted(parameters(folder).items())
                },
            }
            mapped = gguf_names(os.path.join(out, f'{name}-{types[0]}.gguf'), golden['parameters'])
            for key, entry in golden['parameters'].items():
                entry.update(mapped[key])
            if reference is not None:
                golden['reference'] = reference
        with open(os.path.join(out, 'golden.json'), 'w') as f:
            json.dump(golden, f, indent=1)
            f.write('\n')
        print(name, {t: os.path.getsize(os.path.join(out, f'{name}-{t}.gguf')) for t in types})


if __name__ == '__main__':
    main()
