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
# trainfit.fit(fx={('USD','CNY'): 10**400}): OverflowError from math.isfinite

def test_fit_api_refuses_an_integer_rate_beyond_float():
    import trainfit
    from trainfit.errors import CardError

    with pytest.raises(CardError) as exc:
        trainfit.fit(None, gpus=["rtx4090"], max_gpus=1, steps=10, fx={("USD", "CNY"): 10**400})
    assert "fx[('USD', 'CNY')]: a finite rate > 0 whose reverse (1/rate) is finite" in str(exc.value)
    assert "\n" not in str(exc.value)
