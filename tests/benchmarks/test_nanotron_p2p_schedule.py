"""benchmarks/nanotron_p2p_schedule.py: nanotron's 1F1B order with every transfer a rendezvous keeps the 1F1B length
that ``plan.time`` charges, ``(m + pp - 1)(F + B)``, and never deadlocks."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("nanotron_p2p_schedule",
                                                  ROOT / "benchmarks" / "nanotron_p2p_schedule.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["nanotron_p2p_schedule"] = mod
    spec.loader.exec_module(mod)
    return mod


NPS = _module()


@pytest.mark.parametrize(("pp", "micro_batches"), [(pp, m) for pp in (1, 2, 3, 4, 8, 16) for m in (1, 2, 7, 64)
                                                   if m >= pp - 1])  # the engine asserts m >= pp - 1
def test_equal_stages_take_the_one_f_one_b_length(pp, micro_batches):
    got = NPS.schedule_seconds(forward_s=[1.0] * pp, backward_s=[2.5] * pp, micro_batches=micro_batches)
    assert got == pytest.approx((micro_batches + pp - 1) * 3.5)


def test_unequal_stages_stay_within_the_slowest_stage_bound():
    rng = random.Random(7)
    for _ in range(20):
        pp, m = rng.choice([2, 4, 8]), rng.choice([8, 32])
        fwd = [rng.uniform(0.8, 1.2) for _ in range(pp)]
        bwd = [rng.uniform(1.8, 2.6) for _ in range(pp)]
        got = NPS.schedule_seconds(forward_s=fwd, backward_s=bwd, micro_batches=m)
        assert sum(fwd) + sum(bwd) - 1e-9 <= got <= (m + pp - 1) * (max(fwd) + max(bwd)) + 1e-9


def test_a_lockstep_reading_would_be_longer():
    """The alternative the replay rules out: a micro-step of 2 max(F, B) is longer than F + B whenever F != B."""
    pp, m, f, b = 4, 32, 1.0, 2.5
    assert NPS.schedule_seconds(forward_s=[f] * pp, backward_s=[b] * pp, micro_batches=m) < (m + pp - 1) * 2 * max(f, b)


def test_warmup_then_steady_order_of_a_middle_rank():
    ops = NPS.rank_ops(1, 4, 4)
    assert ops[:3] == [("recv", "act", 0), ("F",), ("send", "act", 2)]  # pp - rank - 1 = 2 warm-up forwards
    steady = ops[6:]
    assert steady[:5] == [("recv", "act", 0), ("F",), ("send", "act", 2), ("recv", "grad", 2), ("B",)]
    assert steady[5:7] == [("recv", "act", 0), ("send", "grad", 0)]  # the queued gradient goes after the next receive
