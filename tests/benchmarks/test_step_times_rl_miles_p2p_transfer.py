"""benchmarks/step_times.py, held-out weight-sync rows of published_rl_times_miles_p2p_transfer.json (the NCCL broadcast column
of miles' P2P weight-transfer table for the models not recorded before: Kimi-K2, GLM-4.5-Air, GLM-4.7-Flash, GLM-5
and GLM-5's 4-layer cut, radixark/miles docs/advanced/p2p-weight-transfer.md @748935dc), and the model shapes that
also let the checkpoint-engine Kimi-K2 / GLM-4.5-Air rows of published_rl_times_sync_engines_skyrl.json plan: the file is picked
up, its ids are unique across the RL files, every entry cites its source and its profiling script at the commit and
quotes its figure, the inline shapes reproduce the table's 'Total Param' column, and every row maps to the split
layout and bucket its script sets.

First contact (2026-12-03, before rollout.weight_sync_bucket_mib, miles' 512 MiB buckets planned): Kimi-K2 +40.7 %,
GLM-4.5-Air +59.9 %, GLM-4.7-Flash +1.7 %, GLM-5 -10.2 %, GLM-5 4-layer +17.5 %; the checkpoint-engine rows the
shapes unlock -4.7 % / -28.5 % (Kimi-K2, 16 / 256 H20) and -14.8 % (GLM-4.5-Air). With the scripts' buckets on the card:
+14.8, +37.3, -5.1, -24.1, +2.4 %."""

from __future__ import annotations

import json
import re

import pytest
from step_times_module import file_ids, load_step_times

from trainfit.plan import make_plan
from trainfit.spec.card import RunCard

S = load_step_times("trainfit_bench_step_times_rl_miles_p2p_transfer")
DATA = S.RL_DATA.parent / "published_rl_times_miles_p2p_transfer.json"
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
S14 = {e["id"]: e for e in json.loads((S.RL_DATA.parent / "published_rl_times_sync_engines_skyrl.json").read_text())}
COMMIT = "748935dc7155d4990d02d62f6061c50ef8054051"
# the table's 'Total Param' column, billions (Kimi-K2 '1T'); GLM-5 is planned without its DSA indexer (~0.1 %)
TOTAL_B = {"kimi-k2": 1000, "glm45-air": 106, "glm47-flash": 30, "glm5-h100": 744}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(S, S.RL_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 5
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_cites_the_page_and_its_script_and_quotes_its_figure(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert src["repo"] == "radixark/miles" and src["path"] == "docs/advanced/p2p-weight-transfer.md"
    assert src["commit"] == COMMIT and re.fullmatch(r"\d{4}-\d{2}-\d{2}", src["date"])
    assert src["config_source"].count(f"@{COMMIT}") == 2
    ms = e["measured"]["phases_s"]["weight_sync"] * 1000
    assert f"{ms:,.1f}" in e["quote"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rows_map_to_the_scripts_split_layout_and_bucket(row_id: str) -> None:
    e = ROWS[row_id]
    tr, ro = e["train"], e["rollout"]
    assert ro["train_gpus"] + ro["rollout_gpus"] == e["gpus"] == 8 * e["nodes"]
    assert ro["train_gpus"] % (tr["tp"] * tr["pp"] * tr["cp"]) == 0 and ro["rollout_gpus"] % ro["tp"] == 0
    card, _ = S.map_rl(e)
    assert card["preset"] == "miles" and card["rollout"]["placement"] == "split"
    assert card["rollout"]["weight_sync_bucket_mib"] == ro["weight_sync_bucket_mib"]
    assert card["parallel"].get("pipeline_last_stage_layers") == tr.get("num_layers_in_last_pipeline_stage")
    planned = S.plan_card(card)
    assert planned.parts.get("time.weight_sync", 0) > 0


@pytest.mark.parametrize("key", sorted(TOTAL_B))
def test_inline_shapes_reproduce_the_tables_total_parameters(key: str) -> None:
    (e,) = [e for i, e in ROWS.items() if key in i]
    card, _ = S.map_rl(e)
    total_b = make_plan(RunCard.model_validate(card)).params_total / 1e9
    assert total_b == pytest.approx(TOTAL_B[key], rel=0.03)


def test_checkpoint_engine_rows_plan_with_the_same_shapes() -> None:
    kimi = ROWS["miles-p2p-weight-sync-kimi-k2-h100-32p32n-nccl"]["model_config"]
    air = ROWS["miles-p2p-weight-sync-glm45-air-h100-4p4n-nccl"]["model_config"]
    assert air["model_type"] == "qwen2_moe"  # the miles row keeps its inline shape
    for row_id, shape in (("ckptengine-broadcast-kimi-k2-fp8-h20-16g-tp16", kimi),
                          ("ckptengine-broadcast-kimi-k2-fp8-h20-256g-tp16", kimi)):
        e = S14[row_id]
        assert e["model_config"] == shape and "scripts/models/" in e["note"]
        card, _ = S.map_rl(e)
        assert S.plan_card(card).parts.get("time.weight_sync", 0) > 0
    # GLM-4.5-Air's checkpoint-engine row plans from the catalog's glm4_moe entry (its own family), not a shape
    e = S14["ckptengine-broadcast-glm45-air-bf16-h800-8g-tp8"]
    assert e["model_config"] is None and "catalog" in e["note"]
    card, _ = S.map_rl(e)
    assert S.plan_card(card).parts.get("time.weight_sync", 0) > 0
