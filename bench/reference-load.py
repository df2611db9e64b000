# The reference loader for bench/pool.js, run by it when BENCH_PYTHON names a Python with torch and
# safetensors (pip install "torch==2.13.0+cpu" safetensors; never in CI): every tensor of the file as F32,
# kept, timed from the load on (torch imported before), torch on every core; with --fill, the floor under it (new
# tensors of the same shapes filled). Prints {"ms": ..., "check": ...}.
import json
import os
import sys
import time

import torch
from safetensors import safe_open
from safetensors.torch import load_file

torch.set_num_threads(os.cpu_count())
if "--fill" in sys.argv:
    # The floor under it: as many new F32 tensors of the file's shapes, each written by fill_ on every core.
    with safe_open(sys.argv[1], framework="pt") as f:
        shapes = {name: f.get_slice(name).get_shape() for name in f.keys()}
    start = time.perf_counter()
    kept = {name: torch.empty(shape, dtype=torch.float32).fill_(1) for name, shape in shapes.items()}
else:
    start = time.perf_counter()
    kept = {name: tensor.float() for name, tensor in load_file(sys.argv[1]).items()}
ms = (time.perf_counter() - start) * 1000
check = sum(float(t.reshape(-1)[12345]) for t in kept.values())
print(json.dumps({"ms": ms, "check": check}))
