"""benchmarks/step_times.py, the Qwen3-235B-A22B row of miles' P2P weight-transfer table
(published_rl_times_nemo_rl_v03_miles_p2p.json, miles-p2p-weight-sync-qwen3-235b-a22b-h100-8p8n-nccl): the table's 'PP=4' cannot
split 94 layers evenly; the row's own profiling script (radixark/miles
examples/infra_features/p2p_weight_transfer/run-qwen3-235B-A22B-16node-profile.sh
@748935dc7155d4990d02d62f6061c50ef8054051) passes ``--decoder-last-pipeline-num-layers 22``, so the entry states
the 24/24/24/22 split and the row maps and plans its weight sync instead of being refused."""

from __future__ import annotations

import json

from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_miles_p2p_pipeline_split")
DATA = S.RL_DATA.parent / "published_rl_times_nemo_rl_v03_miles_p2p.json"
ROW = "miles-p2p-weight-sync-qwen3-235b-a22b-h100-8p8n-nccl"
E = {e["id"]: e for e in json.loads(DATA.read_text())}[ROW]


def test_entry_states_the_scripts_last_stage_and_cites_it() -> None:
    tr = E["train"]
    assert (tr["tp"], tr["pp"], tr["cp"], tr["ep"]) == (4, 4, 2, 16)
    assert tr["num_layers_in_last_pipeline_stage"] == 22
    assert "run-qwen3-235B-A22B-16node-profile.sh @748935dc7155d4990d02d62f6061c50ef8054051" in E["note"]
    assert "DECODER_LAST_PIPELINE_NUM_LAYERS=22" in E["note"]


def test_row_maps_with_uneven_last_stage_and_plans_the_sync() -> None:
    card, _ = S.map_rl(E)
    p = card["parallel"]
    assert p["pipeline_parallel"] == 4 and p["pipeline_last_stage_layers"] == 22
    # the script's broadcast-mode buffer, 1 GiB (BUFFER_SIZE), as the page's '1GB transfer bucket'
    assert card["rollout"]["weight_sync_bucket_mib"] == 1024
    planned = S.plan_card(card)
    assert planned.parts.get("time.weight_sync", 0) > 0
