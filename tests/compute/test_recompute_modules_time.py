"""What Megatron-Core's --recompute-modules re-run in backward (``compute.inventory.StepInventory.recompute_modules``)
and the MoE layer recompute's repeated expert-parallel dispatch (``compute.model_parallel``, ``expert_recompute``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import NORM_BYTES, NORM_KERNELS, SWIGLU_BYTES, SWIGLU_KERNELS, step_inventory
from trainfit.compute.model_parallel import model_parallel_comm

QWEN_MOE = from_catalog("Qwen/Qwen3-30B-A3B")
LLAMA = from_catalog("meta-llama/Llama-3.1-8B")
DSV3 = from_catalog("deepseek-ai/DeepSeek-V3")
S = 4096


def _inv(spec):
    return step_inventory(spec, micro_batch_size=1, seq_len=S)


def _flops(inv, names) -> float:
    return sum(g.flops for g in inv.layers_forward.gemms if g.name in names)


def test_moe_act_and_layernorm_rerun_the_activation_and_the_pre_mlp_norm():
    inv = _inv(QWEN_MOE)
    L, h = QWEN_MOE.num_layers, QWEN_MOE.hidden_size
    k, w = QWEN_MOE.moe.experts_per_token, QWEN_MOE.moe.expert_intermediate_size
    act = inv.recompute_modules(("moe_act",))
    assert act.gemms == () and act.memory_bytes == pytest.approx(SWIGLU_BYTES * S * k * w * L)
    assert act.kernels == SWIGLU_KERNELS * L
    ln = inv.recompute_modules(("layernorm",))
    assert ln.gemms == () and ln.memory_bytes == pytest.approx(NORM_BYTES * S * h * L)
    assert ln.kernels == NORM_KERNELS * L
    both = inv.recompute_modules(("layernorm", "moe_act"))
    assert both.memory_bytes == pytest.approx(act.memory_bytes + ln.memory_bytes)
    # far less than a full layer recompute
    assert both.memory_bytes < inv.recompute("none").memory_bytes / 4 and both.gemm_flops == 0


def test_moe_reruns_the_router_and_experts_and_holds_moe_act():
    inv = _inv(QWEN_MOE)
    moe = inv.recompute_modules(("moe",))
    assert moe.gemm_flops == pytest.approx(_flops(inv, {"router", "gate_up_proj", "down_proj"}))
    assert moe.memory_bytes > inv.recompute_modules(("moe_act",)).memory_bytes
    assert inv.recompute_modules(("moe", "moe_act")) == moe
    # core_attn adds the attention core
    core = inv.recompute("core_attention")
    both = inv.recompute_modules(("core_attn", "moe"))
    assert both.attention_forward_flops == core.attention_forward_flops > 0
    assert both.gemm_flops == pytest.approx(moe.gemm_flops + core.gemm_flops)


def test_dense_mlp_and_fused_norms():
    inv = _inv(LLAMA)
    mlp = inv.recompute_modules(("mlp",))
    assert mlp.gemm_flops == pytest.approx(_flops(inv, {"gate_proj", "up_proj", "down_proj"}))
    assert mlp.gemm_flops == pytest.approx(2 * S * 3 * LLAMA.hidden_size * LLAMA.intermediate_size * LLAMA.num_layers)
    # Transformer Engine fuses both norms of a dense layer into a linear: layernorm re-runs nothing
    assert inv.recompute_modules(("layernorm",)).kernels == 0


def test_deepseek_shared_experts_and_mla_up_proj():
    inv = _inv(DSV3)
    assert {g.name for g in inv.recompute_modules(("shared_experts",)).gemms} == {
        "shared_experts.gate_proj", "shared_experts.up_proj", "shared_experts.down_proj"}
    assert {g.name for g in inv.recompute_modules(("mla_up_proj",)).gemms} == {"q_b_proj", "kv_b_proj"}
    # the dense layers' MLP (3 of 61) only
    assert {(g.name, g.count) for g in inv.recompute_modules(("mlp",)).gemms} == {
        ("gate_proj", 3), ("up_proj", 3), ("down_proj", 3)}
    # layernorm: MLA's input norm in every layer, the pre-MLP norm in the MoE layers
    n_moe = sum(1 for i in range(DSV3.num_layers) if DSV3.moe.is_moe_layer(i))
    assert inv.recompute_modules(("layernorm",)).kernels == NORM_KERNELS * (DSV3.num_layers + n_moe)


def test_a_recomputed_moe_layer_repeats_its_dispatch_and_combine():
    kw = dict(tokens=4096, hidden=2048, q_dim=4096, kv_dim=512, layers=48, attention_layers=48, moe_layers=48,
              top_k=8, tp=1, cp=1, ulysses=False, ep=8, pp=1, latency_s=30e-6, tp_bus_bytes_per_s=1e11,
              cp_bus_bytes_per_s=1e11, ep_bus_bytes_per_s=1e11, pp_bytes_per_s=1e11, experts=128)
    plain = model_parallel_comm(recompute=False, **kw).expert_s
    moe = model_parallel_comm(recompute=False, expert_recompute=True, **kw).expert_s
    full = model_parallel_comm(recompute=True, **kw).expert_s
    assert moe == pytest.approx(full) and moe > plain * 1.4
