"""A QLoRA model loaded in float32 without autocast (``precision.nf4_compute_dtype`` fp32): besides the 4-bit base's
GEMMs, SDPA runs fp32 q / k / v on its memory-efficient kernel in 3xTF32 (``attention_time.fp32_attention_ratio``),
and the unquantised head and eager attention's products run as fp32 GEMMs (``inventory.step_inventory``)."""

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
from trainfit.compute.inventory import Adapter, step_inventory
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
