"""The rates trainfit's step-time model divides by, measured on one GPU (``gpu_calibrate.py time``).

Sections (each one is timed with CUDA events in bf16 unless said, fails alone, and is written to
the output as soon as it finishes, so a timeout keeps what was measured):

``gemm``       ``F.linear(x[m, k], w[n, k])`` (what ``nn.Linear`` runs) over the shapes training
               uses: m (tokens) in {512, 2048, 8192, 16384}; (n, k) from hidden sizes 1024..8192
               with the MLP at 3x and 3.5x (up/gate and down); LoRA-skinny n or k in {8, 16, 64};
               decode-shaped m in {1, 8, 64, 256}. Each shape is replayed from a CUDA graph (device
               time, no host launch cost) over enough copies of the operands to defeat the L2 cache.
               Also fp32 (TF32 off, torch's default) on two large and two LoRA shapes: the rate
               PEFT's fp32 adapters run at.
``hbm``        ``dst.copy_(src)`` of 1 GiB (2 bytes moved per byte) and ``torch.add(a, b, out=c)``
               (3 bytes per byte).
``launch``     host cost of eager PyTorch: a loop of tiny ops (``forward``); a tiny Llama-shaped
               model's forward and backward, time over the number of kernels the profiler saw
               (``forward_module``, ``backward``); 1000 tiny kernels replayed from a CUDA graph
               (``device_min_kernel``: the shortest kernel on the device).
``optimizer``  ``torch.optim.AdamW`` fused / foreach / for-loop over 1e8 and 1e9 parameters (4096 x
               4096 tensors), bf16 and fp32: seconds and bytes/s (reads p, g, m, v; writes p, m, v).
``pcie``       pinned host <-> device copies of 1 GiB.
``decode``     a 1.5B Llama-3.2-1B-shaped random model (hidden 2048, 16 layers, GQA 32/8 heads,
               untied 128k vocabulary, no rotary) decoding in plain torch with a static KV cache: batch {1, 16,
               64}, context {1024, 4096}, eager and replayed from a CUDA graph; seconds per step (one
               token for each sequence) and the weight + KV bytes read per second.

``--dry-run`` runs every section on the CPU at tiny sizes (wall-clock timers): the same code
path and output format, no GPU figures. ``trainfit calibrate OUT.json`` turns the output into a
calibration file (``trainfit.calibration.gpu_output``); a dry run's output only with ``--gpu ID
--allow-dry-run`` (its CPU figures are no GPU's rates).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

OUTPUT_KEY = "trainfit_gpu_time"
SECTIONS = ("gemm", "hbm", "launch", "optimizer", "pcie", "decode")
GIB = 2**30
L2_DEFEAT_BYTES = 256 * 2**20
"""Operand copies per GEMM shape add up to at least this (H100/H200 L2 is 50 MiB)."""

FULL = {
    "gemm_m": (512, 2048, 8192, 16384), "gemm_hidden": (1024, 2048, 4096, 8192), "mlp_ratios": (3.0, 3.5),
    "lora_ranks": (8, 16, 64), "decode_m": (1, 8, 64, 256), "gemm_reps": 20,
    "fp32_shapes": ((8192, 4096, 4096, "train"), (8192, 8192, 8192, "train"), (8192, 16, 4096, "lora"),
                    (8192, 4096, 16, "lora")),
    "hbm_bytes": GIB, "launch_ops": 2000, "tiny": {"hidden": 256, "layers": 4, "seq": 64, "vocab": 4096},
    "opt_params": (1e8, 1e9), "pcie_bytes": GIB,
    "decode": {"hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8, "head_dim": 64, "intermediate": 8192,
               "vocab": 128256},
    "decode_batch": (1, 16, 64), "decode_context": (1024, 4096), "decode_steps": 16,
}
DRY = {
    "gemm_m": (16, 64), "gemm_hidden": (64, 128), "mlp_ratios": (3.0,), "lora_ranks": (8,), "decode_m": (1, 8),
    "gemm_reps": 2, "fp32_shapes": ((64, 64, 64, "train"), (64, 8, 64, "lora")), "hbm_bytes": 2**20, "launch_ops": 200, "tiny": {"hidden": 32, "layers": 2, "seq": 8, "vocab": 64},
    "opt_params": (1e4,), "pcie_bytes": 2**20,
    "decode": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 128, "vocab": 256},
    "decode_batch": (1, 2), "decode_context": (16,), "decode_steps": 2,
}


# ---------------------------------------------------------------- timing

class Clock:
    """Seconds of GPU work between two points (CUDA events), or wall time on the CPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def seconds(self, fn: Callable[[], Any], *, reps: int, warmup: int = 2) -> float:
        """Mean seconds per call of ``fn`` over ``reps`` back-to-back calls."""
        for _ in range(warmup):
            fn()
        self.sync()
        if not self.cuda:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            return (time.perf_counter() - t0) / reps
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / reps

    def graph_seconds(self, body: Callable[[], Any], *, calls: int, replays: int = 3) -> tuple[float, str]:
        """Seconds per call of ``body`` with ``calls`` calls captured in one CUDA graph (device time
        only); plain back-to-back calls when not on CUDA or when capture fails."""
        if not self.cuda:
            return self.seconds(body, reps=calls, warmup=1), "eager"
        import torch

        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    body()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    body()
        except Exception:  # noqa: BLE001 - fall back to eager launches, said in the output
            return self.seconds(body, reps=calls), "eager (graph capture failed)"
        per_replay = self.seconds(graph.replay, reps=replays, warmup=1)
        del graph
        return per_replay / calls, "cuda_graph"


