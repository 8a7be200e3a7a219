"""Count the aten kernels and the bytes per rotated element of Megatron-Core's unfused bshd RoPE
(``_apply_rotary_pos_emb_bshd``), the path Megatron-Core takes for a YaRN model whose concentration factor (``mscale``)
is not 1 even when ``apply_rope_fusion`` is set: ``apply_rotary_pos_emb`` logs "mscale=... is not supported by TE's
fused RoPE. Using unfused implementation." (NVIDIA/Megatron-LM megatron/core/models/common/embeddings/rope_utils.py
l.268-300 @core_v0.16.0 3bec9aa97dda898d16ff5a89bac0ed2b6682b172), and ``Attention.forward`` passes
``_yarn_get_concentration_factor_from_config(config)`` as ``mscale`` (megatron/core/transformer/attention.py
l.1097-1116, same commit): gpt-oss's YaRN (factor 32, no mscale / mscale_all_dim) gives 0.1·ln(32) + 1 = 1.347.

The function is the copy in ``tools/measure_thd_rope_ops.py`` (rope_utils.py l.92-137 @61f31145); at core_v0.16.0
(l.92-126) it differs only in the MLA flag's name (``multi_latent_attention``; no deprecation shim), a branch not taken
here, and ``_rotate_half`` (l.73-89) is identical, so the trace holds for the cited release. Run on CPU (torch
2.13.0+cpu): a ``TorchDispatchMode`` records every non-view aten op of the forward on a bf16 ``[s, b, h, d]`` tensor
with fp32 ``[s, 1, 1, d]`` frequencies, and of ``autograd.grad`` of its output; bytes are each op's tensor inputs and
outputs (numel x itemsize), split into those that scale with ``t`` (per rotated element) and the rest (the cos / sin
of the frequencies, per token and rotary dim). One op = one kernel on a GPU.

    PYTHONPATH=src python tools/measure_bshd_rope_ops.py

Output 2026-12-04 (torch 2.13.0+cpu): forward 12 kernels, 24.0 B per rotated element; backward 7 kernels, 28.0 B per
rotated element (besides: the frequencies' cos / sin, 48 B forward and 4 B backward per position and rotary dim).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_thd_rope_ops import VIEW_OPS, _apply_rotary_pos_emb_bshd  # noqa: E402

MSCALE = 0.1 * math.log(32.0) + 1.0


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)


class Record(TorchDispatchMode):
    def __init__(self, t_numel: int) -> None:
        super().__init__()
        self.t_numel = t_numel
        self.ops: list[tuple[str, int, int]] = []  # (name, bytes of t-sized tensors, other bytes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name not in VIEW_OPS:
            big = small = 0
            for x in (*_tensors(args), *_tensors(list((kwargs or {}).values())), *_tensors(out)):
                b = x.numel() * x.element_size()
                if x.numel() * 2 >= self.t_numel:  # t-sized (a half of t counts: rotate_half's chunks)
                    big += b
                else:
                    small += b
            self.ops.append((name, big, small))
        return out


def measure(s: int = 64, b: int = 2, h: int = 4, d: int = 16) -> None:
    t = torch.randn(s, b, h, d, dtype=torch.bfloat16, requires_grad=True)
    freqs = torch.randn(s, 1, 1, d, dtype=torch.float32)
    n = t.numel()
    with Record(n) as fwd:
        y = _apply_rotary_pos_emb_bshd(t, freqs, mscale=MSCALE)
    g = torch.randn_like(y)
    with Record(n) as bwd:
        torch.autograd.grad(y, t, g)
    for name, rec in (("forward", fwd), ("backward", bwd)):
        big = sum(o[1] for o in rec.ops)
        small = sum(o[2] for o in rec.ops)
        print(f"{name}: {len(rec.ops)} kernels, {big / n:.1f} B per rotated element, "
              f"{small / (s * d):.1f} B per token and rotary dim besides: {[o[0] for o in rec.ops]}")


if __name__ == "__main__":
    measure()
