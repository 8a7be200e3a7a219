"""A QLoRA model loaded in float32 without autocast (``precision.nf4_compute_dtype`` fp32): besides the 4-bit base's
GEMMs, SDPA runs fp32 q / k / v on its memory-efficient kernel in 3xTF32 (``attention_time.fp32_attention_ratio``),
the unquantised head and eager attention's products run as fp32 GEMMs, and the residual stream's elementwise ops move
4-byte elements (``inventory.fp32_stream_extra_forward_bytes``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.attention_time import (
    FP32_ATTENTION_TENSOR_OPS_PER_PRODUCT,
    TF32_TO_BF16_TENSOR_RATE,
    attention_seconds,
    fp32_attention_ratio,
)
from trainfit.compute.inventory import BACKWARD_BYTES_FACTOR, EAGER_SCORE_FORWARD_BYTES, Adapter, fp32_stream_extra_forward_bytes, step_inventory
from trainfit.compute.rates import default_rates

A100 = default_rates(resolve_gpu("a100-80gb"))
SPEC = from_catalog("meta-llama/Llama-3.1-8B")
KW = dict(micro_batch_size=1, seq_len=1024)


def _adapter(base_dtype_bytes: int) -> Adapter:
    return Adapter(rank=8, targets=("all-linear",), nf4_base=True, base_dtype_bytes=base_dtype_bytes)


def test_3xtf32_is_six_times_the_bf16_tensor_time():
    assert FP32_ATTENTION_TENSOR_OPS_PER_PRODUCT == 3 and TF32_TO_BF16_TENSOR_RATE == 0.5
    assert fp32_attention_ratio() == pytest.approx(1 / 6)
    for backward in (False, True):
        bf16 = attention_seconds(forward_flops=1e15, seq_len=8192, rates=A100, backward=backward, head_dim=128)
        fp32 = attention_seconds(forward_flops=1e15, seq_len=8192, rates=A100, backward=backward, head_dim=128,
                                 fp32=True)
        assert fp32 == pytest.approx(6 * bf16)


def test_inventory_marks_fp32_attention_and_head():
    bf16 = step_inventory(SPEC, adapter=_adapter(2), **KW)
    fp32 = step_inventory(SPEC, adapter=_adapter(4), **KW)
    assert bf16.layers_forward.attention_dtype_bytes == 2 and fp32.layers_forward.attention_dtype_bytes == 4
    # the sum of passes keeps it (the head pass has no attention)
    assert (fp32.head_forward + fp32.layers_forward).attention_dtype_bytes == 4
    head = {g.name: g.dtype_bytes for g in fp32.head_forward.gemms + fp32.head_backward.gemms}
    assert head == {"lm_head": 4, "lm_head.dX": 4}
    assert {g.dtype_bytes for g in bf16.head_forward.gemms} == {2}
    # a LoRA model (no 4-bit base) and no adapter: bf16 as before
    assert step_inventory(SPEC, **KW).layers_forward.attention_dtype_bytes == 2


def test_eager_attention_products_follow_the_model_dtype():
    fp32 = step_inventory(SPEC, adapter=_adapter(4), eager_attention=True, **KW)
    attn = [g for g in fp32.layers_forward.gemms + fp32.layers_backward.gemms if g.name.startswith("attn.")]
    assert len(attn) == 4 and {g.dtype_bytes for g in attn} == {4}
    # the score tensor's elementwise bytes at 4 bytes an element: twice the 16-bit figure
    bf16 = step_inventory(SPEC, adapter=_adapter(2), eager_attention=True, **KW)
    scores = bf16.layers_forward.eager_score_elements
    assert scores > 0
    x, _ = fp32_stream_extra_forward_bytes(
        tokens=1024, hidden_size=SPEC.hidden_size, norms=SPEC.norms_per_layer * SPEC.num_layers,
        residual_layers=SPEC.num_layers, rotary_elements_per_token=(SPEC.q_dim + SPEC.kv_dim) * SPEC.num_layers,
        glue_layers=SPEC.num_layers, swiglu_elements_per_token=SPEC.intermediate_size * SPEC.num_layers)
    assert fp32.layers_forward.memory_bytes - bf16.layers_forward.memory_bytes == pytest.approx(
        x + EAGER_SCORE_FORWARD_BYTES * scores)


def test_fp32_stream_bytes_per_op():
    """Residual add 6 -> 12, rotary 14 -> 28, glue 8 -> 16, SwiGLU 10 -> 20, RMSNorm 36 -> 28 (two casts fewer)."""
    b, k = fp32_stream_extra_forward_bytes(tokens=1, hidden_size=1, norms=1, residual_layers=0,
                                           rotary_elements_per_token=0, glue_layers=0, swiglu_elements_per_token=0)
    assert (b, k) == (-8.0, -2.0)
    b, _ = fp32_stream_extra_forward_bytes(tokens=10, hidden_size=4, norms=0, residual_layers=1,
                                           rotary_elements_per_token=3, glue_layers=1, swiglu_elements_per_token=5)
    assert b == 10 * (12 * 4 + 14 * 3 + 8 * 4 + 10 * 5)


def test_fp32_stream_adds_layer_bytes_through_the_backward_factor():
    bf16 = step_inventory(SPEC, adapter=_adapter(2), **KW)
    fp32 = step_inventory(SPEC, adapter=_adapter(4), **KW)
    t, h, n = 1024, SPEC.hidden_size, SPEC.num_layers
    x, _ = fp32_stream_extra_forward_bytes(
        tokens=t, hidden_size=h, norms=SPEC.norms_per_layer * n, residual_layers=n,
        rotary_elements_per_token=(SPEC.q_dim + SPEC.kv_dim) * n, glue_layers=n,
        swiglu_elements_per_token=SPEC.intermediate_size * n)
    assert x > 0
    assert fp32.layers_forward.memory_bytes - bf16.layers_forward.memory_bytes == pytest.approx(x)
    assert fp32.layers_backward.memory_bytes - bf16.layers_backward.memory_bytes == pytest.approx(
        BACKWARD_BYTES_FACTOR * x)
    assert fp32.layers_forward.kernels - bf16.layers_forward.kernels == -2 * SPEC.norms_per_layer * n
