"""Count the aten kernels and host syncs of Megatron-Core's unfused THD RoPE (``apply_rope_fusion`` False with
packed sequences) per call, as a function of the packed documents in the row; and of Transformer Engine's thd
sequence reorders around the all-to-all of ``cp_comm_type`` a2a (``measure_a2a``, below).

The functions below are copied from NVIDIA/Megatron-LM megatron/core/models/common/embeddings/rope_utils.py
@61f31145dfb4cfaa7d285df12aa9abffb22ff485 (the Megatron-LM submodule of NVIDIA-NeMo/Megatron-Bridge
@f3ae2767b5e18aeb67b726cd8d5f1db58216dcc9): ``_rotate_half`` l.73-89, ``_apply_rotary_pos_emb_bshd`` l.92-137,
``_get_thd_freqs_on_this_cp_rank`` l.140-186 and the legacy-freqs branch of ``_apply_rotary_pos_emb_thd``
l.189-268 (``freqs`` of the max sequence length: CASE 2, one sequence at a time), with the process group replaced
by its rank and size and the deprecation shims dropped. ``_apply_rotary_pos_emb_thd_cat`` is the loop of the
Megatron-Core releases core_v0.10.0 to core_v0.14.x (copied from NVIDIA/Megatron-LM
megatron/core/models/common/embeddings/rope_utils.py l.139-179 @core_v0.13.0
c550cf6c41c31cd3ec72e05c25ea0c979f2b6631, the same statements at core_v0.12.0
d580efc68a9f0dbf1945f834f6f6200cd01d3343 l.139-175): one ``.tolist()`` of the lengths, no ``.item()``, each sample's
``_apply_rotary_pos_emb_bshd`` (l.88-122 there: the same ops as the copy above, its MLA flag named
``multi_latent_attention``) and one ``torch.cat`` of them at the end, no ``copy_``; its ``_get_thd_freqs_on_this_cp_rank``
(l.125-136) is the copy above at offset 0. Run on CPU (torch 2.13.0+cpu): a
``TorchDispatchMode`` counts every non-view aten op of the forward and of ``autograd.grad`` of its output (one
op = one kernel on a GPU), and the ops that read a device value back to the host (``aten._local_scalar_dense``
of ``.item()``, and ``.tolist()``, which reads every element after one device-to-host copy: counted once).

    PYTHONPATH=src python tools/measure_thd_rope_ops.py
"""

from __future__ import annotations

import itertools

import torch
from torch.utils._python_dispatch import TorchDispatchMode

VIEW_OPS = {"view", "_unsafe_view", "slice", "select", "unsqueeze", "squeeze", "split", "split_with_sizes",
            "chunk", "narrow", "t", "transpose", "expand", "as_strided", "alias", "detach", "unbind", "permute",
            "empty_like", "empty", "new_empty", "new_empty_strided", "empty_strided", "lift_fresh"}


def _rotate_half(x, rotary_interleaved):
    if not rotary_interleaved:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x_new = torch.stack((-x2, x1), dim=-1)
    return x_new.view(x_new.shape[0], x_new.shape[1], x_new.shape[2], -1)


def _apply_rotary_pos_emb_bshd(t, freqs, rotary_interleaved=False, mla_rotary_interleaved=False, mscale=1.0):
    rot_dim = freqs.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]
    if mla_rotary_interleaved:
        x1 = t[..., 0::2]
        x2 = t[..., 1::2]
        t = torch.cat((x1, x2), dim=-1)
    cos_ = (torch.cos(freqs) * mscale).to(t.dtype)
    sin_ = (torch.sin(freqs) * mscale).to(t.dtype)
    t = (t * cos_) + (_rotate_half(t, rotary_interleaved) * sin_)
    return torch.cat((t, t_pass), dim=-1)


def _get_thd_freqs_on_this_cp_rank(cp_rank, cp_size, x, freqs, offset=0):
    if cp_size > 1:
        cp_seg = x.size(0) // 2
        full_seqlen = cp_size * x.size(0)
        return torch.cat([
            freqs[offset + cp_rank * cp_seg: offset + (cp_rank + 1) * cp_seg],
            freqs[offset + full_seqlen - (cp_rank + 1) * cp_seg: offset + full_seqlen - cp_rank * cp_seg],
        ])
    return freqs[offset: offset + x.size(0)]


