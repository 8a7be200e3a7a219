"""A calibration's engine host constants (``compute.rates.ENGINE_HOST_FIELDS``) count as applied only where the card's
rollout engine reads them, and the calibration line names that engine. ``rollout.engine: hf`` reads none: its step
passes ``engine_s_per_sequence=0.0`` and a v0 step, which zeroes the frontend
(``compute.static_generation.static_batch_generation_time``, ``compute.decode_step._step_model``); SGLang reads the
shared ones (``engine_s_per_sequence``, ``frontend_s_per_step``) through the same ``decode_step`` as vLLM."""

import pytest

from trainfit.calibration import make_calibration
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

GPU = "a100-80gb"
MIXED = {GPU: {"matmul_flops_per_s": 2e14, "engine_s_per_sequence": 1.6e-4, "vllm_eager_s_per_kernel": 3e-5,
               "frontend_s_per_step": 1e-3}}


def _plan(engine: str):
    card = load_card_dict({"model": "Qwen/Qwen3-8B", "method": "grpo",
                           "hardware": {"gpu": GPU, "gpus_per_node": 8}, "rollout": {"engine": engine}})
    return make_plan(card, calibration=make_calibration(MIXED))


@pytest.mark.parametrize(("engine", "applied", "label"), [
    ("vllm", {"matmul_flops_per_s", "engine_s_per_sequence", "vllm_eager_s_per_kernel", "frontend_s_per_step"},
     "; vLLM engine host"),
    ("sglang", {"matmul_flops_per_s", "engine_s_per_sequence", "frontend_s_per_step"}, "; SGLang engine host"),
    ("hf", {"matmul_flops_per_s"}, None),
])
def test_engine_host_constants_count_for_the_engines_that_read_them(engine, applied, label):
    p = _plan(engine)
    assert {k for k, _ in p.calibration.applied} == applied
    line = next(n for n in p.to_dict()["assumptions"] if n.startswith("calibration"))
    if label is None:
        assert "engine host" not in line
    else:
        assert label in line
        assert ("vLLM" in line) == (engine == "vllm")



def test_v0_and_v1_vllm_count_only_their_own_per_sequence_constant():
    cal = make_calibration({GPU: {"engine_s_per_sequence": 1.6e-4, "engine_v0_s_per_sequence": 9e-5}})

    def applied(engine):
        card = load_card_dict({"model": "Qwen/Qwen3-8B", "method": "grpo", "hardware": {"gpu": GPU, "gpus_per_node": 8},
                               "rollout": {"engine": "vllm", "vllm_engine": engine}})
        return {k for k, _ in make_plan(card, calibration=cal).calibration.applied}

    assert applied("v1") == {"engine_s_per_sequence"}
    assert applied("v0") == {"engine_v0_s_per_sequence"}
