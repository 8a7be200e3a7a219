"""transformers v5's gpt-oss experts on grouped_mm: the clamped GLU on stride-2 views of the fused gate/up output
(two clamps, sigmoid, three products and an add) and the experts' bias gathers and in-place adds, beyond the
SiLU-and-mul every routed row is charged (``inventory.hf_clamped_glu_extra``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import SWIGLU_BYTES, hf_clamped_glu_extra, step_inventory
from trainfit.spec.enums import MoeDispatcher

GPT_OSS = from_catalog("openai/gpt-oss-20b")
KW = dict(micro_batch_size=1, seq_len=2048)


def test_bytes_per_routed_row():
    b, s, k = hf_clamped_glu_extra(rows=1.0, hidden=2880, expert_width=2880, expert_bias=True)
    assert b == pytest.approx((32 - SWIGLU_BYTES + 16) * 2880 + 8 * 2880)
    assert s == pytest.approx(8 * 2880)  # the two clamps read stride-2 views
    assert k == 9  # 7 GLU kernels for SwiGLU's 2, and a gather and an add per projection
    b0, _, k0 = hf_clamped_glu_extra(rows=1.0, hidden=2880, expert_width=2880, expert_bias=False)
    assert b0 == pytest.approx((32 - SWIGLU_BYTES) * 2880) and k0 == 5


def test_charged_on_transformers_grouped_experts_only():
    moe = GPT_OSS.moe
    plain = replace(GPT_OSS, moe=replace(moe, clamped_glu=False, expert_bias=False))
    got = step_inventory(GPT_OSS, **KW).layers_forward
    ref = step_inventory(plain, **KW).layers_forward
    rows = 2048 * moe.experts_per_token
    b, s, k = hf_clamped_glu_extra(rows=rows, hidden=GPT_OSS.hidden_size, expert_width=moe.expert_intermediate_size,
                                   expert_bias=True)
    n = GPT_OSS.num_layers
    assert got.memory_bytes - ref.memory_bytes == pytest.approx(b * n, rel=1e-6)
    assert got.strided_bytes - ref.strided_bytes == pytest.approx(s * n, rel=1e-6)
    assert got.kernels - ref.kernels == pytest.approx(k * n)
    # Megatron-Core's experts have their own count (moe_time.megatron_expert_elementwise); DeepEP paths compile it
    for kw in (dict(megatron_experts=True), dict(expert_parallel=4, moe_dispatcher=MoeDispatcher.DEEPEP)):
        a = step_inventory(GPT_OSS, **KW, **kw).layers_forward.memory_bytes
        c = step_inventory(plain, **KW, **kw).layers_forward.memory_bytes
        assert a - c != pytest.approx(b * n, rel=1e-3)
