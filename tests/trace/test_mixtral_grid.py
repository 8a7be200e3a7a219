"""trainfit plan vs the fake-tensor trace for Mixtral (``mixtral``): allocated peak within 2%, same peak phase.

The grid's MoE cases (``tests/trace/test_grid.py``) on a small Mixtral (added to ``trainfit.accuracy.grid.ARCHS`` for
this module's tests only), plus LoRA on the attention projections: every layer a sparse block of 8 experts, top-2,
routing weights kept in fp32 (transformers v5.24.0 models/mixtral/modeling_mixtral.py l.96-111)."""

from dataclasses import replace

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy import grid
from trainfit.accuracy.grid import GridCase
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02

MIXTRAL = {"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 384, "num_hidden_layers": 4,
           "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 8192,
           "tie_word_embeddings": False, "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None}
"""Mixtral's layout at grid size: its intermediate_size is every expert's width."""

CASES = [replace(c, arch="mixtral") for c in grid.GRID if c.arch == "qwen3_moe"] + [
    GridCase("mixtral", scope="lora", seq_len=512), GridCase("mixtral", scope="lora", ckpt=True, seq_len=1024)]
"""The MoE grid cases, and LoRA all-linear (the grid's LoRA targets): PEFT wraps the attention projections, the
router's weight and the fused experts (v4 names w1/w3/w2, ``trainfit.memory.lora``)."""


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "mixtral", MIXTRAL)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


def test_half_of_a_fused_pair_is_refused(monkeypatch):
    """PEFT 0.21.2 refuses w1 without w3 (both fuse into gate_up_proj): so does the plan."""
    monkeypatch.setitem(grid.ARCHS, "mixtral", MIXTRAL)
    card = GridCase("mixtral", scope="lora", seq_len=512).card()
    card["lora"]["targets"] = ["w1", "w2"]
    with pytest.raises(CardError, match="w1 and w3"):
        make_plan(load_card_dict(card))


EP_CASES = [replace(c, arch="mixtral") for c in grid.EP_GRID if c.arch == "qwen3_moe"][:2]
"""Expert parallel (``trainfit.trace.expert_parallel``: experts split over the ranks, all-to-all dispatch and
combine around transformers' grouped experts), rank 0 against the plan."""


@pytest.mark.trace
@pytest.mark.parametrize("case", EP_CASES, ids=[c.name for c in EP_CASES])
def test_expert_parallel_matches_the_plan(case, monkeypatch):
    from trainfit.trace.expert_parallel import trace_expert_parallel

    monkeypatch.setitem(grid.ARCHS, "mixtral", MIXTRAL)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_expert_parallel(TraceRequest(**case.trace_kwargs()), expert_parallel=case.expert_parallel)
    planned = {p.phase.value: float(p.tensor_bytes) for p in plan.phases}
    for ph in traced.phases:
        err = (planned[ph.name] - ph.peak_bytes) / ph.peak_bytes
        print(f"{case.name} {ph.name}: {err:+.3%}")
        assert abs(err) < TOLERANCE, ph.name
