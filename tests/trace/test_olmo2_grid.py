"""trainfit plan vs the fake-tensor trace for OLMo 2 (``olmo2``): allocated peak within 2%, same peak phase.

The cases of ``tests/trace/test_grid.py`` with an OLMo 2 model in ``trainfit.accuracy.grid.ARCHS`` (added here, for
this module's tests only)."""

from dataclasses import replace

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy import grid
from trainfit.accuracy.grid import GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02

OLMO2 = {"model_type": "olmo2", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 48, "vocab_size": 32000,
         "tie_word_embeddings": False, "attention_bias": False}
"""GQA, heads x head_dim (384) wider than hidden: the full-width q/k norms have their own width."""

CASES = [replace(c, arch="olmo2") for c in grid.GRID if c.arch == "qwen3" and c.scope in ("full", "lora")]
"""The grid's qwen3 cases (q/k norms; full and LoRA, eager and SDPA, checkpointing, FSDP over 8) on OLMo 2."""


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "olmo2", OLMO2)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


def test_tensor_parallel_is_refused(monkeypatch):
    """transformers runs OLMo 2's attention gathered to full width on every TP rank (Olmo2Config.base_model_tp_plan):
    not a head shard, so a plan refuses tensor parallelism rather than plan it as one."""
    from trainfit.errors import CardError

    monkeypatch.setitem(grid.ARCHS, "olmo2", OLMO2)
    case = GridCase("olmo2", world_size=2, tensor_parallel=2, sequence_parallel=True, seq_len=512)
    with pytest.raises(CardError, match="OLMo 2"):
        make_plan(load_card_dict(case.card()))
