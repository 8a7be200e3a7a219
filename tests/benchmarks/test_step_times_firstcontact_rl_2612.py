"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612.json: published RL step
and phase times not scored before (rllm-org/rllm issue #4's DeepScaleR 24K stage, THUDM/slime issue #385's verl and
slime runs of one GSM8K configuration, the rule-based runs of SkyRL's llm_as_a_judge_local README), and the published
points whose configuration the card cannot state, each with its reason. Every row cites its source, its figures are
the quoted ones, its note records the first-contact error, and every scored row maps to a card that validates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SCORED = {
    "rllm-issue4-grpo-deepscaler-1.5b-24k-a100-32g",
    "slime-issue385-verl-grpo-qwen3-0.6b-gsm8k-h200-16g",
    "slime-issue385-slime-grpo-qwen3-0.6b-gsm8k-h200-16g",
    "skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-1g-sync-rule",
    "skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-2g-async-rule",
}

st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 17, SCORED)


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
    assert card["rollout"]["prompts_per_step"] == e["data"]["prompts_per_step"]
    assert card["rollout"]["num_generations"] == e["data"]["n_per_prompt"]


def test_figures_are_the_quoted_ones() -> None:
    # the maintainer's range, recorded at its midpoint
    rllm = ROWS["rllm-issue4-grpo-deepscaler-1.5b-24k-a100-32g"]
    assert "600-800(s) per iteration" in rllm["quote"] and rllm["measured"]["step_s"] == (600 + 800) / 2
    # slime issue #385: verl's timing_s/step and generation_timing/max, slime's total_train_time and rollout_time
    for row_id, keys in (("slime-issue385-verl-grpo-qwen3-0.6b-gsm8k-h200-16g",
                          ("timing_s/step:", "timing_s/generation_timing/max:")),
                         ("slime-issue385-slime-grpo-qwen3-0.6b-gsm8k-h200-16g",
                          ("'perf/total_train_time': ", "perf/rollout_time': "))):
        e = ROWS[row_id]
        step, gen = (float(re.search(re.escape(k) + r"([0-9.]+)", e["quote"]).group(1)) for k in keys)
        assert (e["measured"]["step_s"], e["measured"]["phases_s"]["generation"]) == (step, gen)
    # SkyRL's README table: the rule-based columns, Generate / Train / Weight sync / Step time
    table = {"1g-sync-rule": (10.7, 4.7, 1.2, 21.9), "2g-async-rule": (11.3, 4.8, 1.9, 13.8)}
    for tail, (gen, train, sync, step) in table.items():
        e = ROWS[f"skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-{tail}"]
        ph = e["measured"]["phases_s"]
        assert (ph["generation"], ph["actor_update"], ph["weight_sync"], e["measured"]["step_s"]) == (
            gen, train, sync, step)
        assert all(f"{v}s" in e["quote"] for v in (gen, train, sync, step))


def test_colocated_skyrl_weight_sync_timer_scope_cites_the_run_commit() -> None:
    """SkyRL's sync_weights timer wraps save_weights_for_sampler: under colocate_all it also wakes the engine and moves
    the trainer state to the host (skyrl-train/skyrl_train/workers/worker_dispatch.py @19552d8f); the split run's
    timer does neither, so only the colocated row states a scope."""
    sync = ROWS["skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-1g-sync-rule"]
    scope = sync["timer_scope"]["weight_sync"]
    assert scope["also"] == ["sleep_wake"] and scope["state_offload_terms"] == ["to_host"]
    assert sync["source"]["commit"][:8] in scope["why"] and "worker_dispatch.py" in scope["why"]
    assert "timer_scope" not in ROWS["skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-2g-async-rule"]


def test_split_skyrl_row_states_the_runs_per_parameter_sync() -> None:
    """At the README's commit SkyRL's broadcast strategy (split placement) sends one parameter per update request,
    not the later packed broadcast the skyrl preset assumes: the row states it, cited, and the card carries it."""
    e = ROWS["skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-2g-async-rule"]
    assert e["rollout"]["weight_sync"] == "per_parameter"
    assert e["source"]["commit"] in e["rollout"]["weight_sync_source"]
    assert "broadcast_strategy.py" in e["rollout"]["weight_sync_source"]
    card, _ = st.map_rl(e)
    assert card["rollout"]["weight_sync"] == "per_parameter" and card["rollout"]["placement"] == "split"
    # the colocated row keeps the preset's CUDA-IPC path (SkyRL groups parameters by module there)
    sync, _ = st.map_rl(ROWS["skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-1g-sync-rule"])
    assert "weight_sync" not in sync["rollout"]


def test_slime_issue_verl_row_plans_verl_engine_sequence_cap() -> None:
    # verl builds its synchronous vLLM rollout with max_num_seqs=config.max_num_seqs, default 1024 on the issue's date
    # (volcengine/verl verl/trainer/config/rollout/rollout.yaml l.59, vllm_rollout_spmd.py l.187-198
    # @14c397f474f1c5de232a36ab4752794b2eb8b3d7); left unset, the card would plan vLLM's 256
    e = ROWS["slime-issue385-verl-grpo-qwen3-0.6b-gsm8k-h200-16g"]
    assert "14c397f474f1c5de232a36ab4752794b2eb8b3d7" in e["rollout"]["max_num_seqs_source"]
    card, _ = st.map_rl(e)
    assert card["rollout"]["max_num_seqs"] == 1024
