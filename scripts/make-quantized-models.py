# Makes test/fixtures/quantized/: tiny random causal language models stored as the Hugging Face Hub ships
# quantized checkpoints (MLX, GPTQ, AWQ, bitsandbytes, FP8, MXFP4, compressed-tensors, NVFP4), each with
#   golden.safetensors  every logical tensor (the dequantized `<module>.weight` [out, in], gpt-oss experts as
#                       transformers names and orients them) in the reference implementation's own output dtype,
#                       computed by that reference from the exact bytes stored in the folder; the unquantized
#                       tensors unchanged. `convert --dtype <golden dtype>` must reproduce it bit for bit.
#   reference.json      versions, which reference function computed what (repository, commit, function), the
#                       logical tensors and their stored parts, and the transformers float32 next-token logits of
#                       the plain model made of golden.safetensors (config.json without its quantization block).
# and test/fixtures/quantized/mutations.json: changes a test applies to a good folder to make it inconsistent.
# Run once by hand, never in CI; its output is committed. Deterministic for one set of versions (recorded in
# every reference.json).
#
# The references run from their own sources, never copied into this repository. Put checkouts of them, at the
# commits below (REFERENCES), in one folder, each named owner+name (git clone URL DIR && git -C DIR checkout
# COMMIT; or `git archive COMMIT` of a clone, extracted: then the commit cannot be checked and is taken as given),
# install what they import that torch/transformers do not bring, and point QUANT_REFS at the folder:
#
#   python3 -m venv /work/venv && /work/venv/bin/pip install "torch==2.13.0+cpu" transformers==5.18.0 \
#       safetensors numpy ml-dtypes accelerate pydantic loguru           # pydantic, loguru: compressed-tensors
#   /work/venv/bin/pip install --no-deps --target /tmp/triton-pkgs triton==3.8.0   # for DeepSeek's kernel only
#   QUANT_REFS=/tmp/qref TRITON_PKGS=/tmp/triton-pkgs /work/venv/bin/python scripts/make-quantized-models.py [NAME...]
#
# How each reference runs on a CPU (the details are in each folder's reference.json):
# - compressed-tensors, AutoAWQ, bitsandbytes (its pure-torch default backend), transformers (MXFP4, FP8):
#   imported as they are.
# - GPTQModel: its package __init__ (which loads every kernel) is skipped; gptqmodel.nn_modules.qlinear.torch is
#   imported with logbar, device_smi and threadpoolctl stubbed (logging, GPU inventory, thread limits) and pcre
#   (a PCRE binding) served by Python's re. Its native pack extension is disabled (pure-Python packing).
# - ModelOpt: qtensor/nvfp4_tensor.py imported with modelopt.torch.utils stubbed; fp4_compatible() (a CUDA
#   capability probe on its TensorRT-LLM path) answers False.
# - DeepSeek-V3 inference/kernel.py::weight_dequant (Triton) runs in Triton's CPU interpreter
#   (TRITON_INTERPRET=1) in a child process, with an F32 output buffer: the interpreter stores F32 to BF16 by
#   truncation, where a GPU rounds to nearest even, so the kernel gives the F32 products and the one rounding to
#   BF16 is torch's (RNE), as fp8_cast_bf16.py gets on a GPU.
# - MLX has no build for Linux x86 here: its CPU path (mlx/ops.cpp affine_quantize/affine_dequantize fallback,
#   which the CPU stream runs: unpack, multiply by the scale, add the bias, each op rounded to the scale dtype) is
#   reproduced in numpy, step by step, and cross-checked against the same steps in torch.
# Every golden tensor is also checked bit for bit against scripts/quant_reference/layout_formulas.py, the
# formulas of shared/quantized-layouts.md written in numpy without the references. The whole run takes about
# 20 seconds on one core.
import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import types

import ml_dtypes
import numpy as np
import safetensors
import safetensors.torch
import torch
import transformers
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_reference"))
import layout_formulas as formulas  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "fixtures", "quantized")
VOCAB_SIZE = 256
# The id sequences whose next-token logits are the reference: lengths 5, 9 and 14.
SEQUENCE_LENGTHS = [5, 9, 14]

REFERENCES = {
    "compressed-tensors": {
        "repo": "vllm-project/compressed-tensors",
        "commit": "ac8e2ba82f4e0d5eaa40069f8fc642738f124cd4",
        "version": "0.18.0",
    },
    "gptqmodel": {
        "repo": "ModelCloud/GPTQModel",
        "commit": "f4c327a17eb3e24524d5a97a3d682e3696ae6a28",
        "version": "7.3.4",
    },
    "autoawq": {
        "repo": "casper-hansen/AutoAWQ",
        "commit": "88e4c76b20755db275574e6a03c83c84ba3bece5",
        "version": "0.2.9",
    },
    "bitsandbytes": {
        "repo": "bitsandbytes-foundation/bitsandbytes",
        "commit": "95f9af309d4d5793847169c39288dcd3fcbdf564",
        "version": "0.50.2.dev0",
    },
    "modelopt": {
        "repo": "NVIDIA/TensorRT-Model-Optimizer",
        "commit": "5a4242faf4147fb0688bb73e10ca30b8ad3aabb3",
        "version": "0.40.0.dev115",
    },
    "deepseek-v3": {"repo": "deepseek-ai/DeepSeek-V3", "commit": "9b4e9788e4a3a731f7567338ed15d3ec549ce03b"},
    "mlx": {"repo": "ml-explore/mlx", "commit": "846d176227a0ac13d2667e58d2bb68b322109ab0"},
    "mlx-lm": {"repo": "ml-explore/mlx-lm", "commit": "d78bf58e217c904ec282ed8da9b947491f78c022"},
}


# ------------------------------------------------------------------------------------------------------------
# Loading the references from their checkouts
# ------------------------------------------------------------------------------------------------------------


def ref_dir(key):
    base = os.environ.get("QUANT_REFS")
    if not base:
        sys.exit("QUANT_REFS is not set: the folder holding the reference checkouts (see the top of this script)")
    path = os.path.join(base, REFERENCES[key]["repo"].replace("/", "+"))
    if not os.path.isdir(path):
        sys.exit(f"no checkout of {REFERENCES[key]['repo']} at {path}")
    if os.path.exists(os.path.join(path, ".git")):
        head = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        if head.stdout.strip() != REFERENCES[key]["commit"]:
            sys.exit(f"{path} is at {head.stdout.strip()}, not {REFERENCES[key]['commit']}")
    else:
        print(f"{path}: not a git checkout, so its commit is taken to be {REFERENCES[key]['commit']}")
    return path


def _namespace(name, path):
    """A package whose __init__ is not run: its submodules import from `path` one by one."""
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
    return module


class _StubMeta(type):
    def __getattr__(cls, key):
        if key.startswith("__"):
            raise AttributeError(key)
        return _Stub


class _Stub(metaclass=_StubMeta):
    """Anything: a class, an instance, a function, an attribute of one; does nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Stub()

    def __getattr__(self, key):
        if key.startswith("__"):
            raise AttributeError(key)
        return _Stub()


def _stub_module(name):
    """A module every attribute of which is _Stub."""

    def attribute(key):
        if key.startswith("__"):
            raise AttributeError(key)
        return _Stub

    module = types.ModuleType(name)
    module.__getattr__ = attribute
    module.__path__ = []
    sys.modules[name] = module


_loaded = {}


def load_compressed_tensors():
    if "ct" not in _loaded:
        sys.path.insert(0, os.path.join(ref_dir("compressed-tensors"), "src"))
        # version.py is written by setuptools_scm at build time; a checkout has none.
        version = types.ModuleType("compressed_tensors.version")
        version.__version__ = version.version = REFERENCES["compressed-tensors"]["version"]
        version.__all__ = ["__version__", "version"]
        sys.modules["compressed_tensors.version"] = version
        import compressed_tensors
        import compressed_tensors.compressors  # noqa: F401  (registers the formats)

        _loaded["ct"] = compressed_tensors
    return _loaded["ct"]


def load_gptqmodel():
    if "gptq" not in _loaded:
        path = ref_dir("gptqmodel")
        os.environ["GPTQMODEL_DISABLE_PACK_EXT"] = "1"
        package = _namespace("gptqmodel", os.path.join(path, "gptqmodel"))
        package.DEBUG_ON = False
        _namespace("gptqmodel.models", os.path.join(path, "gptqmodel", "models"))
        pcre = types.ModuleType("pcre")
        pcre.__dict__.update({k: getattr(re, k) for k in dir(re) if not k.startswith("__")})
        pcre.Flag = re.RegexFlag
        sys.modules["pcre"] = pcre
        for name in ["logbar", "device_smi", "threadpoolctl"]:
            _stub_module(name)
        import gptqmodel.nn_modules.qlinear.torch as qlinear_torch
        import gptqmodel.utils.model as model_utils
        from gptqmodel.quantization.config import QuantizeConfig

        _loaded["gptq"] = types.SimpleNamespace(
            TorchLinear=qlinear_torch.TorchLinear,
            v1_to_v2=model_utils.convert_gptq_v1_to_v2_format_module,
            v2_to_v1=model_utils.convert_gptq_v2_to_v1_format_module,
            QuantizeConfig=QuantizeConfig,
        )
    return _loaded["gptq"]


def load_autoawq():
    if "awq" not in _loaded:
        _namespace("awq", os.path.join(ref_dir("autoawq"), "awq"))
        import awq.modules.linear.gemm as gemm
        import awq.utils.packing_utils as packing_utils

        _loaded["awq"] = types.SimpleNamespace(
            WQLinear_GEMM=gemm.WQLinear_GEMM, dequantize_gemm=packing_utils.dequantize_gemm
        )
    return _loaded["awq"]


def load_bitsandbytes():
    if "bnb" not in _loaded:
        sys.path.insert(0, ref_dir("bitsandbytes"))
        import bitsandbytes

        _loaded["bnb"] = bitsandbytes
    return _loaded["bnb"]


def load_modelopt():
    if "modelopt" not in _loaded:
        path = ref_dir("modelopt")
        for name in [
            "modelopt",
            "modelopt/torch",
            "modelopt/torch/quantization",
            "modelopt/torch/quantization/qtensor",
            "modelopt/torch/quantization/backends",
            "modelopt/torch/export",
        ]:
            _namespace(name.replace("/", "."), os.path.join(path, name))
        utils = types.ModuleType("modelopt.torch.utils")
        utils.get_unwrapped_name = None
        utils.print_rank_0 = print
        sys.modules["modelopt.torch.utils"] = utils
        import modelopt.torch.export.convert_hf_config as convert_hf_config
        import modelopt.torch.quantization.qtensor.nvfp4_tensor as nvfp4_tensor

        nvfp4_tensor.fp4_compatible = lambda: False
        _loaded["modelopt"] = types.SimpleNamespace(
            NVFP4QTensor=nvfp4_tensor.NVFP4QTensor,
            convert_hf_quant_config_format=convert_hf_config.convert_hf_quant_config_format,
        )
    return _loaded["modelopt"]


DEEPSEEK_WORKER = "--deepseek-weight-dequant"


def deepseek_weight_dequant_f32(pairs):
    """DeepSeek-V3 inference/kernel.py::weight_dequant on each (weight F8_E4M3, scale_inv F32) pair, run by
    Triton's interpreter in a child process with torch's default dtype float32 (the output buffer's dtype)."""
    triton = os.environ.get("TRITON_PKGS")
    if not triton:
        sys.exit("TRITON_PKGS is not set: a folder holding triton (pip install --no-deps --target DIR triton==3.8.0)")
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {}
        for i, (w, s) in enumerate(pairs):
            inputs[f"w{i}"] = w.contiguous()
            inputs[f"s{i}"] = s.contiguous()
        safetensors.torch.save_file(inputs, os.path.join(tmp, "in.safetensors"))
        env = dict(os.environ, TRITON_INTERPRET="1")
        subprocess.run(
            [sys.executable, os.path.abspath(__file__), DEEPSEEK_WORKER, tmp, ref_dir("deepseek-v3"), triton],
            check=True,
            env=env,
        )
        out = safetensors.torch.load_file(os.path.join(tmp, "out.safetensors"))
        return [out[f"y{i}"] for i in range(len(pairs))]


def deepseek_worker(tmp, checkout, triton):
    sys.path.insert(0, triton)
    sys.path.insert(0, os.path.join(checkout, "inference"))
    import triton as triton_module
    from kernel import weight_dequant

    torch.set_default_dtype(torch.float32)
    inputs = safetensors.torch.load_file(os.path.join(tmp, "in.safetensors"))
    out = {}
    for i in range(len(inputs) // 2):
        out[f"y{i}"] = weight_dequant(inputs[f"w{i}"], inputs[f"s{i}"])
    safetensors.torch.save_file(
        out, os.path.join(tmp, "out.safetensors"), metadata={"triton": triton_module.__version__}
    )


# ------------------------------------------------------------------------------------------------------------
# Numbers
# ------------------------------------------------------------------------------------------------------------

DTYPE_NAMES = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.int16: "I16",
    torch.int32: "I32",
    torch.int64: "I64",
    torch.uint32: "U32",
}


def same_bits(a, b):
    """Equal bit for bit (so -0 is not 0, and NaN equals the same NaN)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.contiguous(), b.contiguous()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.view(view), b.view(view))


def np_bf16_round(x):
    """float32 array -> the nearest bfloat16 (RNE), as float32."""
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def np_f16_round(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def rng_for(*parts):
    """A numpy generator seeded by the names given (stable across runs and Python versions)."""
    seed = int.from_bytes(("/".join(map(str, parts))).encode(), "little") % (2**63)
    return np.random.default_rng(seed)


def np_of(t):
    """A tensor as numpy: bfloat16 as ml_dtypes' bfloat16, FP8 as its float32 values."""
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype == torch.float8_e4m3fn:
        return t.float().numpy()
    return t.contiguous().numpy()


# ------------------------------------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------------------------------------

# As scripts/make-gguf-models.py: the spread of the random weights keeps the next-token distributions far from
# uniform (so a swapped or misread tensor is visible in the logits) and the model well conditioned.
GAIN = {"q_proj": 1.5, "k_proj": 1.5, "lm_head": 3.0, "": 0.7}
# A tied embedding is also the output layer: at the lm_head's gain the last token's own embedding, which dominates
# the residual stream of these shallow models, takes nearly all the probability (top-1 ~1.00); at 1.5 the top-1
# probabilities are 0.06 to 0.96, as the untied models' are.
TIED_EMBEDDING_GAIN = 1.5
EMBEDDING_STD = 1.0
BIAS_STD = 0.1


def randomize(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if name.endswith("norm.weight"):
                parameter.copy_(1 + 0.2 * noise)
            elif name.endswith("bias") or name.endswith(".sinks"):
                parameter.copy_(BIAS_STD * noise)
            elif "embed_tokens" in name and model.config.tie_word_embeddings:
                parameter.copy_(TIED_EMBEDDING_GAIN / parameter.shape[1] ** 0.5 * noise)
            elif "embed_tokens" in name:
                parameter.copy_(EMBEDDING_STD * noise)
            else:
                gain = next(g for part, g in GAIN.items() if part in name)
                parameter.copy_(gain / parameter.shape[1] ** 0.5 * noise)


def llama(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, head_dim=None, tie=False):
    return transformers.LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim or hidden // heads,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=tie,
        bos_token_id=0,
        eos_token_id=1,
    )


def qwen2(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, tie=True):
    return transformers.Qwen2Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        use_sliding_window=False,
        tie_word_embeddings=tie,
        bos_token_id=None,
        eos_token_id=1,
    )


