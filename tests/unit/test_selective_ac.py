"""Selective activation checkpointing: card sugar, per-layer saved bytes, the recompute it implies."""

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute.inventory import step_inventory, _sac_recomputed_gemms
from trainfit.errors import CardError
from trainfit.memory.activations import activation_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Attention, SelectiveCheckpointing
from trainfit.spec.training import TrainableSpec


def _card(gc, **par):
    return {"model": {"id": "meta-llama/Llama-3.1-8B"}, "method": "sft", "hardware": {"gpu": "h100-sxm"},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": gc, **par},
            "batch": {"micro_batch_size": 2, "seq_len": 8192}}


def test_selective_is_sugar_for_op():
    p = load_card_dict(_card("selective")).parallel
    assert p.gradient_checkpointing is False and p.selective_checkpointing is SelectiveCheckpointing.OP
    assert p.checkpoints_layers
    p = load_card_dict(_card("selective", selective_checkpointing="core_attention")).parallel
    assert p.selective_checkpointing is SelectiveCheckpointing.CORE_ATTENTION


def test_selective_with_full_checkpointing_is_refused():
    with pytest.raises(CardError, match=r"^parallel.selective_checkpointing: 'op' with gradient_checkpointing: true"):
        load_card_dict(_card(True, selective_checkpointing="op"))


def test_op_saves_odd_matmuls_and_attention():
    """Llama layer: q, v, gate, down saved (the 1st, 3rd, 5th, 7th mm), plus SDPA's output and logsumexp."""
    s = resolve_model("meta-llama/Llama-3.1-8B")
    b, L = 1, 4096
    kw = dict(micro_batch_size=b, seq_len=L, attention=Attention.SDPA, trainable=TrainableSpec())
    op = activation_bytes(s, selective=SelectiveCheckpointing.OP, **kw)
    full = activation_bytes(s, **kw)
    T, a = b * L, 2
    inp = a * T * s.hidden_size
    saved = a * T * (s.q_dim + s.kv_dim + s.intermediate_size + s.hidden_size) + T * (a * s.q_dim + 4 * s.num_attention_heads)
    assert op.checkpointed_per_layer[0] == inp + saved
    assert full.checkpointed_per_layer[0] == inp
    assert op.per_layer == full.per_layer  # the recompute brings the layer's whole saved set back


def test_core_attention_drops_korthikanti_s2_terms_with_eager():
    s = resolve_model("meta-llama/Llama-3.1-8B")
    b, L = 1, 2048
    kw = dict(micro_batch_size=b, seq_len=L, trainable=TrainableSpec())
    eager = activation_bytes(s, attention=Attention.EAGER, selective=SelectiveCheckpointing.CORE_ATTENTION, **kw)
    H = s.num_attention_heads
    assert eager.per_layer[0] - eager.checkpointed_per_layer[0] == b * L * H * L * (4 + 2)  # fp32 softmax + bf16 probs
    sdpa = activation_bytes(s, attention=Attention.SDPA, selective=SelectiveCheckpointing.CORE_ATTENTION, **kw)
    assert sdpa.per_layer[0] - sdpa.checkpointed_per_layer[0] == b * L * 4 * H  # logsumexp only


def test_recompute_passes():
    s = resolve_model("meta-llama/Llama-3.1-8B")
    assert _sac_recomputed_gemms(s, None) == {"k_proj", "o_proj", "up_proj"}
    inv = step_inventory(s, micro_batch_size=1, seq_len=4096)
    op, core, full = inv.recompute("op"), inv.recompute("core_attention"), inv.recompute("none")
    assert op.attention_forward_flops == 0 and core.gemm_flops == 0
    assert 0 < op.gemm_flops < full.gemm_flops
    assert core.attention_forward_flops == inv.layers_forward.attention_forward_flops
    assert op.memory_bytes == inv.layers_forward.memory_bytes  # every elementwise op re-runs (early_stop=False)


def test_step_time_and_memory_order():
    plans = {k: make_plan(load_card_dict(_card(v))) for k, v in (("none", False), ("op", "selective"), ("full", True))}
    t = {k: p.step_seconds for k, p in plans.items()}
    m = {k: p.peak.tensor_bytes for k, p in plans.items()}
    assert t["none"] < t["op"] < t["full"]
    assert m["full"] < m["op"] < m["none"]
    assert "recompute" in {p.name for p in plans["op"].time.phases}


def test_diagnose_offers_full_checkpointing_to_a_selective_card():
    from trainfit.preflight.diagnose import quantify_fixes

    card = load_card_dict(_card("selective"))
    changes = [f.change for f in quantify_fixes(card, make_plan(card))]
    assert "parallel.gradient_checkpointing -> true" in changes
