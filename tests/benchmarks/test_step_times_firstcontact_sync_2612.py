"""benchmarks/step_times.py, the out-of-sample weight-sync rows of published_rl_times_firstcontact_sync_2612.json:
published trainer -> rollout-engine weight syncs not scored before (SkyRL's Megatron CUDA-IPC path before and after
pull request #334, slime's colocated loop beside vime's in vime issue #175, TRL's server mode in issue #3557) and the
points whose configuration the card cannot state, each with its reason. Every row cites its source, its figure is the
quoted one, its note records the first-contact error once, and every scored row maps to a card that validates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_sync_2612.json"
SCORED = {
    # id: (card preset, placement, rollout.weight_sync or None, published weight sync s); slime has no card preset
    # in the harness (CARD_PRESETS): its card plans the fallback framework's colocated path
    "skyrl-pr334-megatron-weight-sync-qwen15-moe-a27b-l40s-8g-per-param": ("skyrl", "colocate", "per_parameter", 67.0),
    "skyrl-pr334-megatron-weight-sync-qwen15-moe-a27b-l40s-8g-bucketed": ("skyrl", "colocate", None, 34.0),
    "slime-vime175-weight-sync-loop-qwen3-30b-a3b-h200-8g-colocate": (None, "colocate", None, 3.0),
    "trl-issue3557-server-mode-weight-sync-qwen3-30b-a3b-h200-8g": ("trl", "split", None, 40.0),
}

st = load_step_times("trainfit_bench_step_times_firstcontact_sync_2612")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_sync_2612_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert DATA in st.data_files(st.RL_DATA)
    everything = st.load_entries(st.RL_DATA)
    loaded = [e["id"] for e in everything if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 18
    assert not {e["id"] for e in everything if e["_file"] != DATA.name} & set(ROWS)
    assert SCORED.keys() <= ROWS.keys()
    assert all(e["kind"] == "rl_phase" and set(v for v in e["measured"]["phases_s"].values() if v)
               == {e["measured"]["phases_s"]["weight_sync"]} for e in ROWS.values())


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_sync_2612_row_cites_its_source_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert src["repo"] and e["quote"] and src["read"] == "2026-12-05" and src["date"]
    kind = "pull" if src.get("pr") else "issues"
    assert src["url"] == f"https://github.com/{src['repo']}/{kind}/{src.get('pr') or src['issue']}"
    assert e["note"].count("FIRST-CONTACT") == 1
    after = e["note"].split("FIRST-CONTACT")[1]
    if row_id in SCORED:
        assert "not scored" not in after and "weight sync " in after
    else:
        assert e["card_cannot_state"] and "not scored (not representable)" in after


@pytest.mark.parametrize("row_id", sorted(SCORED))
def test_sync_2612_scored_figure_is_quoted_and_maps_to_a_valid_card(row_id: str) -> None:
    preset, placement, weight_sync, secs = SCORED[row_id]
    e = ROWS[row_id]
    assert e["measured"]["phases_s"]["weight_sync"] == secs
    assert f"{secs:g}s" in e["quote"].replace(" s", "s").replace("~", "") or f"{secs:.1f} s/sync" in e["quote"]
    card, _ = st.map_rl(e)
    st.validate(card)
    assert card.get("preset") == preset and card["rollout"]["placement"] == placement
    assert card["rollout"].get("weight_sync") == weight_sync


@pytest.mark.parametrize("row_id", sorted(set(ROWS) - set(SCORED)))
def test_sync_2612_unscored_row_is_not_representable_for_its_stated_reason(row_id: str) -> None:
    e = ROWS[row_id]
    with pytest.raises(st.Unmapped) as got:
        st.map_rl(e)
    assert got.value.status == "not_representable"
    assert e["card_cannot_state"] in got.value.reasons
