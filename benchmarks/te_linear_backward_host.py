"""Host seconds of Transformer Engine's linear modules per call, forward and backward, on this CPU.

``trainfit.compute.te_host`` prices TE's Python backward per linear call from published GB200 CPU times (TE pull request
#3523) scaled to an x86 host by issue #2053's ratio. This script cross-checks that figure: it runs the pure-Python
``te.pytorch.Linear`` and ``GroupedLinear`` of the ``transformer-engine==2.16.0`` wheel from PyPI (the version of the
NeMo 26.06 container, Megatron-Bridge ``docs/releases/software-versions.md``) on the CPU, forward and
``backward()``, against ``torch.nn.Linear`` in the same interleaved rounds. The compiled extension
``transformer_engine_torch`` is a stub: its GEMM entry points (``generic_gemm``, ``te_general_grouped_gemm``) return
an empty output of the right shape (what the kernel launch would cost is not timed: the plan charges it per kernel), as
are the CUDA queries on this path (device, stream, NVTX, graph capture) and ``prepare_forward``'s input-on-CUDA check
(module/base.py l.1404, patched to pass in a copy of the sources). BF16 recipe-free path (no fp8 autocast), fp32
tensors (the CPU's bf16 matmul in the torch baseline is slow and beside the point), 8 tokens x 64 features.

Get the sources (pure Python, no build) and run:

    pip download --no-deps transformer-engine==2.16.0 -d /tmp/te
    unzip -q /tmp/te/transformer_engine-2.16.0-py3-none-any.whl -d /tmp/te/src
    python benchmarks/te_linear_backward_host.py --te-src /tmp/te/src

Measured 2026-12-03 (torch 2.13 CPU, one thread of a shared 2-core Intel Xeon VM under load ~4, best of 40 interleaved
rounds of 50 calls, three runs): ``torch.nn.Linear`` forward 10.2-10.7 us, backward 27.9-28.7 us (its CPU matmuls
included); ``te.Linear`` forward 33.6-34.6 us, backward 69.3-75.1 us (``fuse_wgrad_accumulation`` with a
``main_grad``, Megatron-Core's gradient-accumulation fusion: 64.9-68.6 us). TE's backward Python alone is 2.5x
torch's backward of the same linear and ~70 us per call here; ``compute.te_host`` charges 91.6 us per call on an x86
host (252.1 us on GB200 x 13.48 / 37.08) less 2 x 12 us already charged per kernel. ``te.GroupedLinear`` at 1 / 4 /
16 / 32 GEMMs (8 rows each), two runs: forward 39.7-40.6 / 50.6-50.9 / 92.9-93.5 / 143.8-144.1 us, backward
73.1-74.0 / 104.0-115.3 / 203.4-204.1 / 370.5-384.7 us: 3.35 us forward and 9.8 us backward per GEMM beyond the first
(``compute.te_host.GROUPED_EXTRA_GEMM_HOST_S``). A third run with the machine more loaded (load average 5.7 on 2 cores,
a ``gc.collect()`` between rounds added): forward 42.7 / 50.6 / 93.8 / 144.8, backward 76.4 / 114.7 / 354.4 / 430.5 us
(3.3 and 11.4 us per GEMM); ``te.Linear`` backward 61.6 us.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.machinery
import os
import shutil
import sys
import tempfile
import time
import types
from unittest import mock


def _stub(name: str) -> None:
    m = mock.MagicMock(name=name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = m


def _package(name: str, path: str) -> None:
    m = types.ModuleType(name)
    m.__path__ = [path]
    sys.modules[name] = m


def load_te(te_src: str):
    """Import TE 2.16's ``module.linear`` / ``module.grouped_linear`` without the compiled library or a GPU."""
    import torch

    work = tempfile.mkdtemp(prefix="te_src_")
    shutil.copytree(os.path.join(te_src, "transformer_engine"), os.path.join(work, "transformer_engine"))
    base = os.path.join(work, "transformer_engine/pytorch/module/base.py")
    with open(base) as f:
        src = f.read()
    assert src.count("if not inp.is_cuda:") == 1
    with open(base, "w") as f:
        f.write(src.replace("if not inp.is_cuda:", "if False:  # CPU timing"))
    tex = mock.MagicMock(name="transformer_engine_torch")
    sys.modules["transformer_engine_torch"] = tex
    for name in ("onnxscript", "onnxscript.values", "onnxscript.onnx_opset", "onnx", "onnx.defs"):
        _stub(name)
    root = os.path.join(work, "transformer_engine")
    _package("transformer_engine", root)
    sys.modules["transformer_engine"].__version__ = "2.16.0"
    for sub in ("common", "pytorch"):
        _package("transformer_engine." + sub, os.path.join(root, sub))
    tri = os.path.join(root, "pytorch/triton")
    for f in ["", *(x[:-3] for x in os.listdir(tri) if x.endswith(".py") and x != "__init__.py")]:
        _stub("transformer_engine.pytorch.triton" + ("." + f if f else ""))
    torch.cuda.is_available = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.device_count = lambda: 1
    torch.cuda.device = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.current_stream = lambda *a, **k: mock.MagicMock()
    torch.cuda.nvtx.range_push = lambda *a, **k: None
    torch.cuda.nvtx.range_pop = lambda *a, **k: None
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    torch.cuda.is_current_stream_capturing = lambda: False
    importlib.import_module("transformer_engine.pytorch.tensor")
    lin = importlib.import_module("transformer_engine.pytorch.module.linear")
    grouped = importlib.import_module("transformer_engine.pytorch.module.grouped_linear")
    gemm = importlib.import_module("transformer_engine.pytorch.cpp_extensions.gemm")
    utils = importlib.import_module("transformer_engine.pytorch.utils")
    workspaces = [torch.empty(1, dtype=torch.uint8)] * 4
    gemm.get_cublas_workspace = lambda device, ub, grouped_gemm: workspaces if grouped_gemm else workspaces[0]
    gemm.get_sm_count = lambda: 132
    empty = torch.Tensor()
    gemm._empty_tensor = utils._empty_tensor = lambda: empty

    def generic_gemm(a, transa, b, transb, out, *args, **kwargs):
        if out is None:
            shape = ((b.shape[0], a.shape[0]) if transa and not transb else
                     (b.shape[0], a.shape[1]) if not transb else (b.shape[1], a.shape[1]))
            out = torch.empty(shape, dtype=torch.float32)
        return [out, None, None, None]

    tex.generic_gemm = generic_gemm
    tex.te_general_grouped_gemm = lambda *a, **k: a[7] if len(a) > 7 else None
    return lin, grouped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--te-src", required=True, help="the unzipped transformer-engine 2.16.0 wheel")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--grouped", type=int, nargs="*", default=[1, 4, 16, 32], help="GroupedLinear num_gemms")
    args = ap.parse_args()
    lin, grouped = load_te(args.te_src)
    import torch

    h, t = 64, 8
    x = torch.randn(t, h, requires_grad=True)
    fused = lin.Linear(h, h, bias=False, params_dtype=torch.float32, device="cpu", fuse_wgrad_accumulation=True)
    fused.weight.main_grad = torch.zeros(h, h)
    cases = {
        "torch.nn.Linear": (torch.nn.Linear(h, h, bias=False), x, ()),
        "te.Linear": (lin.Linear(h, h, bias=False, params_dtype=torch.float32, device="cpu"), x, ()),
        "te.Linear fuse_wgrad": (fused, x, ()),
    }
    for n in args.grouped:
        m = grouped.GroupedLinear(n, h, h, bias=False, params_dtype=torch.float32, device="cpu")
        cases[f"te.GroupedLinear x{n}"] = (m, torch.randn(t * n, h, requires_grad=True), ([t] * n,))

    def timed(mod, inp, extra, backward):
        g = torch.ones(inp.shape[0], h)
        start = time.perf_counter()
        for _ in range(args.calls):
            y = mod(inp, *extra)
            if backward:
                y.backward(g)
        return (time.perf_counter() - start) / args.calls

    best = {k: [1e9, 1e9] for k in cases}
    gc.disable()
    for _ in range(args.rounds):
        gc.collect()
        for k, (mod, inp, extra) in cases.items():
            best[k][0] = min(best[k][0], timed(mod, inp, extra, False))
            best[k][1] = min(best[k][1], timed(mod, inp, extra, True))
    for k, (f, fb) in best.items():
        print(f"{k:26s} forward {f * 1e6:7.1f} us   forward+backward {fb * 1e6:7.1f} us   backward {(fb - f) * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
