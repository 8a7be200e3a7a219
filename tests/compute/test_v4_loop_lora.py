"""PEFT's LoRA on transformers < 5's expert loop (``parallel.moe_experts: loop`` / ``loop_all``): each expert's
linears are unmerged ``lora.Linear`` modules (per hit expert and linear the A and B GEMMs over its routed rows and the
scale / add kernels), and ``all-linear`` also wraps the router's ``gate`` (``inventory.v4_loop_lora_terms``); not
PEFT v5's merged 3-D stack (``<name>.BA``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import Adapter, step_inventory, v4_loop_lora_terms

MIXTRAL = from_catalog("mistralai/Mixtral-8x7B-v0.1")
KW = dict(micro_batch_size=1, seq_len=2048, expert_loop=True)
LORA = Adapter(rank=16, targets=("all-linear",))
ATTN = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"))


def _names(gemms):
    return {g.name for g in gemms}


def test_per_expert_adapter_gemms_no_merge():
    inv = step_inventory(MIXTRAL, adapter=LORA, **KW)
    f = {g.name: g for g in inv.layers_forward.gemms}
    assert not {"gate_up_proj.BA", "down_proj.BA"} & set(f)  # no merged stack on v4
    rows = 2048 * 2 / 8  # T x top-k / E routed rows per expert
    a, b = f["gate_up_proj.A"], f["gate_up_proj.B"]
    # w1 and w3 apart (two lora.Linear per expert), every expert of every layer hit
    assert (a.m, a.n, a.k, a.count) == (rows, 16, 4096, 2 * 8 * 32)
    assert (b.m, b.n, b.k) == (rows, 14336, 16)
    d = f["down_proj.A"]
    assert (d.m, d.n, d.k, d.count) == (rows, 16, 14336, 8 * 32)
    assert {"gate_up_proj.A.dW", "gate_up_proj.B.dX", "down_proj.B.dW", "down_proj.A.dX"} <= _names(
        inv.layers_backward.gemms)


def test_router_gate_wrapped_by_all_linear_only():
    inv = step_inventory(MIXTRAL, adapter=LORA, **KW)
    r = {g.name: g for g in inv.layers_forward.gemms}
    assert (r["router.A"].m, r["router.A"].n, r["router.A"].k, r["router.A"].count) == (2048, 16, 4096, 32)
    assert (r["router.B"].n, r["router.B"].k) == (8, 16)
    assert "router.A" not in _names(step_inventory(MIXTRAL, adapter=ATTN, **KW).layers_forward.gemms)
    # v5 (grouped_mm or its eager loop): the router's weight is PEFT's ParamWrapper, not priced as a lora.Linear
    grouped = step_inventory(MIXTRAL, adapter=LORA, micro_batch_size=1, seq_len=2048)
    assert "router.A" not in _names(grouped.layers_forward.gemms)


def test_kernels_and_bytes_per_call():
    t = v4_loop_lora_terms(name="w", rows=64, in_features=4096, out_features=14336, rank=8, calls=10,
                           adapter_dtype_bytes=2)
    assert (t.gemm_forward_kernels, t.gemm_backward_kernels, t.lora_kernels) == (20, 40, 20)  # mm x 2, mul + add
    assert t.lora_bytes == pytest.approx(10.0 * 64 * 14336 * 10)
    assert not t.chained_forward
    # fp32 adapters (get_peft_model's autocast): two casts more per call (benchmarks/expert_loop_v4_lora_ops.py)
    t32 = v4_loop_lora_terms(name="w", rows=64, in_features=4096, out_features=14336, rank=8, calls=10,
                             adapter_dtype_bytes=4)
    assert t32.lora_kernels == 40 and t32.chained_forward
    assert t32.forward_gemms[0].dtype_bytes == 4
    drop = v4_loop_lora_terms(name="w", rows=64, in_features=4096, out_features=14336, rank=8, calls=10,
                              adapter_dtype_bytes=2, dropout=True)
    assert drop.dropout_kernels == 10 and drop.dropout_bytes == pytest.approx(5.0 * 64 * 4096 * 10)


def test_v4_loop_lora_far_below_the_merge_traffic():
    """The old charge (v5's merge: 6 + 8 B per stacked weight and layer) was weight-sized; the unmerged adapters'
    traffic follows the routed rows."""
    inv = step_inventory(MIXTRAL, adapter=LORA, **KW)
    frozen = step_inventory(MIXTRAL, adapter=ATTN, **KW)
    stack_weights = 1_409_286_144 * 32
    assert inv.layers_forward.memory_bytes - frozen.layers_forward.memory_bytes < 1.0 * stack_weights


QWEN2_MOE = from_catalog("Qwen/Qwen1.5-MoE-A2.7B")


def test_qwen2_moe_experts_and_router_adapted_on_transformers_4_only():
    """Qwen1.5-MoE on transformers 4.x: PEFT wraps each expert's nn.Linear and the router's ``gate`` (an nn.Linear
    there, ``memory.lora._V4_LINEAR_ROUTER``); on 5.x the experts are 3-D Parameters and the router a
    ``Qwen2MoeTopKRouter``, neither wrapped."""
    v4 = _names(step_inventory(QWEN2_MOE, adapter=Adapter(rank=16, targets=("all-linear",), transformers_v4=True),
                               **KW).layers_forward.gemms)
    v5 = _names(step_inventory(QWEN2_MOE, adapter=LORA, **KW).layers_forward.gemms)
    assert {"gate_up_proj.A", "down_proj.B", "router.A", "shared_expert_gate.A"} <= v4
    assert not {"gate_up_proj.A", "router.A"} & v5 and "shared_expert_gate.A" in v5


def test_no_param_wrapper_cycles_on_transformers_4():
    from trainfit.compute.inventory import peft_param_wrapper_calls

    qwen3 = from_catalog("Qwen/Qwen3-30B-A3B")
    assert peft_param_wrapper_calls(qwen3, adapter=LORA) > 0
    assert peft_param_wrapper_calls(qwen3, adapter=Adapter(rank=16, targets=("all-linear",),
                                                           transformers_v4=True)) == 0.0
