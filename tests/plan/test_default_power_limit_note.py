"""A catalog card whose hosts run below its TDP by default (``GpuSpec.default_power_limit_w``): the plan keeps the
datasheet peaks and says so, with what the limit would give (``plan.time.default_power_limit_note``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.plan import make_plan
from trainfit.plan.time import default_power_limit_note
from trainfit.spec.card import load_card_dict


def test_grand_teton_h100_states_its_500_w_limit():
    gpu = resolve_gpu("h100-sxm-hbm2e-96gb")
    assert (gpu.tdp_w, gpu.default_power_limit_w) == (700, 500)
    note = default_power_limit_note(gpu)
    # (500 / 700)^(1/3) = 0.8939, by hand
    assert "default 500 W power limit of the 700 W TDP" in note and "x0.894" in note
    plan = make_plan(load_card_dict({"hardware": {"gpu": "h100-sxm-hbm2e-96gb"}}))
    assert note in plan.time.assumptions


@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-80gb"])
def test_cards_at_their_tdp_say_nothing(gpu):
    assert default_power_limit_note(resolve_gpu(gpu)) is None
