"""Packed rows with per-sample attention: the attention work is Σ len_i² per row, not seq_len²."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.models import from_catalog
from trainfit.compute.attention_time import packed_attention_context
from trainfit.compute.inventory import step_inventory

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


def _per_sample_flops(lengths: list[int]) -> float:
    """By hand: per full-attention layer, Q·Kᵀ and P·V over each sample's causal half,
    2·len²·(q_dim + v_dim) / 2 FLOPs per sample."""
    spec = LLAMA8
    return spec.num_full_attention_layers * sum(2.0 * n * n * (spec.q_dim + spec.attn_out_dim) / 2 for n in lengths)


def _context(lengths: list[int]) -> float:
    mean = sum(lengths) / len(lengths)
    var = sum((n - mean) ** 2 for n in lengths) / len(lengths)
    return packed_attention_context(mean_sample_tokens=mean, sample_length_cv=var ** 0.5 / mean,
                                    row_tokens=sum(lengths))


def test_context_is_the_mean_times_one_plus_cv_squared():
    assert packed_attention_context(mean_sample_tokens=512, sample_length_cv=0.0, row_tokens=8192) == 512
    assert packed_attention_context(mean_sample_tokens=512, sample_length_cv=1.0, row_tokens=8192) == 1024
    # never more than the row: one sample filling it is the unpacked sequence
    assert packed_attention_context(mean_sample_tokens=8192, sample_length_cv=0.5, row_tokens=8192) == 8192
    with pytest.raises(ValueError):
        packed_attention_context(mean_sample_tokens=0, sample_length_cv=0.0, row_tokens=8192)


def test_eight_equal_samples_do_an_eighth_of_the_row_attention():
    row = step_inventory(LLAMA8, micro_batch_size=1, seq_len=8192)
    packed = step_inventory(LLAMA8, micro_batch_size=1, seq_len=8192, attention_context=_context([1024] * 8))
    assert packed.layers_forward.attention_forward_flops == pytest.approx(_per_sample_flops([1024] * 8))
    assert row.layers_forward.attention_forward_flops == pytest.approx(_per_sample_flops([8192]))
    assert packed.layers_forward.attention_forward_flops == pytest.approx(row.layers_forward.attention_forward_flops / 8)
    # the GEMMs and memory traffic are the row's: every token still runs
    assert packed.layers_forward.gemm_flops == row.layers_forward.gemm_flops
    assert packed.layers_forward.memory_bytes == row.layers_forward.memory_bytes


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4096), min_size=1, max_size=24))
def test_inventory_attention_is_the_sum_of_squared_sample_lengths(lengths):
    seq = sum(lengths)
    inv = step_inventory(LLAMA8, micro_batch_size=1, seq_len=seq, attention_context=_context(lengths))
    assert inv.layers_forward.attention_forward_flops == pytest.approx(_per_sample_flops(lengths), rel=1e-9)
    assert inv.layers_forward.attention_forward_flops <= _per_sample_flops([seq]) * (1 + 1e-9)


def test_context_parallel_rank_does_its_share_of_the_per_sample_work():
    lengths = [700, 1300, 2048, 4096]  # 8144 of an 8192-token row, the rest padding
    seq, cp = 8192, 4
    mean = sum(lengths) / len(lengths)
    var = sum((n - mean) ** 2 for n in lengths) / len(lengths)
    ctx = packed_attention_context(mean_sample_tokens=mean, sample_length_cv=var ** 0.5 / mean, row_tokens=seq)
    rank = step_inventory(LLAMA8, micro_batch_size=1, seq_len=seq // cp, attention_context=ctx)
    # the context is per token of the row: Σ len² / Σ len, over the row's seq tokens
    assert rank.layers_forward.attention_forward_flops * cp == pytest.approx(
        _per_sample_flops(lengths) * seq / sum(lengths))


def test_sdpa_with_a_mask_computes_every_block():
    skip = step_inventory(LLAMA8, micro_batch_size=1, seq_len=4096)
    full = step_inventory(LLAMA8, micro_batch_size=1, seq_len=4096, causal_skip=False)
    assert full.layers_forward.attention_forward_flops == pytest.approx(2 * skip.layers_forward.attention_forward_flops)


def test_matches_pytorch_flop_counter_for_varlen_flash():
    """PyTorch's FLOP formula for the varlen flash kernel (``torch.utils.flop_counter``, ``aten._flash_attention_forward``
    / ``_backward`` with ``cum_seq_q``: one ``sdpa_flop_count`` per sample, causal masking not halved) over the same
    samples: the inventory's per-layer count is its causal half, and the backward is 2.5 x the forward."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    spec = LLAMA8
    lengths = [37, 512, 1000, 211, 4096, 64]
    total = sum(lengths)
    cu = torch.tensor([0] + [sum(lengths[: i + 1]) for i in range(len(lengths))], dtype=torch.int32)
    heads, kv_heads, d = spec.num_attention_heads, spec.kv_dim // spec.head_dim, spec.head_dim
    q = torch.empty(total, heads, d, device="meta")
    k = torch.empty(total, kv_heads, d, device="meta")
    fwd = flop_registry[aten._flash_attention_forward](q, k, k, cu, cu, max(lengths), max(lengths))
    bwd = flop_registry[aten._flash_attention_backward](q, q, k, k, q, None, cu, cu, max(lengths), max(lengths))
    inv = step_inventory(spec, micro_batch_size=1, seq_len=total, attention_context=_context(lengths))
    per_layer = inv.layers_forward.attention_forward_flops / spec.num_full_attention_layers
    assert 2 * per_layer == pytest.approx(fwd, rel=1e-9)
    assert bwd == pytest.approx(2.5 * fwd, rel=1e-9)