# ---------------------------------------------------------------- sections

def gemm_shapes(cfg: dict[str, Any]) -> list[tuple[int, int, int, str]]:
    """(m, n, k, kind) for kind in train / lora / decode; n, k multiples of 128 where not LoRA."""
    pairs: list[tuple[int, int]] = []
    for h in cfg["gemm_hidden"]:
        pairs.append((h, h))
        for r in cfg["mlp_ratios"]:
            i = int(round(h * r / 128)) * 128 or int(h * r)
            pairs += [(i, h), (h, i)]
    shapes = [(m, n, k, "train") for m in cfg["gemm_m"] for n, k in pairs]
    for m in cfg["gemm_m"]:
        for h in cfg["gemm_hidden"]:
            for r in cfg["lora_ranks"]:
                shapes += [(m, r, h, "lora"), (m, h, r, "lora")]
    shapes += [(m, n, k, "decode") for m in cfg["decode_m"] for n, k in pairs]
    return shapes


def _gemm_point(clock: Clock, cfg: dict[str, Any], device: str, m: int, n: int, k: int, dtype: Any) -> dict[str, Any]:
    """Seconds and FLOP/s of ``F.linear(x[m, k], w[n, k])`` in ``dtype`` (device time, L2 defeated)."""
    import torch
    import torch.nn.functional as F

    size = torch.tensor([], dtype=dtype).element_size()
    copies = max(1, min(16, math.ceil(L2_DEFEAT_BYTES / (size * (m * k + n * k))))) if device == "cuda" else 1
    xs = [torch.randn(m, k, device=device, dtype=dtype) for _ in range(copies)]
    ws = [torch.randn(n, k, device=device, dtype=dtype) for _ in range(copies)]
    state = {"i": 0}

    def body() -> None:
        i = state["i"] = (state["i"] + 1) % copies
        F.linear(xs[i], ws[i])

    s, method = clock.graph_seconds(body, calls=max(cfg["gemm_reps"], copies))
    return {"m": m, "n": n, "k": k, "seconds": s, "flops_per_s": 2 * m * n * k / s, "copies": copies, "method": method}


def measure_gemm(clock: Clock, cfg: dict[str, Any], device: str) -> dict[str, Any]:
    """bf16 over ``gemm_shapes``; fp32 (TF32 off, torch's default: what PEFT's fp32 LoRA adapters
    run) on a few large and adapter shapes."""
    import torch

    points = [{**_gemm_point(clock, cfg, device, m, n, k, torch.bfloat16), "kind": kind}
              for m, n, k, kind in gemm_shapes(cfg)]
    fp32 = []
    for m, n, k, kind in cfg["fp32_shapes"]:
        fp32.append({**_gemm_point(clock, cfg, device, m, n, k, torch.float32), "kind": kind,
                     "allow_tf32": torch.backends.cuda.matmul.allow_tf32})
    return {"dtype": "bfloat16", "op": "F.linear(x[m, k], w[n, k]) -> [m, n]", "points": points, "fp32_points": fp32}


def measure_hbm(clock: Clock, cfg: dict[str, Any], device: str) -> dict[str, Any]:
    import torch

    n = cfg["hbm_bytes"] // 2
    a, b, c = (torch.empty(n, device=device, dtype=torch.bfloat16).fill_(1.0) for _ in range(3))
    copy_s = clock.seconds(lambda: c.copy_(a), reps=10)
    add_s = clock.seconds(lambda: torch.add(a, b, out=c), reps=10)
    nbytes = cfg["hbm_bytes"]
    return {"bytes": nbytes,
            "copy": {"bytes_moved": 2 * nbytes, "seconds": copy_s, "bytes_per_s": 2 * nbytes / copy_s},
            "add": {"bytes_moved": 3 * nbytes, "seconds": add_s, "bytes_per_s": 3 * nbytes / add_s}}


