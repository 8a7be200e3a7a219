"""benchmarks/step_times.py, the out-of-sample weight-sync rows of published_rl_times_firstcontact_sync_2612.json:
published trainer -> rollout-engine weight syncs not scored before (SkyRL's Megatron CUDA-IPC path before and after
pull request #334, slime's colocated loop beside vime's in vime issue #175, TRL's server mode in issue #3557, the
NCCL-reshard layouts of NeMo RL pull request #2971 that its design doc left out) and the
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
    # id: (card preset, placement, rollout.weight_sync or None, published weight sync s, the figure as quoted)
    "skyrl-pr334-megatron-weight-sync-qwen15-moe-a27b-l40s-8g-per-param": ("skyrl", "colocate", "per_parameter", 67.0,
                                                                           "(67s -> 34s)"),
    "skyrl-pr334-megatron-weight-sync-qwen15-moe-a27b-l40s-8g-bucketed": ("skyrl", "colocate", None, 34.0,
                                                                          "(67s -> 34s)"),
    "slime-vime175-weight-sync-loop-qwen3-30b-a3b-h200-8g-colocate": ("slime", "colocate", None, 3.0, "~3.0 s/sync"),
    "trl-issue3557-server-mode-weight-sync-qwen3-30b-a3b-h200-8g": ("trl", "split", None, 40.0, "~40s"),
}
NCCL_RESHARD = {  # NeMo RL pull request #2971's DGX-H100 table: suffix -> (low s, high s)
    "ep4tp2dp2-tp4dp4": (1.13, 1.53), "ep4tp2pp2-tp4dp4": (0.74, 1.17), "ep8pp2-tp2dp8": (1.21, 1.52),
    "tp2cp2ep8-tp4dp4": (1.02, 1.45), "fp8-ep4tp2pp2-tp2dp8": (3.19, 4.04), "fp8-ep8pp2-tp2dp8": (3.20, 4.30),
}
for _suffix, (_lo, _hi) in NCCL_RESHARD.items():
    SCORED[f"nemorl-pr2971-nccl-reshard-refit-qwen3-30b-a3b-h100-{_suffix}"] = (
        "nemo-rl", "split", "bucketed", round((_lo + _hi) / 2, 4), f"{_lo:.2f}s-{_hi:.2f}s")

st = load_step_times("trainfit_bench_step_times_firstcontact_sync_2612")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_sync_2612_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert DATA in st.data_files(st.RL_DATA)
    everything = st.load_entries(st.RL_DATA)
    loaded = [e["id"] for e in everything if e["_file"] == DATA.name]
    assert sorted(loaded) == sorted(ROWS) and len(ROWS) == 25
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
    preset, placement, weight_sync, secs, quoted = SCORED[row_id]
    e = ROWS[row_id]
    assert e["measured"]["phases_s"]["weight_sync"] == secs and quoted in e["quote"]
    card, _ = st.map_rl(e)
    st.validate(card)
    assert card.get("preset") == preset and card["rollout"]["placement"] == placement
    assert card["rollout"].get("weight_sync") == weight_sync
    if preset == "nemo-rl":  # the reshard transport on 16 + 16 H100, the layout the table's mapping names
        assert card["rollout"]["weight_transport"] == "nccl_reshard" and card["hardware"]["nodes"] == 4
        assert ("fp8" in row_id) == (card["rollout"].get("quantization") == "fp8")


@pytest.mark.parametrize("row_id", sorted(set(ROWS) - set(SCORED)))
def test_sync_2612_unscored_row_is_not_representable_for_its_stated_reason(row_id: str) -> None:
    e = ROWS[row_id]
    with pytest.raises(st.Unmapped) as got:
        st.map_rl(e)
    assert got.value.status == "not_representable"
    assert e["card_cannot_state"] in got.value.reasons


def test_sync_2612_catalog_reason_of_an_entry_is_counted_verbatim() -> None:
    # the Moonlight rows' own reason mentions the catalog; only the harness's catalog misses collapse to a kind
    moonlight = ROWS["verl-pr2418-megatron-sglang-weight-update-moonlight16b-h20-8g-per-tensor"]["card_cannot_state"]
    assert "not in the catalog" in moonlight and st.reason_kind(moonlight) == moonlight
    assert st.counts([{"status": "not_representable", "reasons": [moonlight]}])["not_representable"]["reasons"] == {
        moonlight: 1}
    assert (st.reason_kind("model a/b not in the catalog and the entry has no model_config")
            == "model not in the catalog and no model_config in the entry")
    assert st.reason_kind("GPU 'other' not in the catalog (no peak FLOP/s or bandwidth)") == "GPU not in the catalog"


# the rows' fit verdicts, as their notes state them: SkyRL's Megatron layout is not published (the card's default
# layout holds the whole model on every L40S), TRL's server and slime's colocated engines at their frameworks' defaults
FITS = {
    "skyrl-pr334-megatron-weight-sync-qwen15-moe-a27b-l40s-8g-per-param": False,
    "skyrl-pr334-megatron-weight-sync-qwen15-moe-a27b-l40s-8g-bucketed": False,
    "slime-vime175-weight-sync-loop-qwen3-30b-a3b-h200-8g-colocate": True,
    "trl-issue3557-server-mode-weight-sync-qwen3-30b-a3b-h200-8g": True,
}


@pytest.mark.parametrize("row_id", sorted(FITS))
def test_sync_2612_note_states_the_planned_fit_verdict(row_id: str) -> None:
    from trainfit.plan import make_plan

    e = ROWS[row_id]
    card, _ = st.map_rl(e)
    plan = make_plan(st.validate(card))
    assert plan.fits is FITS[row_id]
    before = e["note"].split("FIRST-CONTACT")[0]
    assert ("Verdict: the plan fits" in before) is plan.fits
    assert ("Verdict: the plan does not fit" in before) is not plan.fits


def test_sync_2612_engines_take_their_frameworks_default_memory_settings() -> None:
    trl, _ = st.map_rl(ROWS["trl-issue3557-server-mode-weight-sync-qwen3-30b-a3b-h200-8g"])
    assert trl["rollout"]["gpu_memory_utilization"] == 0.9  # trl vllm-serve's default
    slime, _ = st.map_rl(ROWS["slime-vime175-weight-sync-loop-qwen3-30b-a3b-h200-8g-colocate"])
    ro = slime["rollout"]  # slime --colocate: offload_train and offload_rollout; SGLang's own memory share on H200
    assert (ro["trainer_offload"], ro["sleep_level"], ro["gpu_memory_utilization"]) == ("params_and_optimizer", 2, 0.906)
    assert ro["tensor_parallel"] == 1  # slime's --rollout-num-gpus-per-engine default
    reserved_mib = 512 + 1.5 * 8192 + 2 * 256 + 1024 * 1 / 8  # SGLang _handle_gpu_memory_settings, H200, TP 1
    assert round(1 - reserved_mib / (139.8 * 1024), 3) == 0.906
