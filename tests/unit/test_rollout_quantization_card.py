"""rollout.quantization (none | fp8) and rollout.quantization_bf16_modules: validated like the rest of the card."""

from __future__ import annotations

import pytest

from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import RolloutQuantization

H100 = {"gpu": "h100-sxm"}


def test_default_is_the_model_dtype():
    assert load_card_dict({"method": "grpo"}).rollout.quantization is RolloutQuantization.NONE


def test_fp8_on_a_card_with_fp8_tensor_cores():
    card = load_card_dict({"method": "grpo", "hardware": H100,
                           "rollout": {"quantization": "fp8", "quantization_bf16_modules": ["a_proj"]}})
    assert card.rollout.quantization is RolloutQuantization.FP8
    assert card.rollout.quantization_bf16_modules == ["a_proj"]


def test_a_bad_value_names_the_field_and_the_allowed_values(capsys):
    with pytest.raises(CardError) as exc:
        load_card_dict({"method": "grpo", "hardware": H100, "rollout": {"quantization": "int4"}})
    assert str(exc.value) == "rollout.quantization: 'int4' is not allowed; allowed: none or fp8"
    assert main(["plan", "--method", "grpo", "--set", "rollout.quantization=int4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rollout.quantization" in err and "none or fp8" in err and "Traceback" not in err


def test_fp8_needs_fp8_tensor_cores():
    with pytest.raises(CardError, match=r"^rollout\.quantization: fp8 needs fp8 tensor cores, which a100-40gb does"
                                        r" not have; GPUs with them: .*h100-sxm"):
        load_card_dict({"method": "grpo", "hardware": {"gpu": "a100-40gb"}, "rollout": {"quantization": "fp8"}})


def test_fp8_is_the_vllm_engines():
    with pytest.raises(CardError, match=r"^rollout\.quantization: fp8 is vLLM's .* engine 'hf' .*allowed with it:"
                                        r" none$"):
        load_card_dict({"method": "grpo", "hardware": H100, "rollout": {"quantization": "fp8", "engine": "hf"}})


def test_bf16_modules_are_only_read_with_fp8():
    with pytest.raises(CardError, match=r"^rollout\.quantization_bf16_modules: only read with rollout\.quantization:"
                                        r" fp8 \(quantization is 'none'\)$"):
        load_card_dict({"method": "grpo", "hardware": H100, "rollout": {"quantization_bf16_modules": ["a_proj"]}})
    with pytest.raises(CardError, match="empty keyword"):
        load_card_dict({"method": "grpo", "hardware": H100,
                        "rollout": {"quantization": "fp8", "quantization_bf16_modules": [" "]}})


def test_a_keyword_that_names_no_linear_is_refused_by_the_planner():
    from trainfit.plan import make_plan

    card = load_card_dict({"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora", "hardware": H100,
                           "rollout": {"quantization": "fp8", "quantization_bf16_modules": ["a_proj"]}})
    with pytest.raises(CardError, match=r"^rollout\.quantization_bf16_modules: 'a_proj' is in no linear of"
                                        r" Qwen/Qwen3-0\.6B; allowed: parts of .*q_proj"):
        make_plan(card)