def tiny_model(cfg: dict[str, Any], device: str):  # noqa: ANN201
    """A small Llama-shaped model in plain ``nn.Module``s (HF-style calls), bf16, on ``device``."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class RMSNorm(nn.Module):
        def __init__(self, h: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(h))

        def forward(self, x):  # noqa: ANN001, ANN202
            x32 = x.float()
            return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    class Block(nn.Module):
        def __init__(self, h: int) -> None:
            super().__init__()
            self.heads, self.n1, self.n2 = h // 32, RMSNorm(h), RMSNorm(h)
            self.q, self.k, self.v, self.o = (nn.Linear(h, h, bias=False) for _ in range(4))
            self.gate, self.up, self.down = nn.Linear(h, 3 * h, bias=False), nn.Linear(h, 3 * h, bias=False), nn.Linear(3 * h, h, bias=False)

        def forward(self, x):  # noqa: ANN001, ANN202
            b, t, h = x.shape
            y = self.n1(x)
            q, k, v = (p(y).view(b, t, self.heads, 32).transpose(1, 2) for p in (self.q, self.k, self.v))
            x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, h))
            y = self.n2(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

    class Tiny(nn.Module):
        def __init__(self, h: int, layers: int, vocab: int) -> None:
            super().__init__()
            self.vocab, self.embed = vocab, nn.Embedding(vocab, h)
            self.blocks = nn.ModuleList(Block(h) for _ in range(layers))
            self.norm, self.head = RMSNorm(h), nn.Linear(h, vocab, bias=False)

        def forward(self, ids):  # noqa: ANN001, ANN202
            x = self.embed(ids)
            for blk in self.blocks:
                x = blk(x)
            return F.cross_entropy(self.head(self.norm(x)).float().view(-1, self.vocab), ids.view(-1))

    return Tiny(cfg["hidden"], cfg["layers"], cfg["vocab"]).to(device=device, dtype=torch.bfloat16)


def count_kernels(fn: Callable[[], Any], device: str) -> tuple[int, str]:
    """Kernels ``fn`` launches (profiler, CUDA), or aten ops it dispatches (CPU)."""
    import torch

    if device == "cuda":
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            n = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
            if n:
                return n, "CUDA kernels (profiler)"
        except Exception:  # noqa: BLE001 - no CUPTI: count the dispatched ops instead, said in the output
            pass
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n, "aten ops (dispatch mode)" + (", the profiler saw no kernel" if device == "cuda" else "")


def _autograd_nodes(loss: Any) -> int:
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo += [n for n, _ in node.next_functions]
    return len(seen)


def _wall(clock: Clock, fn: Callable[[], Any]) -> float:
    clock.sync()
    t0 = time.perf_counter()
    fn()
    clock.sync()
    return time.perf_counter() - t0


def measure_launch(clock: Clock, cfg: dict[str, Any], device: str) -> dict[str, Any]:
    import torch

    ops = cfg["launch_ops"]
    x = torch.ones(16, device=device)

    def loop() -> None:
        y = x
        for _ in range(ops):
            y = y * 1.0001

    _wall(clock, loop)
    loop_s = _wall(clock, loop)
    model = tiny_model(cfg["tiny"], device)
    ids = torch.randint(0, cfg["tiny"]["vocab"], (1, cfg["tiny"]["seq"]), device=device)
    fwd_kernels, counted = count_kernels(lambda: model(ids), device)
    for _ in range(3):
        model(ids).backward()
    reps = 10
    fwd_s = _wall(clock, lambda: [model(ids) for _ in range(reps)]) / reps
    loss = model(ids)
    nodes = _autograd_nodes(loss)
    bwd_kernels, _ = count_kernels(loss.backward, device)
    bwd_s = []
    for _ in range(reps):
        loss = model(ids)
        bwd_s.append(_wall(clock, loss.backward))
    bwd = sorted(bwd_s)[len(bwd_s) // 2]
    tiny = torch.zeros(1, device=device)
    min_s, method = clock.graph_seconds(lambda: tiny.add_(1), calls=1000 if device == "cuda" else ops)
    return {
        "forward": {"ops": ops, "seconds": loop_s, "s_per_op": loop_s / ops, "op": "y = y * c on 16 elements"},
        "forward_module": {"kernels": fwd_kernels, "counted": counted, "seconds": fwd_s, "s_per_kernel": fwd_s / fwd_kernels,
                           "model": cfg["tiny"]},
        "backward": {"kernels": bwd_kernels, "autograd_nodes": nodes, "counted": counted, "seconds": bwd,
                     "s_per_kernel": bwd / bwd_kernels, "s_per_node": bwd / nodes},
        "device_min_kernel": {"kernels": 1000 if device == "cuda" else ops, "s_per_kernel": min_s, "method": method},
    }


def measure_optimizer(clock: Clock, cfg: dict[str, Any], device: str) -> list[dict[str, Any]]:
    import torch

    rows = []
    for total in cfg["opt_params"]:
        chunk = min(4096 * 4096, int(total))
        for dtype in (torch.bfloat16, torch.float32):
            params = [torch.nn.Parameter(torch.randn(chunk, device=device, dtype=dtype) * 0.02)
                      for _ in range(math.ceil(total / chunk))]
            for p in params:
                p.grad = torch.randn_like(p) * 1e-3
            n = sum(p.numel() for p in params)
            for impl, kw in (("fused", {"fused": True}), ("foreach", {"foreach": True}), ("for_loop", {"foreach": False})):
                row = {"impl": impl, "dtype": str(dtype).removeprefix("torch."), "params": n, "tensors": len(params)}
                try:
                    opt = torch.optim.AdamW(params, lr=1e-5, **kw)
                    s = clock.seconds(opt.step, reps=3, warmup=1)
                    nbytes = n * params[0].element_size() * 7  # reads p, g, m, v; writes p, m, v
                    row.update(seconds=s, bytes=nbytes, bytes_per_s=nbytes / s)
                    del opt
                except Exception as exc:  # noqa: BLE001 - e.g. fused unsupported for a dtype
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                rows.append(row)
                _free(device)
            del params
            _free(device)
    return rows


def measure_pcie(clock: Clock, cfg: dict[str, Any], device: str) -> dict[str, Any]:
    import torch

    n = cfg["pcie_bytes"]
    host = torch.empty(n, dtype=torch.uint8, pin_memory=device == "cuda").fill_(1)
    dev = torch.empty(n, dtype=torch.uint8, device=device)
    h2d = clock.seconds(lambda: dev.copy_(host, non_blocking=True), reps=5)
    d2h = clock.seconds(lambda: host.copy_(dev, non_blocking=True), reps=5)
    return {"bytes": n, "pinned": device == "cuda",
            "h2d": {"seconds": h2d, "bytes_per_s": n / h2d}, "d2h": {"seconds": d2h, "bytes_per_s": n / d2h}}


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


class Decoder:
    """A Llama-shaped decoder with random bf16 weights and a static KV cache of ``length``
    positions; ``step()`` appends one token per sequence at ``pos`` with static shapes (attention
    over the whole cache under an additive mask), so it can be captured in a CUDA graph."""

    def __init__(self, shape: dict[str, int], *, batch: int, context: int, length: int, device: str) -> None:
        import torch

        bf = dict(device=device, dtype=torch.bfloat16)
        h, nh, kv, d, i = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"], shape["intermediate"]
        self.shape, self.batch = shape, batch

        def w(*s: int):  # noqa: ANN202
            return torch.randn(*s, **bf) * 0.02

        self.embed, self.head, self.norm = w(shape["vocab"], h), w(shape["vocab"], h), torch.ones(h, **bf)
        self.layers = [{"n1": torch.ones(h, **bf), "q": w(nh * d, h), "k": w(kv * d, h), "v": w(kv * d, h),
                        "o": w(h, nh * d), "n2": torch.ones(h, **bf), "g": w(i, h), "u": w(i, h), "d": w(h, i),
                        "ck": torch.randn(batch, kv, length, d, **bf), "cv": torch.randn(batch, kv, length, d, **bf)}
                       for _ in range(shape["layers"])]
        self.mask = torch.full((1, 1, 1, length), float("-inf"), **bf)
        self.mask[..., :context] = 0
        self.pos = torch.tensor([context], device=device)
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.weight_bytes = 2 * sum(t.numel() for L in self.layers for k, t in L.items() if k not in ("ck", "cv"))
        self.weight_bytes += 2 * self.head.numel()  # the embedding is a gather: one row per token, not counted
        self.kv_bytes = 2 * sum(L["ck"].numel() + L["cv"].numel() for L in self.layers)

    @staticmethod
    def _norm(x, w):  # noqa: ANN001, ANN205
        import torch

        x32 = x.float()
        return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    def step(self) -> None:
        import torch.nn.functional as F

        s, b = self.shape, self.batch
        self.mask.index_fill_(3, self.pos, 0.0)
        x = F.embedding(self.tok, self.embed)
        for L in self.layers:
            y = self._norm(x, L["n1"])
            # one new token: the query heads sharing a KV head are that head's query rows (GQA without repeats)
            q = F.linear(y, L["q"]).view(b, s["kv_heads"], s["heads"] // s["kv_heads"], s["head_dim"])
            k = F.linear(y, L["k"]).view(b, 1, s["kv_heads"], s["head_dim"]).transpose(1, 2)
            v = F.linear(y, L["v"]).view(b, 1, s["kv_heads"], s["head_dim"]).transpose(1, 2)
            L["ck"].index_copy_(2, self.pos, k)
            L["cv"].index_copy_(2, self.pos, v)
            a = F.scaled_dot_product_attention(q, L["ck"], L["cv"], attn_mask=self.mask)
            x = x + F.linear(a.reshape(b, 1, -1), L["o"])
            y = self._norm(x, L["n2"])
            x = x + F.linear(F.silu(F.linear(y, L["g"])) * F.linear(y, L["u"]), L["d"])
        self.tok.copy_(F.linear(self._norm(x, self.norm), self.head).argmax(-1))
        self.pos.add_(1)


def measure_decode(clock: Clock, cfg: dict[str, Any], device: str) -> dict[str, Any]:
    import torch

    shape, steps = cfg["decode"], cfg["decode_steps"]
    points, params = [], None
    modes = ("eager", "cuda_graph") if device == "cuda" else ("eager",)
    for batch in cfg["decode_batch"]:
        for context in cfg["decode_context"]:
            for mode in modes:
                row: dict[str, Any] = {"batch": batch, "context": context, "mode": mode}
                try:
                    with torch.no_grad():
                        dec = Decoder(shape, batch=batch, context=context, length=context + 4 * steps + 8, device=device)
                        params = params or dec.weight_bytes // 2 + dec.embed.numel()
                        if mode == "eager":
                            s = clock.seconds(dec.step, reps=steps, warmup=2)
                        else:
                            s, how = clock.graph_seconds(dec.step, calls=1, replays=steps)
                            row["method"] = how
                    moved = dec.weight_bytes + dec.kv_bytes
                    row.update(s_per_step=s, tokens_per_s=batch / s, weight_bytes=dec.weight_bytes,
                               kv_bytes=dec.kv_bytes, bytes_per_s=moved / s)
                    del dec
                except Exception as exc:  # noqa: BLE001 - e.g. out of memory at the largest batch
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                points.append(row)
                _free(device)
    return {"model": {**shape, "params": params, "rope": "omitted (elementwise, small)"},
            "step": "one token for each of the batch's sequences; attention over the whole static cache under a mask",
            "points": points}


MEASURES = {"gemm": measure_gemm, "hbm": measure_hbm, "launch": measure_launch, "optimizer": measure_optimizer,
            "pcie": measure_pcie, "decode": measure_decode}


def versions(cuda: bool) -> dict[str, Any]:
    import torch

    v: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                         "gpu": None, "driver": None}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        v.update(gpu=torch.cuda.get_device_name(0), gpu_total_bytes=props.total_memory,
                 compute_capability=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count,
                 cudnn=torch.backends.cudnn.version())
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            v["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
        except (OSError, subprocess.TimeoutExpired):
            pass
    return v


def _write(out: Path, record: dict[str, Any]) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, out)


def run(out: Path, *, dry_run: bool, sections: tuple[str, ...] = SECTIONS) -> int:
    """Measure ``sections`` into ``out`` (rewritten after each); 2 when there is no GPU and no dry run."""
    import torch

    cuda = torch.cuda.is_available() and not dry_run
    if not cuda and not dry_run:
        print("no CUDA device: use --dry-run on CPU", file=sys.stderr)
        return 2
    device = "cuda" if cuda else "cpu"
    if not cuda:
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    torch.manual_seed(0)
    cfg = DRY if dry_run else FULL
    record: dict[str, Any] = {OUTPUT_KEY: 1, "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              "dry_run": dry_run, "device": device, "versions": versions(cuda), "errors": [],
                              "section_seconds": {}}
    out.parent.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    for name in sections:
        t0 = time.perf_counter()
        try:
            record[name] = MEASURES[name](Clock(cuda), cfg, device)
        except Exception as exc:  # noqa: BLE001 - one failing section must not lose the others
            record["errors"].append({"section": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        _free(device)
        record["section_seconds"][name] = round(time.perf_counter() - t0, 2)
        record["seconds"] = round(time.perf_counter() - t_all, 2)
        _write(out, record)
        print(f"{name}: {record['section_seconds'][name]:.1f} s" + (" (failed)" if name not in record else ""), flush=True)
    return 0
