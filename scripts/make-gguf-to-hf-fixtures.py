# Makes test/fixtures/gguf-to-hf/: GGUFs of the tiny models of test/fixtures/gguf/ as llama.cpp's own converter
# (convert_hf_to_gguf.py of the llama.cpp that node-llama-cpp 3.21.1 ships, release v0.4.0) writes them, and the
# golden data test/node/gguf-model.test.ts holds `convert x.gguf out/` to. Run once by hand, never in CI; its output
# is committed.
#
#   /work/venv-gguf/bin/python scripts/make-gguf-to-hf-fixtures.py [--llama-cpp /work/llama.cpp-src] [NAME ...]
#
# For each model, the original is the fixture loaded by transformers in float32 and saved again with
# save_pretrained (its values are the stored bfloat16 or float16 ones, exactly): llama.cpp's converter then does
# its arithmetic (Gemma's norms + 1) in float32, and an F32 GGUF holds every value the original has. From that
# folder the converter writes <name>-f32.gguf, <name>-f16.gguf and <name>-q8_0.gguf. golden.json holds, for each
# parameter transformers saves (its name as saved), its shape, the sha256 of its float32 little-endian bytes and
# the GGUF tensor llama.cpp's converter maps it to (gguf-py's TensorNameMap; an expert's index in its stack), and
# the original's config.json; the logits and token ids are the fixture's reference.json. --golden-only makes
# golden.json again from the GGUFs already there.
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
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ['llama3', 'llama2-spm', 'qwen3', 'qwen3moe', 'mixtral', 'gemma2', 'gemma3', 'phi3', 'gpt2']
TYPES = ['f32', 'f16', 'q8_0']
# llama.cpp's converter, naming the pre-tokenizer of a vocabulary it does not know by hash from its regex.
_spec = importlib.util.spec_from_file_location('gguf_reference', os.path.join(HERE, 'gguf-reference.py'))
gguf_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gguf_reference)
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


def parameters(folder):
    """Every tensor of the saved model, as float32, by name."""
    tensors = {}
    for file in sorted(os.listdir(folder)):
        if file.endswith('.safetensors'):
            tensors.update(load_file(os.path.join(folder, file)))
    return {name: np.ascontiguousarray(t.astype('<f4')) for name, t in tensors.items()}


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
    parser.add_argument('names', nargs='*', default=MODELS)
    args = parser.parse_args()
    for name in args.names:
        out = os.path.join(args.out, name)
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryDirectory() as folder:
            original(name, folder)
            for outtype in [] if args.golden_only else TYPES:
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
            mapped = gguf_names(os.path.join(out, f'{name}-f32.gguf'), golden['parameters'])
            for key, entry in golden['parameters'].items():
                entry.update(mapped[key])
        with open(os.path.join(out, 'golden.json'), 'w') as f:
            json.dump(golden, f, indent=1)
            f.write('\n')
        print(name, {t: os.path.getsize(os.path.join(out, f'{name}-{t}.gguf')) for t in TYPES})


if __name__ == '__main__':
    main()
