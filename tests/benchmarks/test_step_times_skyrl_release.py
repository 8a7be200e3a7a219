"""benchmarks/step_times.py and the plan: a ``software.skyrl-train`` pin picks SkyRL's colocated path of that release
(``compute.sync.SKYRL_IPC_PER_TENSOR``: one CUDA-IPC handle per tensor before the packed buffer). SkyRL pull request
#334's bucketed row ran the Megatron worker's loop of its merge, f53414ab (megatron_worker.py l.369-426: per tensor
``reduce_tensor``, ``all_gather_object``, barrier and device sync; requests per 1 GB), which the entry pins as '<0.3'
(skyrl_train 0.2.0 holds that merge, 0.3.0 holds #487's packed buffer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit
from trainfit.catalog.models import from_catalog
from trainfit.compute import sync
from trainfit.plan import make_plan

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_sync_2612.json"
BUCKETED = "skyrl-pr334-megatron-weight-sync-qwen15-moe-a27b-l40s-8g-bucketed"
FSDP_ROW = "skyrl-llmjudge-readme-grpo-qwen25-0.5b-gsm8k-l4-1g-sync-rule"

st = load_step_times("trainfit_bench_step_times_skyrl_release")
ROWS = {e["id"]: e for e in st.load_entries(st.RL_DATA)}


def _sync_terms(card: dict) -> dict[str, float]:
    plan = make_plan(st.validate(card))
    (phase,) = [ph for ph in plan.time.phases if ph.name == "weight_sync"]
    return phase.terms


def _card(row_id: str, pin: str | None) -> dict:
    card, _ = st.map_rl(ROWS[row_id])
    software = {k: v for k, v in (card.get("software") or {}).items() if k != "skyrl-train"}
    card["software"] = {**software, **({"skyrl-train": pin} if pin else {})}
    return card


def test_pr334_rows_pin_the_release_their_code_is_in() -> None:
    rows = {e["id"]: e for e in json.loads(DATA.read_text())}
    for row_id in (BUCKETED, BUCKETED.replace("bucketed", "per-param")):
        e = rows[row_id]
        assert e["software"]["value"] == {"skyrl-train": "<0.3"}
        assert "f53414abc0f83a74c42ddecbfd68c6dcd8dae5f7" in e["software"]["source"]
        assert "skyrl_train-v0.2.0" in e["software"]["source"] and "skyrl_train-v0.3.0" in e["software"]["source"]
        card, notes = st.map_rl(e)
        assert card["software"]["skyrl-train"] == "<0.3" and "software: skyrl-train <0.3 (the entry's software)" in notes
    assert "RE-SCORED after a model change" in rows[BUCKETED]["note"]


@pytest.mark.parametrize("pin, per_tensor_s", [("<0.3", sync.S_PER_TENSOR_IPC), ("0.2.0", sync.S_PER_TENSOR_IPC),
                                               ("0.3.0", sync.S_PER_TENSOR_BUCKETED), (None, sync.S_PER_TENSOR_BUCKETED)])
def test_megatron_worker_release_sets_the_cost_per_tensor(pin: str | None, per_tensor_s: float) -> None:
    terms, packed = _sync_terms(_card(BUCKETED, pin)), _sync_terms(_card(BUCKETED, None))
    tensors = sync.hf_tensor_count(from_catalog("Qwen/Qwen1.5-MoE-A2.7B"))
    # the same tensors, buckets and copies; only the cost per tensor differs
    assert terms["transfer"] == pytest.approx(packed["transfer"])
    assert terms["per_tensor"] - packed["per_tensor"] == pytest.approx(
        tensors * (per_tensor_s - sync.S_PER_TENSOR_BUCKETED), abs=1e-9)


@pytest.mark.parametrize("pin, old", [("0.2.0", True), ("0.3.0", True), ("0.4.0", False), (None, False)])
def test_fsdp_worker_packs_one_release_later(pin: str | None, old: bool) -> None:
    terms = _sync_terms(_card(FSDP_ROW, pin))
    packed = _sync_terms(_card(FSDP_ROW, None))
    assert (terms["per_tensor"] > 5 * packed["per_tensor"]) is old


def test_pr334_bucketed_row_is_planned_with_a_handle_per_tensor() -> None:
    card, _ = st.map_rl(ROWS[BUCKETED])
    terms = _sync_terms(card)
    # about 4,650 tensors x 2.5 ms: 11.6-11.7 s of host work (11.73 s with the copies); the packed path gave 1.48 s
    assert 11.5 < terms["per_tensor"] < 11.8
    assert 11.6 < sum(terms.values()) < 11.9
