"""Host seconds of one Transformer Engine attention-backend selection (``get_attention_backend``), on this CPU.

Transformer Engine keeps the backend it chose for one ``AttentionParams`` only: ``DotProductAttention.forward`` reruns
``get_attention_backend`` whenever a call's parameters differ from the previous call's
(transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py l.71-78, l.1575-1597 @v2.16).
gpt-oss alternates sliding-window and full-attention layers, so under Megatron-Core every layer's forward pays the
selection (``trainfit.compute.te_host.TE_ATTENTION_BACKEND_SELECT_S``). This script times the selection itself: the
pure-Python ``get_attention_backend`` of the ``transformer-engine==2.16.0`` wheel from PyPI (the version of the NeMo
26.06 container, Megatron-Bridge ``docs/releases/software-versions.md``), called alternately for the two layer kinds
of gpt-oss-20b (64 query heads, 8 key/value groups, head dim 64, learnable softmax, window (127, 0) and (-1, 0)), bf16,
training. The compiled extension ``transformer_engine_torch`` is replaced by a stub (its one call on this path,
``get_fused_attn_backend``, is a C++ table of conditions), and so are the two CUDA queries (``sm90``, cuDNN 9.21).

Get the sources (pure Python, no build) and run:

    pip download --no-deps transformer-engine==2.16.0 -d /tmp/te
    unzip -q /tmp/te/transformer_engine-2.16.0-py3-none-any.whl -d /tmp/te/src
    python benchmarks/te_attention_backend_select.py --te-src /tmp/te/src

Measured 2026-12-03 (torch 2.13 CPU, one thread of a shared 2-core Intel Xeon VM, best of 5 rounds of 200 pairs,
three runs): 73-79 us per selection, sbhd (pre-training) and thd (packed SFT) alike, with the 260 loggers this process
holds; the selection also clears every logger's cache (``logging.Logger.setLevel``), so it grows with the process's
loggers: 135-154 us with 2,000 more. (A first run while the machine was loaded read 168-220 us.)
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import logging
import sys
import time
import types
from unittest import mock


def _stub_package(name: str, path: str) -> None:
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module


def load_selector(te_src: str):
    """Import ``transformer_engine.pytorch.attention.dot_product_attention.utils`` without the compiled library."""
    sys.modules["transformer_engine_torch"] = mock.MagicMock(name="transformer_engine_torch")
    for name in ("onnxscript", "onnxscript.values", "onnxscript.onnx_opset", "onnx", "onnx.defs"):
        stub = mock.MagicMock(name=name)
        stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[name] = stub
    root = f"{te_src}/transformer_engine"
    _stub_package("transformer_engine", root)
    sys.modules["transformer_engine"].__version__ = "2.16.0"
    for sub in ("common", "pytorch", "pytorch/attention", "pytorch/attention/dot_product_attention"):
        _stub_package("transformer_engine." + sub.replace("/", "."), f"{root}/{sub}")
    importlib.import_module("transformer_engine.pytorch.tensor")  # the package's own import order
    utils = importlib.import_module("transformer_engine.pytorch.attention.dot_product_attention.utils")
    utils.get_device_compute_capability = lambda: (9, 0)
    utils.get_cudnn_version = lambda: (9, 21, 1)
    return utils


def gpt_oss_params(utils, *, window: tuple[int, int], qkv_format: str):
    import torch

    thd = qkv_format == "thd"
    return utils.AttentionParams(
        qkv_type=torch.Tensor, qkv_dtype=torch.bfloat16, qkv_layout="thd_thd_thd" if thd else "sbhd_sbhd_sbhd",
        batch_size=6 if thd else 1, num_heads=64, num_gqa_groups=8, max_seqlen_q=2048, max_seqlen_kv=2048,
        head_dim_qk=64, head_dim_v=64, attn_mask_type="padding_causal" if thd else "causal", window_size=window,
        softmax_type="learnable", is_training=True, deterministic=False, fp8=False, fp8_meta={"recipe": None})


def seconds_per_call(utils, *, qkv_format: str, pairs: int = 200, rounds: int = 5) -> float:
    """Best-of-``rounds`` mean seconds of one selection, the two gpt-oss layer kinds alternating."""
    a = gpt_oss_params(utils, window=(127, 0), qkv_format=qkv_format)
    b = gpt_oss_params(utils, window=(-1, 0), qkv_format=qkv_format)
    assert a != b
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(pairs):
            utils.get_attention_backend(a)
            utils.get_attention_backend(b)
        best = min(best, (time.perf_counter() - start) / (2 * pairs))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--te-src", required=True, help="the unpacked transformer-engine 2.16.0 wheel")
    args = ap.parse_args()
    utils = load_selector(args.te_src)
    loggers = len(logging.root.manager.loggerDict)
    for fmt in ("sbhd", "thd"):
        print(f"{fmt}: {seconds_per_call(utils, qkv_format=fmt) * 1e6:.1f} us per selection ({loggers} loggers)")
    for i in range(2000):
        logging.getLogger(f"te_attention_backend_select.extra.{i}")
    loggers = len(logging.root.manager.loggerDict)
    for fmt in ("sbhd", "thd"):
        print(f"{fmt}: {seconds_per_call(utils, qkv_format=fmt) * 1e6:.1f} us per selection ({loggers} loggers)")


if __name__ == "__main__":
    main()
