"""``parallel.sac_saves_attention``: torchtitan's per-op policy without the attention op the run dispatches to in
its save list (cuDNN SDPA on Blackwell before torchtitan b39377f9) re-runs the attention forward in backward."""

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute.inventory import step_inventory
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(gc="selective", **par):
    return {"model": {"id": "meta-llama/Llama-3.1-8B"}, "method": "sft", "hardware": {"gpu": "b200", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": gc, **par},
            "batch": {"micro_batch_size": 1, "seq_len": 8192}}


def test_field_defaults_true_and_needs_op():
    assert load_card_dict(_card()).parallel.sac_saves_attention is True
    assert load_card_dict(_card(sac_saves_attention=False)).parallel.sac_saves_attention is False
    with pytest.raises(CardError, match=r"parallel.sac_saves_attention: false .* needs selective_checkpointing: op"):
        load_card_dict(_card(True, sac_saves_attention=False))
    with pytest.raises(CardError, match=r"parallel.sac_saves_attention"):
        load_card_dict(_card("selective", selective_checkpointing="core_attention", sac_saves_attention=False))


def test_op_recompute_adds_the_attention_forward_only():
    inv = step_inventory(resolve_model("meta-llama/Llama-3.1-8B"), micro_batch_size=1, seq_len=8192)
    op = inv.recompute("op")
    both = inv.recompute("op", op_recomputes_attention=True)
    assert op.attention_forward_flops == 0.0
    assert both.attention_forward_flops == inv.layers_forward.attention_forward_flops > 0
    assert both.gemms == op.gemms  # a fused kernel: no GEMMs of its own
    assert both.kernels == op.kernels + inv.layers_recompute_core_attention.kernels
    # other granularities ignore it
    assert inv.recompute("none", op_recomputes_attention=True) == inv.recompute("none")
    assert inv.recompute("core_attention", op_recomputes_attention=True) == inv.recompute("core_attention")


def test_plan_recompute_phase_grows_by_the_attention_forward():
    saved = make_plan(load_card_dict(_card()))
    rerun = make_plan(load_card_dict(_card(sac_saves_attention=False)))
    ph = {p.name: p for p in saved.time.phases}
    ph2 = {p.name: p for p in rerun.time.phases}
    assert ph2["recompute"].terms["attention"] == pytest.approx(ph["forward"].terms["attention"])
    assert ph["recompute"].terms.get("attention", 0.0) == 0.0
    assert rerun.step_seconds > saved.step_seconds


def test_memory_drops_the_attention_output_and_logsumexp():
    from trainfit.memory.activations import activation_bytes
    from trainfit.spec.enums import Attention, SelectiveCheckpointing
    from trainfit.spec.training import TrainableSpec

    s = resolve_model("meta-llama/Llama-3.1-8B")
    kw = dict(micro_batch_size=1, seq_len=8192, attention=Attention.SDPA, trainable=TrainableSpec(),
              selective=SelectiveCheckpointing.OP)
    saved = activation_bytes(s, **kw)
    rerun = activation_bytes(s, sac_saves_attention=False, **kw)
    per_layer = 8192 * (2 * s.q_dim + 4 * s.num_attention_heads)  # bf16 output, fp32 logsumexp
    assert all(a - b == per_layer for a, b in zip(saved.checkpointed_per_layer, rerun.checkpointed_per_layer))
    assert saved.per_layer == rerun.per_layer  # without checkpointing nothing changes
    full = dict(kw, selective=SelectiveCheckpointing.NONE)
    assert activation_bytes(s, sac_saves_attention=False, **full) == activation_bytes(s, **full)


def test_plan_peak_falls_with_the_unsaved_attention():
    saved = make_plan(load_card_dict(_card()))
    rerun = make_plan(load_card_dict(_card(sac_saves_attention=False)))
    assert rerun.peak.allocated < saved.peak.allocated
