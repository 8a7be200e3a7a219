"""Host seconds per dispatched op of a transformers training step on this CPU: the grad forward, the no-grad
forward and ``loss.backward()``, each over the non-view aten ops it dispatches, and the backward-to-forward ratio.

Why: ``compute.rates`` prices the host at ``HOST_S_PER_FORWARD_KERNEL`` (65 us) per forward kernel and
``HOST_S_PER_BACKWARD_KERNEL`` (12 us) per backward kernel, fitted together on the H200 "default" steps, whose
host time is ``kernels_fwd x (fwd + 1.9 x bwd)`` (``inventory.BACKWARD_KERNEL_FACTOR``). A training step fixes the
sum, not the split, and a no-grad pass (log-prob passes, an eager decode step) pays the forward rate alone. This
measures the split's device-independent part: the CPU work per op (Python module calls, the dispatcher, autograd
recording on the forward; the autograd engine's C++ node calls on the backward). A GPU adds the launch and the
caching allocator to every op on either side, so the ratio there lies between this one and 1.

Model: a transformers Qwen2 (hidden 64, intermediate 128, 4 heads, 2 KV heads, vocab 256, SDPA attention, fp32, 16
tokens), 4 and 8 decoder layers: the per-layer figures are the slope from 4 to 8 (the embedding, head and loss drop
out). Ops are counted by a ``TorchDispatchMode`` (views excluded). Timed: best of ``ROUNDS`` interleaved rounds of
10 calls, one thread.

Usage::

    ROUNDS=15 .venv/bin/python benchmarks/host_fwd_bwd_cpu.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
from torch.utils._python_dispatch import TorchDispatchMode

LAYERS = (4, 8)
MODES = ("grad_forward", "nograd_forward", "backward")


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.ops += 1
        return func(*args, **(kwargs or {}))


def build(layers: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).float()


def loss_of(model, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids, use_cache=False).loss


def timed(model, ids: torch.Tensor, mode: str) -> float:
    if mode == "nograd_forward":
        with torch.no_grad():
            t = time.perf_counter()
            loss_of(model, ids)
            return time.perf_counter() - t
    if mode == "grad_forward":
        t = time.perf_counter()
        loss = loss_of(model, ids)
        dt = time.perf_counter() - t
        loss.backward()
        model.zero_grad(set_to_none=True)
        return dt
    loss = loss_of(model, ids)
    t = time.perf_counter()
    loss.backward()
    dt = time.perf_counter() - t
    model.zero_grad(set_to_none=True)
    return dt


def counted(model, ids: torch.Tensor) -> dict[str, int]:
    out = {}
    with torch.no_grad(), _Count() as c:
        loss_of(model, ids)
    out["nograd_forward"] = c.ops
    with _Count() as c:
        loss = loss_of(model, ids)
    out["grad_forward"] = c.ops
    with _Count() as c:
        loss.backward()
    out["backward"] = c.ops
    model.zero_grad(set_to_none=True)
    return out


def main() -> None:
    import transformers

    torch.set_num_threads(1)
    rounds = int(os.environ.get("ROUNDS", "15"))
    ids = torch.randint(0, 256, (1, 16))
    models = {n: build(n) for n in LAYERS}
    ops = {n: counted(m, ids) for n, m in models.items()}
    for m in models.values():
        for _ in range(5):
            timed(m, ids, "backward")
    best: dict[tuple[int, str], float] = {}
    for _ in range(rounds):
        for n, m in models.items():
            for mode in MODES:
                t = min(timed(m, ids, mode) for _ in range(10))
                best[(n, mode)] = min(best.get((n, mode), 1e9), t)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, best of {rounds} rounds of 10")
    lo, hi = LAYERS
    per_op = {}
    for mode in MODES:
        d_ops = (ops[hi][mode] - ops[lo][mode]) / (hi - lo)
        d_s = (best[(hi, mode)] - best[(lo, mode)]) / (hi - lo)
        per_op[mode] = d_s / d_ops
        whole = best[(hi, mode)] / ops[hi][mode]
        print(f"{mode:15} ops {ops[lo][mode]:4d} / {ops[hi][mode]:4d} at {lo} / {hi} layers; "
              f"{best[(lo, mode)] * 1e3:.3f} / {best[(hi, mode)] * 1e3:.3f} ms; per layer {d_ops:.1f} ops, "
              f"{d_s * 1e6:.0f} us: {per_op[mode] * 1e6:.2f} us per op ({whole * 1e6:.2f} over the whole pass)")
    fwd_ops = (ops[hi]["grad_forward"] - ops[lo]["grad_forward"])
    bwd_ops = (ops[hi]["backward"] - ops[lo]["backward"])
    print(f"backward / forward ops per layer {bwd_ops / fwd_ops:.2f}; "
          f"per op backward / grad forward {per_op['backward'] / per_op['grad_forward']:.2f}, "
          f"no-grad / grad forward {per_op['nograd_forward'] / per_op['grad_forward']:.2f}")


if __name__ == "__main__":
    main()
