"""benchmarks/step_times.py, held-out RL rows of published_rl_times_nemo_rl_issue959_rlinf.json (verl v0.5.0's and RLinf's columns of RLinf's
'Comparison with VeRL' page, slime's colocated weight sync of Qwen3-30B-A3B after its weight-sync optimizations, the
'Our rerun' rows of NeMo RL issue #959 that repeat the v0.3 blog's runs):
the file is picked up, its ids are unique across the RL files, every entry cites its source at a commit, every
figure is in its quote, and both rows map and plan the phases they publish."""

from __future__ import annotations

import json
import re

import pytest
from step_times_module import file_ids, load_step_times

S = load_step_times("trainfit_bench_step_times_rl_nemo_rl_issue959_rlinf")
DATA = S.RL_DATA.parent / "published_rl_times_nemo_rl_issue959_rlinf.json"
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(S, S.RL_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 7
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_cites_its_source_and_quotes_its_figures(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", src["date"])
    if src.get("url"):
        assert src["url"].startswith("https://github.com/") and src["issue"]
    else:
        assert src["repo"] and src["path"] and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    figures = [v for v in e["measured"]["phases_s"].values() if v is not None]
    figures += [e["measured"]["step_s"]] if e["measured"]["step_s"] else []
    for v in figures:
        assert f"{v:g}" in e["quote"] or f"{v:g}s" in e["quote"], (row_id, v)
    if e["data"].get("response_len_mean"):
        assert f"{e['data']['response_len_mean']:g}" in e["quote"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rows_map_and_plan_the_phases_they_publish(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = S.map_rl(e)
    planned = S.plan_card(card)
    for phase, value in e["measured"]["phases_s"].items():
        if value is None:
            continue
        plan_phase = {"old_logprob": "logprob"}.get(phase, phase)
        assert S.phase_seconds(planned, plan_phase)[0], (row_id, phase)


def test_verl_row_states_its_batch_lengths_and_reference_pass() -> None:
    e = ROWS["verl-v050-rlinf-compare-grpo-r1distill-qwen15b-boba-h100-8g"]
    # 'Batch Size Per DP 128' x 'Data Parallelism 4'; context 28672 less the 1024-token prompt cap
    assert e["data"]["prompts_per_step"] * e["data"]["n_per_prompt"] == 128 * 4
    assert e["data"]["prompt_len_max"] + e["data"]["response_len_max"] == e["data"]["sequence_len_max"] == 28672
    card, _ = S.map_rl(e)
    assert card["rollout"]["tensor_parallel"] == 2 and card["roles"]["kl_coef"] > 0


def test_rerun_rows_keep_the_card_of_the_blog_run_they_repeat() -> None:
    """NeMo RL issue #959 reruns the v0.3 blog's runs (published_rl_times_nemo_rl_v03_miles_p2p.json): same card, new measurements."""
    blog = {e["id"]: e for e in S.load_entries(S.RL_DATA) if e["id"].startswith("nemorl-v03blog-grpo-llama31")}
    reruns = [e for e in ROWS.values() if e["id"].startswith("nemorl-issue959-rerun-")]
    assert len(reruns) == 4
    for e in reruns:
        twin = blog[e["id"].replace("nemorl-issue959-rerun-", "nemorl-v03blog-")]
        assert e["train"] == twin["train"] and e["rollout"] == twin["rollout"] and e["gpus"] == twin["gpus"]
        assert e.get("timer_scope") == twin.get("timer_scope")  # the same NeMo RL timers
        assert {k: v for k, v in e["data"].items() if k != "response_len_mean"} == \
            {k: v for k, v in twin["data"].items() if k != "response_len_mean"}
        assert e["measured"] != twin["measured"]


def test_rlinf_row_packs_its_sequences_as_rlinf_megatron_forward_does() -> None:
    """RLinf's Megatron actor forwards through custom_forward with pack_seqs on (megatron_model_manager.py
    @b3dca525): each one-sequence micro-batch runs at its own length, not the 28672-token padded row."""
    e = ROWS["rlinf-rlinf-compare-grpo-r1distill-qwen15b-boba-h100-8g"]
    assert e["train"]["sequence_packing"] is True
    assert re.search(r"megatron_model_manager\.py l\.\d+-\d+ @[0-9a-f]{40}", e["train"]["sequence_packing_source"])
    card, notes = S.map_rl(e)
    assert card["rollout"]["packed_sequences"] is True and card["batch"]["micro_batch_size"] == 1
    assert any("packed without padding" in n for n in notes)
    packed = S.plan_card(card)
    padded = S.plan_card({**card, "rollout": {**card["rollout"], "packed_sequences": False}})
    # the mean sequence (max prompt + 13975) against the padded 28672: the update at least 1.5x shorter
    assert padded.parts["time.actor_update"] > 1.5 * packed.parts["time.actor_update"]
