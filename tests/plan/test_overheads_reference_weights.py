"""``plan.overheads.PERSISTENT``: a frozen reference copy resident on the GPU is allocated once and never freed, so it
is no fragmentation source (its bytes are not in the step's transient that the fitted fragmentation share scales)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.overheads import PERSISTENT
from trainfit.spec.card import load_card_dict

CARD = {"model": "Qwen/Qwen3-1.7B", "method": "dpo", "scope": "full", "hardware": {"gpu": "h100", "gpus_per_node": 1}}


def test_reference_weights_persist():
    assert "reference_weights" in PERSISTENT


def test_the_frozen_copy_adds_no_fragmentation():
    """Qwen3-1.7B DPO on one H100: 20.61 GiB reserved when the frozen copy counted as transient, 20.00 now; the
    allocated figure does not move."""
    plan = make_plan(load_card_dict(CARD))
    assert max(p.allocated for p in plan.phases) / 2**30 == pytest.approx(18.02, abs=0.01)
    assert max(p.reserved for p in plan.phases) / 2**30 == pytest.approx(20.00, abs=0.01)
    assert next(p for p in plan.phases if p.phase.value == "ref_logprob").components["reference_weights"] > 2**30
