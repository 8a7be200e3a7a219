"""``plan.time._sft_time``: a DPO step charges the reference forward only where the reference runs in the step
(``DPO_NO_REFERENCE_PASS``: TRL's ``precompute_ref_log_probs`` runs it once before training; ``none`` has none)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.time import DPO_NO_REFERENCE_PASS
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import RefPlacement

BASE = {"model": "Qwen/Qwen3-8B", "method": "dpo", "scope": "full", "hardware": {"gpu": "h100", "gpus_per_node": 8},
        "parallel": {"strategy": "zero3", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 4}}


def _plan(**roles):
    return make_plan(load_card_dict({**BASE, **({"roles": roles} if roles else {})}))


def test_precomputed_reference_has_no_reference_forward():
    gpu, pre = _plan(reference="gpu"), _plan(reference="precomputed")
    assert "reference_forward" in gpu.time_parts
    assert "reference_forward" not in pre.time_parts
    assert gpu.step_seconds - pre.step_seconds == pytest.approx(gpu.time_parts["reference_forward"], rel=1e-6)
    # the reference forward is the policy's forward over the same chosen + rejected batch, its ZeRO-3 units gathered
    # again (plan.time.reference_forward_of)
    ref = next(p for p in gpu.time.phases if p.name == "reference_forward")
    assert gpu.time_parts["reference_forward"] == pytest.approx(
        gpu.time_parts["forward"] + ref.terms["fsdp_forward_gathers"], rel=1e-6)


def test_placements_with_a_reference_in_the_step_keep_it():
    assert set(DPO_NO_REFERENCE_PASS) == {RefPlacement.PRECOMPUTED, RefPlacement.NONE}
    assert "reference_forward" in _plan().time_parts  # full scope: a separate reference on the GPU
    lora = make_plan(load_card_dict({**BASE, "scope": "lora"}))  # the adapter-disabled policy
    assert "reference_forward" in lora.time_parts


def test_precomputed_reference_states_that_its_one_time_pass_is_outside_the_step():
    pre, gpu = _plan(reference="precomputed"), _plan(reference="gpu")
    line = "one-time reference pass over the dataset"
    assert any(line in a for a in pre.assumptions)
    assert not any(line in a for a in gpu.assumptions)


def test_reference_forward_pays_the_forward_gathers_of_its_sharded_units():
    """ZeRO-3 on 8 GPUs: the reference forward gathers its units again (the memory plan holds them); before, it was
    the policy's forward compute alone."""
    gpu = _plan(reference="gpu")
    ref = next(p for p in gpu.time.phases if p.name == "reference_forward")
    comm = next(p for p in gpu.time.phases if p.name == "communication")
    assert ref.terms["fsdp_forward_gathers"] == comm.terms["forward_gathers"] > 0
    assert ref.seconds == pytest.approx(gpu.time_parts["forward"] + ref.terms["fsdp_forward_gathers"], rel=1e-9)


H100x8 = {"gpu": "h100", "gpus_per_node": 8}


def _mp(**card):
    return make_plan(load_card_dict({"method": "dpo", "hardware": H100x8} | card))


def _ref(plan):
    return next(p for p in plan.time.phases if p.name == "reference_forward")


def test_tensor_parallel_reference_forward_pays_its_all_reduces():
    """Llama-3.1-70B LoRA, TP 8 (1 x 2,048): the reference forward's TP all-reduces (the policy forward's share),
    0.2613 -> 0.3210 s; step 1.458 -> 1.518 s."""
    plan = _mp(model="meta-llama/Llama-3.1-70B", scope="lora", parallel={"tensor_parallel": 8},
               batch={"micro_batch_size": 1, "seq_len": 2048})
    ref, tp = _ref(plan), next(p for p in plan.time.phases if p.name == "tensor_parallel")
    assert ref.terms["tensor_parallel_forward"] == tp.terms["forward"] > 0
    assert ref.seconds == pytest.approx(plan.time_parts["forward"] + tp.terms["forward"], rel=1e-9)


def test_expert_parallel_reference_forward_pays_its_all_to_alls():
    plan = _mp(model="Qwen/Qwen3-30B-A3B", scope="full", parallel={"expert_parallel": 4})
    ref, ep = _ref(plan), next(p for p in plan.time.phases if p.name == "expert_parallel")
    assert ref.terms["expert_parallel_forward"] == ep.terms["forward"] > 0
    assert ref.seconds > plan.time_parts["forward"] + ep.terms["forward"]  # and the FSDP gathers


def test_pipeline_host_swap_reference_forward_has_a_forward_only_bubble():
    plan = _mp(model="Qwen/Qwen3-8B", scope="full", roles={"reference": "host_swap"},
               parallel={"tensor_parallel": 2, "pipeline_parallel": 2}, batch={"grad_accum": 4})
    ref = _ref(plan)
    bubble = next(p for p in plan.time.phases if p.name == "pipeline_bubble")
    assert ref.terms["pipeline_forward_bubble"] == pytest.approx(
        bubble.terms["idle_micro_steps"] * bubble.terms["forward_micro_step"])
    assert 0 < bubble.terms["forward_micro_step"] < bubble.terms["micro_step"]
    assert ref.terms["pipeline_p2p_forward"] > 0
