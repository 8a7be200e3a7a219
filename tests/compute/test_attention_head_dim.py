"""The attention kernels' rate depends on the head dimension (``compute.attention_time`` module docstring)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.attention_time import attention_seconds, head_dim_efficiency
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates

H100 = default_rates(resolve_gpu("h100-sxm"))


def test_inventory_carries_the_head_dim():
    inv = step_inventory(from_catalog("openai/gpt-oss-120b"), micro_batch_size=1, seq_len=4096).layers_forward
    assert inv.attention_head_dim == 64
    assert step_inventory(from_catalog("meta-llama/Llama-3.1-8B"), micro_batch_size=1,
                          seq_len=4096).layers_forward.attention_head_dim == 128


def test_head_dim_factor_follows_the_published_ratios():
    assert head_dim_efficiency(compute_capability="9.0", head_dim=128, backward=False) == 1.0
    assert head_dim_efficiency(compute_capability="9.0", head_dim=256, backward=False) == 1.0
    assert head_dim_efficiency(compute_capability="9.0", head_dim=None, backward=False) == 1.0
    assert head_dim_efficiency(compute_capability="9.0", head_dim=64, backward=False) == 0.89
    assert head_dim_efficiency(compute_capability="9.0", head_dim=64, backward=True) == 0.90
    assert head_dim_efficiency(compute_capability="10.0", head_dim=64, backward=False) == 0.67
    assert head_dim_efficiency(compute_capability="10.0", head_dim=96, backward=False) == pytest.approx(0.835)
    assert head_dim_efficiency(compute_capability="10.0", head_dim=32, backward=False) == 0.67
    # A100 (sm8x): FlashAttention-2 causal forward + backward at 4k, head dim 64 / 128 = 156 / 173 (Dao 2023 Fig. 4)
    for cc in ("8.0", "8.6", "8.9"):
        for backward in (False, True):
            assert head_dim_efficiency(compute_capability=cc, head_dim=64, backward=backward) == pytest.approx(
                156 / 173, abs=0.005)
    # sm_120 (consumer Blackwell) runs the sm8x kernels (no wgmma): the sm8x row (compute.attention_time)
    assert head_dim_efficiency(compute_capability="12.0", head_dim=64, backward=False) == head_dim_efficiency(
        compute_capability="8.9", head_dim=64, backward=False)


def test_head_dim_64_attention_is_slower_on_h100():
    kw = dict(forward_flops=1e12, seq_len=4096, rates=H100, backward=False)
    assert attention_seconds(**kw, head_dim=64) == pytest.approx(attention_seconds(**kw, head_dim=128) / 0.89)
    assert attention_seconds(**kw, head_dim=128) == attention_seconds(**kw)