def _apply_rotary_pos_emb_thd(t, cu_seqlens, freqs, *, cp_rank, cp_size, rotary_interleaved=False):
    seqlens = ((cu_seqlens[1:] - cu_seqlens[:-1]) // cp_size).tolist()
    sequence_splits = torch.split(t, seqlens)
    total_seqlen = int(cu_seqlens[-1].item())
    assert not (freqs.dim() >= 1 and freqs.size(0) == total_seqlen)  # CASE 2 (freqs of the max sequence length)
    output = torch.empty_like(t)
    output_offset = 0
    for x in sequence_splits:
        freq_slice = _get_thd_freqs_on_this_cp_rank(cp_rank, cp_size, x, freqs)
        output_slice = _apply_rotary_pos_emb_bshd(x.unsqueeze(1), freq_slice,
                                                  rotary_interleaved=rotary_interleaved).squeeze(1)
        output.narrow(0, output_offset, x.size(0)).copy_(output_slice)
        output_offset += x.size(0)
    return output


def _apply_rotary_pos_emb_thd_cat(t, cu_seqlens, freqs, *, cp_rank, cp_size, rotary_interleaved=False):
    cu_seqlens = cu_seqlens // cp_size
    seqlens = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    return torch.cat(
        [
            _apply_rotary_pos_emb_bshd(x.unsqueeze(1), _get_thd_freqs_on_this_cp_rank(cp_rank, cp_size, x, freqs),
                                       rotary_interleaved=rotary_interleaved)
            for x in torch.split(t, seqlens)
        ]
    ).squeeze(1)


LOOPS = {"copy": _apply_rotary_pos_emb_thd, "cat": _apply_rotary_pos_emb_thd_cat}
"""The two per-sample loops by ``spec.enums.ThdRopeLoop`` value: ``copy`` (Megatron-LM @61f31145, core_v0.19.0),
``cat`` (core_v0.10.0 to core_v0.14.x)."""


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.kernels, self.syncs = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name == "_local_scalar_dense":
            self.syncs += 1
        elif name not in VIEW_OPS:
            self.kernels += 1
        return func(*args, **(kwargs or {}))


def measure(docs: int, cp_size: int, doc_tokens: int = 64, heads: int = 2, dim: int = 8,
            loop: str = "copy") -> tuple[int, int, int, int]:
    """(forward kernels, forward syncs, backward kernels, backward syncs) of one call over ``docs`` documents, of
    the ``loop`` form (``LOOPS``)."""
    lens = [doc_tokens * cp_size] * docs
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32)
    t = torch.randn(sum(lens) // cp_size, heads, dim, dtype=torch.bfloat16, requires_grad=True)
    # CASE 2 needs freqs shorter or longer than the row: the collate's max_seqlen is the longest document
    freqs = torch.randn(max(lens) + 1, 1, 1, dim)
    with Count() as f:
        out = LOOPS[loop](t, cu, freqs, cp_rank=0, cp_size=cp_size)
    grad = torch.ones_like(out)
    with Count() as b:
        torch.autograd.grad(out, t, grad)
    # .tolist() of a device tensor is one device-to-host copy + wait (the CPU run shows no op for it)
    return f.kernels, f.syncs + 1, b.kernels, b.syncs


# Transformer Engine @2e559f062497bef768dfbe9d7e45548fadeca80a (the commit NVIDIA-NeMo/Megatron-Bridge pins in
# pyproject.toml override-dependencies @f3ae2767b5e18aeb67b726cd8d5f1db58216dcc9):
# transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py
# reorder_seq_chunks_before_a2a_after_attn_thd l.298-361 and reorder_seq_chunks_after_a2a_before_attn_thd l.364-436,
# and get_seq_chunk_ids_for_reordering_before_attn l.236-251, copied (docstrings dropped). ``torch.arange`` of 0-d
# device tensors reads both bounds back to the host: two syncs per call.


def reorder_seq_chunks_before_a2a_after_attn_thd(x, cu_seqlens, cp_size, seq_dim=0):
    total_slices_of_any_sequence = 2 * cp_size
    slice_sizes = (cu_seqlens[1:] - cu_seqlens[:-1]) // total_slices_of_any_sequence
    indices = [
        (
            torch.arange(seq_start + (cp_rank * slice_size), seq_start + ((cp_rank + 1) * slice_size),
                         device=cu_seqlens.device),
            torch.arange(seq_start + ((total_slices_of_any_sequence - cp_rank - 1) * slice_size),
                         seq_start + ((total_slices_of_any_sequence - cp_rank) * slice_size), device=cu_seqlens.device),
        )
        for cp_rank in range(cp_size)
        for slice_size, seq_start in zip(slice_sizes, cu_seqlens[:-1])
    ]
    indices = list(itertools.chain(*indices))
    indices = torch.cat(indices)
    return x.index_select(seq_dim, indices)


def reorder_seq_chunks_after_a2a_before_attn_thd(x, cu_seqlens, seq_chunk_ids, cp_size, seq_dim=0):
    max_cum_seqlen_per_cp_rank = cu_seqlens[-1] // cp_size
    cu_seqlens_on_any_cp_rank = cu_seqlens // cp_size
    indices = [
        torch.arange(
            (start + max_cum_seqlen_per_cp_rank * (chunk_id // 2) if loc < cp_size
             else (start + end) // 2 + max_cum_seqlen_per_cp_rank * (chunk_id // 2)),
            ((start + end) // 2 + max_cum_seqlen_per_cp_rank * (chunk_id // 2) if loc < cp_size
             else end + max_cum_seqlen_per_cp_rank * (chunk_id // 2)),
            device=cu_seqlens.device,
        )
        for start, end in zip(cu_seqlens_on_any_cp_rank[:-1], cu_seqlens_on_any_cp_rank[1:])
        for loc, chunk_id in enumerate(seq_chunk_ids)
    ]
    indices = torch.cat(indices)
    return x.index_select(seq_dim, indices)


def get_seq_chunk_ids_for_reordering_before_attn(cp_size, device):
    chunk_ids = torch.empty(2 * cp_size, dtype=torch.int32, device=device)
    for rank in range(cp_size):
        chunk_ids[rank] = 2 * rank
        chunk_ids[rank + cp_size] = 2 * cp_size - 2 * rank - 1
    return chunk_ids


def measure_a2a(docs: int, cp_size: int, doc_tokens: int = 16) -> tuple[int, int, int, int]:
    """(kernels, syncs) of the reorder after the attention (before the a2a) and of the one before it (after the
    a2a), over ``docs`` packed sequences."""
    cu = torch.tensor([0] + [doc_tokens * (i + 1) for i in range(docs)], dtype=torch.int32)
    x = torch.randn(doc_tokens * docs, 2, 4)
    ids = get_seq_chunk_ids_for_reordering_before_attn(cp_size, "cpu")
    with Count() as after:
        reorder_seq_chunks_before_a2a_after_attn_thd(x, cu, cp_size)
    with Count() as before:
        reorder_seq_chunks_after_a2a_before_attn_thd(x, cu, ids, cp_size)
    return after.kernels, after.syncs, before.kernels, before.syncs


if __name__ == "__main__":
    for loop in LOOPS:
        for cp in (1, 2):
            rows = [measure(n, cp, loop=loop) for n in (1, 2, 5, 10)]
            slope = [(rows[3][i] - rows[0][i]) / 9 for i in range(4)]
            fixed = [rows[0][i] - slope[i] for i in range(4)]
            print(f"{loop} cp {cp}: per call {rows} -> per document {slope}, fixed {fixed}")
    for cp in (2, 4):
        rows = [measure_a2a(n, cp) for n in (1, 2, 5, 10)]
        slope = [(rows[3][i] - rows[0][i]) / 9 for i in range(4)]
        fixed = [rows[0][i] - slope[i] for i in range(4)]
        print(f"a2a cp {cp}: (after-attn kernels, syncs, before-attn kernels, syncs) {rows} -> per sequence {slope},"
              f" fixed {fixed}")
