"""rollout.vllm_engine and rollout.engine_outputs are vLLM's: refused on another engine (an SGLang card with
vllm_engine v0 was timed with vLLM V0's in-process host terms)."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import VllmEngineGeneration


def _card(**rollout) -> dict:
    ro = {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 512, "response_len": 1024,
          "response_len_mean": 400, **rollout}
    return {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}, "rollout": ro}


@pytest.mark.parametrize("engine", ["sglang", "hf"])
def test_v0_is_refused_on_another_engine(engine):
    with pytest.raises(CardError) as err:
        load_card_dict(_card(engine=engine, vllm_engine="v0"))
    msg = str(err.value)
    assert msg.startswith("rollout.vllm_engine: 'v0'") and f"engine is '{engine}'" in msg and "allowed with it: v1" in msg
    assert "\n" not in msg


def test_the_default_is_accepted_on_any_engine():
    assert load_card_dict(_card(engine="sglang", vllm_engine="v1")).rollout.vllm_engine is VllmEngineGeneration.V1
    assert load_card_dict(_card(vllm_engine="v0")).rollout.vllm_engine is VllmEngineGeneration.V0


@pytest.mark.parametrize(("rollout", "why"), [
    ({"engine": "sglang"}, "engine is 'sglang', vllm_engine 'v1'"),
    ({"vllm_engine": "v0"}, "engine is 'vllm', vllm_engine 'v0'"),
])
def test_engine_outputs_is_vllm_v1s(rollout, why):
    with pytest.raises(CardError) as err:
        load_card_dict(_card(engine_outputs="final_only", **rollout))
    msg = str(err.value)
    assert msg.startswith("rollout.engine_outputs: 'final_only'") and why in msg and "\n" not in msg
    assert load_card_dict(_card(engine_outputs="final_only")).rollout.engine_outputs.value == "final_only"



def test_cumulative_outputs_need_the_multiprocess_core():
    """AsyncLLM (cumulative outputs) always runs its engine core in its own process (vllm/v1/engine/async_llm.py
    l.118-123 of the vLLM 0.9.0 wheel: AsyncMPClient / DPAsyncMPClient)."""
    with pytest.raises(CardError) as err:
        load_card_dict(_card(engine_outputs="cumulative", engine_multiprocess=False))
    msg = str(err.value)
    assert msg.startswith("rollout.engine_outputs: 'cumulative'") and "engine_multiprocess is false" in msg
    assert "allowed with it: final_only, null" in msg and "\n" not in msg
    assert load_card_dict(_card(engine_outputs="final_only", engine_multiprocess=False)).rollout.engine_outputs
    assert load_card_dict(_card(engine_outputs="cumulative")).rollout.engine_multiprocess


def test_the_description_says_no_copy_is_made():
    from trainfit.spec.card import RolloutSection
    text = RolloutSection.model_fields["engine_outputs"].description
    assert "a copy of every token" not in text and "rather than a copy" in text
