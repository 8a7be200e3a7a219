"""benchmarks/step_times.py picks up published_rl_times_open_instruct_areal_lite_verl_qwen35.json: open-instruct's
OLMo 2 1B RLVR stages (docs/olmo2.md), AReaL-lite's GSM8K GRPO example (examples/math/README.md) and verl PR #6660's
Qwen3.5-27B GRPO run. Every entry cites a repository, path and 40-hex commit and quotes the figure it records; the
step count a total time is divided by follows from the quoted flags; each entry maps to a card the planner plans."""

from __future__ import annotations

import json
import re

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_open_instruct_areal_lite")
DATA = S.RL_DATA.parent / "published_rl_times_open_instruct_areal_lite_verl_qwen35.json"
ENTRIES = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_the_harness_loads_the_file_and_ids_are_unique() -> None:
    assert DATA in set(S.data_files(S.RL_DATA))
    loaded = [e for e in S.load_entries(S.RL_DATA) if e["id"] in ENTRIES]
    assert sorted(e["_file"] for e in loaded) == [DATA.name] * len(ENTRIES) and len(ENTRIES) == 5
    ids = [e["id"] for e in S.load_entries(S.RL_DATA)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("eid", sorted(ENTRIES))
def test_each_entry_cites_and_quotes_its_figure(eid: str) -> None:
    e = ENTRIES[eid]
    src = e["source"]
    assert src.get("repo") and (src.get("path") or src.get("url"))
    assert re.fullmatch(r"[0-9a-f]{40}", src.get("commit", ""))
    m = e["measured"]
    if m["step_s"]:
        assert f"step time `{m['step_s']}s`" in e["quote"]
    else:
        t = m["total_time"]
        figure = {"h": f"{t['value']:.0f} hours per stage", "min": f"~{t['value']:.0f} minutes"}[t["unit"]]
        assert figure in e["quote"]


@pytest.mark.parametrize("eid", sorted(i for i in ENTRIES if i.startswith("open-instruct-")))
def test_open_instruct_step_count_follows_from_the_quoted_flags(eid: str) -> None:
    # grpo_vllm_thread_ray_gtrl.py l.1608-1614: world = sum(actor GPUs), rollout = local x world prompts,
    # steps = total_episodes // (rollout x samples), mini-batches = rollout x samples / (local_mini x world)
    e = ENTRIES[eid]
    flag = lambda name: re.search(rf"--{name} ([\d ]+?)(?: --|$)", e["quote"]).group(1).split()  # noqa: E731
    world = sum(int(x) for x in flag("actor_num_gpus_per_node"))
    prompts = int(flag("local_rollout_batch_size")[0]) * world
    samples = int(flag("number_samples_per_prompt")[0])
    assert (prompts, samples) == (e["data"]["prompts_per_step"], e["data"]["n_per_prompt"])
    assert int(flag("total_episodes")[0]) // (prompts * samples) == e["measured"]["total_time"]["steps"]
    minis = prompts * samples // (int(flag("local_mini_batch_size")[0]) * world)
    assert prompts // e["train"]["ppo_mini_batch_size"] == minis == 2
    assert world + int(flag("vllm_tensor_parallel_size")[0]) == e["gpus"]


@pytest.mark.parametrize("eid", sorted(ENTRIES))
def test_each_entry_maps_to_a_card_the_planner_plans(eid: str) -> None:
    e = ENTRIES[eid]
    card, _ = S.map_rl(e)
    assert card["hardware"]["gpus_per_node"] * card["hardware"]["nodes"] == e["gpus"]
    assert card["rollout"]["prompts_per_step"] == e["data"]["prompts_per_step"]
    assert card["rollout"]["num_generations"] == e["data"]["n_per_prompt"]
    planned = S.plan_card(card)
    assert planned.step_s is not None and planned.step_s > 0


@pytest.mark.parametrize("eid", sorted(i for i in ENTRIES if i.startswith("open-instruct-")))
def test_open_instruct_cites_the_doc_that_holds_the_figure_and_the_run_time_vllm(eid: str) -> None:
    # the '43 hours per stage' sentence first appears in docs/olmo2.md at b5dd5621d (#1318); the run's vLLM is the
    # lockfile's 0.8.2 at the stages' beaker jobs (April 2025), whose V1 engine defaults max_num_seqs to 1,024
    e = ENTRIES[eid]
    assert e["source"]["commit"] == "b5dd5621d0ae0caca97e2f8789ffc6408520e5e2"
    assert "(l.13 @b5dd5621d" in e["quote"]
    src = e["rollout"]["max_num_seqs_source"]
    assert e["rollout"]["max_num_seqs"] == 1024 and "vllm 0.8.2" in src and "l.1815-1817" in src


BYTES_PER_TOKEN = 4
"""OpenAI's English rule of thumb, '1 token ~= 4 chars in English' (help.openai.com articles/4936856), the figure the
open-instruct rows' notes use to turn the dataset cards' bytes into tokens."""


@pytest.mark.parametrize(("eid", "row_bytes"), [
    # allenai/RLVR-GSM-MATH-IF-Mixed-Constraints @22aaec1d: 58,788,096 bytes over 29,946 rows (stage 1 samples it whole)
    ("open-instruct-grpo-olmo2-1b-rlvr-stage1-h100-16g", 58_788_096 / 29_946),
    # its 7,500 MATH rows (allenai/RLVR-MATH, stage 2): the mixed set less RLVR-GSM's train (18,898,829 B) and
    # RLVR-IFeval's (29,394,048 B)
    ("open-instruct-grpo-olmo2-1b-rlvr-stage2-h100-16g", (58_788_096 - 18_898_829 - 29_394_048) / 7_500),
])
def test_open_instruct_mean_prompt_follows_from_the_dataset_cards(eid: str, row_bytes: float) -> None:
    e = ENTRIES[eid]
    assert e["data"]["prompt_len_mean"] == round(row_bytes / BYTES_PER_TOKEN, -1)
    assert f"{row_bytes:,.0f} bytes a row" in e["note"] and "4936856" in e["note"]
    # the mean, not the 2,048 maximum, reaches the card (rl_lengths: a published mean is the card's prompt)
    card, _ = S.map_rl(e)
    assert card["rollout"]["prompt_len"] == e["data"]["prompt_len_mean"] < e["data"]["prompt_len_max"]
    # an estimate, stored as one: the structured source says so and the row's notes carry it
    assert e["data"]["prompt_len_mean_source"].startswith("estimate:") and "4936856" in e["data"]["prompt_len_mean_source"]
    notes = S.rl_lengths(e)[4]
    assert any(n.startswith(f"prompt mean {e['data']['prompt_len_mean']} tokens: estimated from the dataset card")
               for n in notes)
    published = {**e, "data": {k: v for k, v in e["data"].items() if k != "prompt_len_mean_source"}}
    assert not any("estimated from" in n for n in S.rl_lengths(published)[4])
    assert S.rl_lengths(published)[:4] == S.rl_lengths(e)[:4]  # the numbers do not change, only the notes


def test_only_an_estimate_prefixed_prompt_mean_source_is_labelled_or_loaded(tmp_path) -> None:
    """``data.prompt_len_mean_source`` exists to say how an estimated mean was made: only an "estimate:" source puts
    "estimated from" in the notes, and the loader refuses any other prefix, naming the entry."""
    e = next(x for x in ENTRIES.values() if (x.get("data") or {}).get("prompt_len_mean_source"))
    other = {**e, "data": {**e["data"], "prompt_len_mean_source": "published: the paper's table 2"}}
    assert not any("estimated from" in n for n in S.rl_lengths(other)[4])
    main = tmp_path / "published_rl_times.json"
    main.write_text(json.dumps([other]))
    with pytest.raises(ValueError, match=re.escape(other["id"]) + ".*prompt_len_mean_source"):
        S.load_entries(main)
    main.write_text(json.dumps([e]))
    assert [x["id"] for x in S.load_entries(main)] == [e["id"]]  # the committed estimate loads