def qwen3(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, head_dim=16, tie=True):
    return transformers.Qwen3Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        use_sliding_window=False,
        tie_word_embeddings=tie,
        bos_token_id=None,
        eos_token_id=1,
    )


def gpt_oss(hidden=64, intermediate=64, layers=2, experts=4, heads=4, kv_heads=2, head_dim=16):
    return transformers.GptOssConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_local_experts=experts,
        num_experts_per_tok=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"][:layers],
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=1,
        pad_token_id=None,
    )


def random_weights(config, seed):
    """The float32 parameters of a random model of `config`, as save_pretrained would name them."""
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    randomize(model, seed)
    weights = {name: p.detach().clone().float() for name, p in model.state_dict().items()}
    if config.tie_word_embeddings:
        weights.pop("lm_head.weight", None)
    return weights


def linear_name(name, weight):
    """The module of a linear layer's weight inside the decoder layers."""
    return name.endswith("_proj.weight") and ".layers." in name and weight.ndim == 2


# ------------------------------------------------------------------------------------------------------------
# Layouts. Each one: the config.json block, which tensors it quantizes, pack (float32 [out, in] -> the stored
# parts, named as the Hub's checkpoints name them) and golden (the stored parts, read back from the folder ->
# the logical tensor in the reference's output dtype, computed by the reference).
# ------------------------------------------------------------------------------------------------------------


class Layout:
    model_dtype = torch.bfloat16
    golden_dtype = torch.bfloat16
    metadata = {"format": "pt"}
    notes = ()

    def extra_files(self, folder):
        pass

    def quantizes(self, name, weight):
        return linear_name(name, weight)


# ---- MLX affine ---------------------------------------------------------------------------------------------


