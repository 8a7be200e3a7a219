"""benchmarks/step_times.py picks up published_rl_times_verl_megatron_practice.json (the verl practice tables of
ISEEKYAN/verl_megatron_practice: GRPO Qwen2.5-7B-Instruct on 8 H100 with Megatron, DAPO Qwen2.5-14B / Qwen3-14B-Base /
Qwen2.5-32B on H20 with FSDP + Ulysses): every entry cites its table at a commit and quotes the CSV row whose figures it
records, the FSDP and Megatron rows map to the cards their scripts state, and the Megatron DAPO rows, whose generation
rounds per step are not published, are listed as not representable with that reason."""

from __future__ import annotations

import json
import re

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_verl_megatron_practice")
FILE = S.RL_DATA.parent / "published_rl_times_verl_megatron_practice.json"
ENTRIES = {e["id"]: e for e in json.loads(FILE.read_text())}
PLANNED = sorted(i for i, e in ENTRIES.items() if not e.get("card_cannot_state"))
NOT_REPRESENTABLE = sorted(i for i, e in ENTRIES.items() if e.get("card_cannot_state"))


def _row(e: dict) -> list[str]:
    """The quoted CSV data row (after the header and ' / ')."""
    return e["quote"].rsplit(" / ", 1)[1].split(",")


def test_the_harness_loads_the_file_and_ids_are_new() -> None:
    assert FILE in S.data_files(S.RL_DATA)
    ids = [e["id"] for e in S.load_entries(S.RL_DATA)]
    assert len(ids) == len(set(ids))
    assert sum(1 for e in S.load_entries(S.RL_DATA) if e["_file"] == FILE.name) == len(ENTRIES) == 20
    assert len(PLANNED) == 16 and len(NOT_REPRESENTABLE) == 4


@pytest.mark.parametrize("eid", sorted(ENTRIES))
def test_each_entry_cites_and_quotes_its_figures(eid: str) -> None:
    e = ENTRIES[eid]
    src = e["source"]
    assert src["repo"] == "ISEEKYAN/verl_megatron_practice" and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    row = _row(e)
    assert float(row[{"grpo_qwen2.5_7b.csv": 10, "dapo14b.csv": 11, "dapo32b.csv": 9}[src["path"]]]) == \
        e["measured"]["step_s"]
    ph, m = e["measured"]["phases_s"], e["measured"]
    for v in (ph["generation"], ph["actor_update"], ph["old_logprob"], ph["weight_sync"]):
        assert v is None or f"{v:g}" in row or str(v) in row
    if m.get("throughput"):
        assert str(m["throughput"]["value"]) in row or f"{m['throughput']['value']:g}" in row
    if e["data"].get("response_len_mean"):
        assert str(e["data"]["response_len_mean"]) in row
    assert "First contact" in e["note"]


@pytest.mark.parametrize("eid", PLANNED)
def test_rows_map_to_the_stated_layout_and_plan(eid: str) -> None:
    e = ENTRIES[eid]
    card, _ = S.map_rl(e)
    assert card["preset"] == "verl"
    assert card["hardware"]["gpus_per_node"] * card["hardware"]["nodes"] == e["gpus"]
    tr, par = e["train"], card["parallel"]
    if tr["strategy"] == "megatron":
        assert par["tensor_parallel"] == tr["tp"]
        assert par.get("context_parallel", 1) == (tr["cp"] or 1)
        assert card["rollout"].get("max_tokens_per_micro_batch") == (tr["dynamic_bsz / max_token_len_per_gpu"] or None)
    else:  # verl FSDP with Ulysses sequence parallel: one micro-batch spans the Ulysses group
        assert par["context_parallel"] == tr["sequence_parallel_ulysses"]
        assert par["context_parallel_kind"] == "ulysses"
        assert card["rollout"]["max_tokens_per_micro_batch"] == 22528
    if e["data"].get("generated_prompts_per_step"):  # DAPO dynamic sampling: one round of 1536 prompts
        assert card["rollout"]["generated_prompts_per_step"] == 1536
    planned = S.plan_card(card)
    assert planned.step_s is not None and planned.step_s > 0


@pytest.mark.parametrize("eid", NOT_REPRESENTABLE)
def test_megatron_dapo_rows_are_not_representable_with_their_reason(eid: str) -> None:
    with pytest.raises(S.Unmapped) as exc:
        S.map_rl(ENTRIES[eid])
    assert exc.value.status == "not_representable"
    assert any("rounds per step not published" in r for r in exc.value.reasons)


GRPO7B = "verlmp-grpo-qwen25-7b-instruct-math-h100-8g-megatron-"


