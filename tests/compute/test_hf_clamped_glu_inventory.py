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


def test_named_constants_and_the_torchtitan_path():
    """The per-element figures are the cited module constants (HF_CLAMPED_GLU_*, HF_EXPERT_BIAS_*), and torchtitan's
    padded grouped_mm experts (``expert_padding``), whose ``swiglu`` and bias adds are the same eager ops, get the
    same charge."""
    from trainfit.compute import inventory as inv

    assert (inv.HF_CLAMPED_GLU_BYTES, inv.HF_CLAMPED_GLU_KERNELS, inv.HF_CLAMPED_GLU_STRIDED_BYTES) == (32.0, 7, 8.0)
    assert (inv.HF_EXPERT_BIAS_GATE_UP_BYTES, inv.HF_EXPERT_BIAS_DOWN_BYTES, inv.HF_EXPERT_BIAS_KERNELS) == (16.0, 8.0, 4)
    assert inv.EAGER_SINK_GEMM_KERNELS == 4
    moe = GPT_OSS.moe
    plain = replace(GPT_OSS, moe=replace(moe, clamped_glu=False, expert_bias=False))
    got = step_inventory(GPT_OSS, expert_padding=True, **KW).layers_forward
    ref = step_inventory(plain, expert_padding=True, **KW).layers_forward
    _, _, k = hf_clamped_glu_extra(rows=2048 * moe.experts_per_token, hidden=GPT_OSS.hidden_size,
                                   expert_width=moe.expert_intermediate_size, expert_bias=True)
    assert got.kernels - ref.kernels == pytest.approx(k * GPT_OSS.num_layers)
