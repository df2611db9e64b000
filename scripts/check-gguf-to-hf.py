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
#
#   GGUF_TO_HF_OUT=/tmp/gguf-to-hf npx vitest run test/node/gguf-model.test.ts
#   /work/venv-gguf/bin/python scripts/check-gguf-to-hf.py /tmp/gguf-to-hf [MODEL ...]
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, 'test', 'fixtures')
# The models transformers' from_pretrained(..., gguf_file=...) loads right (a SentencePiece Llama, GPT-2).
TRANSFORMERS_GGUF = {'llama2-spm', 'gpt2'}
NARROW = ['f32', 'f16', 'q8_0']
WIDE = ['', 'Q2_K', 'Q3_K_M', 'Q4_K_M', 'Q5_K_M', 'Q6_K']


def logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]


def check(out, reference, expected, gguf):
    """One converted folder against the original's logits (`expected`, one per case) and ids; `gguf` is
    (folder, file) of the GGUF it came from, for transformers' own loading where it is right."""
    row = {}
    try:
        model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
        cases = reference['cases']
        row['logits'] = max((logits(model, case['ids']) - want).abs().max().item() for case, want in zip(cases, expected))
        if gguf:
            # transformers' own GGUF loading, where it is right: the same logits.
            theirs = AutoModelForCausalLM.from_pretrained(gguf[0], gguf_file=gguf[1], dtype=torch.float32)
            row['vs_transformers_gguf'] = max((logits(model, case['ids']) - logits(theirs, case['ids'])).abs().max().item() for case in cases)
        tokenizer = AutoTokenizer.from_pretrained(out)
        sentence = reference['sentence']
        row['ids'] = tokenizer(sentence)['input_ids'] == reference['sentence_ids']
        row['ids_without_special'] = tokenizer(sentence, add_special_tokens=False)['input_ids'] == reference['sentence_ids_without_special']
    except Exception as error:  # noqa: BLE001 - a row says what failed
        row['error'] = f'{type(error).__name__}: {error}'[:300]
    return row


def main(folder, only=None):
    results = {}
    for name in sorted(os.listdir(os.path.join(FIXTURES, 'gguf-to-hf'))):
        if only and name not in only:
            continue
        source = os.path.join(FIXTURES, 'gguf', name)
        reference = json.load(open(os.path.join(source, 'reference.json')))
        # The original's logits in this run, as the converted folders' are computed: the same code, the same order.
        original = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
        expected = [logits(original, case['ids']) for case in reference['cases']]
        for outtype in NARROW:
            out = os.path.join(folder, f'{name}-{outtype}')
            if os.path.isdir(out):
                gguf = (os.path.join(FIXTURES, 'gguf-to-hf', name), f'{name}-{outtype}.gguf') if name in TRANSFORMERS_GGUF else None
                results[f'{name}-{outtype}'] = check(out, reference, expected, gguf)
                print(f'{name}-{outtype}', results[f'{name}-{outtype}'], flush=True)
        wide = os.path.join(FIXTURES, 'gguf-to-hf-wide', name)
        reference = json.load(open(os.path.join(wide, 'golden.json')))['reference']
        expected = [torch.tensor(case['logits']) for case in reference['cases']]
        for outtype in WIDE:
            key = f'{name}-wide' + (f'-{outtype}' if outtype else '')
            out = os.path.join(folder, key)
            if os.path.isdir(out):
                stored = next(f for f in os.listdir(wide) if f.endswith('.gguf'))
                gguf = ((wide, stored) if not outtype else (folder, f'{key}.gguf')) if name in TRANSFORMERS_GGUF else None
                results[key] = check(out, reference, expected, gguf)
                print(key, results[key], flush=True)
    return results


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