def _update(eid: str) -> tuple[float, float, float]:
    """(published update s, planned update s without the state trips, planned ``state_offload`` s) of a GRPO 7B row."""
    e = ENTRIES[GRPO7B + eid]
    planned = S.plan_card(S.map_rl(e)[0])
    return (e["measured"]["phases_s"]["actor_update"], planned.parts["time.actor_update"],
            planned.parts.get("time.state_offload", 0.0))


def test_megatron_state_trips_are_per_call_not_per_micro_batch() -> None:
    """The null result in plan.rl_passes' docstring, (2)(g): verl's Megatron worker moves the trainer state to the
    host once per timed call (volcengine/verl verl/workers/megatron_workers.py l.613-648 and l.728-747
    @62549582a71881fe861b09f8375e3aea80ac6754), so the plan's ``state_offload`` is the same for the offloaded TP 4
    rows with 2,048 fixed micro-batches and with about 290 token-budgeted ones, and the update timer's third of it
    is a few seconds. The table's own TP 4 fixed pair, with and without offload (grpo_qwen2.5_7b.csv rows 7 and 8:
    update 300.2 / 300.7 s), shows the trips are not the ~190 s the fixed-micro-batch rows miss: the row without offload
    misses by as much as its offloaded twin. Fails if the trips are ever charged per micro-batch, or if a charge
    meant for the fixed-micro-batch miss lands on the offloaded rows only."""
    fixed_pub, fixed_plan, fixed_trips = _update("tp4-offload-mbs2-cudagraph")
    budget_pub, budget_plan, budget_trips = _update("tp4-offload-dynbsz")
    plain_pub, plain_plan, plain_trips = _update("tp4-mbs2")
    assert plain_trips == 0.0 and fixed_trips > 0.0
    assert fixed_trips == pytest.approx(budget_trips, rel=1e-9)
    share = S.VERL_MEGATRON_OFFLOAD_SHARES["params_and_optimizer"]["actor_update"]
    assert share * fixed_trips < 0.05 * (fixed_pub - fixed_plan)
    assert abs(fixed_pub - plain_pub) < 1.0
    with_trips = (fixed_plan + share * fixed_trips) / fixed_pub - 1
    assert with_trips == pytest.approx(plain_plan / plain_pub - 1, abs=0.02)


FSDP_DAPO = sorted(i for i, e in ENTRIES.items() if e["method"] == "dapo" and e["train"]["strategy"] == "fsdp")
# The run scripts committed with the tables on 2025-07-31 (ISEEKYAN/verl_megatron_practice): DAPO-14B/3 at de3cd71f,
# DAPO-14B/5 at 036edb89, DAPO-32B/5 at ff2e2b48. DAPO-32B/5 was rewritten on 2025-08-22 (fdd915f9: verl.trainer.main_ppo, no
# data.gen_batch_size, no filter_groups), three weeks after the table, so that version cannot be the one behind it.
TABLE_DAY_SCRIPTS = {"de3cd71f82b13332ba9acf4d327bd1354af70130", "036edb890d9c24321629182679df79c5fc380fb5",
                     "ff2e2b4891a8dcff30a2f28e36f4303b1960517b"}


@pytest.mark.parametrize("eid", FSDP_DAPO)
def test_fsdp_dapo_rows_generate_the_scripts_gen_batch_of_1536_prompts(eid: str) -> None:
    """Every FSDP DAPO row maps from its table-day script: recipe.dapo.main_dapo with data.gen_batch_size=1536
    (gen_prompt_bsz = train_prompt_bsz * 3). verl builds the train dataloader with batch_size = data.gen_batch_size
    (verl/trainer/ppo/ray_trainer.py l.530 @2633140a73be8b6c244910c3fbbd021a43920344) and the DAPO trainer generates
    each dataloader batch x n inside its 'gen' timer (recipe/dapo/dapo_ray_trainer.py l.106-137, same commit), so a
    round generates 1536 prompts' responses. One round, not several: the table's rollout/gen over its inner
    generation column stays at 1.08-1.32 (the sharding manager and the slowest rank's wait), where a second round
    would double it. Fails for the 32B rows when
    they are mapped from the 2025-08-22 rewrite (512 prompts generated), as they were."""
    e = ENTRIES[eid]
    assert e["source"]["config_source"].rsplit("@", 1)[1] in TABLE_DAY_SCRIPTS
    assert e["data"]["generated_prompts_per_step"] == 1536 == 3 * e["data"]["prompts_per_step"]
    row = _row(e)
    rollout_gen, inner = {"dapo14b.csv": (12, 13), "dapo32b.csv": (10, 11)}[e["source"]["path"]]
    assert float(row[rollout_gen]) == e["measured"]["phases_s"]["generation"]
    assert 1.0 < float(row[rollout_gen]) / float(row[inner]) < 1.5
    card, _ = S.map_rl(e)
    assert card["rollout"]["generated_prompts_per_step"] == 1536
