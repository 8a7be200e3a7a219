"""benchmarks/gpu_calibrate.py is ready for a GPU: its dry run executes the same code on CPU."""

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_calibrate.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_calibrate", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.trace
@pytest.mark.parametrize("only", ["small", "heldout", "heldout2", "heldout3",
                                  pytest.param("heldout4", marks=pytest.mark.slow)])
def test_dry_run_measures_every_case(tmp_path, only):
    mod = _module()
    out = tmp_path / "r.json"
    assert mod.main(["measure", "--dry-run", "--only", only, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["dry_run"] and data["device"] == "cpu"
    grid = [c for c in mod.GRID + mod.HELDOUT + mod.HELDOUT2 + mod.HELDOUT3 + mod.HELDOUT4 if c["size"] == only]
    assert len(data["cases"]) == len(grid)
    for case in data["cases"]:
        assert case["error"] is None, case["error"]
        want = {"load", "logprob"} if case["pass_kind"] == "logprob" else {"load", "forward", "backward", "optimizer_step"}
        assert set(case["measured"]["phases"]) == want
        assert case["measured"]["step_s"] > 0
        assert case["measured"]["params_total"] > 0
        if case.get("profile"):  # CPU: no device kernels, but the profiled step ran and was recorded
            assert case["measured"]["profile"]["profiled_wall_s"] > 0


def test_measure_without_cuda_refuses_without_dry_run(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine measures for real")
    assert _module().main(["measure", "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


def test_heldout4_profiles_every_case_and_runs_the_loops_last():
    """The fourth set profiles each step, and the per-expert loops (the slowest steps) come last, so a timeout
    keeps the rest; a case's ``experts`` (transformers v5's eager experts) reaches the card as
    ``parallel.moe_experts: loop_v5``; its row id keeps the "experts loop" label."""
    from trainfit.accuracy.gpu import card_dict, label

    mod = _module()
    assert all(c.get("profile") for c in mod.HELDOUT4)
    loops = [i for i, c in enumerate(mod.HELDOUT4) if c.get("experts") == "eager"]
    assert loops == list(range(len(mod.HELDOUT4) - len(loops), len(mod.HELDOUT4))) and loops
    case = {**mod.HELDOUT4[loops[0]], "config": None}
    assert card_dict(case)["parallel"]["moe_experts"] == "loop_v5"
    assert label(case).endswith("experts loop")
    plain = {**mod.HELDOUT4[0], "config": None}
    assert "moe_experts" not in card_dict(plain)["parallel"] and not label(plain).endswith("loop")
