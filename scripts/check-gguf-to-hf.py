# Loads the folders that test/node/gguf-model.test.ts converted from GGUFs (kept with GGUF_TO_HF_OUT) with
# transformers, and compares them with the original models: the logits after the reference's id sequences (largest
# |difference|; 0 from a GGUF that holds the original's values), and the tokenizer's ids for the reference's
# sentence with and without special tokens; for the models transformers' own GGUF loading gets right, the logits
# against it. Run by hand (CI has no Python); docs/gguf.md reports what it printed.
#
# The originals: for the folders of test/fixtures/gguf-to-hf/ (<model>-f32, -f16, -q8_0), the fixture of
# test/fixtures/gguf/ loaded in float32 in this run, its ids from reference.json; for those of
# test/fixtures/gguf-to-hf-wide/ (<model>-wide from the converter's BF16 or F16 GGUF, <model>-wide-<K type> from the
# K-quant GGUFs llama.cpp's quantizer made of it), golden.json's reference: the original's float32 logits and ids as
# transformers computed them when the fixture was made (the <model>-wide row, 0 when this run's transformers agrees).
# A K-quant folder's logits are also compared with those of a third computation of what it must hold
# (`vs_dequantized`): the original's architecture (golden.json's config) with each parameter set to gguf-py's
# dequantization of its GGUF tensor, un-permuted, shifted or transposed here in numpy; then what is left of the
# difference from the original is the quantization's own. Every model runs with eager attention, as the
# references were computed (transformers' SDPA leaves out Gemma 2's attention soft-capping).
#
#   GGUF_TO_HF_OUT=/tmp/gguf-to-hf npx vitest run test/node/gguf-model.test.ts
#   /work/venv-gguf/bin/python scripts/check-gguf-to-hf.py /tmp/gguf-to-hf [MODEL ...]
import json
import os
import sys
import tempfile

import gguf
import numpy as np
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, 'test', 'fixtures')
# The models transformers' from_pretrained(..., gguf_file=...) loads right (a SentencePiece Llama, GPT-2).
TRANSFORMERS_GGUF = {'llama2-spm', 'gpt2'}
NARROW = ['f32', 'f16', 'q8_0']
K_TYPES = ['Q2_K', 'Q3_K_M', 'Q4_K_M', 'Q5_K_M', 'Q6_K']


def load(folder, **kwargs):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation='eager', **kwargs).eval()


def dequantized(path, golden, folder):
    """The original's architecture with every parameter gguf-py's dequantization of its tensor in the GGUF at
    `path`, with what llama.cpp's converter did undone: an expert taken from its stack, llama's Q/K rows from
    interleaved pairs back to halves, Gemma's norms minus 1, GPT-2's Conv1D weights transposed back. Written into
    `folder` with golden.json's config.json and loaded from there, as transformers loads a checkpoint (experts
    stored apart, fused by its loading)."""
    config = golden['config']
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    state = {}
    for name, p in golden['parameters'].items():
        t = tensors[p['gguf']]
        values = gguf.quants.dequantize(t.data, t.tensor_type).reshape([int(n) for n in reversed(t.shape)]).astype(np.float32)
        if 'expert' in p:
            values = values[p['expert']]
        role = p['gguf'].rsplit('.', 2)[-2]
        if config['model_type'] in ('llama', 'mixtral') and role in ('attn_q', 'attn_k'):
            heads = config['num_attention_heads' if role == 'attn_q' else 'num_key_value_heads']
            rows = values.shape[0]
            values = values.reshape(heads, rows // heads // 2, 2, -1).swapaxes(1, 2).reshape(rows, -1)
        if config['model_type'].startswith('gemma') and name.endswith('norm.weight'):
            values = values - np.float32(1)
        if config['model_type'] == 'gpt2' and name.rsplit('.', 2)[-2] in ('c_attn', 'c_proj', 'c_fc'):
            values = values.T
        state[name] = torch.from_numpy(np.ascontiguousarray(values))
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump({**config, 'dtype': 'float32'}, f)
    save_file(state, os.path.join(folder, 'model.safetensors'), metadata={'format': 'pt'})
    return load(folder)


def logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]


def check(out, reference, expected, gguf, theirs=False, golden=None):
    """One converted folder against the original's logits (`expected`, one per case) and ids. `gguf` is (folder,
    file) of the GGUF it came from: with `theirs`, transformers' own loading of it is compared too; with `golden`,
    the third computation of dequantized()."""
    row = {}
    try:
        model = load(out)
        cases = reference['cases']
        row['logits'] = max((logits(model, case['ids']) - want).abs().max().item() for case, want in zip(cases, expected))
        if golden:
            with tempfile.TemporaryDirectory() as folder:
                third = dequantized(os.path.join(*gguf), golden, folder)
                row['vs_dequantized'] = max((logits(model, case['ids']) - logits(third, case['ids'])).abs().max().item() for case in cases)
        if theirs:
            # transformers' own GGUF loading, where it is right: the same logits.
            transformers_gguf = load(gguf[0], gguf_file=gguf[1])
            row['vs_transformers_gguf'] = max((logits(model, case['ids']) - logits(transformers_gguf, case['ids'])).abs().max().item() for case in cases)
        tokenizer = AutoTokenizer.from_pretrained(out)
        sentence = reference['sentence']
        row['ids'] = tokenizer(sentence)['input_ids'] == reference['sentence_ids']
        row['ids_without_special'] = tokenizer(sentence, add_special_tokens=False)['input_ids'] == reference['sentence_ids_without_special']
    except Exception as error:  # noqa: BLE001 - a row says what failed
        row['error'] = f'{type(error).__name__}: {error}'[:300]
    return row


def main(folder, only=None):
    results = {}

    def report(key, row):
        results[key] = row
        print(key, row, flush=True)

    for name in sorted(os.listdir(os.path.join(FIXTURES, 'gguf-to-hf'))):
        if only and name not in only:
            continue
        theirs = name in TRANSFORMERS_GGUF
        source = os.path.join(FIXTURES, 'gguf', name)
        reference = json.load(open(os.path.join(source, 'reference.json')))
        # The original's logits in this run, as the converted folders' are computed: the same code, the same order.
        original = load(source)
        expected = [logits(original, case['ids']) for case in reference['cases']]
        for outtype in NARROW:
            out = os.path.join(folder, f'{name}-{outtype}')
            if os.path.isdir(out):
                gguf_file = (os.path.join(FIXTURES, 'gguf-to-hf', name), f'{name}-{outtype}.gguf')
                report(f'{name}-{outtype}', check(out, reference, expected, gguf_file, theirs))
        wide = os.path.join(FIXTURES, 'gguf-to-hf-wide', name)
        golden = json.load(open(os.path.join(wide, 'golden.json')))
        reference = golden['reference']
        expected = [torch.tensor(case['logits']) for case in reference['cases']]
        stored = next(f for f in os.listdir(wide) if f.endswith('.gguf'))
        out = os.path.join(folder, f'{name}-wide')
        if os.path.isdir(out):
            report(f'{name}-wide', check(out, reference, expected, (wide, stored), theirs))
        for outtype in K_TYPES:
            key = f'{name}-wide-{outtype}'
            if os.path.isdir(os.path.join(folder, key)):
                report(key, check(os.path.join(folder, key), reference, expected, (folder, f'{key}.gguf'), theirs, golden))
    return results


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
