"""`trainfit fit`'s calibration summary (cli/fit_cmd.py ``_calibration``) lists an engine host constant as applied
only where the card's rollout engine reads it (plan/rl_common.py ``engine_host_fields_read``: vLLM's V1 engine
and SGLang read the step, per-sequence and frontend constants, vLLM's V0 engine the step and its own per-sequence
constant and no frontend, transformers ``generate`` and DeepSpeed's Hybrid Engine none), labelled by that engine,
and the time rates only for a kind whose rows have a step time. It listed every engine field on any ppo/grpo card."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainfit.calibration import make_calibration
from trainfit.cli.fit_cmd import _calibration, _calibration_text
from trainfit.plan.rl_common import engine_host_fields_read
from trainfit.spec.card import load_card_dict

ENGINE = {"engine_s_per_step": 0.004, "engine_s_per_sequence": 2e-5, "engine_v0_s_per_sequence": 5e-5,
          "frontend_s_per_step": 0.001, "frontend_cumulative_s_per_sequence": 1e-6, "vllm_eager_s_per_kernel": 2.5e-5,
          "sglang_eager_s_per_kernel": 2.7e-5}
CAL = make_calibration({"a100-40gb": {**ENGINE, "hbm_bytes_per_s": 1.5e12, "fragmentation_share": 0.5}})


def _card(rollout: dict):
    return load_card_dict({"model": "Qwen/Qwen3-8B", "method": "ppo", "hardware": {"gpu": "a100-40gb", "gpus_per_node": 8},
                           "roles": {"critic": "same_as_actor", "reference": "gpu"}, "rollout": rollout})


def _rows(step_seconds):
    return [SimpleNamespace(gpu="a100-40gb", step_seconds=step_seconds)]


@pytest.mark.parametrize(("rollout", "engine", "fields"), [
    ({"engine": "vllm"}, "vLLM", {"engine_s_per_step", "engine_s_per_sequence", "frontend_s_per_step",
                                  "frontend_cumulative_s_per_sequence", "vllm_eager_s_per_kernel"}),
    ({"engine": "vllm", "engine_multiprocess": False}, "vLLM",
     {"engine_s_per_step", "engine_s_per_sequence", "frontend_s_per_step", "vllm_eager_s_per_kernel"}),
    ({"engine": "vllm", "vllm_engine": "v0"}, "vLLM V0", {"engine_s_per_step", "engine_v0_s_per_sequence",
                                                           "vllm_eager_s_per_kernel"}),
    ({"engine": "sglang"}, "SGLang", {"engine_s_per_step", "engine_s_per_sequence", "frontend_s_per_step",
                                      "frontend_cumulative_s_per_sequence", "sglang_eager_s_per_kernel"}),
    ({"engine": "hf"}, None, set()),
])
def test_engine_fields_by_the_cards_engine(rollout, engine, fields):
    card = _card(rollout)
    obj = _calibration(CAL, ["a100-40gb"], card, _rows(12.0))
    applied = obj["applied"]["a100-40gb"]
    assert set(applied) - {"hbm_bytes_per_s", "fragmentation_share"} == fields
    assert applied["hbm_bytes_per_s"] == 1.5e12
    assert obj["engine"] == engine
    text = _calibration_text(obj)
    if engine:
        assert f"{engine} engine host " in text
    else:
        assert "engine host" not in text and "engine_s_per_step" not in text


def test_time_rates_only_with_a_step_time():
    obj = _calibration(CAL, ["a100-40gb"], _card({"engine": "vllm"}), _rows(None))
    assert obj["applied"]["a100-40gb"] == {"fragmentation_share": 0.5}  # no step time: no rate, no engine constant


def test_an_sft_card_reads_no_engine_field():
    sft = load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "a100-40gb"}})
    assert engine_host_fields_read(sft) == ()
    assert set(_calibration(CAL, ["a100-40gb"], sft, _rows(3.0))["applied"]["a100-40gb"]) == {"hbm_bytes_per_s",
                                                                                             "fragmentation_share"}
