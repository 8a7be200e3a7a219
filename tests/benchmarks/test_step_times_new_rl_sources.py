"""benchmarks/step_times.py picks up the RL companions published_rl_times_nemo_rl_v06.json and
published_rl_times_nemo_rl_v04.json (the NeMo RL v0.6 and v0.4 table rows not recorded before),
published_rl_times_nemo_rl_refit.json (NeMo RL's DeepSeek-V3 NCCL refit) and
published_rl_times_miles_rocm.json (Miles on MI300X): every entry cites its source and quotes the figure it records,
the NeMo RL rows map to cards the planner plans, and the rows the card cannot state are skipped with their reason."""

from __future__ import annotations

import json
import re

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_new_rl_sources")
NEMO = S.RL_DATA.parent / "published_rl_times_nemo_rl_v06.json"
V04 = S.RL_DATA.parent / "published_rl_times_nemo_rl_v04.json"
MILES = S.RL_DATA.parent / "published_rl_times_miles_rocm.json"
REFIT = S.RL_DATA.parent / "published_rl_times_nemo_rl_refit.json"
ENTRIES = {e["id"]: e for f in (NEMO, V04, MILES, REFIT) for e in json.loads(f.read_text())}
PLANNED = [i for i in ENTRIES if i.startswith(("nemorl-v06-grpo-", "nemorl-v04-grpo-"))]


def test_the_harness_loads_both_companions() -> None:
    files = S.data_files(S.RL_DATA)
    assert {NEMO, V04, MILES, REFIT} <= set(files)
    loaded = [e for e in S.load_entries(S.RL_DATA) if e["id"] in ENTRIES]
    assert sorted(e["_file"] for e in loaded) == sorted([NEMO.name] * 10 + [V04.name] * 8 + [MILES.name]
                                                        + [REFIT.name] * 2)


def test_ids_are_new() -> None:
    ids = [e["id"] for e in S.load_entries(S.RL_DATA)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("eid", sorted(ENTRIES))
def test_each_entry_cites_and_quotes_its_figure(eid: str) -> None:
    e = ENTRIES[eid]
    src = e["source"]
    assert src.get("repo") and src.get("path") and re.fullmatch(r"[0-9a-f]{40}", src.get("commit", ""))
    step = e["measured"]["step_s"]
    if e["kind"] == "rl_phase":
        # the quoted table row: | measurement | NIXL | NCCL | improvement |, the NCCL column recorded
        cells = [c.strip() for c in e["quote"].rsplit("[...]", 1)[1].strip().strip("|").split("|")]
        assert cells[2] == f"{e['measured']['phases_s']['weight_sync']:.2f} s"
    elif e["framework"] == "nemo-rl":
        # the table's last columns: G-Average Seq len, #-GPUs, G-GBS, T-GBS, generation and training layouts,
        # tokens/s/GPU, step time (the v0.4 table has no Algorithm column in front)
        cells = [c.strip() for c in e["quote"].strip().strip("|").split("|")]
        assert float(cells[-1]) == step
        assert float(cells[-2].replace(",", "")) == e["measured"]["throughput"]["value"]
        assert float(cells[-8].replace(",", "")) == e["data"]["response_len_mean"]
        assert int(cells[-7]) == e["gpus"]
        assert f"[{e['rollout']['tp']},1]" == cells[-4]
        assert cells[-3].strip("[]").split(",")[-2] == str(e["train"]["pp"])
    else:
        assert f"{step:.2f}s" in e["quote"]
        for v in e["measured"]["phases_s"].values():
            assert v is None or f"{v:.2f}s" in e["quote"]


@pytest.mark.parametrize("eid", PLANNED)
def test_nemo_rl_rows_map_and_plan(eid: str) -> None:
    e = ENTRIES[eid]
    card, _ = S.map_rl(e)
    assert card["preset"] == "nemo-rl"
    assert card["hardware"]["gpus_per_node"] * card["hardware"]["nodes"] == e["gpus"]
    g_gbs = int([c.strip() for c in e["quote"].strip().strip("|").split("|")][-6].replace(",", ""))
    assert card["rollout"]["prompts_per_step"] * card["rollout"]["num_generations"] == g_gbs
    planned = S.plan_card(card)
    assert planned.step_s is not None and planned.step_s > 0


@pytest.mark.parametrize("eid", sorted(i for i in ENTRIES if i.startswith("nemorl-refit-")))
def test_refit_rows_plan_a_split_weight_sync(eid: str) -> None:
    card, _ = S.map_rl(ENTRIES[eid])
    assert card["rollout"]["placement"] == "split" and card["rollout"]["nodes"] == 4
    seconds, keys = S.phase_seconds(S.plan_card(card), "weight_sync")
    assert keys == ["time.weight_sync"] and seconds is not None and seconds > 0


@pytest.mark.parametrize(("eid", "reason"), [
    ("nemorl-v06-swe-nemotron3-nano-30b-a3b-h100-bf16-128g-off1", "not in the catalog"),
    ("miles-rocm-grpo-qwen3-30b-a3b-mi300x-8g", "prompt or response length not published"),
])
def test_unstated_rows_are_skipped_with_their_reason(eid: str, reason: str) -> None:
    with pytest.raises(S.Unmapped) as err:
        S.map_rl(ENTRIES[eid])
    assert err.value.status == "skipped"
    assert any(reason in r for r in err.value.reasons)
