# The reference loader for bench/pool.js, run by it when BENCH_PYTHON names a Python with torch and
# safetensors (pip install "torch==2.13.0+cpu" safetensors; never in CI): every tensor of the file as F32,
# kept, timed from the load on (torch imported before), torch on every core. Prints {"ms": ..., "check": ...}.
import json
import os
import sys
import time

import torch
from safetensors.torch import load_file

torch.set_num_threads(os.cpu_count())
start = time.perf_counter()
kept = {name: tensor.float() for name, tensor in load_file(sys.argv[1]).items()}
ms = (time.perf_counter() - start) * 1000
check = sum(float(t.reshape(-1)[12345]) for t in kept.values())
print(json.dumps({"ms": ms, "check": check}))
