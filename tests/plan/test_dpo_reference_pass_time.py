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
    # the reference forward is the policy's forward over the same chosen + rejected batch
    assert gpu.time_parts["reference_forward"] == pytest.approx(gpu.time_parts["forward"], rel=1e-6)


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
