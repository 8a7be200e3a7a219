"""`fit`'s invalid count is the exhaustive search's: the time-first screen (``fit_search.screen_time_row``) refuses
what the full plan's memory walk refuses (parameter offload under DeepSpeed ZeRO-1/2,
``plan.terms.zero_param_offload_refusal``), so jobs it never plans in full are still counted. Before, the screen
timed those jobs and the count held only the refusals of the jobs it happened to plan (0 here, 1 exhaustive)."""

import pytest

from trainfit import fit_search
from trainfit.errors import CardError
from trainfit.search import fit

CARD = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "lora", "loss": {"chunked": True},
        "precision": {"optimizer": "adamw"}, "parallel": {"gradient_checkpointing": True, "tensor_parallel_impl": "dtensor"}}
PINNED = frozenset({"model", "method", "scope", "loss.chunked", "precision.optimizer", "parallel.gradient_checkpointing",
                    "parallel.tensor_parallel_impl"})


def test_screened_invalid_count_equals_the_exhaustive_search():
    card = fit_search.deep_copy(CARD) | {"hardware": {"gpus_per_node": 2}, "batch": {"micro_batch_size": 4}}
    pinned = PINNED | {"hardware.gpus_per_node", "batch.micro_batch_size"}
    kw = dict(gpus=["h100-sxm"], max_gpus=2, pinned=pinned, workers=1)
    screened, full = fit(card, **kw), fit(card, **kw, screen=False)
    assert screened.evaluated == full.evaluated
    assert full.invalid > 0 and screened.invalid == full.invalid


def test_the_screen_refuses_zero2_with_parameter_offload():
    base = fit_search.deep_copy(CARD) | {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 2, "nodes": 1}}
    knobs = {"parallel.strategy": "zero2", "parallel.offload": "params_and_optimizer"}
    with pytest.raises(CardError, match="offload_param is ZeRO-3 only"):
        fit_search.screen_time_row(base, knobs, None)
    assert fit_search.screen_time_row(base, knobs | {"parallel.strategy": "fsdp"}, None) is not None


MOE = {"model": "Qwen/Qwen1.5-MoE-A2.7B", "method": "sft", "scope": "lora", "software": {"transformers": "4.57.6"},
       "hardware": {"gpu": "h200", "gpus_per_node": 1, "nodes": 1}, "parallel": {"strategy": "single"},
       "batch": {"micro_batch_size": 1, "seq_len": 2048}}


def test_the_screen_times_a_transformers_4_pin_as_the_plan_does():
    """A transformers < 5 pin runs the grouped default as the 4.x loop (plan.resolve.transformers_v4_experts), so the
    screen times that loop (about 5 s here, not the grouped experts' 0.3 s), and an explicit grouped under the pin is
    refused (counted invalid), as make_plan refuses it."""
    from trainfit.plan import make_plan
    from trainfit.search import parallel_of
    from trainfit.spec.card import load_card_dict

    row = fit_search.screen_time_row(MOE, {}, None)
    plan = make_plan(load_card_dict(MOE))
    assert row is not None and row.step_seconds == plan.step_seconds > 1.0
    assert row.parallel == parallel_of(plan.card.parallel)
    with pytest.raises(CardError, match="parallel.moe_experts: grouped"):
        fit_search.screen_time_row(MOE, {"parallel.moe_experts": "grouped"}, None)
