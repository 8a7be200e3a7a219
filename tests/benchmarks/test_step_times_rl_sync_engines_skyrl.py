"""benchmarks/step_times.py, held-out RL rows of published_rl_times_sync_engines_skyrl.json (checkpoint-engine's broadcast
update benchmark, verl's checkpoint-engine backend benchmark, NeMo RL's experimental NCCL reshard refit table and
its v0.3 refit blog, its default non-colocated refit after PR #1379, SkyRL's Megatron vs FSDP2 Search-R1
table): the file is picked up, the reshard and checkpoint-engine rows map to their ``rollout.weight_transport``, every figure is in its
quote (a range's two ends where the midpoint is recorded), every entry cites its source, and the rows the card
cannot state, or cannot score yet, say why."""

from __future__ import annotations

import copy
import json
import re

import pytest
from step_times_module import file_ids, load_step_times

S = load_step_times("trainfit_bench_step_times_rl_sync_engines_skyrl")
DATA = S.RL_DATA.parent / "published_rl_times_sync_engines_skyrl.json"
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(S, S.RL_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 23
    assert not loaded & others


def _figures(e: dict) -> list[float]:
    return [v for v in e["measured"]["phases_s"].values() if v is not None]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_cites_its_source_and_quotes_its_figures(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    if src.get("url"):
        assert src["url"].startswith("https://") and re.fullmatch(r"\d{4}-\d{2}-\d{2}", src["date"])
    else:
        assert src["repo"] and src["path"] and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    for v in _figures(e):
        if f"{v:g}" in e["quote"] or f"{v:.2f}s" in e["quote"] or f"~{v:g}" in e["quote"]:
            continue
        # a range whose midpoint is recorded: its two ends are quoted and average to the figure
        ends = re.findall(r"(\d+\.\d+)s?\s*[–-]\s*(\d+\.\d+)s", e["quote"])
        assert any(abs((float(a) + float(b)) / 2 - v) < 0.006 for a, b in ends), (row_id, v)


def test_rows_the_card_cannot_state_are_listed_with_their_reason() -> None:
    stated = [i for i, e in ROWS.items() if e.get("card_cannot_state")]
    assert len(stated) == 3  # verl's checkpoint-engine benchmark; the reshard and checkpoint-engine rows map now
    for row_id in stated:
        with pytest.raises(S.Unmapped) as got:
            S.map_rl(ROWS[row_id])
        assert got.value.status == "not_representable"
        assert got.value.reasons[0] == ROWS[row_id]["card_cannot_state"]


def test_card_cannot_state_blocks_any_rl_entry() -> None:
    """The harness reads the field for RL entries as it does for training entries (a general field)."""
    base = next(e for e in S.load_entries(S.RL_DATA) if e["id"] == "verl-v1-weight-sync-qwen25-32b-h100-2p2n-nccl")
    S.map_rl(base)  # maps as it is
    x = copy.deepcopy(base)
    x["card_cannot_state"] = "a run setting no card field states"
    with pytest.raises(S.Unmapped) as got:
        S.map_rl(x)
    assert got.value.status == "not_representable" and got.value.reasons == [x["card_cannot_state"]]


def test_search_r1_rows_wait_for_a_measured_prompt() -> None:
    skyrl = [e for e in ROWS.values() if e["framework"] == "skyrl"]
    assert len(skyrl) == 5
    for e in skyrl:
        with pytest.raises(S.Unmapped) as got:
            S.map_rl(e)
        assert got.value.status == "skipped"
        assert e["data"]["prompts_per_step"] == 512 and e["data"]["n_per_prompt"] == 5
        assert e["measured"]["phases_s"]["actor_update"] and e["measured"]["phases_s"]["old_logprob"]


def test_default_refit_rows_without_a_layout_are_skipped_with_the_rule_only() -> None:
    for row_id in ("nemorl-pr1379-nccl-refit-qwen3-235b-a22b-h100", "nemorl-pr1379-nccl-refit-dsv3-h100"):
        with pytest.raises(S.Unmapped) as got:
            S.map_rl(ROWS[row_id])
        assert got.value.status == "skipped" and "layouts" in got.value.reasons[0]


def test_refit_blog_row_is_refused_for_its_unpublished_pipeline_split() -> None:
    card, _ = S.map_rl(ROWS["nemorl-refitblog-v03-dsv3-ep64pp8-vllm-tp64-512g"])
    assert card["rollout"]["placement"] == "colocate" and card["rollout"]["tensor_parallel"] == 64
    with pytest.raises(S.Unmapped) as got:
        S.plan_card(card)
    assert got.value.status == "not_representable" and "does not divide the 61 layers" in got.value.reasons[0]


def test_the_rule_scores_the_rows_whose_model_the_catalog_has() -> None:
    rules = {i: S.rl_rule_figures(e, S.rule_params(e["model"], None)[0])["weight_sync"]
             for i, e in ROWS.items() if e["kind"] == "rl_phase"}
    scored = {i for i, v in rules.items() if v}
    assert len(scored) == 15  # 14, and checkpoint-engine's GLM-4.5-Air broadcast since the catalog holds GLM-4.5-Air
    # bf16 weight bytes over one per-direction link: DeepSeek-V3 on H100, 2 x 671.0e9 B / 450 GB/s
    assert rules["nemorl-nccl-reshard-refit-dsv3-h100-pp16ep16-tp32dp8"] == pytest.approx(2.98, abs=0.01)


@pytest.mark.parametrize("row_id", sorted(i for i in ROWS if i.startswith(("nemorl-nccl-reshard-refit-",
                                                                          "ckptengine-broadcast-"))))
def test_transport_rows_map_to_their_weight_transport(row_id: str) -> None:
    """rollout.weight_transport states NeMo RL's NCCL reshard refit and checkpoint-engine's Broadcast update
    (compute.sync); the rows whose model the catalog has, or whose entry gives the shape (Kimi-K2 and GLM-4.5-Air:
    model_config from miles' model arguments, test_step_times_rl_miles_p2p_transfer), map and plan a weight sync; the others
    wait for the model."""
    e = ROWS[row_id]
    want = "nccl_reshard" if row_id.startswith("nemorl") else "checkpoint_engine"
    assert e["rollout"]["weight_transport"] == want and not e.get("card_cannot_state")
    if e["model"] == "Qwen/Qwen3.5-397B-A17B":
        with pytest.raises(S.Unmapped) as got:
            S.map_rl(e)
        assert "not in the catalog" in got.value.reasons[0]
        return
    card, _ = S.map_rl(e)
    assert card["rollout"]["weight_transport"] == want
    assert 0 < S.plan_card(card).parts["time.weight_sync"] < 60
