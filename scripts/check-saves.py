#!/usr/bin/env python3
"""A manual check, not run in CI: Python's safetensors reads the folders that test/node/save-model.test.ts's
kill -9 test leaves, each as one whole save.

    SAVE_KILL_KEEP=/tmp/kills npx vitest run test/node/save-model.test.ts -t kills
    python3 -m venv /tmp/venv-save && /tmp/venv-save/bin/pip install safetensors numpy
    /tmp/venv-save/bin/python scripts/check-saves.py /tmp/kills

For every folder, in transformers' order (modeling_utils: model.safetensors, else
model.safetensors.index.json): every tensor loaded with safetensors.safe_open, through the index's
weight_map when there is no model.safetensors; all of them must be the six tensors t0..t5 of one
generation (every element equal to it). An index beside a model.safetensors is loaded too, and must
be whole as well. Prints one line per folder that fails, and a summary.
"""
import json
import os
import sys

import numpy as np
from safetensors import safe_open

NAMES = [f"t{i}" for i in range(6)]


def generation(tensors, where):
    if sorted(tensors) != NAMES:
        raise ValueError(f"{where}: tensors {sorted(tensors)}")
    g = int(tensors["t0"].flat[0])
    for name, data in tensors.items():
        if not np.all(data == g):
            raise ValueError(f"{where}: {name} is not all {g} (two saves mixed)")
    return g


def load_file(path):
    with safe_open(path, framework="numpy") as f:
        return {name: f.get_tensor(name) for name in f.keys()}


def load_index(folder):
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        with safe_open(os.path.join(folder, shard), framework="numpy") as f:
            for name in (n for n, s in weight_map.items() if s == shard):
                tensors[name] = f.get_tensor(name)
    return tensors


def check(folder):
    single = os.path.join(folder, "model.safetensors")
    has_index = os.path.exists(os.path.join(folder, "model.safetensors.index.json"))
    by_index = generation(load_index(folder), f"{folder} (by its index)") if has_index else None
    if os.path.exists(single):
        return generation(load_file(single), single), by_index
    if by_index is None:
        raise ValueError(f"{folder}: no model.safetensors and no index")
    return by_index, by_index


def main(root):
    folders = sorted(os.path.join(root, d) for d in os.listdir(root))
    failed = 0
    both = 0
    for folder in folders:
        try:
            g, by_index = check(folder)
            if by_index is not None and by_index != g:
                both += 1
        except Exception as error:  # a folder that does not load is the failure this script looks for
            failed += 1
            print(f"FAIL {error}")
    print(f"{len(folders)} folders: {len(folders) - failed} load as one whole save, {failed} do not; "
          f"{both} hold model.safetensors of one save beside a whole index of another")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
