"""torchao's MXFP8 casts at their published bandwidth (``float8_casts.TORCHAO_MXFP8_CAST_BYTES_PER_S``): 5.5 TB/s on
a B200 (pytorch/ao torchao/prototype/mx_formats/README.md l.107-111 @d8bb51f6), compared with the card's own streaming
rate (``DeviceRates.hbm_bytes_per_s``) where the casts are priced: below it their bytes are charged streaming / 5.5
times; Transformer Engine's casts and the other recipes keep the streaming rate. Golden values by hand: a B200's
default streaming rate is 0.90 x 8 TB/s = 7.2 TB/s, so 1 GB of cast bytes is charged as 7.2 / 5.5 = 1.3091 GB."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.float8_casts import (
    TE_MXFP8,
    TORCHAO_COMPILED,
    TORCHAO_MXFP8,
    cast_stream_bytes,
    linear_cast_traffic,
    recompute_cast_bytes,
)
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates
from trainfit.memory.params import linear_groups

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
B200_STREAM = 7.2e12  # 0.90 x the catalog's 8 TB/s
FACTOR = 7.2 / 5.5  # 1.3091


def test_published_rate_against_the_cards_streaming_rate():
    assert TORCHAO_MXFP8.cast_bytes_per_s == 5.5e12
    assert default_rates(resolve_gpu("b200")).hbm_bytes_per_s == pytest.approx(B200_STREAM)
    assert cast_stream_bytes(casts=TORCHAO_MXFP8, bytes_moved=1e9, stream_bytes_per_s=B200_STREAM) == \
        pytest.approx(1.3090909e9)
    # a calibrated streaming rate moves the streaming side only: at 6.6 TB/s the casts cost 6.6 / 5.5 = 1.2 x
    assert cast_stream_bytes(casts=TORCHAO_MXFP8, bytes_moved=1e9, stream_bytes_per_s=6.6e12) == pytest.approx(1.2e9)
    # at or below the cast rate (a card streaming no faster than 5.5 TB/s), or with no rate given: unchanged
    assert cast_stream_bytes(casts=TORCHAO_MXFP8, bytes_moved=1e9, stream_bytes_per_s=5.0e12) == 1e9
    assert cast_stream_bytes(casts=TORCHAO_MXFP8, bytes_moved=1e9, stream_bytes_per_s=None) == 1e9
    # casts without a published rate of their own stay at the streaming rate
    for casts in (TE_MXFP8, TORCHAO_COMPILED):
        assert casts.cast_bytes_per_s is None
        assert cast_stream_bytes(casts=casts, bytes_moved=1e9, stream_bytes_per_s=B200_STREAM) == 1e9


def test_linear_and_recompute_casts_are_scaled_and_layout_copies_are_not():
    kw = dict(input_tokens=8192, grad_tokens=8192, in_features=4096, out_features=14336,
              weight_elements=4096 * 14336, transposed_elements=4096 * 14336, weight_casts=1, weight_transposes=1,
              stream_bytes_per_s=B200_STREAM)
    fwd, bwd, fk, bk = linear_cast_traffic(casts=TORCHAO_MXFP8, copy_bytes=1e6, **kw)
    per = 2 + 1 + 1 / 32  # one MXFP8 cast per element: 2 B read, 1 B fp8 + 1/32 B scale written
    assert fwd == pytest.approx(FACTOR * per * (8192 * 4096 + 4096 * 14336))
    # backward: the output gradient along dim 0 and dim 1, the input and the weight along dim 1
    assert bwd == pytest.approx(FACTOR * per * (2 * 8192 * 14336 + 8192 * 4096 + 4096 * 14336) + 1e6)
    assert (fk, bk) == (2, 4)  # kernels are not scaled
    rec = recompute_cast_bytes(casts=TORCHAO_MXFP8, input_elements=8192 * 4096, weight_elements=4096 * 14336,
                               stream_bytes_per_s=B200_STREAM)
    assert rec == pytest.approx(FACTOR * per * (8192 * 4096 + 4096 * 14336))


def test_inventory_forward_cast_bytes_carry_the_factor():
    t = 2 * 1024
    dense = [g for g in linear_groups(LLAMA8) if not g.is_fused_experts]
    acts_in = sum(g.in_features * g.count for g in dense) * t
    weights = sum(g.in_features * g.out_features * g.count for g in dense)
    base = step_inventory(LLAMA8, micro_batch_size=2, seq_len=1024)
    kw = dict(micro_batch_size=2, seq_len=1024, fp8=True, fp8_casts=TORCHAO_MXFP8)
    inv = step_inventory(LLAMA8, **kw, hbm_bytes_per_s=B200_STREAM)
    extra = inv.layers_forward.memory_bytes - base.layers_forward.memory_bytes
    raw = (2 + 1 + 1 / 32) * (acts_in + weights)
    assert extra == pytest.approx(raw * FACTOR)
    # the same inventory at a streaming rate below the casts' charges their bytes as they are
    slow = step_inventory(LLAMA8, **kw, hbm_bytes_per_s=5.0e12)
    assert slow.layers_forward.memory_bytes - base.layers_forward.memory_bytes == pytest.approx(raw)


def test_calibrated_streaming_rate_keeps_the_published_cast_time():
    """The casts' seconds are bytes / 5.5 TB/s whatever the card streams at (while it streams faster)."""
    raw = 1e9
    for stream in (7.2e12, 6.6e12, 8.0e12):
        charged = cast_stream_bytes(casts=TORCHAO_MXFP8, bytes_moved=raw, stream_bytes_per_s=stream)
        assert charged / stream == pytest.approx(raw / 5.5e12)
