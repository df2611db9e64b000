# Loads the folders that `safetensors-wasm convert x.gguf OUT` wrote from the GGUFs of test/fixtures/gguf-to-hf/
# with transformers, and compares them with the original models of test/fixtures/gguf/, loaded in float32 in the
# same run: the logits after reference.json's id sequences (largest |difference|; 0 for an F32 GGUF), and the
# tokenizer's ids for reference.json's sentence with and without special tokens; for the models transformers'
# own GGUF loading gets right, the logits against it. Run by hand (CI has no Python); docs/gguf.md reports what it printed.
#
#   for m in test/fixtures/gguf-to-hf/*/; do n=$(basename $m); for t in f32 f16 q8_0; do
#     node dist/cli.js convert $m/$n-$t.gguf /tmp/gguf-to-hf/$n-$t; done; done
#   /work/venv-gguf/bin/python scripts/check-gguf-to-hf.py /tmp/gguf-to-hf [MODEL ...]
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The models transformers' from_pretrained(..., gguf_file=...) loads right (a SentencePiece Llama, GPT-2).
TRANSFORMERS_GGUF = {'llama2-spm', 'gpt2'}


def main(folder, only=None):
    results = {}
    for name in sorted(os.listdir(os.path.join(ROOT, 'test', 'fixtures', 'gguf-to-hf'))):
        if only and name not in only:
            continue
        source = os.path.join(ROOT, 'test', 'fixtures', 'gguf', name)
        reference = json.load(open(os.path.join(source, 'reference.json')))
        # The original's logits in this run, as the converted folders' are computed: the same code, the same order.
        original = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
        with torch.no_grad():
            expected = [original(torch.tensor([case['ids']])).logits[0, -1] for case in reference['cases']]
        for outtype in ['f32', 'f16', 'q8_0']:
            out = os.path.join(folder, f'{name}-{outtype}')
            if not os.path.isdir(out):
                continue
            row = {}
            try:
                model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
                with torch.no_grad():
                    row['logits'] = max(
                        (model(torch.tensor([case['ids']])).logits[0, -1] - logits).abs().max().item()
                        for case, logits in zip(reference['cases'], expected)
                    )
                if name in TRANSFORMERS_GGUF:
                    # transformers' own GGUF loading, where it is right: the same logits.
                    gguf_folder = os.path.join(ROOT, 'test', 'fixtures', 'gguf-to-hf', name)
                    theirs = AutoModelForCausalLM.from_pretrained(gguf_folder, gguf_file=f'{name}-{outtype}.gguf', dtype=torch.float32)
                    with torch.no_grad():
                        row['vs_transformers_gguf'] = max(
                            (model(torch.tensor([case['ids']])).logits[0, -1] - theirs(torch.tensor([case['ids']])).logits[0, -1]).abs().max().item()
                            for case in reference['cases']
                        )
                tokenizer = AutoTokenizer.from_pretrained(out)
                sentence = reference['sentence']
                row['ids'] = tokenizer(sentence)['input_ids'] == reference['sentence_ids']
                row['ids_without_special'] = tokenizer(sentence, add_special_tokens=False)['input_ids'] == reference['sentence_ids_without_special']
            except Exception as error:  # noqa: BLE001 - a row says what failed
                row['error'] = f'{type(error).__name__}: {error}'[:300]
            results[f'{name}-{outtype}'] = row
            print(f'{name}-{outtype}', row, flush=True)
    return results


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
