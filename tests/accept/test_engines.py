"""The generation-path choice and the vLLM glue (against a fake vLLM on transformers: vLLM is not
installed here, so these prove trainfit's calls, the sync order and the checks, not vLLM itself)."""

import os
import sys
from pathlib import Path

import pytest

from trainfit.accept.engines import VLLM_MODULE_ENV, resolve_engine, vllm_available
from trainfit.accept.run import run_accept

FAKE = str(Path(__file__).parent / "fake_vllm")
STAGES = ("trajectories", "update", "generation_sync", "resume")


@pytest.fixture
def fake_vllm(monkeypatch):
    monkeypatch.syspath_prepend(FAKE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (FAKE, os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.setenv(VLLM_MODULE_ENV, "fake_vllm_api")
    yield
    sys.modules.pop("fake_vllm_api", None)


def _by_name(rec):
    return {c["name"]: c for c in rec["checks"]}


@pytest.mark.skipif(vllm_available(), reason="a real vLLM is installed")
def test_resolve_without_vllm():
    assert resolve_engine("auto", "cpu") == ("hf", None)
    assert resolve_engine("hf", "cuda") == ("hf", None)
    for engine, device in (("auto", "cuda"), ("vllm", "cpu")):
        name, why = resolve_engine(engine, device)
        assert name == "hf" and "vLLM is not installed" in why
    with pytest.raises(ValueError):
        resolve_engine("sglang", "cpu")


def test_resolve_with_vllm(fake_vllm):
    assert resolve_engine("auto", "cuda") == ("vllm", None)
    assert resolve_engine("auto", "cpu") == ("hf", None)
    assert resolve_engine("vllm", "cpu") == ("vllm", None)


@pytest.mark.skipif(vllm_available(), reason="a real vLLM is installed")
def test_vllm_asked_but_missing_is_a_skip_not_a_pass():
    rec = run_accept(engine="vllm", only=("reward_calibration",))
    c = _by_name(rec)["vllm_generation"]
    assert c["status"] == "skipped" and "not installed" in c["evidence"]
    assert rec["engine"] == "hf" and rec["ok"]


def test_vllm_path_closes_the_loop(fake_vllm):
    rec = run_accept(engine="vllm", only=STAGES)
    checks = _by_name(rec)
    assert rec["engine"] == "vllm"
    assert "vllm_generation" not in checks
    for name in STAGES:
        assert checks[name]["status"] == "pass", checks[name]
    assert "'vllm'" in checks["generation_sync"]["evidence"]


def test_vllm_sync_that_drops_the_weights_fails(fake_vllm, monkeypatch):
    monkeypatch.setenv("TRAINFIT_FAKE_VLLM_DROP_WEIGHTS", "1")
    rec = run_accept(engine="vllm", only=("generation_sync",))
    assert _by_name(rec)["generation_sync"]["status"] == "fail"
    assert not rec["ok"]
