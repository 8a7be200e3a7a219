"""`trainfit trace --time`: the whole text output against a golden file (seconds masked), and the JSON.

Regenerate the golden file after an intended change with TRAINFIT_UPDATE_GOLDEN=1.
"""

import json
import os
import re
from pathlib import Path

import pytest

from trainfit.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("peft")

pytestmark = pytest.mark.trace

GOLDEN = Path(__file__).parent / "golden"
SMALL = ("model={config: {model_type: qwen3, hidden_size: 512, intermediate_size: 1536, num_hidden_layers: 4,"
         " num_attention_heads: 8, num_key_value_heads: 4, head_dim: 64, vocab_size: 8192, tie_word_embeddings: false}}")
ARGS = ["trace", "--set", SMALL, "--gpus", "1", "--strategy", "single", "--seq", "512", "--time"]


def test_time_text_output(capsys):
    assert main([*ARGS, "--ckpt"]) == 0
    out = re.sub(r"in \d+\.\d s", "in X.X s", capsys.readouterr().out)
    path = GOLDEN / "trace_time_small_qwen3.txt"
    if os.environ.get("TRAINFIT_UPDATE_GOLDEN"):
        path.write_text(out)
    assert out == path.read_text()


def test_time_json(capsys):
    assert main([*ARGS, "--no-ckpt", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in obj["phases"]] == ["forward", "backward", "optimizer_step"]
    assert obj["layers"] == 4 and obj["tokens"] == 512 and obj["extrapolated"] and obj["layers_traced"] == [2, 3]
    fwd, bwd, opt = obj["phases"]
    assert fwd["gemms"] == 4 * 7 + 1 and bwd["gemms"] == 2 * fwd["gemms"] and bwd["recompute"]["kernels"] == 0
    assert fwd["gemm_flops"] == 2 * 512 * (4 * (512 * 512 * 2 + 512 * 256 * 2 + 3 * 512 * 1536) + 8192 * 512)
    assert opt["kernels"] == 2  # fused AdamW + the step counters' foreach add
    for p in obj["phases"]:
        rows = [r for r in obj["places"] if r["phase"] == p["name"]]
        recs = [r for r in obj["records"] if r["phase"] == p["name"]]
        for key in ("ops", "kernels", "gemm_flops", "memory_bytes"):
            assert sum(r[key] for r in rows) == p[key]
        assert sum(r["calls"] for r in recs) == p["ops"]
        assert sum(o["ops"] for o in obj["by_op"] if o["phase"] == p["name"]) == p["ops"]
    lm_head = sorted([[1, 512, 8192, 512], [1, 512, 512, 8192], [1, 8192, 512, 512]])
    assert sorted(g["shape"] for g in obj["gemm_shapes"][:3]) == lm_head and obj["notes"]


def test_time_refuses_fsdp_in_one_line(capsys):
    rc = main(["trace", "--set", SMALL, "--gpus", "8", "--strategy", "fsdp", "--seq", "64", "--time"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "world_size 1" in err
