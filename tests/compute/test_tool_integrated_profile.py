"""The tool-integrated length profile (compute.response_lengths.TOOL_INTEGRATED): its natural scale reproduces the
trajectory length ReTool publishes at its cap, a card names it, and the model-name rule never picks it."""

from __future__ import annotations

import pytest

from trainfit.compute.response_lengths import (
    PROFILES,
    TOOL_INTEGRATED,
    _solve_theta,
    default_response_mean,
    profile_for,
    profile_named,
)
from trainfit.spec.enums import LengthProfileName

RETOOL_CAP_TOKENS = 16384
RETOOL_RUN_AVERAGE_TOKENS = 8000  # mean of the ~10k SFT start and the ~6k end after RL (arXiv:2504.11536v2, Fig. 3,
# as a summary states them; the figure itself not read)


def test_scale_gives_the_run_average_at_the_published_cap():
    # theta = 9,882: 9,882 x (1 - exp(-16,383 / 9,882)) = 9,882 x 0.8095 = 7,999
    mean = default_response_mean(response_len_max=RETOOL_CAP_TOKENS, profile=TOOL_INTEGRATED)
    assert mean == pytest.approx(RETOOL_RUN_AVERAGE_TOKENS, rel=1e-3)
    assert TOOL_INTEGRATED.natural_mean_tokens == pytest.approx(9882.0, abs=0.5)
    assert TOOL_INTEGRATED.natural_mean_tokens == pytest.approx(
        _solve_theta(RETOOL_RUN_AVERAGE_TOKENS - 1, RETOOL_CAP_TOKENS - 1), abs=1.0)
    # a tighter cap clips it: most trajectories cut, the mean close to the cap
    assert 3000 < default_response_mean(response_len_max=4096, profile=TOOL_INTEGRATED) < 4096


def test_it_is_registered_with_its_source():
    # no ordering against the chain-of-thought profiles: the source gives the trajectory mean at its cap only
    assert PROFILES[LengthProfileName.TOOL_INTEGRATED] is TOOL_INTEGRATED
    assert "arXiv:2504.11536" in TOOL_INTEGRATED.source


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B", "Qwen/Qwen2.5-32B-Instruct", None])
def test_a_card_names_it_and_auto_never_picks_it(model):
    assert profile_named("tool_integrated", model_name=model) is TOOL_INTEGRATED
    assert profile_for(model) is not TOOL_INTEGRATED
    assert profile_named("auto", model_name=model) is not TOOL_INTEGRATED
