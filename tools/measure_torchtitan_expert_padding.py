"""Count the aten kernels and the bytes they move in torchtitan's ``expert_parallel`` wrapper around the routed experts'
grouped GEMMs, which pads every expert's rows to ``TOKEN_GROUP_ALIGN_SIZE_M`` for ``torch._grouped_mm`` even on one
device (its docstring: "3 is needed even for single-device computation").

``wrapper`` below is copied from pytorch/torchtitan torchtitan/distributed/expert_parallel.py l.318-363 @a1fdd7e43694
bbfeff5d6ad8ac738c067bb90d41 (the torchtitan rev PrimeIntellect-ai/prime-rl pins in pyproject.toml l.84
@d8f290ef0358a804f1912bd29ea1b37cc56894b4, whose ``GroupedExperts`` calls ``_run_experts_grouped_mm`` through it:
src/prime_rl/trainer/models/layers/moe.py l.124-140); ``generate_permute_indices`` is copied from
torchtitan/experiments/kernels/moe/indices.py l.140-206 at the same commit, its Triton fill kernel
(``fill_indices_wrapper``, one launch) replaced by a vectorised CPU fill of the same result. The inner
``func`` (the three grouped GEMMs) is the identity here: only the wrapper's own work is counted.

Run on CPU (torch 2.13.0+cpu): a ``TorchDispatchMode`` counts every non-view aten op of the forward and of
``autograd.grad`` of its output (one op = one kernel on a GPU), and sums the bytes each op reads and writes (every
tensor argument and result at its stored size). Reported per element of the ``rows x hidden`` routed input (the
bytes scale with it; the index work is per expert and tiny).

    PYTHONPATH=src python tools/measure_torchtitan_expert_padding.py
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from trainfit.trace.opcount import distinct_bytes

TOKEN_GROUP_ALIGN_SIZE_M = 8  # torchtitan/distributed/expert_parallel.py l.61 @a1fdd7e
VIEW_OPS = {"view", "_unsafe_view", "slice", "select", "unsqueeze", "squeeze", "split", "split_with_sizes",
            "chunk", "narrow", "t", "transpose", "expand", "as_strided", "alias", "detach", "unbind", "permute",
            "empty_like", "empty", "new_empty", "new_empty_strided", "empty_strided", "lift_fresh"}


def _fill(tokens_per_expert_group, start_index_values, write_offsets, max_len):
    """The Triton ``fill_indices_wrapper``'s result for one rank (``num_ranks`` 1), as one op."""
    out = torch.full((max_len,), -1, dtype=torch.int32)
    for e in range(tokens_per_expert_group.numel()):
        s, n, w = int(start_index_values[e]), int(tokens_per_expert_group[e]), int(write_offsets[e])
        out[w:w + n] = torch.arange(s, s + n, dtype=torch.int32)
    return out


def generate_permute_indices(tokens_per_expert_group, experts_per_rank, num_ranks, max_len, alignment, count):
    start_index_values = torch.cumsum(tokens_per_expert_group, 0) - tokens_per_expert_group
    total_tokens_per_expert = tokens_per_expert_group.view(num_ranks, -1).sum(0)
    total_tokens_per_expert = torch.clamp_min(total_tokens_per_expert, alignment)
    m_sizes = ((total_tokens_per_expert + alignment - 1) // alignment * alignment).to(torch.int32)
    m_offsets = torch.cumsum(m_sizes, 0)
    write_offsets = m_offsets - m_sizes
    with torch.utils._python_dispatch._disable_current_modes():
        permuted_indices = _fill(tokens_per_expert_group, start_index_values, write_offsets, max_len)
    count.kernels += 2  # torch.full and the Triton fill kernel
    return permuted_indices, m_sizes, m_offsets.to(torch.int32)


def wrapper(func, w1, w2, w3, x, num_tokens_per_expert, count):
    experts_per_ep_rank = w1.shape[0]
    num_ep_ranks = num_tokens_per_expert.shape[0] // experts_per_ep_rank
    with torch.no_grad():
        (permuted_indices, num_tokens_per_expert, _) = generate_permute_indices(
            num_tokens_per_expert, experts_per_ep_rank, num_ep_ranks,
            x.shape[0] + experts_per_ep_rank * TOKEN_GROUP_ALIGN_SIZE_M, TOKEN_GROUP_ALIGN_SIZE_M, count)
    x = torch.vstack((x, x.new_zeros((x.shape[-1]))))
    input_shape = x.shape
    x = x[permuted_indices, :]
    out = func(w1, w2, w3, x, num_tokens_per_expert)
    out_unpermuted = out.new_empty(input_shape)
    out_unpermuted[permuted_indices, :] = out
    out = out_unpermuted[:-1]
    return out


CREATION_OPS = {"new_zeros", "zeros", "zeros_like", "full", "new_full", "ones_like"}
"""Ops that only write their result (their ``self`` argument gives the shape, it is not read)."""


class Count(TorchDispatchMode):
    """Non-view ops as kernels and their bytes: every tensor argument and result at its stored size, except that a
    creation op only writes, a non-accumulating ``index_put_`` only writes its ``self`` (it is counted as an argument
    and as the result otherwise) and ``slice_backward`` is zeros plus a copy (2 kernels, 3 times the slice)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels, self.bytes, self.ops = 0, 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in VIEW_OPS:
            return out
        kwargs = kwargs or {}
        if name in CREATION_OPS:
            b, k = distinct_bytes(out), 1
        elif name == "slice_backward":
            b, k = 3 * distinct_bytes(args[0]), 2
        else:
            flat, _ = tree_flatten((args, kwargs, out))
            b, k = sum(distinct_bytes(x) for x in flat if isinstance(x, torch.Tensor)), 1
            if name == "index_put_" and not (args[3] if len(args) > 3 else kwargs.get("accumulate", False)):
                b -= distinct_bytes(args[0])
        self.kernels += k
        self.bytes += b
        self.ops.append((name, b))
        return out


def measure(experts: int, *, rows_per_expert: int = 256, hidden: int = 512) -> tuple[float, float, int, int]:
    """(forward bytes, backward bytes) per routed-input element and (forward, backward) kernels of one call."""
    rows = experts * rows_per_expert
    x = torch.randn(rows, hidden, dtype=torch.bfloat16, requires_grad=True)
    w = torch.empty(experts, 1, 1)
    counts = torch.full((experts,), rows_per_expert, dtype=torch.int64)
    with Count() as f:
        out = wrapper(lambda w1, w2, w3, h, n: h * 1, w, w, w, x, counts, f)
    grad = torch.ones_like(out)
    with Count() as b:
        torch.autograd.grad(out, (x,), grad)
    # the identity stand-in for the GEMMs (h * 1) and its backward: one multiply each way, taken off
    ident = 2 * 2 * (rows + experts * TOKEN_GROUP_ALIGN_SIZE_M) * hidden
    return (f.bytes - ident) / x.numel(), (b.bytes - ident) / x.numel(), f.kernels - 1, b.kernels - 1


if __name__ == "__main__":
    for e in (8, 32, 128):
        fb, bb, fk, bk = measure(e)
        print(f"experts {e}: forward {fb:.2f} B and {fk} kernels, backward {bb:.2f} B and {bk} kernels"
              " per routed-input element / per call")
