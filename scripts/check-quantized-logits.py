# A manual check, run once by hand and never in CI (issue 33): the plain model folder that
# `convert <quantized model> <out> --dtype F32` writes loads in transformers with no quantization library, and its
# next-token logits equal, bit for bit, those of the golden model in each fixture's reference.json (the plain
# config.json with golden.safetensors, loaded in float32 with eager attention). Every folder of
# test/fixtures/quantized is converted by `node dist/cli.js` (run `npm run build` first).
#
# One thread, as the references ran: on more, torch's matmul sums in another order and logits move by ~1e-6 (for
# the golden model as much as for the converted one).
#
#   python3 -m venv /tmp/venv && /tmp/venv/bin/pip install "torch==2.13.0+cpu" transformers==5.18.0 safetensors
#   /tmp/venv/bin/python scripts/check-quantized-logits.py
import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIXTURES = os.path.join(ROOT, "test", "fixtures", "quantized")


def main():
    torch.set_num_threads(1)
    folders = sorted(f for f in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, f)))
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            out = os.path.join(tmp, folder)
            cli = [os.path.join(ROOT, "dist", "cli.js"), "convert", os.path.join(FIXTURES, folder), out, "--dtype", "F32"]
            subprocess.run(["node", *cli], check=True, capture_output=True)
            model, info = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
            problems = {k: v for k, v in info.items() if v}
            quantized = getattr(model.config, "quantization_config", None)
            model.eval()
            cases = json.load(open(os.path.join(FIXTURES, folder, "reference.json")))["cases"]
            with torch.no_grad():
                same = all(
                    torch.equal(model(torch.tensor([case["ids"]])).logits[0, -1].to(torch.float32), torch.tensor(case["logits"], dtype=torch.float32))
                    for case in cases
                )
            good = same and not problems and quantized is None
            print(f"{folder}: {'same logits' if same else 'OTHER LOGITS'} in {len(cases)} cases, loading problems {problems or 'none'}")
            if not good:
                failed.append(folder)
    print(f"{len(folders) - len(failed)} of {len(folders)} folders load as plain models with the golden logits bit for bit")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
