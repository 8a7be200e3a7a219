"""``response_lengths.slowest_engine_length_groups``: the draws of the engine the rollout phase waits for, the one
holding the batch's longest response (``generation`` module docstring, "The slowest engine")."""

from __future__ import annotations

import pytest

from trainfit.compute.response_lengths import response_length_groups, slowest_engine_length_groups
from trainfit.errors import CardError
from trainfit.spec.enums import ResponseShape

ARGS = dict(shape=ResponseShape.EXPONENTIAL, response_len_max=1024, response_len_mean=168.0)


def _mean(groups) -> float:
    return sum(length * share for length, share in groups)


def test_one_engine_is_its_own_slowest():
    assert slowest_engine_length_groups(**ARGS, sequences=64, engines=1) == response_length_groups(
        **ARGS, sequences=64)


@pytest.mark.parametrize("sequences, engines", [(64, 8), (640, 8), (8, 4), (256, 4)])
def test_the_slowest_engine_holds_the_batchs_longest_and_its_own_other_draws(sequences, engines):
    own = response_length_groups(**ARGS, sequences=sequences)
    batch = response_length_groups(**ARGS, sequences=sequences * engines)
    slow = slowest_engine_length_groups(**ARGS, sequences=sequences, engines=engines)
    assert slow[:-1] == own[:-1]
    assert slow[-1] == (pytest.approx(batch[-1][0]), own[-1][1])
    assert own[-1][1] == pytest.approx(1 / sequences)  # the top group is one sequence of the engine
    assert slow[-1][0] > own[-1][0]
    assert sum(share for _, share in slow) == pytest.approx(1.0)
    # the mean rises by (batch longest - engine longest) / sequences
    assert _mean(slow) - _mean(own) == pytest.approx((batch[-1][0] - own[-1][0]) / sequences)


def test_more_engines_wait_for_a_longer_response_up_to_the_cap():
    tops = [slowest_engine_length_groups(**ARGS, sequences=64, engines=e)[-1][0] for e in (1, 2, 8, 64, 4096)]
    assert tops == sorted(tops)
    assert tops[-1] <= ARGS["response_len_max"]


def test_a_fixed_length_has_no_slowest_draw():
    fixed = dict(shape=ResponseShape.FIXED, response_len_max=1024, response_len_mean=300.0)
    assert slowest_engine_length_groups(**fixed, sequences=64, engines=8) == ((300.0, 1.0),)


def test_no_engine_is_an_error():
    with pytest.raises(CardError, match="engines"):
        slowest_engine_length_groups(**ARGS, sequences=64, engines=0)