def mlx_pack_bits(codes, bits):
    """Codes [rows, n] (< 2**bits) -> uint32 [rows, n*bits/32]: element i of a row at bit i*bits of the row's
    little-endian bitstream (mlx/ops.cpp pack_and_quantize: sum of shifts for 2/4/8 bits, bit planes otherwise)."""
    rows, n = codes.shape
    bitplanes = ((codes[:, :, None].astype(np.uint64) >> np.arange(bits, dtype=np.uint64)) & 1).reshape(rows, n * bits)
    words = bitplanes.reshape(rows, -1, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    return words.sum(axis=-1).astype(np.uint32)


def mlx_unpack_bits(w, bits):
    """mlx/ops.cpp affine_dequantize fallback, the unpacking: for bits 2/4/8 `(w << (32 - (start + bits))) >> (32 -
    bits)` for each start; otherwise every bit of every word, regrouped `bits` at a time, summed with shifts."""
    w = w.astype(np.uint32)
    if bits in (2, 4, 8):
        parts = [
            ((w << np.uint32(32 - (start + bits))) >> np.uint32(32 - bits))[..., None] for start in range(0, 32, bits)
        ]
        return np.concatenate(parts, axis=-1).reshape(w.shape[0], -1)
    planes = (w[..., None] >> np.arange(32, dtype=np.uint32)) & np.uint32(1)
    planes = planes.reshape(w.shape[0], -1, bits)
    return (planes << np.arange(bits, dtype=np.uint32)).sum(axis=-1, dtype=np.uint32)


class MlxAffine(Layout):
    metadata = {"format": "mlx"}
    reference_text = (
        "ml-explore/mlx mlx/ops.cpp affine_dequantize, the fallback the CPU stream runs (MLX does not build for Linux "
        "x86 here): reproduced in numpy. Unpack (LSB-first bitstream per row), multiply by the scale, add the bias, each "
        "op computed in float32 and rounded to the scale dtype (MLX's CPU float16/bfloat16 ops), i.e. "
        "T(T(q*scale) + bias); cross-checked against the same two ops in torch. Scales and biases come from mlx/ops.cpp "
        "affine_quantize's fallback, in float32, stored in the scale dtype."
    )

    def __init__(self, bits, group_size, dtype, overrides=None, unquantized=(), mode_key=True):
        self.bits, self.group_size = bits, group_size
        self.model_dtype = self.golden_dtype = dtype
        self.overrides = overrides or {}
        self.unquantized = set(unquantized)
        self.mode_key = mode_key

    def config_block(self):
        q = {"group_size": self.group_size, "bits": self.bits}
        if self.mode_key:
            q["mode"] = "affine"
        q.update(self.overrides)
        # mlx-lm's save_config writes the same dict under both keys.
        return {"quantization": q, "quantization_config": dict(q)}

    def params(self, module):
        override = self.overrides.get(module)
        if isinstance(override, dict):
            return override["bits"], override["group_size"]
        return self.bits, self.group_size

    def quantizes(self, name, weight):
        module = name.removesuffix(".weight")
        if (
            module in self.unquantized
            or self.overrides.get(module) is False
            or not name.endswith(".weight")
            or weight.ndim != 2
        ):
            return False
        if not (linear_name(name, weight) or module in ("model.embed_tokens", "lm_head")):
            return False
        # mlx-lm quantizes a layer only if its rows are whole groups.
        return weight.shape[-1] % self.params(module)[1] == 0

    def pack(self, name, weight):
        module = name.removesuffix(".weight")
        bits, group_size = self.params(module)
        # What MLX quantizes: the model's weights in their dtype.
        w = weight.to(self.model_dtype).float().numpy()
        rows, cols = w.shape
        g = w.reshape(rows, cols // group_size, group_size)
        w_max = g.max(axis=-1, keepdims=True)
        w_min = g.min(axis=-1, keepdims=True)
        n_bins = np.float32(2**bits - 1)
        mask = np.abs(w_min) > np.abs(w_max)
        scales = np.maximum((w_max - w_min) / n_bins, np.float32(1e-7)).astype(np.float32)
        scales = np.where(mask, scales, -scales)
        edge = np.where(mask, w_min, w_max)
        q0 = np.rint(edge / scales)
        with np.errstate(divide="ignore", invalid="ignore"):
            scales = np.where(q0 != 0, edge / q0, scales).astype(np.float32)
        biases = np.where(q0 == 0, np.float32(0), edge).astype(np.float32)
        codes = np.clip(np.rint((g - biases) / scales), 0, n_bins).astype(np.uint32).reshape(rows, cols)
        return {
            f"{module}.weight": torch.from_numpy(mlx_pack_bits(codes, bits)),
            f"{module}.scales": torch.from_numpy(scales[..., 0]).to(self.model_dtype),
            f"{module}.biases": torch.from_numpy(biases[..., 0]).to(self.model_dtype),
        }

    def golden(self, name, stored):
        module = name.removesuffix(".weight")
        bits, group_size = self.params(module)
        w = stored[f"{module}.weight"].numpy()
        scales_t, biases_t = stored[f"{module}.scales"], stored[f"{module}.biases"]
        assert scales_t.dtype == biases_t.dtype == self.golden_dtype
        q = mlx_unpack_bits(w, bits)
        rows = q.shape[0]
        q = q.reshape(rows, -1, group_size).astype(np.float32)
        s = scales_t.float().numpy()[..., None]
        b = biases_t.float().numpy()[..., None]
        rnd = np_bf16_round if self.golden_dtype == torch.bfloat16 else np_f16_round
        out = rnd(rnd(q * s) + b).reshape(rows, -1)
        result = torch.from_numpy(out).to(self.golden_dtype)
        # The same ops in torch (CPU half ops also compute in float32 and round once).
        qt = torch.from_numpy(q).to(self.golden_dtype)
        check = (qt * scales_t[..., None]) + biases_t[..., None]
        assert same_bits(check.reshape(rows, -1), result), name
        return result


# ---- GPTQ ---------------------------------------------------------------------------------------------------


class Gptq(Layout):
    model_dtype = golden_dtype = torch.float16
    reference_text = (
        "ModelCloud/GPTQModel gptqmodel/nn_modules/qlinear/torch.py TorchLinear (PackableQuantLinear.dequantize_weight): "
        "a TorchLinear gets the stored qweight/qzeros/scales/g_idx; for checkpoint_format gptq (v1) "
        "gptqmodel/utils/model.py convert_gptq_v1_to_v2_format_module first adds the historical +1 to the zeros, as "
        "GPTQModel does on load; dequantize_weight() gives [in, out] in the scales dtype, transposed here to [out, in]. "
        "The stored parts come from TorchLinear.pack_block (and convert_gptq_v2_to_v1_format_module for v1) on codes "
        "quantized round-to-nearest with GPTQ's Quantizer.find_params scales and zeros."
    )

    def __init__(self, bits, group_size, sym, desc_act, checkpoint_format, style):
        self.bits, self.group_size, self.sym, self.desc_act = bits, group_size, sym, desc_act
        self.checkpoint_format = checkpoint_format  # None: the key is absent (which means v1)
        self.style = style

    def config_block(self):
        if self.style == "optimum":
            # As transformers/optimum wrote it (e.g. Qwen's own *-GPTQ-Int4 releases): no checkpoint_format.
            q = {
                "batch_size": 1,
                "bits": self.bits,
                "block_name_to_quantize": None,
                "cache_block_outputs": True,
                "damp_percent": 0.01,
                "dataset": None,
                "desc_act": self.desc_act,
                "exllama_config": {"version": 1},
                "group_size": self.group_size,
                "max_input_length": None,
                "model_seqlen": None,
                "module_name_preceding_first_block": None,
                "modules_in_block_to_quantize": None,
                "pad_token_id": None,
                "quant_method": "gptq",
                "sym": self.sym,
                "tokenizer": None,
                "true_sequential": True,
                "use_cuda_fp16": False,
                "use_exllama": True,
            }
        elif self.style == "autogptq":
            # As AutoGPTQ wrote it (TheBloke's models): quantize_config.json's keys, no checkpoint_format.
            q = {
                "bits": self.bits,
                "group_size": self.group_size,
                "damp_percent": 0.1,
                "desc_act": self.desc_act,
                "sym": self.sym,
                "true_sequential": True,
                "model_name_or_path": None,
                "model_file_base_name": "model",
                "quant_method": "gptq",
            }
        else:
            # As GPTQModel writes it.
            q = {
                "bits": self.bits,
                "checkpoint_format": self.checkpoint_format,
                "desc_act": self.desc_act,
                "group_size": self.group_size,
                "lm_head": False,
                "meta": {
                    "damp_auto_increment": 0.01,
                    "damp_percent": 0.05,
                    "mse": 0.0,
                    "quantizer": [f"gptqmodel:{REFERENCES['gptqmodel']['version']}"],
                    "static_groups": False,
                    "true_sequential": True,
                    "uri": "https://github.com/modelcloud/gptqmodel",
                },
                "pack_dtype": "int32",
                "quant_method": "gptq",
                "sym": self.sym,
            }
        return {"quantization_config": q}

    def extra_files(self, folder):
        if self.style == "autogptq":
            with open(os.path.join(folder, "quantize_config.json"), "w") as f:
                json.dump(
                    {k: v for k, v in self.config_block()["quantization_config"].items() if k != "quant_method"},
                    f,
                    indent=2,
                )
                f.write("\n")

    def v1(self):
        return (self.checkpoint_format or "gptq") == "gptq"

    def g_idx(self, name, in_features):
        if self.group_size == -1:
            return torch.zeros(in_features, dtype=torch.int32)
        if not self.desc_act:
            return (torch.arange(in_features) // self.group_size).to(torch.int32)
        # Activation order: columns are quantized in the order of a permutation (GPTQ's descending Hessian
        # diagonal); the i-th quantized column belongs to group i // group_size. Storage is not permuted.
        perm = torch.from_numpy(rng_for(name, "perm").permutation(in_features))
        g_idx = torch.empty(in_features, dtype=torch.int32)
        g_idx[perm] = (torch.arange(in_features) // self.group_size).to(torch.int32)
        return g_idx

    def pack(self, name, weight):
        gptq = load_gptqmodel()
        module = name.removesuffix(".weight")
        out_features, in_features = weight.shape
        maxq = 2**self.bits - 1
        g_idx = self.g_idx(name, in_features)
        n_groups = int(g_idx.max()) + 1
        scales = torch.empty(out_features, n_groups)
        zeros = torch.empty(out_features, n_groups)
        for g in range(n_groups):
            cols = weight[:, g_idx == g]
            # GPTQ's Quantizer.find_params (per output row).
            xmin = torch.minimum(cols.min(dim=1).values, torch.zeros(out_features))
            xmax = torch.maximum(cols.max(dim=1).values, torch.zeros(out_features))
            if self.sym:
                xmax = torch.maximum(xmin.abs(), xmax)
                xmin = torch.where(xmin < 0, -xmax, xmin)
            both_zero = (xmin == 0) & (xmax == 0)
            xmin[both_zero], xmax[both_zero] = -1, 1
            scale = (xmax - xmin) / maxq
            zero = torch.full_like(scale, (maxq + 1) / 2) if self.sym else torch.round(-xmin / scale)
            if self.v1() and not self.sym:
                # v1 stores zero - 1: a zero of 0 would underflow into the neighbouring field (a known defect of
                # asymmetric v1 checkpoints); this fixture stays clear of it.
                zero = zero.clamp(min=1)
            scales[:, g] = scale.half().float()
            zeros[:, g] = zero
        s = scales[:, g_idx.long()]
        z = zeros[:, g_idx.long()]
        codes = torch.clamp(torch.round(weight / s) + z, 0, maxq)
        fake = (codes - z) * s  # exact in float32: what pack_block rounds back to `codes`
        # A bias stays its own tensor (float16, as pack_block stores it): the generic loop writes it.
        linear = torch.nn.Linear(in_features, out_features, bias=False)
        with torch.no_grad():
            linear.weight.copy_(fake)
        qlinear = gptq.TorchLinear(
            bits=self.bits,
            group_size=self.group_size,
            sym=self.sym,
            desc_act=self.desc_act,
            in_features=in_features,
            out_features=out_features,
            bias=False,
            pack_dtype=torch.int32,
        )
        qlinear.pack_block(linear, scales, zeros.to(torch.int32), g_idx)
        if self.v1():
            gptq.v2_to_v1(
                qlinear,
                gptq.QuantizeConfig(bits=self.bits, group_size=self.group_size, sym=self.sym, desc_act=self.desc_act),
            )
        parts = {
            f"{module}.qweight": qlinear.qweight.clone(),
            f"{module}.qzeros": qlinear.qzeros.clone(),
            f"{module}.scales": qlinear.scales.clone(),
            f"{module}.g_idx": qlinear.g_idx.to(torch.int32).clone(),
        }
        return parts

    def golden(self, name, stored):
        gptq = load_gptqmodel()
        module = name.removesuffix(".weight")
        qweight = stored[f"{module}.qweight"]
        scales = stored[f"{module}.scales"]
        in_features = stored[f"{module}.g_idx"].shape[0]
        out_features = scales.shape[1]
        qlinear = gptq.TorchLinear(
            bits=self.bits,
            group_size=self.group_size,
            sym=self.sym,
            desc_act=self.desc_act,
            in_features=in_features,
            out_features=out_features,
            bias=False,
            pack_dtype=torch.int32,
        )
        qlinear.qweight = qweight.clone()
        qlinear.qzeros = stored[f"{module}.qzeros"].clone()
        qlinear.scales = scales.clone()
        qlinear.g_idx = stored[f"{module}.g_idx"].clone()
        if self.v1():
            gptq.v1_to_v2(qlinear, bits=self.bits, pack_dtype=torch.int32)
        qlinear.post_init()
        w = qlinear.dequantize_weight()
        assert w.shape == (in_features, out_features) and w.dtype == torch.float16, (w.shape, w.dtype)
        return w.T.contiguous()

    def formula(self, name, p):
        m = name.removesuffix(".weight")
        return formulas.gptq(
            p[f"{m}.qweight"], p[f"{m}.qzeros"], p[f"{m}.scales"], p[f"{m}.g_idx"], self.bits, self.v1()
        )


# ---- AWQ ----------------------------------------------------------------------------------------------------


class AwqGemm(Layout):
    model_dtype = golden_dtype = torch.float16
    reference_text = (
        "casper-hansen/AutoAWQ awq/utils/packing_utils.py dequantize_gemm(qweight, qzeros, scales, 4, group_size) "
        "(the same function is in GPTQModel's gptqmodel/quantization/awq/utils/packing_utils.py): [in, out] float16, "
        "transposed here to [out, in]. The stored parts come from awq/modules/linear/gemm.py WQLinear_GEMM.from_linear "
        "with AutoAWQ's zero-point scales and zeros (pseudo_quantize_tensor's formulas)."
    )

    def __init__(self, group_size):
        self.bits, self.group_size = 4, group_size

    def config_block(self):
        return {
            "quantization_config": {
                "bits": 4,
                "group_size": self.group_size,
                "modules_to_not_convert": None,
                "quant_method": "awq",
                "version": "gemm",
                "zero_point": True,
            }
        }

    def pack(self, name, weight):
        awq = load_autoawq()
        module = name.removesuffix(".weight")
        out_features, in_features = weight.shape
        gs = self.group_size
        g = weight.reshape(out_features, in_features // gs, gs)
        # AutoAWQ's pseudo_quantize_tensor (zero_point=True).
        max_val = g.amax(dim=-1)
        min_val = g.amin(dim=-1)
        scales = ((max_val - min_val).clamp(min=1e-5) / 15).half().float()
        zeros = (-torch.round(min_val / scales)).clamp(0, 15)
        s = scales.repeat_interleave(gs, dim=1)
        z = zeros.repeat_interleave(gs, dim=1)
        codes = torch.clamp(torch.round(weight / s) + z, 0, 15)
        fake = (codes - z) * s
        linear = torch.nn.Linear(in_features, out_features, bias=False)
        with torch.no_grad():
            linear.weight.copy_(fake)
        qlinear = awq.WQLinear_GEMM.from_linear(linear, 4, gs, scales=scales.T.contiguous(), zeros=zeros.T.contiguous())
        return {
            f"{module}.qweight": qlinear.qweight.clone(),
            f"{module}.qzeros": qlinear.qzeros.clone(),
            f"{module}.scales": qlinear.scales.clone(),
        }

    def golden(self, name, stored):
        awq = load_autoawq()
        module = name.removesuffix(".weight")
        w = awq.dequantize_gemm(
            stored[f"{module}.qweight"], stored[f"{module}.qzeros"], stored[f"{module}.scales"], 4, self.group_size
        )
        assert w.dtype == torch.float16
        return w.T.contiguous()

    def formula(self, name, p):
        m = name.removesuffix(".weight")
        return formulas.awq(p[f"{m}.qweight"], p[f"{m}.qzeros"], p[f"{m}.scales"], self.group_size)


# ---- bitsandbytes -------------------------------------------------------------------------------------------


class Bnb4bit(Layout):
    reference_text = (
        "bitsandbytes-foundation/bitsandbytes (its pure-torch default backend on CPU): nn/modules.py "
        "Params4bit.from_prequantized(stored weight, stored quant_state parts) then functional.py dequantize_4bit(weight, "
        "quant_state), what transformers' integrations/bitsandbytes.py dequantize_bnb_weight calls; output in "
        "quant_state.dtype. The stored parts are a bnb.nn.Linear4bit's state_dict after quantizing on the CPU."
    )

    def __init__(self, quant_type, double_quant, dtype, skip=()):
        self.quant_type, self.double_quant = quant_type, double_quant
        self.model_dtype = self.golden_dtype = dtype
        self.skip = list(skip)

    def config_block(self):
        dtype = {torch.bfloat16: "bfloat16", torch.float16: "float16"}[self.model_dtype]
        return {
            "quantization_config": {
                "_load_in_4bit": True,
                "_load_in_8bit": False,
                "bnb_4bit_compute_dtype": dtype,
                "bnb_4bit_quant_storage": "uint8",
                "bnb_4bit_quant_type": self.quant_type,
                "bnb_4bit_use_double_quant": self.double_quant,
                "llm_int8_enable_fp32_cpu_offload": False,
                "llm_int8_has_fp16_weight": False,
                "llm_int8_skip_modules": ["lm_head", *self.skip],
                "llm_int8_threshold": 6.0,
                "load_in_4bit": True,
                "load_in_8bit": False,
                "quant_method": "bitsandbytes",
            }
        }

    def quantizes(self, name, weight):
        return linear_name(name, weight) and name.removesuffix(".weight") not in self.skip

    def pack(self, name, weight):
        bnb = load_bitsandbytes()
        module = name.removesuffix(".weight")
        out_features, in_features = weight.shape
        layer = bnb.nn.Linear4bit(
            in_features,
            out_features,
            bias=False,
            compute_dtype=self.model_dtype,
            compress_statistics=self.double_quant,
            quant_type=self.quant_type,
            quant_storage=torch.uint8,
        )
        layer.weight = bnb.nn.Params4bit(
            weight.to(self.model_dtype),
            requires_grad=False,
            compress_statistics=self.double_quant,
            quant_type=self.quant_type,
        )
        layer = layer.to("cpu")
        return {f"{module}.{k}": v.clone() for k, v in layer.state_dict().items()}

    def golden(self, name, stored):
        bnb = load_bitsandbytes()
        stats = {k[len(name) + 1 :]: v for k, v in stored.items() if k.startswith(name + ".")}
        param = bnb.nn.Params4bit.from_prequantized(
            data=stored[name], quantized_stats=stats, requires_grad=False, device="cpu"
        )
        w = bnb.functional.dequantize_4bit(param.data, param.quant_state)
        assert w.dtype == self.golden_dtype, w.dtype
        return w

    def formula(self, name, p):
        return formulas.bnb_4bit(
            p[name],
            p[f"{name}.absmax"],
            p[f"{name}.quant_map"],
            p[f"{name}.quant_state.bitsandbytes__{self.quant_type}"],
            p.get(f"{name}.nested_absmax"),
            p.get(f"{name}.nested_quant_map"),
        )


class Bnb8bit(Layout):
    model_dtype = torch.float16
    golden_dtype = torch.float32
    reference_text = (
        "bitsandbytes-foundation/bitsandbytes functional.py int8_vectorwise_dequant(CB, SCB) (the op "
        "_ops.py int8_vectorwise_dequant, default backend), what transformers' dequantize_bnb_weight calls for 8-bit: "
        "f32(f32(CB * SCB) * 7.874015718698502e-3), float32. The stored parts are a bnb.nn.Linear8bitLt's state_dict "
        "(has_fp16_weights=False) after quantizing on the CPU."
    )

    def config_block(self):
        return {
            "quantization_config": {
                "_load_in_4bit": False,
                "_load_in_8bit": True,
                "bnb_4bit_compute_dtype": "float32",
                "bnb_4bit_quant_storage": "uint8",
                "bnb_4bit_quant_type": "fp4",
                "bnb_4bit_use_double_quant": False,
                "llm_int8_enable_fp32_cpu_offload": False,
                "llm_int8_has_fp16_weight": False,
                "llm_int8_skip_modules": None,
                "llm_int8_threshold": 6.0,
                "load_in_4bit": False,
                "load_in_8bit": True,
                "quant_method": "bitsandbytes",
            }
        }

    def pack(self, name, weight):
        bnb = load_bitsandbytes()
        module = name.removesuffix(".weight")
        out_features, in_features = weight.shape
        layer = bnb.nn.Linear8bitLt(in_features, out_features, bias=False, has_fp16_weights=False)
        layer.weight = bnb.nn.Int8Params(weight.to(self.model_dtype), requires_grad=False, has_fp16_weights=False)
        layer = layer.to("cpu")
        return {f"{module}.{k}": v.clone() for k, v in layer.state_dict().items()}

    def golden(self, name, stored):
        bnb = load_bitsandbytes()
        module = name.removesuffix(".weight")
        assert int(stored[f"{module}.weight_format"]) == 0
        return bnb.functional.int8_vectorwise_dequant(stored[name], stored[f"{module}.SCB"])

    def formula(self, name, p):
        return formulas.bnb_8bit(p[name], p[name.removesuffix(".weight") + ".SCB"])


# ---- FP8 ----------------------------------------------------------------------------------------------------


def fp8_e4m3(x):
    return x.clamp(-448, 448).to(torch.float8_e4m3fn)


def transformers_fp8_dequantize(weight, scale, dtype):
    """transformers 5.18 integrations/finegrained_fp8.py Fp8Dequantize._dequantize_one."""
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize

    return Fp8Dequantize(None)._dequantize_one(weight, scale, output_dtype=dtype)


class Fp8Block(Layout):
    notes = (
        "DeepSeek's kernel run by Triton's interpreter with a bfloat16 output (torch default dtype bfloat16, as "
        "fp8_cast_bf16.py sets it) truncates instead of rounding: the interpreter's cast_impl converts float32 to "
        "bfloat16 by dropping bits, where a GPU's store rounds to nearest even. The golden takes the interpreter's "
        "float32 products (bit-identical to torch's) and rounds them with torch.",
    )
    reference_text = (
        "deepseek-ai/DeepSeek-V3 inference/kernel.py weight_dequant (the Triton kernel fp8_cast_bf16.py uses): run "
        "in Triton 3.8.0's CPU interpreter with a float32 output, giving f32(w) * scale_inv over ceil-div 128x128 blocks "
        "(masked at the edges); then rounded once to bfloat16 (RNE), what the kernel's store does on a GPU into "
        "fp8_cast_bf16.py's bfloat16 buffer. Cross-checked with the same formula in torch (llama.cpp's dequant_simple: "
        "repeat_interleave, crop, multiply in f32)."
    )

    def __init__(self, not_convert):
        self.not_convert = list(not_convert)

    def config_block(self):
        return {
            "quantization_config": {
                "activation_scheme": "dynamic",
                "fmt": "e4m3",
                "modules_to_not_convert": self.not_convert,
                "quant_method": "fp8",
                "weight_block_size": [128, 128],
            }
        }

    def quantizes(self, name, weight):
        return linear_name(name, weight) and name.removesuffix(".weight") not in self.not_convert

    def pack(self, name, weight):
        module = name.removesuffix(".weight")
        rows, cols = weight.shape
        br, bc = math.ceil(rows / 128), math.ceil(cols / 128)
        padded = torch.zeros(br * 128, bc * 128)
        padded[:rows, :cols] = weight
        amax = padded.reshape(br, 128, bc, 128).abs().amax(dim=(1, 3))
        scale = (amax / 448).float()
        expanded = scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[:rows, :cols]
        return {f"{module}.weight": fp8_e4m3(weight / expanded), f"{module}.weight_scale_inv": scale}

    def golden_all(self, names, stored):
        pairs = [(stored[n], stored[n.removesuffix(".weight") + ".weight_scale_inv"]) for n in names]
        products = deepseek_weight_dequant_f32(pairs)
        result = {}
        self.transformers_outcome = {}
        for n, (w, s), y in zip(names, pairs, products, strict=True):
            rows, cols = w.shape
            emulated = w.float() * s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:rows, :cols]
            assert same_bits(y, emulated), n
            result[n] = y.to(torch.bfloat16)
            try:
                t = transformers_fp8_dequantize(w, s, torch.bfloat16)
                differ = int((t.view(torch.int16) != result[n].view(torch.int16)).sum())
                self.transformers_outcome[n] = f"{differ} of {w.numel()} values differ" if differ else "equal"
            except Exception as e:  # noqa: BLE001
                self.transformers_outcome[n] = f"{type(e).__name__}: {e}"
        return result

    def formula(self, name, p):
        return formulas.fp8_blocks(p[name], p[name.removesuffix(".weight") + ".weight_scale_inv"], (128, 128))


class Fp8PerTensor(Layout):
    notes = (
        "transformers 5.18 loads this folder on a CPU without an error but wrongly: it reports weight_scale and "
        "input_scale as UNEXPECTED keys and casts the raw e4m3 values to bfloat16 unscaled "
        "(transformers_loads_quantized_folder).",
    )
    reference_text = (
        "transformers 5.18 integrations/finegrained_fp8.py Fp8Dequantize._dequantize_one(weight, weight_scale, "
        "output_dtype=bfloat16) on each module: a 0-d scale is its one-block case, bf16(f32(w) * f32(scale)). transformers "
        "itself does not read this layout (it looks for weight_scale_inv and, without weight_block_size in the config, "
        "assumes 128x128 blocks), nor does llama.cpp (only *_scale_inv under quant_method fp8); vLLM's Fp8LinearMethod "
        "reads it (per-tensor weight_scale, static input_scale) but never dequantizes."
    )

    def config_block(self):
        # AutoFP8's config (e.g. neuralmagic/Meta-Llama-3-8B-Instruct-FP8).
        return {
            "quantization_config": {"activation_scheme": "static", "ignored_layers": ["lm_head"], "quant_method": "fp8"}
        }

    def pack(self, name, weight):
        module = name.removesuffix(".weight")
        scale = (weight.abs().max() / 448).float().reshape(())
        input_scale = torch.tensor(float(rng_for(name, "input").uniform(0.004, 0.02)), dtype=torch.float32).reshape(())
        return {
            f"{module}.weight": fp8_e4m3(weight / scale),
            f"{module}.weight_scale": scale,
            f"{module}.input_scale": input_scale,
        }

    def golden(self, name, stored):
        module = name.removesuffix(".weight")
        w, s = stored[name], stored[f"{module}.weight_scale"]
        result = transformers_fp8_dequantize(w, s, torch.bfloat16)
        assert same_bits(result, (w.float() * s.float()).to(torch.bfloat16)), name
        return result

    def formula(self, name, p):
        return formulas.fp8_scaled(p[name], p[name.removesuffix(".weight") + ".weight_scale"])


class FbgemmFp8(Layout):
    reference_text = (
        "transformers 5.18 integrations/finegrained_fp8.py Fp8Dequantize._dequantize_one(weight, weight_scale [out, 1], "
        "output_dtype=bfloat16): a scale grid of [out, 1] is per-row blocks, bf16(f32(w) * f32(scale[row])). transformers "
        "loads fbgemm_fp8 only on a GPU with fbgemm-gpu (FbgemmFp8Linear), which never dequantizes; the formula is "
        "fbgemm's per-row scaling (quantize_fp8_per_row: scale = row amax / 448)."
    )

    def __init__(self, not_convert):
        self.not_convert = list(not_convert)

    def config_block(self):
        # As meta-llama/Llama-3.1-405B-Instruct-FP8 ships it.
        return {
            "quantization_config": {
                "activation_scale_ub": 1200.0,
                "modules_to_not_convert": self.not_convert,
                "quant_method": "fbgemm_fp8",
            }
        }

    def quantizes(self, name, weight):
        return linear_name(name, weight) and name.removesuffix(".weight") not in self.not_convert

    def pack(self, name, weight):
        module = name.removesuffix(".weight")
        scale = (weight.abs().amax(dim=1, keepdim=True) / 448).float()
        return {f"{module}.weight": fp8_e4m3(weight / scale), f"{module}.weight_scale": scale}

    def golden(self, name, stored):
        module = name.removesuffix(".weight")
        w, s = stored[name], stored[f"{module}.weight_scale"]
        result = transformers_fp8_dequantize(w, s, torch.bfloat16)
        assert same_bits(result, (w.float() * s.float()).to(torch.bfloat16)), name
        return result

    def formula(self, name, p):
        return formulas.fp8_scaled(p[name], p[name.removesuffix(".weight") + ".weight_scale"])


# ---- MXFP4 (gpt-oss) ----------------------------------------------------------------------------------------

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def e2m1_codes(x):
    """Nearest E2M1 code of each value (ties to the even code), sign in bit 3."""
    magnitudes = E2M1[:8]
    a = x.abs().clamp(max=6.0)
    distance = (a[..., None] - magnitudes).abs()
    best = distance.min(dim=-1, keepdim=True).values
    candidates = torch.where(distance == best, torch.arange(8), 99)
    # Of two equally near magnitudes, the even code (its mantissa bit 0).
    even = torch.where(candidates % 2 == 0, candidates, 99).amin(dim=-1)
    codes = torch.where(even == 99, candidates.amin(dim=-1), even)
    return codes | ((x < 0).to(torch.int64) << 3)


class Mxfp4(Layout):
    reference_text = (
        "transformers 5.18 integrations/mxfp4.py convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16) (the "
        "function transformers' Mxfp4 quantizer dequantizes with on a CPU; the same code as openai/gpt-oss "
        "gpt_oss/torch/weights.py): [E, in, out] bfloat16, the orientation of GptOssExperts' gate_up_proj and "
        "down_proj. The quantized values are E2M1 codes of the float32 weights over 32-element blocks with a power-of-two "
        "scale (E8M0 byte = exponent + 127); expert 3 (Mxfp4.DISABLED_EXPERT, never routed: its router bias is -1e4) holds the "
        "edge cases."
    )
    DISABLED_EXPERT = 3

    def config_block(self):
        # openai/gpt-oss-20b's block.
        return {
            "quantization_config": {
                "modules_to_not_convert": [
                    "model.layers.*.self_attn",
                    "model.layers.*.mlp.router",
                    "model.embed_tokens",
                    "lm_head",
                ],
                "quant_method": "mxfp4",
            }
        }

    def quantizes(self, name, weight):
        return name.endswith(".mlp.experts.gate_up_proj") or name.endswith(".mlp.experts.down_proj")

    def pack(self, name, weight):
        # transformers' [E, in, out] -> the checkpoint's [E, out, in/32, 16].
        w = weight.transpose(1, 2).contiguous()
        experts, rows, cols = w.shape
        blocks = w.reshape(experts, rows, cols // 32, 32)
        amax = blocks.abs().amax(dim=-1)
        exponent = torch.ceil(torch.log2(amax.clamp(min=2.0**-120) / 6.0)).to(torch.int64)
        scales = (exponent + 127).clamp(1, 254)
        codes = e2m1_codes(blocks / torch.pow(2.0, (scales - 127).float())[..., None])
        rng = rng_for(name, "edges")
        # Code 8 (-0) in place of some +0 codes in the experts that run.
        zero_codes = (codes == 0).nonzero()
        pick = zero_codes[torch.from_numpy(rng.choice(len(zero_codes), size=min(12, len(zero_codes)), replace=False))]
        codes[tuple(pick.T)] = 8
        # The never-routed expert: scale byte 0x00 (2^-127, subnormal in float32 and bfloat16), 0xFF (2^128: 0.5
        # gives 2^127, larger codes infinity, ±0 stays ±0) and every code in a block of bytes 1 and 254.
        e = self.DISABLED_EXPERT
        scales[e, 0, 0] = 0x00
        scales[e, 1, 0] = 0xFF
        codes[e, 1, 0] = torch.tensor([0, 8, 1, 9] * 8)
        scales[e, 2, 0] = 0xFF
        codes[e, 2, 0] = torch.arange(32) % 16
        scales[e, 3, 0] = 1
        codes[e, 3, 0] = torch.arange(32) % 16
        scales[e, 4, 0] = 254
        codes[e, 4, 0] = (torch.arange(32) + 5) % 16
        codes[e, 0, 0] = torch.arange(32) % 16
        flat = codes.to(torch.uint8).reshape(experts, rows, cols // 32, 16, 2)
        packed = flat[..., 0] | (flat[..., 1] << 4)
        prefix = name  # model.layers.N.mlp.experts.gate_up_proj
        return {f"{prefix}_blocks": packed.contiguous(), f"{prefix}_scales": scales.to(torch.uint8).contiguous()}

    def golden(self, name, stored):
        from transformers.integrations.mxfp4 import convert_moe_packed_tensors

        return convert_moe_packed_tensors(stored[f"{name}_blocks"], stored[f"{name}_scales"], dtype=torch.bfloat16)

    def formula(self, name, p):
        return formulas.mxfp4(p[f"{name}_blocks"], p[f"{name}_scales"])


# ---- compressed-tensors -------------------------------------------------------------------------------------


class CompressedTensors(Layout):
    reference_text = (
        "vllm-project/compressed-tensors compressors/<format>/base.py <Compressor>.decompress(module state dict, scheme) "
        "-> quantization/lifecycle/forward.py dequantize (forward_helpers._dequantize), the path ModelCompressor's "
        "decompress_model takes per module; output in the scale dtype. The stored parts are <Compressor>.compress(state "
        "dict, scheme) of the bfloat16 weights with scales and zero points from quantization/utils/helpers.py "
        "calculate_qparams on each group's (or row's) min and max; config.json's block is ModelCompressor.update_config's."
    )

    def __init__(self, preset, fmt, overrides=None, g_idx=False, input_global_scale=False):
        self.preset, self.fmt, self.overrides, self.use_g_idx = preset, fmt, overrides or {}, g_idx
        self.input_global_scale = input_global_scale

    def scheme(self):
        load_compressed_tensors()
        from compressed_tensors.quantization import QuantizationScheme, preset_name_to_scheme

        scheme = preset_name_to_scheme(self.preset, ["Linear"])
        if self.overrides:
            weights = scheme.weights.model_copy(update=self.overrides)
            scheme = QuantizationScheme(
                targets=scheme.targets, weights=weights, input_activations=scheme.input_activations
            )
        return scheme

    def compressor(self):
        load_compressed_tensors()
        from compressed_tensors.compressors import BaseCompressor

        return BaseCompressor.get_value_from_registry(self.fmt)

    def write_config(self, folder):
        load_compressed_tensors()
        from compressed_tensors.compressors import ModelCompressor
        from compressed_tensors.quantization import QuantizationConfig, QuantizationStatus

        # llm-compressor's ModelCompressor.from_pretrained_model names each group's format too.
        qc = QuantizationConfig(
            config_groups={"group_0": self.scheme().model_copy(update={"format": self.fmt})},
            format=self.fmt,
            ignore=["lm_head"],
            quantization_status=QuantizationStatus.COMPRESSED,
        )
        ModelCompressor(quantization_config=qc).update_config(folder)

    def config_block(self):
        return {}

    def qparams(self, weight, g_idx):
        from compressed_tensors.quantization.utils import calculate_qparams

        args = self.scheme().weights
        w = weight.to(torch.bfloat16)
        out_features, in_features = w.shape
        strategy = args.strategy.value if hasattr(args.strategy, "value") else args.strategy
        if strategy == "channel":
            return calculate_qparams(w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True), args)
        if strategy == "group":
            gs = args.group_size
            n_groups = in_features // gs
            if g_idx is None:
                grouped = w.reshape(out_features, n_groups, gs)
                return calculate_qparams(grouped.amin(dim=-1), grouped.amax(dim=-1), args)
            mins = torch.stack([w[:, g_idx == g].amin(dim=1) for g in range(n_groups)], dim=1)
            maxs = torch.stack([w[:, g_idx == g].amax(dim=1) for g in range(n_groups)], dim=1)
            return calculate_qparams(mins, maxs, args)
        if strategy == "tensor_group":
            from compressed_tensors.quantization.utils import generate_gparam

            global_scale = generate_gparam(w.amin(), w.amax())
            gs = args.group_size
            grouped = w.reshape(out_features, in_features // gs, gs)
            scale, zp = calculate_qparams(grouped.amin(dim=-1), grouped.amax(dim=-1), args, global_scale=global_scale)
            return scale, zp, global_scale
        raise NotImplementedError(strategy)

    def pack(self, name, weight):
        module = name.removesuffix(".weight")
        scheme = self.scheme()
        g_idx = None
        if self.use_g_idx:
            gs = scheme.weights.group_size
            perm = torch.from_numpy(rng_for(name, "perm").permutation(weight.shape[1]))
            g_idx = torch.empty(weight.shape[1], dtype=torch.int32)
            g_idx[perm] = (torch.arange(weight.shape[1]) // gs).to(torch.int32)
        params = self.qparams(weight, g_idx)
        state = {"weight": weight.to(torch.bfloat16), "weight_scale": params[0]}
        if not scheme.weights.symmetric:
            state["weight_zero_point"] = params[1]
        if g_idx is not None:
            state["weight_g_idx"] = g_idx
        if len(params) == 3:
            state["weight_global_scale"] = params[2].reshape(1).float()
            if self.input_global_scale:
                state["input_global_scale"] = torch.tensor(
                    [float(rng_for(name, "input").uniform(200, 900))], dtype=torch.float32
                )
        compressed = self.compressor().compress(state, scheme)
        return {f"{module}.{k}": v.contiguous() for k, v in compressed.items()}

    def golden(self, name, stored):
        module = name.removesuffix(".weight")
        state = {k[len(module) + 1 :]: v for k, v in stored.items() if k.startswith(module + ".")}
        out = self.compressor().decompress(state, self.scheme())
        return out["weight"]

    def formula(self, name, p):
        m = name.removesuffix(".weight")
        args = self.scheme().weights
        if self.fmt == "pack-quantized":
            return formulas.ct_pack_quantized(
                p[f"{m}.weight_packed"],
                p[f"{m}.weight_scale"],
                p[f"{m}.weight_shape"],
                args.num_bits,
                args.group_size,
                args.symmetric,
                p.get(f"{m}.weight_zero_point"),
                p.get(f"{m}.weight_g_idx"),
            )
        if self.fmt == "nvfp4-pack-quantized":
            return formulas.ct_nvfp4(p[f"{m}.weight_packed"], p[f"{m}.weight_scale"], p[f"{m}.weight_global_scale"])
        return formulas.ct_channel(p[name].astype(np.float32), p[f"{m}.weight_scale"])


# ---- NVFP4 (ModelOpt) ---------------------------------------------------------------------------------------


class ModeloptNvfp4(Layout):
    reference_text = (
        "NVIDIA/TensorRT-Model-Optimizer modelopt/torch/quantization/qtensor/nvfp4_tensor.py "
        "NVFP4QTensor(shape, bfloat16, weight).dequantize(dtype=bfloat16, scale=weight_scale, double_scale=weight_scale_2, "
        "block_sizes={-1: 16}) (its non-fast, pure-torch path): bf16(f32(e2m1 * f32(f32(weight_scale) * weight_scale_2))). "
        "The stored parts are NVFP4QTensor.quantize(bfloat16 weight, 16) (weight_scale_2 = amax / (6 * 448)), named as "
        "modelopt/torch/export/unified_export_hf.py exports them; config.json's block is "
        "export/convert_hf_config.py convert_hf_quant_config_format(hf_quant_config.json)."
    )

    def hf_quant_config(self):
        return {
            "producer": {"name": "modelopt", "version": REFERENCES["modelopt"]["version"]},
            "quantization": {
                "quant_algo": "NVFP4",
                "kv_cache_quant_algo": None,
                "group_size": 16,
                "exclude_modules": ["lm_head"],
            },
        }

    def config_block(self):
        return {"quantization_config": load_modelopt().convert_hf_quant_config_format(self.hf_quant_config())}

    def extra_files(self, folder):
        with open(os.path.join(folder, "hf_quant_config.json"), "w") as f:
            json.dump(self.hf_quant_config(), f, indent=4)

    def pack(self, name, weight):
        modelopt = load_modelopt()
        module = name.removesuffix(".weight")
        qtensor, scale, scale_2 = modelopt.NVFP4QTensor.quantize(weight.to(torch.bfloat16), 16)
        input_scale = torch.tensor(float(rng_for(name, "input").uniform(0.001, 0.005)), dtype=torch.float32).reshape(())
        return {
            f"{module}.weight": qtensor._quantized_data.contiguous(),
            f"{module}.weight_scale": scale.contiguous(),
            f"{module}.weight_scale_2": scale_2.float().reshape(()),
            f"{module}.input_scale": input_scale,
        }

    def golden(self, name, stored):
        modelopt = load_modelopt()
        module = name.removesuffix(".weight")
        packed = stored[name]
        shape = torch.Size([packed.shape[0], packed.shape[1] * 2])
        qtensor = modelopt.NVFP4QTensor(shape, torch.bfloat16, packed)
        return qtensor.dequantize(
            dtype=torch.bfloat16,
            scale=stored[f"{module}.weight_scale"],
            double_scale=stored[f"{module}.weight_scale_2"],
            block_sizes={-1: 16},
        )

    def formula(self, name, p):
        m = name.removesuffix(".weight")
        return formulas.modelopt_nvfp4(p[name], p[f"{m}.weight_scale"], p[f"{m}.weight_scale_2"])


# ------------------------------------------------------------------------------------------------------------
# The folders
# ------------------------------------------------------------------------------------------------------------

FOLDERS = [
    {
        "name": "mlx-affine-4bit",
        "what": "MLX affine 4-bit, group 64, BF16 scales and biases; quantized embedding and lm_head; per-module overrides "
        "(k_proj group 32, v_proj and lm_head 6-bit, down_proj 3-bit: codes straddle 32-bit words); gate_proj left "
        "unquantized (no .scales, no config entry, as mlx-lm leaves a module its predicate skipped); an index and 2 "
        "shards as mlx-lm writes them",
        "config": llama(hidden=128, intermediate=128, layers=1, heads=4, kv_heads=2),
        "layout": MlxAffine(
            4,
            64,
            torch.bfloat16,
            overrides={
                "model.layers.0.self_attn.k_proj": {"group_size": 32, "bits": 4, "mode": "affine"},
                "model.layers.0.self_attn.v_proj": {"group_size": 64, "bits": 6, "mode": "affine"},
                "model.layers.0.mlp.down_proj": {"group_size": 64, "bits": 3, "mode": "affine"},
                "lm_head": {"group_size": 64, "bits": 6, "mode": "affine"},
            },
            unquantized=["model.layers.0.mlp.gate_proj"],
        ),
        "shards": "mlx",
    },
    {
        "name": "mlx-affine-8bit",
        "what": "MLX affine 8-bit, group 32, F16 scales and biases; Qwen3 with tied embeddings (the quantized embedding "
        "is also the output layer); the older config without a mode key; model.safetensors with an index of one file, "
        "as mlx-lm writes it",
        "config": qwen3(hidden=64, intermediate=128, layers=2),
        "layout": MlxAffine(8, 32, torch.float16, mode_key=False),
    },
    {
        "name": "gptq-4bit-sym",
        "what": "GPTQ 4-bit symmetric, group 32, checkpoint_format absent (= gptq, v1: zeros stored minus one, so every "
        "qzeros word is 0x77777777), desc_act false with g_idx = k // 32; Qwen2 with float16 q/k/v biases (as Qwen's own "
        "GPTQ releases); config as transformers/optimum writes it; an index and 2 shards, the boundary inside a module "
        "(layer 0 down_proj's qweight in the first shard, its other parts in the second)",
        "config": qwen2(hidden=64, intermediate=128, layers=2),
        "layout": Gptq(4, 32, sym=True, desc_act=False, checkpoint_format=None, style="optimum"),
        "shards": "split-module",
    },
    {
        "name": "gptq-4bit-asym-v2",
        "what": "GPTQ 4-bit asymmetric, group 32, checkpoint_format gptq_v2 (zeros stored as they are)",
        "config": llama(),
        "layout": Gptq(4, 32, sym=False, desc_act=False, checkpoint_format="gptq_v2", style="gptqmodel"),
    },
    {
        "name": "gptq-4bit-desc-act",
        "what": "GPTQ 4-bit symmetric v1 with desc_act true: g_idx is a permutation's groups (not monotonic), storage not "
        "permuted; config as AutoGPTQ wrote it (and quantize_config.json beside it)",
        "config": llama(),
        "layout": Gptq(4, 32, sym=True, desc_act=True, checkpoint_format=None, style="autogptq"),
    },
    {
        "name": "gptq-3bit",
        "what": "GPTQ 3-bit asymmetric v1, group 32: 32 codes in 3 words, values 10 and 21 straddle words, in qweight "
        "(along in) and qzeros (along out); zeros stored minus one field by field",
        "config": llama(),
        "layout": Gptq(3, 32, sym=False, desc_act=False, checkpoint_format="gptq", style="gptqmodel"),
    },
    {
        "name": "gptq-2bit",
        "what": "GPTQ 2-bit asymmetric v1, group 32 (16 codes a word)",
        "config": llama(),
        "layout": Gptq(2, 32, sym=False, desc_act=False, checkpoint_format="gptq", style="gptqmodel"),
    },
    {
        "name": "gptq-8bit",
        "what": "GPTQ 8-bit symmetric v1, group_size -1 (one group per row: scales [1, out], g_idx all 0)",
        "config": llama(),
        "layout": Gptq(8, -1, sym=True, desc_act=False, checkpoint_format="gptq", style="gptqmodel"),
    },
    {
        "name": "awq-gemm-4bit",
        "what": "AWQ GEMM 4-bit with zero points, group 64: qweight/qzeros packed along out with the interleaved nibble "
        "order [0, 2, 4, 6, 1, 3, 5, 7]",
        "config": llama(hidden=128, intermediate=128, layers=1),
        "layout": AwqGemm(64),
    },
    {
        "name": "bnb-nf4",
        "what": "bitsandbytes 4-bit NF4 with double quantization, quant_state dtype bfloat16; hidden 80 and intermediate 210 "
        "so that 64-element blocks straddle rows, the last block is partial (80*210 = 262.5 blocks) and the nested absmax "
        "has 2 blocks of 256; one module skipped through llm_int8_skip_modules (stays BF16); an index and 2 shards",
        "config": llama(hidden=80, intermediate=210, layers=2, heads=5, kv_heads=1),
        "layout": Bnb4bit("nf4", True, torch.bfloat16, skip=["model.layers.1.mlp.down_proj"]),
        "shards": "layers",
    },
    {
        "name": "bnb-fp4",
        "what": "bitsandbytes 4-bit FP4 (bnb's own table), no double quantization, quant_state dtype float16",
        "config": llama(),
        "layout": Bnb4bit("fp4", False, torch.float16),
    },
    {
        "name": "bnb-int8",
        "what": "bitsandbytes 8-bit LLM.int8: int8 weight, SCB (row absmax, F32), weight_format 0; the reference gives F32",
        "config": llama(),
        "layout": Bnb8bit(),
    },
    {
        "name": "fp8-block",
        "what": "fine-grained FP8 (DeepSeek/Qwen3-FP8 style): F8_E4M3 weights, F32 weight_scale_inv over 128x128 blocks; "
        "hidden 144, head_dim 36 and intermediate 136, so no weight dimension is a multiple of 128 (partial edge blocks, "
        "ceil-div scale grids [2, 2] and [1, 2]); o_proj in modules_to_not_convert (stays BF16)",
        "config": qwen3(hidden=144, intermediate=136, layers=1, heads=4, kv_heads=2, head_dim=36),
        "layout": Fp8Block(not_convert=["lm_head", "model.layers.0.self_attn.o_proj"]),
    },
    {
        "name": "fp8-tensor",
        "what": "per-tensor FP8 as AutoFP8 wrote it (quant_method fp8 without weight_block_size, activation_scheme "
        "static): weight_scale and input_scale F32 scalars of shape []",
        "config": llama(),
        "layout": Fp8PerTensor(),
    },
    {
        "name": "fp8-channel",
        "what": "per-channel FP8, quant_method fbgemm_fp8 (Meta's Llama-3.1-405B-FP8 layout): weight_scale F32 [out, 1]; "
        "layer 0's attention in modules_to_not_convert (stays BF16)",
        "config": llama(),
        "layout": FbgemmFp8(
            not_convert=[
                "lm_head",
                "model.layers.0.self_attn.q_proj",
                "model.layers.0.self_attn.k_proj",
                "model.layers.0.self_attn.v_proj",
                "model.layers.0.self_attn.o_proj",
            ]
        ),
    },
    {
        "name": "mxfp4-gpt-oss",
        "what": "MXFP4 experts of gpt-oss (GptOssForCausalLM, 4 experts, top 2): U8 _blocks [E, out, in/32, 16] and E8M0 "
        "_scales [E, out, in/32], BF16 biases; attention, router, embeddings and lm_head BF16. Code 8 (-0) in the "
        "routed experts; expert 3 (router bias -1e4, never chosen) holds scale bytes 0x00, 0x01, 0xFE and 0xFF with "
        "every code (0xFF gives 2^127 for 0.5 and infinity beyond, which the golden keeps)",
        "config": gpt_oss(),
        "layout": Mxfp4(),
    },
    {
        "name": "ct-w4a16-asym",
        "what": "compressed-tensors pack-quantized int4, group 32, asymmetric: I32 weight_packed [out, in/8], BF16 "
        "weight_scale [out, in/32], I32 weight_zero_point packed along out [out/8, in/32], I64 weight_shape",
        "config": llama(),
        "layout": CompressedTensors("W4A16_ASYM", "pack-quantized", overrides={"group_size": 32}),
    },
    {
        "name": "ct-w4a16-gidx",
        "what": "compressed-tensors pack-quantized int4, group 32, symmetric, actorder group: I32 weight_g_idx maps each "
        "input column to its group (not monotonic)",
        "config": llama(),
        "layout": CompressedTensors(
            "W4A16", "pack-quantized", overrides={"group_size": 32, "actorder": "group"}, g_idx=True
        ),
    },
    {
        "name": "ct-w8a8-int8",
        "what": "compressed-tensors int-quantized (W8A8): I8 weight, BF16 weight_scale [out, 1] (channel), symmetric",
        "config": llama(),
        "layout": CompressedTensors("W8A8", "int-quantized"),
    },
    {
        "name": "ct-fp8-dynamic",
        "what": "compressed-tensors float-quantized (FP8_DYNAMIC): F8_E4M3 weight, BF16 weight_scale [out, 1] (channel)",
        "config": llama(),
        "layout": CompressedTensors("FP8_DYNAMIC", "float-quantized"),
    },
    {
        "name": "ct-nvfp4",
        "what": "compressed-tensors nvfp4-pack-quantized: U8 weight_packed [out, in/2] (low nibble first), F8_E4M3 "
        "weight_scale [out, in/16], F32 weight_global_scale [1] (divided by), F32 input_global_scale [1]",
        "config": llama(),
        "layout": CompressedTensors("NVFP4", "nvfp4-pack-quantized", input_global_scale=True),
    },
    {
        "name": "modelopt-nvfp4",
        "what": "NVFP4 from NVIDIA ModelOpt: U8 weight [out, in/2], F8_E4M3 weight_scale [out, in/16], F32 weight_scale_2 "
        "[] (multiplied by), F32 input_scale []; hf_quant_config.json beside config.json",
        "config": llama(),
        "layout": ModeloptNvfp4(),
    },
]


def prepare_weights(spec, weights):
    if isinstance(spec["layout"], Mxfp4):
        # The never-routed expert.
        for name in weights:
            if name.endswith(".mlp.router.bias"):
                weights[name][Mxfp4.DISABLED_EXPERT] = -1e4


def config_dict(config, dtype):
    with tempfile.TemporaryDirectory() as tmp:
        config.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            data = json.load(f)
    data["dtype"] = str(dtype).removeprefix("torch.")
    data.pop("_attn_implementation", None)
    return data


def write_json(path, data, indent=2):
    with open(path, "w") as f:
        json.dump(data, f, indent=indent)
        f.write("\n")


def compact_json(data, level=0):
    """JSON indented by one space a level, with lists of plain values (shapes, ids, logits) and short objects deep
    down on one line."""
    pad = " " * (level + 1)
    if isinstance(data, dict) and data and level >= 2 and len(json.dumps(data)) <= 120:
        return json.dumps(data)
    if isinstance(data, dict) and data:
        items = [f"{pad}{json.dumps(k)}: {compact_json(v, level + 1)}" for k, v in data.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * level + "}"
    if isinstance(data, list) and data and any(isinstance(v, (dict, list)) for v in data):
        return "[\n" + ",\n".join(pad + compact_json(v, level + 1) for v in data) + "\n" + " " * level + "]"
    return json.dumps(data)


def shard_plan(spec, names):
    """The shard of each stored tensor: one file, or two."""
    kind = spec.get("shards")
    if kind is None:
        return {n: 0 for n in names}
    if kind == "mlx" or kind == "layers":
        # Shard 1: embeddings and layer 0's attention; shard 2: the rest.
        return {
            n: 0 if ("embed_tokens" in n or ".layers.0.self_attn." in n or ".layers.0.input_layernorm" in n) else 1
            for n in names
        }
    if kind == "split-module":
        plan = {}
        for n in names:
            first = "embed_tokens" in n or ".layers.0.self_attn." in n or ".layers.0.input_layernorm" in n
            first = first or n == "model.layers.0.mlp.down_proj.qweight"
            plan[n] = 0 if first else 1
        return plan
    raise ValueError(kind)


def write_model(folder, spec, stored, n_parameters):
    layout = spec["layout"]
    plan = shard_plan(spec, stored)
    count = max(plan.values()) + 1
    mlx = isinstance(layout, MlxAffine)
    if count == 1 and not mlx:
        safetensors.torch.save_file(stored, os.path.join(folder, "model.safetensors"), metadata=layout.metadata)
        return ["model.safetensors"]
    files = (
        ["model.safetensors"] if count == 1 else [f"model-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)]
    )
    for i, file in enumerate(files):
        part = {n: t for n, t in stored.items() if plan[n] == i}
        safetensors.torch.save_file(part, os.path.join(folder, file), metadata=layout.metadata)
    total_size = sum(t.numel() * t.element_size() for t in stored.values())
    weight_map = {n: files[plan[n]] for n in sorted(stored)}
    if mlx:
        # mlx-lm's save_model: an index even for one file, total_parameters too, and indent 4.
        index = {"metadata": {"total_size": total_size, "total_parameters": n_parameters}, "weight_map": weight_map}
        write_json(os.path.join(folder, "model.safetensors.index.json"), index, indent=4)
    else:
        index = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
        write_json(os.path.join(folder, "model.safetensors.index.json"), index)
    return files + ["model.safetensors.index.json"]


def read_model(folder, files):
    stored = {}
    for file in files:
        if file.endswith(".safetensors"):
            stored.update(safetensors.torch.load_file(os.path.join(folder, file)))
    return stored


def sequences(seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(2, VOCAB_SIZE, size=length).tolist() for length in SEQUENCE_LENGTHS]


def plain_logits(config_data, golden, seed):
    """transformers' float32 next-token logits of the plain model: config.json without its quantization block and
    golden.safetensors as model.safetensors."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = {k: v for k, v in config_data.items() if k not in ("quantization_config", "quantization")}
        write_json(os.path.join(tmp, "config.json"), plain)
        safetensors.torch.save_file(golden, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        model, info = AutoModelForCausalLM.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
        )
        problems = {k: v for k, v in info.items() if v}
        assert not problems, problems
        model.eval()
        cases = []
        with torch.no_grad():
            for ids in sequences(seed):
                logits = model(torch.tensor([ids])).logits[0, -1].to(torch.float32)
                assert torch.isfinite(logits).all(), ids
                p = torch.softmax(logits.double(), dim=-1).sort(descending=True).values
                cases.append(
                    {
                        "ids": ids,
                        "logits": [float(x) for x in logits],
                        "spread": {"top1": float(p[0]), "top2": float(p[1]), "uniform": 1 / len(logits)},
                    }
                )
        return cases, type(model).__name__


def transformers_direct(folder, golden, dtype):
    """Whether transformers itself loads the quantized folder on this CPU, and if so whether its parameters equal
    the golden tensors bit for bit."""
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    except Exception as e:  # noqa: BLE001
        return f"refuses: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    state = model.state_dict()
    differ = [n for n, t in golden.items() if n in state and not same_bits(state[n].to(t.dtype), t)]
    missing = [n for n in golden if n not in state]
    if missing:
        return f"loads, but lacks {missing[:3]}"
    return (
        "loads; every tensor equals golden"
        if not differ
        else f"loads; {len(differ)} tensors differ from golden, e.g. {differ[:3]}"
    )


def make_folder(spec, seed):
    name, layout = spec["name"], spec["layout"]
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    config = spec["config"]
    weights = random_weights(config, seed)
    prepare_weights(spec, weights)
    n_parameters = sum(t.numel() for t in weights.values())

    stored, logical = {}, {}
    for tensor_name in sorted(weights):
        weight = weights[tensor_name]
        if layout.quantizes(tensor_name, weight):
            parts = layout.pack(tensor_name, weight)
            assert not set(parts) & set(stored), tensor_name
            stored.update(parts)
            logical[tensor_name] = sorted(parts)
        else:
            stored[tensor_name] = weight.to(layout.model_dtype)
            logical[tensor_name] = None

    config_data = config_dict(config, layout.model_dtype)
    config_data.update(layout.config_block())
    if isinstance(layout, MlxAffine):
        # mlx-lm's save_config: keys sorted, indent 4, no newline at the end.
        config_data = dict(sorted(config_data.items()))
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config_data, f, indent=4)
    else:
        # transformers' save_pretrained: indent 2, keys sorted.
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(json.dumps(config_data, indent=2, sort_keys=True) + "\n")
    if isinstance(layout, CompressedTensors):
        layout.write_config(folder)
        with open(os.path.join(folder, "config.json")) as f:
            config_data = json.load(f)
    layout.extra_files(folder)
    files = write_model(folder, spec, stored, n_parameters)

    # Golden: the reference on the tensors as read back from the folder.
    readback = read_model(folder, files)
    assert set(readback) == set(stored)
    quantized = [n for n in logical if logical[n]]
    golden = {}
    if hasattr(layout, "golden_all"):
        golden.update(layout.golden_all(quantized, readback))
    else:
        for n in quantized:
            golden[n] = layout.golden(n, {p: readback[p] for p in logical[n]}).contiguous()
    errors = {}
    for n in logical:
        if logical[n] is None:
            golden[n] = readback[n]
            continue
        g = golden[n]
        assert g.dtype == layout.golden_dtype, (n, g.dtype)
        assert g.shape == weights[n].shape, (n, g.shape, weights[n].shape)
        # The quantization error, to show the packing agrees with the reference's reading of it.
        w = weights[n]
        mask = torch.isfinite(g.float())
        if isinstance(layout, Mxfp4):
            mask[Mxfp4.DISABLED_EXPERT] = False
        err = float(((g.float() - w).abs()[mask]).max() / w.abs().max())
        errors[n] = err
        assert err < 0.6, (n, err)
        if hasattr(layout, "formula"):
            expected, dtype = layout.formula(n, {p: np_of(readback[p]) for p in logical[n]})
            expected = np.ascontiguousarray(expected)
            assert expected.dtype == dtype and expected.shape == tuple(g.shape), (n, expected.dtype, expected.shape)
            assert g.contiguous().view(torch.uint8).numpy().tobytes() == expected.tobytes(), (
                f"{n}: golden != the notes' formula"
            )
    safetensors.torch.save_file(golden, os.path.join(folder, "golden.safetensors"), metadata={"format": "pt"})

    cases, architecture = plain_logits(config_data, golden, seed)
    direct = None
    if isinstance(layout, (Mxfp4, Fp8Block, Fp8PerTensor, FbgemmFp8)):
        direct = transformers_direct(folder, golden, torch.bfloat16)

    notes = list(layout.notes)
    if isinstance(layout, Fp8Block):
        notes.append(
            "transformers 5.18 Fp8Dequantize._dequantize_one (its CPU dequantization on load) on each stored pair: "
            + "; ".join(f"{n}: {o}" for n, o in layout.transformers_outcome.items())
            + ". It infers the block size as rows // scale_rows instead of reading weight_block_size."
        )
    reference = {
        "made_by": "scripts/make-quantized-models.py",
        "folder": name,
        "what": spec["what"],
        "architecture": architecture,
        "model_dtype": DTYPE_NAMES[layout.model_dtype],
        "golden_dtype": DTYPE_NAMES[layout.golden_dtype],
        "reference": {
            "how": layout.reference_text,
            "sources": reference_sources(layout),
        },
        "versions": versions(),
        "files": {f: os.path.getsize(os.path.join(folder, f)) for f in sorted(os.listdir(folder))},
        "tensors": {
            n: {
                "dtype": DTYPE_NAMES[golden[n].dtype],
                "shape": list(golden[n].shape),
                "stored": logical[n],
            }
            for n in sorted(logical)
        },
        "quantization_error": {"max_abs_error_over_max_abs_weight": max(errors.values()) if errors else 0.0},
        "transformers_loads_quantized_folder": direct,
        "notes": notes,
        "cases": cases,
    }
    with open(os.path.join(folder, "reference.json"), "w") as f:
        f.write(compact_json(reference) + "\n")
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    spreads = ", ".join(f"{c['spread']['top1']:.2f}" for c in cases)
    print(
        f"{name}: {len(quantized)} quantized of {len(logical)} tensors, max error {max(errors.values()):.3f}, top1 {spreads}, {size} bytes; transformers direct: {direct}"
    )
    return folder, stored, logical


def reference_sources(layout):
    keys = {
        MlxAffine: ["mlx", "mlx-lm"],
        Gptq: ["gptqmodel"],
        AwqGemm: ["autoawq"],
        Bnb4bit: ["bitsandbytes"],
        Bnb8bit: ["bitsandbytes"],
        Fp8Block: ["deepseek-v3"],
        Fp8PerTensor: [],
        FbgemmFp8: [],
        Mxfp4: [],
        CompressedTensors: ["compressed-tensors"],
        ModeloptNvfp4: ["modelopt"],
    }[type(layout)]
    sources = [{k: v for k, v in REFERENCES[key].items()} for key in keys]
    if isinstance(layout, Fp8Block):
        sources.append({"package": "triton", "version": "3.8.0", "use": "TRITON_INTERPRET=1 CPU interpreter"})
    if isinstance(layout, (Fp8Block, Fp8PerTensor, FbgemmFp8, Mxfp4)):
        sources.append({"package": "transformers", "version": transformers.__version__})
    return sources


def versions():
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__,
    }


# ------------------------------------------------------------------------------------------------------------
# Mutations: inconsistent folders, as changes a test applies to a copy of a good one
# ------------------------------------------------------------------------------------------------------------

MUTATIONS_ABOUT = (
    "Each mutation turns a copy of a good folder into an inconsistent (or unsupported) one. Apply `ops` in order to a "
    "copy of test/fixtures/quantized/<folder>, then openModel the copy and read the logical tensor `read`: the error, at "
    "open or at that read, is a SafetensorsError with `code`, whose message contains every string of `mentions`. Ops: "
    "removeTensor {tensor} drops a stored tensor from whichever file holds it (and from the index's weight_map); "
    "replaceTensor {tensor, dtype, shape, and values (a flat list, row-major) or utf8 (the UTF-8 bytes of a string, "
    "dtype U8, shape [length])} writes a new tensor of that name in place of the old one, in the same file; setConfig "
    "{path, value} sets config.json's key at `path` (a list of keys) to `value`."
)


def stored_tensor(folder, tensor):
    path = os.path.join(OUT, folder)
    for file in sorted(os.listdir(path)):
        if file.endswith(".safetensors") and file != "golden.safetensors":
            with safetensors.safe_open(os.path.join(path, file), "pt") as f:
                if tensor in f.keys():
                    return f.get_tensor(tensor)
    raise KeyError(tensor)


def make_mutations():
    mutations = []

    def add(name, folder, ops, read, code, mentions):
        mutations.append(
            {"name": name, "folder": folder, "ops": ops, "read": read, "expect": {"code": code, "mentions": mentions}}
        )

    m = "model.layers.0.self_attn.q_proj"
    add(
        "gptq: a module without its scales",
        "gptq-4bit-asym-v2",
        [{"op": "removeTensor", "tensor": f"{m}.scales"}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    m = "model.layers.0.mlp.down_proj"
    g_idx = stored_tensor("gptq-4bit-desc-act", f"{m}.g_idx").tolist()
    g_idx[5] = max(g_idx) + 1
    add(
        "gptq: a g_idx entry past the last group",
        "gptq-4bit-desc-act",
        [{"op": "replaceTensor", "tensor": f"{m}.g_idx", "dtype": "I32", "shape": [len(g_idx)], "values": g_idx}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    add(
        "gptq: 5 bits without the planar format",
        "gptq-3bit",
        [{"op": "setConfig", "path": ["quantization_config", "bits"], "value": 5}],
        "model.layers.0.mlp.down_proj.weight",
        "UnsupportedQuantization",
        ["5"],
    )
    m = "model.layers.0.mlp.down_proj"
    add(
        "mlx: scales with one group too few",
        "mlx-affine-8bit",
        [{"op": "replaceTensor", "tensor": f"{m}.scales", "dtype": "F16", "shape": [64, 3], "values": [0.01] * 192}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    m = "model.layers.0.self_attn.q_proj"
    add(
        "mlx: bits that do not fit the packed rows (16 words of a 128-wide row are not whole 5-bit codes)",
        "mlx-affine-4bit",
        [
            {"op": "setConfig", "path": ["quantization", "bits"], "value": 5},
            {"op": "setConfig", "path": ["quantization_config", "bits"], "value": 5},
        ],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    add(
        "awq: 3 bits (AWQ GEMM is 4-bit only)",
        "awq-gemm-4bit",
        [{"op": "setConfig", "path": ["quantization_config", "bits"], "value": 3}],
        "model.layers.0.mlp.down_proj.weight",
        "UnsupportedQuantization",
        ["3"],
    )
    m = "model.layers.0.mlp.gate_proj"
    state = json.loads(bytes(stored_tensor("bnb-nf4", f"{m}.weight.quant_state.bitsandbytes__nf4").tolist()).decode())
    state["shape"] = [state["shape"][0], state["shape"][1] + 1]
    text = json.dumps(state)
    add(
        "bitsandbytes: a quant_state shape the packed codes do not hold",
        "bnb-nf4",
        [
            {
                "op": "replaceTensor",
                "tensor": f"{m}.weight.quant_state.bitsandbytes__nf4",
                "dtype": "U8",
                "shape": [len(text.encode())],
                "utf8": text,
            }
        ],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    add(
        "bitsandbytes: double quantization without its nested absmax",
        "bnb-nf4",
        [{"op": "removeTensor", "tensor": f"{m}.weight.nested_absmax"}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    m = "model.layers.0.mlp.up_proj"
    add(
        "bitsandbytes 8-bit: no SCB",
        "bnb-int8",
        [{"op": "removeTensor", "tensor": f"{m}.SCB"}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    m = "model.layers.0.self_attn.q_proj"
    add(
        "fp8 block: a scale grid of 1x1 for a 144x144 weight (ceil-div 128 gives 2x2)",
        "fp8-block",
        [
            {
                "op": "replaceTensor",
                "tensor": f"{m}.weight_scale_inv",
                "dtype": "F32",
                "shape": [1, 1],
                "values": [0.001],
            }
        ],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    add(
        "fp8 block: weight_block_size 64x64, which the stored 2x2 grids do not fit (144 rows need 3)",
        "fp8-block",
        [{"op": "setConfig", "path": ["quantization_config", "weight_block_size"], "value": [64, 64]}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    m = "model.layers.0.mlp.down_proj"
    add(
        "fp8 per tensor: a weight_scale of two values",
        "fp8-tensor",
        [
            {
                "op": "replaceTensor",
                "tensor": f"{m}.weight_scale",
                "dtype": "F32",
                "shape": [2],
                "values": [0.001, 0.002],
            }
        ],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    m = "model.layers.0.mlp.experts"
    add(
        "mxfp4: experts without their scales",
        "mxfp4-gpt-oss",
        [{"op": "removeTensor", "tensor": f"{m}.gate_up_proj_scales"}],
        f"{m}.gate_up_proj",
        "InvalidQuantization",
        [m],
    )
    add(
        "mxfp4: scales for half the blocks",
        "mxfp4-gpt-oss",
        [
            {
                "op": "replaceTensor",
                "tensor": f"{m}.down_proj_scales",
                "dtype": "U8",
                "shape": [4, 64, 1],
                "values": [127] * 256,
            }
        ],
        f"{m}.down_proj",
        "InvalidQuantization",
        [m],
    )
    m = "model.layers.0.mlp.down_proj"
    add(
        "compressed-tensors: a weight_shape wider than the packed rows",
        "ct-w4a16-asym",
        [{"op": "replaceTensor", "tensor": f"{m}.weight_shape", "dtype": "I64", "shape": [2], "values": [64, 160]}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    g_idx = stored_tensor("ct-w4a16-gidx", f"{m}.weight_g_idx").tolist()
    g_idx[7] = -1
    add(
        "compressed-tensors: a negative weight_g_idx entry",
        "ct-w4a16-gidx",
        [
            {
                "op": "replaceTensor",
                "tensor": f"{m}.weight_g_idx",
                "dtype": "I32",
                "shape": [len(g_idx)],
                "values": g_idx,
            }
        ],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    add(
        "compressed-tensors: the marlin-24 format",
        "ct-w4a16-asym",
        [
            {"op": "setConfig", "path": ["quantization_config", "format"], "value": "marlin-24"},
            {
                "op": "setConfig",
                "path": ["quantization_config", "config_groups", "group_0", "format"],
                "value": "marlin-24",
            },
        ],
        f"{m}.weight",
        "UnsupportedQuantization",
        ["marlin-24"],
    )
    add(
        "compressed-tensors nvfp4: no weight_global_scale",
        "ct-nvfp4",
        [{"op": "removeTensor", "tensor": f"{m}.weight_global_scale"}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    add(
        "modelopt: no weight_scale_2",
        "modelopt-nvfp4",
        [{"op": "removeTensor", "tensor": f"{m}.weight_scale_2"}],
        f"{m}.weight",
        "InvalidQuantization",
        [m],
    )
    add(
        "a method this library does not read",
        "gptq-4bit-sym",
        [{"op": "setConfig", "path": ["quantization_config", "quant_method"], "value": "hqq"}],
        f"{m}.weight",
        "UnsupportedQuantization",
        ["hqq"],
    )
    with open(os.path.join(OUT, "mutations.json"), "w") as f:
        f.write(compact_json({"about": MUTATIONS_ABOUT, "mutations": mutations}) + "\n")
    print(f"mutations.json: {len(mutations)} mutations")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == DEEPSEEK_WORKER:
        deepseek_worker(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*", help="folders to make (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    os.makedirs(OUT, exist_ok=True)
    for seed, spec in enumerate(FOLDERS, start=1):
        if args.names and spec["name"] not in args.names:
            continue
        make_folder(spec, seed)
    if not args.names:
        make_mutations()


if __name__ == "__main__":
    main()
