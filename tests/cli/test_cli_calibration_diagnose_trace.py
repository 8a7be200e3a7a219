"""`diagnose` and `trace` plan with the calibration `plan` uses (--calibration, else $TRAINFIT_CALIBRATION or the
default file): their plan lines, re-planned fixes and trace's plan column were made with the default rates."""

from __future__ import annotations

import json

import pytest

from trainfit.calibration import load_found_calibration, make_calibration, save_calibration
from trainfit.cli.main import main
from trainfit.plan import make_plan
from trainfit.cli.common import load_card

GRPO = {"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "trl", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8},
        "rollout": {"num_generations": 8, "prompts_per_step": 64, "prompt_len": 512, "response_len": 4096,
                    "gpu_memory_utilization": 0.9}}
FRAG = {"a100-80gb": {"fragmentation_share": 3.0}}
"""An RL plan's reserved is allocated + rounding + share x the largest transient (calibration/memory.py)."""
TINY = ("model={config: {model_type: qwen3, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,"
        " num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 512, tie_word_embeddings: false}}")


def _diagnose(argv, capsys) -> dict:
    assert main(["diagnose", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _plan_line(plan) -> str:
    return f"plan: peak {plan.peak.device / 2**30:.2f} GiB in {plan.peak.phase.value}"


def test_diagnose_plans_and_replans_with_the_calibration(tmp_path, capsys, monkeypatch):
    card = tmp_path / "card.yaml"
    card.write_text(json.dumps(GRPO))
    path = save_calibration(make_calibration(FRAG), tmp_path / "cal.json").path
    cal = load_found_calibration(path)
    run_card = load_card(card, {}, [])  # as the command reads it (the preset applied)
    calibrated, default = make_plan(run_card, calibration=cal), make_plan(run_card)
    assert calibrated.peak.device != default.peak.device
    out = _diagnose(["oom-generation", "--card", str(card), "--calibration", path], capsys)
    assert any(n.startswith(_plan_line(calibrated)) for n in out["notes"])
    assert all(f["peak_before_bytes"] == calibrated.peak.device for f in out["fixes"])
    monkeypatch.setenv("TRAINFIT_CALIBRATION", path)  # the default file, as plan reads it
    log = tmp_path / "oom.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity"
                   " of 79.25 GiB of which 1.00 GiB is free.")
    out = _diagnose(["--log", str(log), "--card", str(card)], capsys)
    assert any(n.startswith(_plan_line(calibrated)) for n in out["notes"])


def test_diagnose_refuses_a_missing_calibration_in_one_line(tmp_path, capsys):
    assert main(["diagnose", "oom-load", "--calibration", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainfit: error: --calibration: no such file") and err.count("\n") == 1


@pytest.mark.trace
def test_trace_time_plan_column_and_rates_use_the_calibration(tmp_path, capsys):
    pytest.importorskip("torch")
    path = save_calibration(make_calibration({"a100-40gb": {"matmul_flops_per_s": 1e12}}), tmp_path / "cal.json").path
    argv = ["trace", "--set", TINY, "--gpus", "1", "--strategy", "single", "--seq", "64", "--time", "--json"]
    assert main(argv) == 0
    base = {p["name"]: p for p in json.loads(capsys.readouterr().out)["seconds"]["phases"]}
    assert main([*argv, "--calibration", path]) == 0
    slow = {p["name"]: p for p in json.loads(capsys.readouterr().out)["seconds"]["phases"]}
    assert slow["forward"]["gemm_s"] > 10 * base["forward"]["gemm_s"]  # the traced ops at the calibrated rate
    assert slow["backward"]["plan_seconds"] > base["backward"]["plan_seconds"]  # and the plan column


def test_trace_memory_plan_column_uses_the_calibration(tmp_path, capsys, monkeypatch):
    import trainfit.plan as plan_module

    path = save_calibration(make_calibration(FRAG), tmp_path / "cal.json").path
    seen = []

    def spy(card, **kwargs):
        seen.append(kwargs.get("calibration"))
        raise SystemExit(0)  # stop before the trace itself

    monkeypatch.setattr(plan_module, "make_plan", spy)
    with pytest.raises(SystemExit):
        main(["trace", "--set", TINY, "--gpus", "1", "--strategy", "single", "--seq", "64", "--calibration", path])
    assert seen and seen[0] is not None and seen[0].path == path
