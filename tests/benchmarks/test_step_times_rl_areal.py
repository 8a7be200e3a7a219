"""benchmarks/step_times.py, held-out RL rows of published_rl_times_areal.json (AReaL's v0.2 tutorial table of
single-step times with the configs it launches, and the first six steps of the 7B 16-node run its v0.1 tutorial
logs): the file is picked up, its ids are unique across the RL files, every entry cites its source at a commit,
every figure is in its quote, and every row maps, plans and keeps the split the run's allocation states."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from step_times_module import file_ids, load_step_times

S = load_step_times("trainfit_bench_step_times_rl_areal")
DATA = S.RL_DATA.parent / "published_rl_times_areal.json"
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
LOG_ROW = "areal-v01-ppo-r1distill-7b-h800-128g-log"


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(S, S.RL_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 7
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_cites_its_source_and_quotes_its_figures(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", src["date"])
    assert src["repo"] and src["path"] and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert re.search(r"@[0-9a-f]{40}", src["config_source"])
    if row_id == LOG_ROW:
        return  # a mean over the six logged steps: test_log_row_is_the_mean_of_the_six_logged_steps
    assert f"{e['measured']['step_s']:g}" in e["quote"], row_id


def test_log_row_is_the_mean_of_the_six_logged_steps() -> None:
    e = ROWS[LOG_ROW]
    steps = [float(x) for x in re.findall(r"\*(\d+\.\d+)\*s", e["quote"])]
    seqs = [float(x) for x in re.findall(r"(\d+\.\d+) / (?:\d+\.\d+)", e["quote"])]
    prompts = [float(x) for x in re.findall(r"\d+\.\d+ / (\d+\.\d+)", e["quote"])]
    assert len(steps) == 6
    assert e["measured"]["step_s"] == pytest.approx(statistics.mean(steps), abs=0.01)
    # the first step's lengths are quoted with their keys, the other five as 'avg_seq_len / avg_prompt_len'
    first = re.search(r"'avg_seq_len': (\d+\.\d+), 'avg_prompt_len': (\d+\.\d+)", e["quote"])
    seqs, prompts = [float(first.group(1))] + seqs, [float(first.group(2))] + prompts
    assert len(seqs) == len(prompts) == 6
    responses = [s - p for s, p in zip(seqs, prompts)]
    assert e["data"]["response_len_mean"] == pytest.approx(statistics.mean(responses), abs=0.1)
    assert e["data"]["prompt_len_mean"] == pytest.approx(statistics.mean(prompts), abs=0.1)
    assert e["data"]["prompts_per_step"] * e["data"]["n_per_prompt"] == 16384  # 'n_seqs': 16384.0


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rows_map_and_plan_a_step(row_id: str) -> None:
    card, notes = S.map_rl(ROWS[row_id])
    planned = S.plan_card(card)
    assert planned.step_s and planned.step_s > 0
    # the ReaL engine's own layers under Megatron's DDP and distributed optimizer: ZeRO-1, no Megatron-Core kernels
    assert card["parallel"]["strategy"] == "zero1" and "compile" not in card["parallel"]
    # no old-policy pass (the engine's log-probs), the reference pass offloaded between calls
    assert card["rollout"]["recompute_old_logprobs"] is False and card["roles"]["reference"] == "cpu"


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_split_follows_the_allocation_whole_nodes_beyond_one_node(row_id: str) -> None:
    """realhf splits the global device mesh at the generation world size (common.py l.237-251 @aff05c25)."""
    e = ROWS[row_id]
    card, notes = S.map_rl(e)
    ro = e["rollout"]
    assert ro["rollout_gpus"] + ro["train_gpus"] == e["gpus"]
    if e["nodes"] > 1:
        assert card["rollout"]["nodes"] == ro["rollout_gpus"] // 8
        assert any("AReaL's multi-node split" in n for n in notes)
    else:
        assert card["rollout"].get("gpus") == ro["rollout_gpus"]


def test_distilled_32b_is_planned_with_its_base_model_shapes() -> None:
    from trainfit.catalog.models import catalog_entry

    card, notes = S.map_rl(ROWS["areal-v02-ppo-r1distill-32b-boba-h800-128g"])
    # the catalog's own entry for the checkpoint carries its base's shapes (DeepSeek-R1 README: Qwen2.5-32B)
    assert card["model"] == "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"
    assert catalog_entry(card["model"])["config"] == catalog_entry("Qwen/Qwen2.5-32B")["config"]
    assert card["parallel"]["tensor_parallel"] == 4 and card["parallel"]["pipeline_parallel"] == 4
    assert card["rollout"]["tensor_parallel"] == 8 and card["rollout"]["num_generations"] == 32
