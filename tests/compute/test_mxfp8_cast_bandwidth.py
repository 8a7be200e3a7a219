"""torchao's MXFP8 casts at their published bandwidth (``float8_casts.TORCHAO_MXFP8_CAST_BANDWIDTH_FRACTION``): 5.5 of
the B200's 8 TB/s, below the 90 % streaming copy the plan assumes, so their bytes are charged 0.90 / 0.6875 times;
Transformer Engine's casts and the other recipes keep the streaming rate."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.float8_casts import (
    TE_MXFP8,
    TORCHAO_COMPILED,
    TORCHAO_MXFP8,
    TORCHAO_MXFP8_CAST_BANDWIDTH_FRACTION,
    cast_stream_bytes,
    linear_cast_traffic,
    recompute_cast_bytes,
)
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import HBM_FRACTION
from trainfit.memory.params import linear_groups

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


def test_published_fraction_and_stream_factor():
    assert TORCHAO_MXFP8_CAST_BANDWIDTH_FRACTION == pytest.approx(5.5 / 8.0)
    assert TORCHAO_MXFP8.cast_bandwidth_fraction == TORCHAO_MXFP8_CAST_BANDWIDTH_FRACTION
    assert cast_stream_bytes(casts=TORCHAO_MXFP8, bytes_moved=1e9) == pytest.approx(1e9 * HBM_FRACTION / 0.6875)
    # casts without a published rate of their own stay at the streaming rate
    for casts in (TE_MXFP8, TORCHAO_COMPILED):
        assert casts.cast_bandwidth_fraction is None
        assert cast_stream_bytes(casts=casts, bytes_moved=1e9) == 1e9


def test_linear_and_recompute_casts_are_scaled_and_layout_copies_are_not():
    kw = dict(input_tokens=8192, grad_tokens=8192, in_features=4096, out_features=14336,
              weight_elements=4096 * 14336, transposed_elements=4096 * 14336, weight_casts=1, weight_transposes=1)
    f = HBM_FRACTION / TORCHAO_MXFP8_CAST_BANDWIDTH_FRACTION
    fwd, bwd, fk, bk = linear_cast_traffic(casts=TORCHAO_MXFP8, copy_bytes=1e6, **kw)
    c = TORCHAO_MXFP8
    assert fwd == pytest.approx(f * (c.input_forward_bytes * 8192 * 4096 + c.weight_forward_bytes * 4096 * 14336))
    assert bwd == pytest.approx(f * (c.grad_output_backward_bytes * 8192 * 14336 + c.input_backward_bytes * 8192 * 4096
                                     + c.weight_backward_bytes * 4096 * 14336) + 1e6)
    assert (fk, bk) == (2, 4)  # kernels are not scaled
    rec = recompute_cast_bytes(casts=c, input_elements=8192 * 4096, weight_elements=4096 * 14336)
    assert rec == pytest.approx(f * (c.input_forward_bytes * 8192 * 4096 + c.weight_forward_bytes * 4096 * 14336))


def test_inventory_forward_cast_bytes_carry_the_factor():
    t = 2 * 1024
    dense = [g for g in linear_groups(LLAMA8) if not g.is_fused_experts]
    acts_in = sum(g.in_features * g.count for g in dense) * t
    weights = sum(g.in_features * g.out_features * g.count for g in dense)
    base = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024)
    inv = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024, fp8=True, fp8_casts=TORCHAO_MXFP8)
    extra = inv.layers_forward.memory_bytes - base.layers_forward.memory_bytes
    raw = TORCHAO_MXFP8.input_forward_bytes * acts_in + TORCHAO_MXFP8.weight_forward_bytes * weights
    assert extra == pytest.approx(raw * HBM_FRACTION / TORCHAO_MXFP8_CAST_BANDWIDTH_FRACTION)
