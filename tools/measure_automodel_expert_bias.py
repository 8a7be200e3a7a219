"""Count the aten kernels and the bytes they move in NeMo Automodel's per-expert bias loop (``_apply_bias``), which
``GroupedExpertsDeepEP`` runs after both grouped GEMMs of a model with expert biases (gpt-oss: ``expert_bias=True``,
nemo_automodel/components/models/gpt_oss/model.py l.132 @2861c4143cd335539213b1b6d0c890cb17682444).

``_apply_bias`` below is copied from NVIDIA-NeMo/Automodel nemo_automodel/components/moe/experts.py l.148-198
@2861c4143cd335539213b1b6d0c890cb17682444 (docstring dropped). ``GroupedExpertsDeepEP.forward`` (same file,
l.843-854 on the ``grouped_gemm`` ``ops.gmm`` path, l.807-822 on the ``torch._grouped_mm`` path) calls it on the
fc1 output without routing probabilities and on the fc2 output with them; the probabilities are the DeepEP
dispatcher's float32 ``permuted_probs`` (nemo_automodel/components/moe/megatron/token_dispatcher.py l.296-306:
"DeepEP only supports float32 probs"), unsqueezed to one column per row.

Run on CPU (torch 2.13.0+cpu): a ``TorchDispatchMode`` counts every non-view aten op of the forward and of
``autograd.grad`` of its output (one op = one kernel on a GPU), and sums the bytes each op reads and writes (every
tensor argument and result, a broadcast operand at its stored size). Per element of the loop's ``rows x features``
output: the bytes scale with it, the kernels with the local experts (the sizes below are arbitrary).

    PYTHONPATH=src python tools/measure_automodel_expert_bias.py
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from trainfit.trace.opcount import distinct_bytes

VIEW_OPS = {"view", "_unsafe_view", "slice", "select", "unsqueeze", "squeeze", "split", "split_with_sizes",
            "chunk", "narrow", "t", "transpose", "expand", "as_strided", "alias", "detach", "unbind", "permute",
            "empty_like", "empty", "new_empty", "new_empty_strided", "empty_strided", "lift_fresh"}


def _apply_bias(value, bias, tokens_per_expert, permuted_probs=None):
    if bias is None:
        return value
    shape = value.shape
    if permuted_probs is not None:
        output = (
            torch.cat(
                [
                    t + b * p
                    for t, b, p in zip(
                        torch.split(value.view(-1, shape[-1]), tokens_per_expert.tolist()),
                        bias,
                        torch.split(permuted_probs, tokens_per_expert.tolist()),
                    )
                ]
            )
            .view(shape)
            .to(value.dtype)
        )
    else:
        output = (
            torch.cat(
                [
                    t + b
                    for t, b in zip(
                        torch.split(
                            value.view(-1, shape[-1]),
                            tokens_per_expert.tolist()
                            if isinstance(tokens_per_expert, torch.Tensor)
                            else tokens_per_expert,
                        ),
                        bias,
                    )
                ]
            )
            .view(shape)
            .to(value.dtype)
        )
    return output


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.kernels, self.bytes = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ not in VIEW_OPS:
            self.kernels += 1
            flat, _ = tree_flatten((args, kwargs or {}, out))
            self.bytes += sum(distinct_bytes(x) for x in flat if isinstance(x, torch.Tensor))
        return out


def measure(experts: int, *, with_probs: bool, probs_grad: bool = True, rows_per_expert: int = 256,
            features: int = 512) -> tuple[float, float, int, int]:
    """(forward bytes, backward bytes) per output element and (forward, backward) kernels of one call;
    ``probs_grad`` False: routing weights that take no gradient (Automodel's ``FakeBalancedGate``, whose weights
    are a constant ``torch.ones(...) / k``, nemo_automodel/components/moe/layers.py l.269-275)."""
    rows = experts * rows_per_expert
    value = torch.randn(rows, features, dtype=torch.bfloat16, requires_grad=True)
    bias = torch.randn(experts, features, dtype=torch.bfloat16, requires_grad=True)
    probs = torch.rand(rows, 1, dtype=torch.float32, requires_grad=probs_grad) if with_probs else None
    counts = torch.full((experts,), rows_per_expert, dtype=torch.int64)
    with Count() as f:
        out = _apply_bias(value, bias, counts, probs)
    inputs = (value, bias, probs) if with_probs and probs_grad else (value, bias)
    grad = torch.ones_like(out)
    with Count() as b:
        torch.autograd.grad(out, inputs, grad)
    return f.bytes / out.numel(), b.bytes / out.numel(), f.kernels, b.kernels


if __name__ == "__main__":
    for with_probs, probs_grad in ((False, False), (True, True), (True, False)):
        rows = {e: measure(e, with_probs=with_probs, probs_grad=probs_grad) for e in (1, 2, 4, 8)}
        per_expert = [(rows[8][i] - rows[1][i]) / 7 for i in (2, 3)]
        fixed = [rows[1][i] - per_expert[j] for j, i in enumerate((2, 3))]
        print(f"probs {with_probs} (gradient {probs_grad}): (fwd B/elem, bwd B/elem, fwd kernels, bwd kernels) {rows}"
              f" -> kernels per expert {per_expert}, fixed {fixed}")
