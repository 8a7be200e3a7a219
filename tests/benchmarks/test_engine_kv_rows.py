"""benchmarks/engine_kv_rows.py and the engine-memory check it serves (src/trainfit/rollout/vllm.py, "Checked: the
engine's memory fraction and its non-KV reservation"): the listing's order and summary, and the facts the module
docstring states about NVIDIA-NeMo/RL PR #3278's Qwen3-235B pair, so that a model change that moves them is seen and the
docstring revisited."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
PAIR = "nemorl-pr3278-grpo-qwen3-235b-h100-bf16-256g-off1-gmu{}"
GIB = 2**30


def _module(name: str):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(rid, recompute, gen, gmu=0.6):
    return {"id": rid, "framework": "verl", "gpu_memory_utilization": gmu, "sequences_per_engine": 64,
            "kv_tokens_per_engine": 100_000, "full_length_sequences": 20, "preemption_recompute_s": recompute,
            "generation_error": gen, "step_error": None}


def test_the_listing_puts_preempting_rows_first_and_splits_the_summary_by_them():
    mod = _module("engine_kv_rows")
    text = mod.render([_row("b-none", 0.0, 0.10), _row("a-none", 0.0, -0.30), _row("c-pre", 2.0, -0.40),
                       _row("d-pre", 5.0, 0.20)])
    table = [line.split(" | ")[0].lstrip("| ") for line in text.splitlines() if line.startswith("| ") and "framework" not in line]
    assert table == ["d-pre", "c-pre", "a-none", "b-none"]  # most recompute first, then by id
    assert "rows the plan preempts: n=2, median -10.0%, 1 under." in text
    assert "rows it does not: n=2, median -10.0%, median |error| 20.0%, 1 under." in text
    assert "Rows: 4; stating the memory fraction 4; preemption charged 2." in text


def test_the_committed_listing_holds_the_pair_and_the_rows_the_docstring_counts():
    text = (BENCH / "engine_kv_rows.md").read_text()
    assert "Rows: 164; stating the memory fraction 161; preemption charged 13." in text
    assert "rows the plan preempts: n=9, median -18.9%, 7 under." in text
    for x in ("080", "088"):
        assert f"| {PAIR.format(x)} | nemo-rl |" in text


def _pair_plans(**rollout):
    st = _module("step_times")
    from trainfit.plan import make_plan

    entries = {e["id"]: e for e in st.load_entries(st.RL_DATA)}
    out = {}
    for x in ("080", "088"):
        card, _ = st.map_rl(copy.deepcopy(entries[PAIR.format(x)]))
        card["rollout"].update(rollout)
        out[x] = make_plan(st.validate(card))
    return out


def _generation(plan):
    return {ph.name: ph for ph in plan.time.phases}["generation"]


def test_the_235b_pair_plans_one_step_at_both_fractions_because_neither_engine_preempts():
    plans = _pair_plans()
    assert plans["080"].step_seconds == pytest.approx(plans["088"].step_seconds, rel=1e-9)
    low = plans["080"].rollout
    assert low.kv_cache_bytes / GIB == pytest.approx(6.61, abs=0.01)
    assert low.kv_capacity_tokens == 147_376
    assert low.kv_capacity_tokens < low.demand_tokens  # not every sequence fits at full length ...
    for p in plans.values():  # ... yet the default length mix never outgrows the KV: no recompute is charged
        assert _generation(p).terms["preemption_recompute"] == 0.0
    published = json.loads((BENCH / "data" / "published_rl_times_firstcontact_2612i.json").read_text())
    rates = {e["id"]: e["measured"]["throughput"]["value"] for e in published if e["id"].startswith(PAIR[:-2])}
    assert rates[PAIR.format("088")] / rates[PAIR.format("080")] == pytest.approx(57.8 / 51.5)  # the run moved 10.9 %


def test_with_every_response_at_the_mean_the_080_engine_preempts_and_the_plan_moves_less_than_the_run():
    plans = _pair_plans(response_len_shape="fixed")
    low, high = plans["080"], plans["088"]
    assert _generation(low).terms["preemption_recompute"] > 0.0
    assert _generation(high).terms["preemption_recompute"] == 0.0
    moved = 1 - high.step_seconds / low.step_seconds
    assert 0.03 < moved < 0.06  # 166.7 -> 159.0 s (4.6 %) against the run's 226.8 -> 202.0 s (10.9 %)
