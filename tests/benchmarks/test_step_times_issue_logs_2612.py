"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_issue_logs_2612.json: per-phase verl
console logs pasted in GitHub issues (verl-project/verl issue #1208's SGLang run on GH200, scored) and the pasted logs
whose run the card cannot state (issue #6747 on an Ascend NPU, issue #3727's vision-language MoE), each with its
reason. Every row cites its source, its figures are the quoted log values, its note records the first-contact error,
and the scored row maps to a card that validates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_issue_logs_2612.json"
SCORED = {"verl-issue1208-grpo-qwen25-05b-gsm8k-sglang-gh200-4g"}
LOG_KEYS = {"generation": "timing_s/gen:", "old_logprob": "timing_s/old_log_prob:", "ref_logprob": "timing_s/ref:",
            "actor_update": "timing_s/update_actor:"}

st = load_step_times("trainfit_bench_step_times_issue_logs_2612")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 3, SCORED)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_issue_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert src["url"] == f"https://github.com/{src['repo']}/issues/{src['issue']}" and src["date"] and e["quote"]
    assert e["note"].count("FIRST-CONTACT") == 1
    if row_id in SCORED:
        assert "not scored" not in e["note"].split("FIRST-CONTACT")[1]
    else:
        assert e["card_cannot_state"] and "not scored (not representable)" in e["note"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_card_or_states_why_not(row_id: str) -> None:
    e = ROWS[row_id]
    if row_id not in SCORED:
        with pytest.raises(st.Unmapped) as got:
            st.map_rl(e)
        assert got.value.status == "not_representable"
        assert e["card_cannot_state"] in got.value.reasons
        return
    card, _ = st.map_rl(e)
    st.validate(card)
    assert card["rollout"]["prompts_per_step"] == e["data"]["prompts_per_step"]
    assert card["rollout"]["num_generations"] == e["data"]["n_per_prompt"]


def test_scored_row_figures_are_the_logged_ones() -> None:
    e = ROWS["verl-issue1208-grpo-qwen25-05b-gsm8k-sglang-gh200-4g"]
    logged = lambda key: float(re.search(re.escape(key) + r"([0-9.]+)", e["quote"]).group(1))  # noqa: E731
    assert e["measured"]["step_s"] == logged("timing_s/step:")
    for phase, key in LOG_KEYS.items():
        assert e["measured"]["phases_s"][phase] == logged(key)
    assert e["data"]["response_len_mean"] == logged("response_length/mean:")
    assert e["data"]["prompt_len_mean"] == logged("prompt_length/mean:")
    # the GPU count and rollout.n the note derives: 1,024 prompts x 5 x (prompt + response) over 4 ranks is the
    # logged global_seqlen/mean
    d = e["data"]
    per_rank = d["prompts_per_step"] * d["n_per_prompt"] * (d["prompt_len_mean"] + d["response_len_mean"]) / e["gpus"]
    assert per_rank == pytest.approx(logged("global_seqlen/mean:"), rel=1e-5)


def test_scored_row_states_verl_03_entropy_in_every_log_prob_pass() -> None:
    """verl 0.3.0.post1 took the compiled entropy in every _forward_micro_batch call, the reference's included (before
    #1100): the row says so, cited at the tag's commit, and the card carries it."""
    e = ROWS["verl-issue1208-grpo-qwen25-05b-gsm8k-sglang-gh200-4g"]
    assert e["train"]["logprob_entropy"] == "every_pass"
    assert "070ed6ac3f6aea13a916556794f34e8f2bde7dde" in e["train"]["logprob_entropy_source"]
    card, _ = st.map_rl(e)
    assert card["loss"]["logprob_entropy"] == "every_pass"
