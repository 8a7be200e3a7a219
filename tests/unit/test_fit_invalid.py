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
