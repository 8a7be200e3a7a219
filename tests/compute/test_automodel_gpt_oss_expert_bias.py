"""NeMo Automodel's per-expert bias loops for gpt-oss (compute.moe_time.automodel_expert_bias_elementwise): ``t + b``
after the fc1 grouped GEMM and ``t + b * p`` (float32 probabilities) after fc2, counted on grouped_gemm ``gmm`` cards
(``expert_streams``) for models with expert biases only."""

from dataclasses import replace

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute import moe_time
from trainfit.compute.inventory import BACKWARD_BYTES_FACTOR, hf_clamped_glu_extra, step_inventory


def test_bytes_and_kernels_from_the_traced_ops():
    rows, h, f, n = 4096, 2880, 2880, 4
    w = moe_time.automodel_expert_bias_elementwise(rows=rows, hidden=h, expert_width=f, local_experts=n)
    assert w.forward_bytes == pytest.approx(8.0 * rows * 2 * f + 28.0 * rows * h)
    assert w.backward_bytes == pytest.approx(6.0 * rows * 2 * f + 40.0 * rows * h)
    assert w.forward_kernels == (1 + 2) * n + 1 + 2
    assert w.backward_kernels == (1 + 6) * n + 2 + 4
    # constant routing weights (FakeBalancedGate): no probability gradient in the fc2 loop's backward
    c = moe_time.automodel_expert_bias_elementwise(rows=rows, hidden=h, expert_width=f, local_experts=n,
                                                   probs_grad=False)
    assert c.forward_bytes == w.forward_bytes
    assert c.backward_bytes == pytest.approx(6.0 * rows * 2 * f + 28.0 * rows * h)
    assert c.backward_kernels == (1 + 4) * n + 2 + 3
    assert moe_time.automodel_expert_bias_elementwise(rows=0, hidden=h, expert_width=f, local_experts=n) == (
        moe_time.MoeLayerWork(0.0, 0.0, 0.0, 0.0))


def test_only_gmm_cards_and_only_gpt_oss_move():
    oss = resolve_model("openai/gpt-oss-20b")
    kw = dict(micro_batch_size=1, seq_len=1024, expert_parallel=1)
    plain = step_inventory(oss, **kw)
    gmm = step_inventory(oss, expert_streams=True, **kw)
    layers = oss.num_moe_layers
    extra = moe_time.automodel_expert_bias_elementwise(
        rows=1024 * oss.moe.experts_per_token, hidden=oss.hidden_size,
        expert_width=oss.moe.expert_intermediate_size, local_experts=oss.moe.num_experts)
    # the plain card runs transformers' own experts, whose clamped GLU and bias adds are charged there instead
    # (inventory.hf_clamped_glu_extra, with the backward factors)
    hf_b, _, hf_k = hf_clamped_glu_extra(rows=1024 * oss.moe.experts_per_token, hidden=oss.hidden_size,
                                         expert_width=oss.moe.expert_intermediate_size, expert_bias=True)
    assert gmm.layers_forward.memory_bytes - plain.layers_forward.memory_bytes == pytest.approx(
        (extra.forward_bytes - hf_b) * layers)
    assert gmm.layers_backward.memory_bytes - plain.layers_backward.memory_bytes == pytest.approx(
        (extra.backward_bytes - BACKWARD_BYTES_FACTOR * hf_b) * layers)
    # eager: left out of the compile memory factor, launches counted with the others
    assert gmm.layers_forward.fused_bytes - plain.layers_forward.fused_bytes == pytest.approx(
        extra.forward_bytes * layers)
    assert gmm.layers_backward.fused_bytes - plain.layers_backward.fused_bytes == pytest.approx(
        extra.backward_bytes * layers)
    assert gmm.layers_forward.kernels - plain.layers_forward.kernels == pytest.approx(
        (extra.forward_kernels - hf_k) * layers)
    # Megatron-Core's TEGroupedMLP keeps its own count (compute.moe_time.megatron_expert_elementwise)
    mega = step_inventory(oss, megatron_experts=True, **kw)
    both = step_inventory(oss, megatron_experts=True, expert_streams=True, **kw)
    assert both.layers_forward.memory_bytes == pytest.approx(mega.layers_forward.memory_bytes)
    # no expert biases (Qwen3-MoE): only the routed GEMMs' per-expert launches tell the two apart
    qwen = resolve_model("Qwen/Qwen3-30B-A3B")
    q_gmm, q_plain = step_inventory(qwen, expert_streams=True, **kw), step_inventory(qwen, **kw)
    for p in ("layers_forward", "layers_backward"):
        a, b = getattr(q_gmm, p), getattr(q_plain, p)
        assert (replace(a, gemms=tuple(replace(g, launch_per_group=False) for g in a.gemms))
                == replace(b, gemms=tuple(replace(g, grouped_kernel=False) for g in b.gemms)))
