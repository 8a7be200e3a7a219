"""`trainfit plan` with tensor and pipeline parallel: per-rank memory and the worst rank named."""

import json

import pytest

from trainfit.cli.main import main

ARGV = ["plan", "--set", "parallel.tensor_parallel=8", "--set", "parallel.pipeline_parallel=2",
        "--model", "meta-llama/Llama-3.1-70B", "--gpu", "h100-sxm", "--nodes", "2"]


def test_tp8_pp2_llama_70b_names_the_worst_rank(capsys):
    assert main(ARGV) == 0
    out = capsys.readouterr().out
    assert "on 16 x NVIDIA H100" in out
    assert "on rank (tp 0, pp " in out and ", cp 0, ep 0, dp 0)" in out
    assert "per pipeline stage (device peak of its rank's training step): pp 0 " in out and ", pp 1 " in out
    assert "FITS" in out
    assert "model parallel: tp 8, cp 1, pp 2" in out


def test_tp8_pp2_json_has_the_rank(capsys):
    assert main(ARGV + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["worst_rank"]) == {"tp", "pp", "cp", "ep", "dp"}
    assert data["worst_rank"]["pp"] in (0, 1)
    assert len(data["stage_peak_device_bytes"]) == 2
    assert data["peak_gpu_bytes"]["device"] == max(data["stage_peak_device_bytes"])


def test_no_model_parallel_prints_no_rank(capsys):
    assert main(["plan", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["worst_rank"] is None and data["stage_peak_device_bytes"] == []


@pytest.mark.parametrize(("sets", "expected"), [
    (["parallel.tensor_parallel=3", "hardware.gpus_per_node=3"], "parallel.tensor_parallel: 3 does not divide the 32"),
    (["parallel.pipeline_parallel=5", "hardware.gpus_per_node=5"], "does not divide the 36 layers of Qwen/Qwen3-8B"),
    (["parallel.context_parallel=8", "parallel.context_parallel_kind=ulysses", "parallel.tensor_parallel=1",
      "hardware.gpus_per_node=8", "model=meta-llama/Llama-3.1-8B", "batch.seq_len=8192"], None),
])
def test_refusals_exit_2_with_one_line(sets, expected, capsys):
    argv = ["plan"] + [x for s in sets for x in ("--set", s)]
    rc = main(argv)
    out, err = capsys.readouterr()
    if expected is None:
        assert rc == 0, err
        return
    assert rc == 2
    assert expected in err and len(err.strip().splitlines()) == 1
