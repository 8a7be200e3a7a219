"""step_times: a run that publishes only its maximum prompt length is planned with the mean prompt measured for its
dataset and model (benchmarks/data/rl_prompt_lengths.json); memory keeps the maximum."""

from __future__ import annotations

import copy
import json

import pytest
from step_times_module import REPO, load_step_times

st = load_step_times("step_times_prompt_mean")
DATA = json.loads((REPO / "benchmarks" / "data" / "rl_prompt_lengths.json").read_text())


def _entry(entry_id: str) -> dict:
    return next(e for e in st.load_entries(st.RL_DATA) if e["id"] == entry_id)


def test_every_measurement_cites_its_sources():
    for x in DATA["entries"]:
        assert x["prompts"] > 1000 and x["p50_tokens"] <= x["max_tokens"] and 1 <= x["mean_tokens"] <= x["max_tokens"]
        for key in x["sources"]:
            src = DATA["sources"][key]
            assert src["repo"] and src["path"] and len(src["commit"]) == 40, key


def test_gsm8k_measurement_equals_the_published_means():
    """The same instruction, template and tokenizer give the mean verl logged for these runs."""
    got = {x["model"]: x["mean_tokens"] for x in DATA["entries"] if x["dataset"] == "openai/gsm8k"}
    for e in st.load_entries(st.RL_DATA):
        d = e["data"]
        if d.get("dataset") == "openai/gsm8k" and d.get("prompt_len_mean") and e["model"] in got:
            # one logged step's mean is a sample of the split (1,024 of 7,473 prompts): within 2 % of the split's
            one_step = "one logged step" in d.get("prompt_len_mean_scope", "")
            tol = {"rel": 0.02} if one_step else {"abs": 0.2}
            assert got[e["model"]] == pytest.approx(d["prompt_len_mean"], **tol), e["id"]


def test_max_only_dapo_row_gets_the_measured_mean():
    e = _entry("verl-one-step-off-dapo-qwen25math7b-h20-colocate-fsdp2")
    prompt, prompt_mean, _, _, notes = st.rl_lengths(e)
    measured = st.measured_prompt_mean("BytedTsinghua-SIA/DAPO-Math-17k", "Qwen/Qwen2.5-Math-7B")
    assert (prompt, prompt_mean) == (2048, round(measured["mean_tokens"]))
    assert any(n.startswith(f"prompt mean {prompt_mean} tokens: BytedTsinghua-SIA/DAPO-Math-17k measured") for n in notes)
    card, _ = st.map_rl(e)
    assert card["rollout"]["prompt_len"] == 2048 and card["rollout"]["prompt_len_mean"] == prompt_mean


def test_a_published_mean_wins_and_an_unmeasured_dataset_keeps_the_max():
    e = next(x for x in st.load_entries(st.RL_DATA) if x["data"].get("prompt_len_mean"))
    assert st.rl_lengths(e)[1] is None
    x = copy.deepcopy(_entry("verl-one-step-off-dapo-qwen25math7b-h20-colocate-fsdp2"))
    x["data"]["dataset"] = "some/unmeasured-dataset"
    _, prompt_mean, _, _, notes = st.rl_lengths(x)
    assert prompt_mean is None and any("the published max (2048); no mean published" in n for n in notes)


def test_a_max_below_the_measured_longest_prompt_is_not_given_the_mean():
    x = copy.deepcopy(_entry("verl-one-step-off-dapo-qwen25math7b-h20-colocate-fsdp2"))
    x["data"]["prompt_len_max"] = 512  # the run filters or truncates: its mean is not the measured one
    _, prompt_mean, _, _, notes = st.rl_lengths(x)
    assert prompt_mean is None and any("exceeds it" in n for n in notes)
