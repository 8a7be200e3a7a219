"""parallel.fsdp_version in the plan: FSDP2's compute-stream copies (``fsdp_copies``) only for fsdp2 under FSDP."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _plan(strategy: str, version: str | None):
    par = {"strategy": strategy, **({"fsdp_version": version} if version else {})}
    return make_plan(load_card_dict({"model": "meta-llama/Llama-3.1-8B", "hardware": {"gpu": "h100-sxm"},
                                     "parallel": par, "batch": {"micro_batch_size": 1, "seq_len": 4096}}))


def _copies(plan) -> float:
    return sum(p.seconds for p in plan.time.phases if p.name == "fsdp_copies")


@pytest.mark.parametrize("strategy", ["fsdp", "fsdp_grad_op", "hsdp"])
def test_fsdp2_pays_the_copies_fsdp1_does_not(strategy):
    one, two = _plan(strategy, "fsdp1"), _plan(strategy, "fsdp2")
    assert _copies(one) == 0.0 and 0.01 < _copies(two) < 0.1  # ~100 GB of copies at H100's HBM rate
    # besides the copies, FSDP2 (as verl applies it) gathers the untied embedding as a unit of its own, not in the
    # root (compute.training.root_unit_share): the collectives move by under 1 %
    assert two.step_seconds == pytest.approx(one.step_seconds + _copies(two), rel=0.01)
    assert two.peak.device == one.peak.device  # a time term: memory does not move


def test_the_default_is_fsdp2_and_other_strategies_ignore_it():
    assert _plan("fsdp", None).step_seconds == _plan("fsdp", "fsdp2").step_seconds
    assert _plan("zero3", "fsdp1").step_seconds == _plan("zero3", "fsdp2").step_seconds
