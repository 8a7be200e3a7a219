"""``parallel.moe_experts: loop_v5`` (transformers v5's eager experts) is refused, in one line naming the field and
what is allowed, where that loop does not run: a ``software.transformers`` 4.x pin, a dense model, gpt-oss (whose
experts run their own loop)."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import check_model_options, make_plan
from trainfit.spec.card import RunCard, load_card_dict


def _card(model="Qwen/Qwen3-30B-A3B", software=None, **par):
    d = {"model": model, "method": "sft", "hardware": {"gpu": "h200", "gpus_per_node": 8},
         "parallel": {"strategy": "fsdp", "moe_experts": "loop_v5", **par},
         "batch": {"micro_batch_size": 1, "seq_len": 2048}, "attention": "sdpa"}
    if software:
        d["software"] = software
    return load_card_dict(d)


def _one_line(exc) -> str:
    text = str(exc.value).strip()
    assert "\n" not in text
    return text


@pytest.mark.parametrize("pin", ["4.57.6", "4.x", "<5"])
def test_refused_with_a_transformers_4_pin(pin):
    with pytest.raises(CardError) as exc:
        _card(software={"transformers": pin})
    text = _one_line(exc)
    assert "parallel.moe_experts" in text and "transformers >= 5" in text and "loop, loop_all" in text
    assert "grouped," not in text  # an explicit grouped is refused under a 4.x pin (plan.resolve.transformers_v4_experts)


@pytest.mark.parametrize("pin", ["5.24.0", ">=5.0", None])
def test_accepted_with_a_v5_pin_or_none(pin):
    card = _card(software={"transformers": pin} if pin else None)
    assert isinstance(card, RunCard)


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "openai/gpt-oss-20b"])
def test_refused_on_a_dense_model_and_on_gpt_oss(model):
    card = _card(model=model)
    for call in (make_plan, check_model_options):
        with pytest.raises(CardError) as exc:
            call(card)
        text = _one_line(exc)
        assert text.startswith("parallel.moe_experts: loop_v5") and "allowed for it: grouped" in text


def test_field_description_says_what_is_accepted():
    desc = RunCard.model_fields["parallel"].annotation.model_fields["moe_experts"].description
    assert "transformers >= 5" in desc and "not under zero3" in desc and "gpt-oss" in desc
