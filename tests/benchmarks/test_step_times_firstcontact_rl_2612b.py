"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612b.json: published RL step
times not scored before (the Mini-R1 tutorial's TRL 0.14 GRPO on 4x H100, open-r1 issue #251's TRL GRPO on 8x H100,
the first TRL rows the benchmark holds) and the published points whose configuration the card cannot state, each with
its reason. Every row cites its source, its figures are the quoted ones, its note records the first-contact error,
and every scored row maps to a card that validates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612b.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SCORED = {
    "mini-r1-trl014-grpo-qwen25-3b-countdown-h100-4g",
    "openr1-issue251-trl-grpo-qwen25-math-7b-math-h100-8g",
}

st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612b")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 16, SCORED)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_source_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert src["repo"] and e["quote"]
    if "commit" in src:
        assert HEX40.match(src["commit"]) and src["path"]
    else:
        assert src["url"].startswith(f"https://github.com/{src['repo']}/") and src["date"]
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
    assert card["preset"] == "trl" and card["rollout"]["placement"] == "split" and card["rollout"]["gpus"] == 1
    assert card["rollout"]["prompts_per_step"] == e["data"]["prompts_per_step"]
    assert card["rollout"]["num_generations"] == e["data"]["n_per_prompt"]
    # neither TRL computes an old-policy forward: the ratio is taken against the detached log-probs
    assert card["rollout"]["recompute_old_logprobs"] is False
    assert "detach()" in e["train"]["old_logprob_pass_source"]


def test_figures_are_the_quoted_ones() -> None:
    # the tutorial's range, recorded at its midpoint
    mini = ROWS["mini-r1-trl014-grpo-qwen25-3b-countdown-h100-4g"]
    assert "takes around 45-60s" in mini["quote"] and mini["measured"]["step_s"] == (45 + 60) / 2
    # one optimizer step: 3 processes x 1 prompt x 8 accumulation micro-batches, 8 generations each
    assert "--num_processes 3" in mini["quote"] and "gradient_accumulation_steps: 8" in mini["quote"]
    assert mini["data"]["prompts_per_step"] == 3 * 1 * 8 and mini["data"]["n_per_prompt"] == 8
    # open-r1 #251: steps 4-9 between the two progress lines, (10:25 - 3:25) / 6
    issue = ROWS["openr1-issue251-trl-grpo-qwen25-math-7b-math-h100-8g"]
    assert "3/468 [03:25<" in issue["quote"] and "9/468 [10:25<" in issue["quote"]
    assert issue["measured"]["step_s"] == ((10 * 60 + 25) - (3 * 60 + 25)) / 6
    # 7 processes x 2 completions x 8 micro-batches = 112 completions = 16 prompts of 7; 7,500 / 16 gives the 468 steps
    assert issue["data"]["prompts_per_step"] * issue["data"]["n_per_prompt"] == 7 * 2 * 8
    assert 7500 // issue["data"]["prompts_per_step"] == 468
    assert "'completion_length': 639.0250267028808" in issue["quote"] and issue["data"]["response_len_mean"] == 639


def test_trl_rows_state_their_per_micro_batch_generation_with_the_run_commit() -> None:
    """TRL before 0.17 generates inside every gradient-accumulation micro-batch (TRL #3283 made it once per effective
    batch): each TRL row records the calls per step, cited at the TRL the run installed."""
    for row_id, accumulation, commit in (("mini-r1-trl014-grpo-qwen25-3b-countdown-h100-4g", 8, "29de6eec"),
                                         ("openr1-issue251-trl-grpo-qwen25-math-7b-math-h100-8g", 8, "09eefa73")):
        ro = ROWS[row_id]["rollout"]
        assert ro["generation_calls_per_step"] == accumulation
        assert commit in ro["generation_calls_source"] and "llm.generate" in ro["generation_calls_source"]
        card, notes = st.map_rl(ROWS[row_id])
        assert card["rollout"]["generation_calls"] == accumulation
        assert any("rollout.generation_calls" in n for n in notes)


@pytest.mark.parametrize("change, reason", [
    ({"generation_calls_source": None}, "without a source"),
    ({"generation_calls_per_step": 5}, "do not split the 24 prompts"),
])
def test_generation_calls_without_a_source_or_unequal_are_skipped(change, reason) -> None:
    """An entry whose calls per step have no source, or do not divide the prompts generated per step (TRL's calls are
    equal micro-batches), is skipped with its reason, not a KeyError or a card error."""
    row = ROWS["mini-r1-trl014-grpo-qwen25-3b-countdown-h100-4g"]
    ro = {k: v for k, v in {**row["rollout"], **change}.items() if v is not None}
    with pytest.raises(st.Unmapped) as u:
        st.map_rl({**row, "rollout": ro})
    assert u.value.status == "skipped" and any(reason in r for r in u.value.reasons)
