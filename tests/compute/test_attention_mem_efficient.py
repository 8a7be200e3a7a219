"""SDPA handed an explicit mask runs PyTorch's memory-efficient kernel: half FlashAttention-2's rate, on the work its
head-dim tiles do (``compute.attention_time`` module docstring, "Memory-efficient kernel"), reading the mask per head
(``attention_time.mask_bias_read_bytes``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.attention_time import (
    MEM_EFFICIENT_TO_FA2_RATE,
    attention_seconds,
    fp32_attention_ratio,
    mask_bias_read_bytes,
    mem_efficient_attention_seconds,
    mem_efficient_tile_factor,
)
from trainfit.compute.inventory import PassInventory, step_inventory
from trainfit.compute.rates import default_rates
from trainfit.compute.training import pass_seconds

A100 = default_rates(resolve_gpu("a100-80gb"))
H100 = default_rates(resolve_gpu("h100-sxm"))
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
PHI3 = from_catalog("microsoft/Phi-3-mini-4k-instruct")


def test_tile_factor_from_the_kernels_tiles():
    """Head dim 96 (Phi-3-mini) runs the kMaxK-128 kernels: forward Q·Kᵀ over 96 and P·V over a 128-wide tile,
    backward S and dP over 96 and dV, dQ, dK over 128."""
    assert mem_efficient_tile_factor(head_dim=96, backward=False) == pytest.approx(7 / 6)
    assert mem_efficient_tile_factor(head_dim=96, backward=True) == pytest.approx(6 / 5)
    for d in (64, 128, 256):
        assert mem_efficient_tile_factor(head_dim=d, backward=False) == 1.0
        assert mem_efficient_tile_factor(head_dim=d, backward=True) == 1.0
    # 80: the contraction rounds up to 96, the tile to 128
    assert mem_efficient_tile_factor(head_dim=80, backward=False) == pytest.approx((96 + 128) / 160)
    assert mem_efficient_tile_factor(head_dim=80, backward=True) == pytest.approx((2 * 96 + 3 * 128) / 400)
    assert mem_efficient_tile_factor(head_dim=None, backward=True) == 1.0


def test_head_dims_up_to_32_keep_the_64_wide_tile_in_backward():
    """Review finding checked against the kernels (MEM_EFFICIENT_SMALL_TILE): the max_k-32 backward kernel keeps 64 x 64
    blocks, and dV, dK, dQ span the head dim with the block, not with kMaxK; so head dim 32 pays a 64-wide tile in
    backward as in forward (the smallest forward kernel is (64, 64, 64)). A 32-wide tile would give 1.0."""
    assert mem_efficient_tile_factor(head_dim=32, backward=True) == pytest.approx((2 * 32 + 3 * 64) / (5 * 32))
    assert mem_efficient_tile_factor(head_dim=32, backward=False) == pytest.approx((32 + 64) / (2 * 32))
    assert mem_efficient_tile_factor(head_dim=16, backward=True) == pytest.approx((2 * 32 + 3 * 64) / (5 * 16))


@pytest.mark.parametrize("rates", [A100, H100], ids=["a100", "h100"])
@pytest.mark.parametrize("backward", [False, True])
def test_half_the_flash_attention_2_rate_at_head_dim_128(rates, backward):
    kw = dict(forward_flops=1e12, seq_len=8192, rates=rates, backward=backward, head_dim=128)
    fa2 = attention_seconds(**kw, kernel="fa2")
    assert mem_efficient_attention_seconds(**kw) == pytest.approx(fa2 / MEM_EFFICIENT_TO_FA2_RATE)
    assert MEM_EFFICIENT_TO_FA2_RATE == 0.5
    assert mem_efficient_attention_seconds(**{**kw, "forward_flops": 0.0}) == 0.0


def test_head_dim_96_pays_the_padded_tile_not_the_flash_head_dim_table():
    kw = dict(forward_flops=1e12, seq_len=8192, rates=H100, head_dim=96)
    base = dict(kw, head_dim=128)
    assert (mem_efficient_attention_seconds(**kw, backward=False)
            == pytest.approx(mem_efficient_attention_seconds(**base, backward=False) * 7 / 6))
    assert (mem_efficient_attention_seconds(**kw, backward=True)
            == pytest.approx(mem_efficient_attention_seconds(**base, backward=True) * 6 / 5))


def test_fp32_keeps_its_ratio_at_head_dim_128():
    """fp32 q / k / v: the same kernel at fp32_attention_ratio of the bf16 rate, as before, where no tile is padded."""
    kw = dict(forward_flops=1e12, seq_len=8192, rates=A100, backward=True, head_dim=128)
    assert mem_efficient_attention_seconds(**kw, fp32=True) == pytest.approx(attention_seconds(**kw, fp32=True))
    assert (mem_efficient_attention_seconds(**kw, fp32=True)
            == pytest.approx(attention_seconds(**kw, kernel="fa2") / fp32_attention_ratio()))


def test_inventory_marks_the_masked_work():
    """A padding or packed mask (no causal skip) masks every layer's attention; a window mask the windowed layers'."""
    kw = dict(micro_batch_size=2, seq_len=8192)
    causal = step_inventory(LLAMA8, **kw).layers_forward
    masked = step_inventory(LLAMA8, causal_skip=False, mask_layers=LLAMA8.num_layers, **kw).layers_forward
    assert causal.masked_attention_forward_flops == 0.0
    assert masked.masked_attention_forward_flops == masked.attention_forward_flops > 0
    assert step_inventory(LLAMA8, causal_skip=False, **kw).layers_backward.masked_attention_forward_flops > 0
    s = 4 * PHI3.sliding_window
    window = step_inventory(PHI3, micro_batch_size=2, seq_len=s, window_mask=True,
                            mask_layers=PHI3.num_layers).layers_forward
    assert window.masked_attention_forward_flops == pytest.approx(window.attention_forward_flops)
    flash = step_inventory(PHI3, micro_batch_size=2, seq_len=s).layers_forward
    assert flash.masked_attention_forward_flops == 0.0
    added = PassInventory() + masked
    assert added.masked_attention_forward_flops == masked.masked_attention_forward_flops


@pytest.mark.parametrize("backward", [False, True])
def test_pass_times_the_masked_work_at_the_memory_efficient_rate(backward):
    inv = PassInventory((), 1e12, 32.0, attention_head_dim=128.0)
    masked = replace(inv, masked_attention_forward_flops=1e12)
    kw = dict(rates=H100, seq_len=8192, backward=backward)
    t, tm = pass_seconds(inv, **kw).attention_s, pass_seconds(masked, **kw).attention_s
    assert tm == pytest.approx(t / MEM_EFFICIENT_TO_FA2_RATE)
    # the stated kernel does not reach the masked work: SDPA picks the memory-efficient kernel with a mask
    assert pass_seconds(masked, attention_kernel="fa3", **kw).attention_s == pytest.approx(tm)
    half = replace(inv, masked_attention_forward_flops=5e11)
    assert pass_seconds(half, **kw).attention_s == pytest.approx((t + tm) / 2)


def test_the_kernel_reads_the_mask_once_per_head():
    assert mask_bias_read_bytes(micro_batch_size=2, heads=32, seq_len=8192) == 2 * 32 * 8192 ** 2 * 2
    assert mask_bias_read_bytes(micro_batch_size=2, heads=32, seq_len=8192, dtype_bytes=4) == 2 * 32 * 8192 ** 2 * 4


@pytest.mark.parametrize("seq_len", [2048, 8192])
def test_masked_layers_move_the_mask_reads_forward_recompute_and_backward(seq_len):
    """A padding mask on every layer: each pass's memory-efficient kernel reads the mask per head; the heads after the
    first re-read the row's mask, from L2 when it fits (training.l2_chained_bytes: 8 MiB at 2,048 tokens does, 128 MiB
    at 8,192 does not on an H100)."""
    from trainfit.compute.training import l2_chained_bytes

    n = LLAMA8.num_layers
    kw = dict(micro_batch_size=2, seq_len=seq_len, mask_layers=n)
    skip, masked = step_inventory(LLAMA8, **kw), step_inventory(LLAMA8, causal_skip=False, **kw)
    reads = mask_bias_read_bytes(micro_batch_size=2, heads=LLAMA8.num_attention_heads, seq_len=seq_len) * n
    for p in ("layers_forward", "layers_recompute", "layers_backward"):
        assert getattr(masked, p).memory_bytes - getattr(skip, p).memory_bytes == pytest.approx(reads), p
    (chain,) = [c for c in masked.layers_forward.chained_reads if c not in skip.layers_forward.chained_reads]
    assert chain.working_set_bytes == seq_len ** 2 * 2
    assert chain.contiguous_bytes == pytest.approx(reads * (LLAMA8.num_attention_heads - 1)
                                                   / LLAMA8.num_attention_heads)
    in_l2 = l2_chained_bytes((chain,), rates=H100)[0]
    assert in_l2 == (chain.contiguous_bytes if seq_len == 2048 else 0.0)
