"""Findings of a second review of the December 2026 hardening pass (importers, calibrate, the Python API), as explicit
cases (each fails without its fix). As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a
refusal is one line, exit code 2, no traceback and no output file."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzzlib import check_run, run_cli
from test_hardening_2612 import GRPO_CARD, _exported, _put, _record


def _import(tmp_path: Path, target: str, old: str, new: str):
    text = _exported(tmp_path, GRPO_CARD, target)
    assert old in text, text
    path = tmp_path / f"edited.{target}"
    path.write_text(text.replace(old, new, 1))
    out = tmp_path / "imported.yaml"
    return run_cli(["import", str(path), "--from", target, "--out", str(out)]), out


def _card(out: Path) -> dict:
    import yaml

    return yaml.safe_load(out.read_text())


VERL_GC = "actor_rollout_ref.model.enable_gradient_checkpointing=True"
NEMO_GC = "activation_checkpointing: true"
TRL_GC = "gradient_checkpointing=False"


# ------------------------------------------------------------------------------------------------
# calibrate: record.watch a string (AttributeError traceback), device tpu or null (exit 0, time rows used as GPU figures)

@pytest.mark.parametrize(("watch", "fragment"), [
    ("cuda", "record.watch must be a mapping"),
    ({"device": "tpu"}, "record.watch.device must be 'cuda' or 'cpu', got 'tpu'"),
    ({"device": None}, "record.watch.device must be 'cuda' or 'cpu', got None"),
])
def test_calibrate_checks_record_watch_as_compare_does(tmp_path, watch, fragment):
    import yaml

    path = _record(tmp_path, _put("record.watch", watch))
    data = yaml.safe_load(path.read_text())
    data["record"]["step_s"] = 1.0
    path.write_text(yaml.safe_dump([data, {**data, "record": {**data["record"], "step_s": 1.2}}]))
    run = run_cli(["calibrate", str(path), "--out", str(tmp_path / "cal.json")])
    check_run(run, codes=(2,), outputs=(tmp_path / "cal.json",))
    assert fragment in run.stderr and "calibrate: " in run.stderr, run.stderr


def test_an_absent_device_is_cuda_for_calibrates_memory_path():
    from trainfit.calibration.memory import memory_record

    rec = {"watch": {}, "phases": [{"phase": "forward", "measured": {"reserved_bytes": 5.0}}]}
    m = memory_record(None, rec, where="x")
    assert m is not None and m.reserved_bytes == 5.0


# ------------------------------------------------------------------------------------------------
# trainfit.fit(fx={('USD','CNY'): 10**400}): OverflowError from math.isfinite

def test_fit_api_refuses_an_integer_rate_beyond_float():
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError) as exc:
        trainfit.fit(None, gpus=["rtx4090"], max_gpus=1, steps=10, fx={("USD", "CNY"): 10**400})
    assert "fx[('USD', 'CNY')]: a finite rate > 0 whose reverse (1/rate) is finite" in str(exc.value)
    assert "\n" not in str(exc.value)
