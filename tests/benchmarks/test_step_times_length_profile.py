"""step_times: an entry whose source states its dataset names the task's length profile (``data.length_profile``,
with ``length_profile_source``); the card carries it as ``rollout.length_profile`` only when the run's mean response is not
published (compute.response_lengths; the card refuses a non-auto profile next to a mean)."""

from __future__ import annotations

import re

import pytest
from step_times_module import load_step_times

from trainfit.compute.response_lengths import SHORT_ANSWER, default_response_mean, profile_for
from trainfit.spec.enums import LengthProfileName

st = load_step_times("step_times_length_profile")
ENTRIES = st.load_entries(st.RL_DATA)


def _entry(entry_id: str) -> dict:
    return next(e for e in ENTRIES if e["id"] == entry_id)


def test_every_named_profile_is_valid_and_cited():
    named = [e for e in ENTRIES if e["data"].get("length_profile")]
    assert len(named) >= 10
    for e in named:
        d = e["data"]
        LengthProfileName(d["length_profile"])
        assert d.get("dataset") and re.search(r"@[0-9a-f]{40}", d["length_profile_source"]), e["id"]
        if d["length_profile"] == "short_answer":
            assert "gsm8k" in d["dataset"].lower() and profile_for(e["model"]) is not profile_for("Qwen/Qwen3-8B"), \
                e["id"]  # the GSM8K profile is for non-thinking models


def test_mix_run_without_a_published_mean_plans_the_short_answer_default():
    e = _entry("verl-pr1629-ppo-qwen2-7b-megatron-tp2pp2-h100-8g")
    card, notes = st.map_rl(e)
    assert card["rollout"]["length_profile"] == "short_answer" and "response_len_mean" not in card["rollout"]
    assert any("rollout.length_profile short_answer" in n for n in notes)
    assert st.planned_response_mean(card["rollout"], e["model"]) == pytest.approx(
        default_response_mean(response_len_max=512, profile=SHORT_ANSWER))


@pytest.mark.parametrize("entry_id", ["verl-issue7847-grpo-qwen35-9b-gsm8k-b200-8g"])
def test_thinking_models_on_gsm8k_keep_the_model_rule(entry_id):
    e = _entry(entry_id)
    card, _ = st.map_rl(e)
    assert card["rollout"]["length_profile"] == "auto"
    assert st.planned_response_mean(card["rollout"], e["model"]) == pytest.approx(
        default_response_mean(response_len_max=1024, profile=profile_for(e["model"])))


def test_a_mean_derived_from_the_published_mfu_wins_over_the_profile():
    # verl PR #5596: the lengths come from its published actor MFU (the entry's note), the profile stays recorded
    e = _entry("verl-pr5596-grpo-qwen3-8b-gsm8k-gb200-4g")
    card, _ = st.map_rl(e)
    assert e["data"]["length_profile"] == "auto" and card["rollout"]["response_len_mean"] == 753
    assert st.planned_response_mean(card["rollout"], e["model"]) == 753


def test_a_published_mean_wins_over_the_profile():
    e = _entry("playverl-ppo-qwen2-7b-min-h100-8g")
    card, notes = st.map_rl(e)
    assert e["data"]["length_profile"] == "short_answer" and "length_profile" not in card["rollout"]
    assert st.planned_response_mean(card["rollout"], e["model"]) == card["rollout"]["response_len_mean"]
    assert not any("rollout.length_profile" in n for n in notes)


def test_a_checkpoint_planned_with_its_base_shapes_keeps_its_own_profile():
    # DeepSeek-R1-Distill-Qwen-32B has its own catalog entry (its base Qwen2.5-32B's shapes), so the row plans under its
    # own name and the planner's auto rule reads the distilled thinking model's profile directly
    e = _entry("areal-v02-ppo-r1distill-32b-boba-h800-128g")
    card, _ = st.map_rl(e)
    assert card["model"] == e["model"] and profile_for(card["model"]) is not profile_for("Qwen/Qwen2.5-32B")
    assert st.planned_response_mean(card["rollout"], card["model"]) == pytest.approx(
        st.planned_response_mean(card["rollout"], e["model"]))
    # planned as a stand-in with the same shapes (MODEL_ALIASES), the base's name alone would pick the chain-of-thought
    # profile: the card then names the checkpoint's own
    notes: list[str] = []
    assert st.checkpoint_length_profile(e["model"], "Qwen/Qwen2.5-32B", notes) == {"length_profile": "long_cot"}
    assert any("rollout.length_profile long_cot, the profile of deepseek-ai/DeepSeek-R1-Distill-Qwen-32B" in n
               for n in notes)


def test_an_alias_whose_profile_agrees_adds_nothing():
    assert st.checkpoint_length_profile("Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-32B", []) == {}
    assert st.checkpoint_length_profile("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", []) == {}
