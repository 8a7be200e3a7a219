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
# TRL: SFTConfig(...) / GRPOConfig(...) store a switch as written and test its truth ('0' is true at run time);
# NeMo RL (and verl) load the YAML untyped: a quoted 'no' stays text and is true. Text is refused, not read reversed.

@pytest.mark.parametrize(("target", "old", "new"), [
    ("trl", TRL_GC, "gradient_checkpointing='0'"),
    ("trl", TRL_GC, "gradient_checkpointing='no'"),
    ("trl", TRL_GC, "gradient_checkpointing='f'"),
    ("trl", TRL_GC, "gradient_checkpointing='t'"),
    ("nemo-rl", NEMO_GC, "activation_checkpointing: 'no'"),
    ("nemo-rl", NEMO_GC, "activation_checkpointing: 'off'"),
    ("verl", VERL_GC, "actor_rollout_ref.model.enable_gradient_checkpointing=Off"),
    ("verl", VERL_GC, "actor_rollout_ref.model.enable_gradient_checkpointing=yes"),
])
def test_import_refuses_a_switch_written_as_text(tmp_path, target, old, new):
    run, out = _import(tmp_path, target, old, new)
    check_run(run, codes=(2,), outputs=(out,))
    assert f"--from {target}: " in run.stderr and "truth" in run.stderr, run.stderr
    assert ("write True or False" if target == "trl" else "write true or false") in run.stderr, run.stderr


@pytest.mark.parametrize(("target", "old", "new", "want"), [
    ("trl", TRL_GC, "gradient_checkpointing=True", True),
    ("trl", TRL_GC, "gradient_checkpointing=1", True),
    ("trl", TRL_GC, "gradient_checkpointing=0", False),
    ("nemo-rl", NEMO_GC, "activation_checkpointing: false", False),
    ("nemo-rl", NEMO_GC, "activation_checkpointing: 0", False),
    ("verl", VERL_GC, "actor_rollout_ref.model.enable_gradient_checkpointing=1", True),
])
def test_import_reads_booleans_and_integers_by_truth(tmp_path, target, old, new, want):
    run, out = _import(tmp_path, target, old, new)
    check_run(run, codes=(0,))
    assert _card(out)["parallel"]["gradient_checkpointing"] is want


# ------------------------------------------------------------------------------------------------
# OpenRLHF's --algo.advantage.estimator has fixed, case-sensitive choices: 'foo' or 'GAE' imported as grpo (exit 0)

@pytest.mark.parametrize("name", ["foo", "GAE", "Group_Norm"])
def test_openrlhf_refuses_an_unknown_estimator(tmp_path, name):
    run, out = _import(tmp_path, "openrlhf", "--algo.advantage.estimator group_norm",
                       f"--algo.advantage.estimator {name}")
    check_run(run, codes=(2,), outputs=(out,))
    assert (f"--from openrlhf: --algo.advantage.estimator: {name!r}; allowed: one of gae, reinforce, rloo,"
            " reinforce_baseline, group_norm, dr_grpo") in run.stderr, run.stderr


# ------------------------------------------------------------------------------------------------
# verl: critic-free estimators (rloo, remax, ...) imported as ppo with a critic; verl builds one only for gae

@pytest.mark.parametrize(("name", "extra", "method"), [
    ("rloo", "", "grpo"), ("remax", "", "grpo"), ("reinforce_plus_plus", "", "grpo"), ("grpo_passk", "", "grpo"),
    ("gae", "", "ppo"), ("rloo", " critic.enable=True", "ppo"),
])
def test_verl_critic_free_estimators_import_as_grpo(tmp_path, name, extra, method):
    run, out = _import(tmp_path, "verl", "algorithm.adv_estimator=grpo", f"algorithm.adv_estimator={name}{extra}")
    check_run(run, codes=(0,))
    assert _card(out)["method"] == method
    if name not in ("gae", "grpo"):
        assert f"algorithm.adv_estimator {name}" in run.stdout + run.stderr + out.read_text()


@pytest.mark.parametrize("name", ["foo", "GRPO"])
def test_verl_refuses_an_unknown_estimator(tmp_path, name):
    run, out = _import(tmp_path, "verl", "algorithm.adv_estimator=grpo", f"algorithm.adv_estimator={name}")
    check_run(run, codes=(2,), outputs=(out,))
    assert f"--from verl: algorithm.adv_estimator: {name!r}; allowed: one of gae, grpo, " in run.stderr, run.stderr


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
