"""A pipeline stage under FSDP2 (torch.distributed.pipelining with fully_shard) keeps its unsharded gradients and its
gathered parameters until its last backward (``plan.fsdp_no_sync.pipeline_fsdp2_holds_unsharded``)."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.plan.fsdp_no_sync import pipeline_fsdp2_holds_unsharded
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Phase

GIB = 2**30


def _card(*, version: str = "fsdp2", pp: int = 2, strategy: str = "fsdp"):
    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": strategy, "fsdp_version": version, "pipeline_parallel": pp,
                     "gradient_checkpointing": True},
        "precision": {"weights": "fp32", "grads": "fp32"},
        "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 4}})


@pytest.mark.parametrize(("version", "pp", "strategy", "expected"), [
    ("fsdp2", 2, "fsdp", True),
    ("fsdp1", 2, "fsdp", False),
    ("fsdp2", 1, "fsdp", False),
])
def test_resolver(version: str, pp: int, strategy: str, expected: bool) -> None:
    assert pipeline_fsdp2_holds_unsharded(_card(version=version, pp=pp, strategy=strategy)) is expected


def _phase(plan, phase: Phase):
    return next(p for p in plan.phases if p.phase is phase)


def test_stage_holds_unsharded_grads_and_gathered_params() -> None:
    """Same stage, FSDP1 (reduce-scatter per backward, units resharded) vs FSDP2 under torch's PipelineStage: the
    backward holds the stage's fp32 gradients unsharded (8x the 8-way shards) and the whole stage gathered; the
    optimizer step reads the same shards in both."""
    one, two = make_plan(_card(version="fsdp1")), make_plan(_card(version="fsdp2"))
    g1 = _phase(one, Phase.BACKWARD).components["gradients"]
    g2 = _phase(two, Phase.BACKWARD).components["gradients"]
    assert g2 == pytest.approx(8 * g1, rel=0.02)
    assert _phase(two, Phase.OPTIMIZER_STEP).components["gradients"] == pytest.approx(
        _phase(one, Phase.OPTIMIZER_STEP).components["gradients"], rel=1e-6)
    # 16 Llama-3.1-8B layers gathered in bf16, 7/8 of them not local: ~5.6 GiB more than two layer units
    f1 = _phase(one, Phase.BACKWARD).components["fsdp_buffers"]
    f2 = _phase(two, Phase.BACKWARD).components["fsdp_buffers"]
    assert f2 - f1 > 4.0 * GIB
    assert _phase(two, Phase.BACKWARD).device > _phase(one, Phase.BACKWARD).device + 15 * GIB


def test_walk_keeps_the_gathered_stage_to_the_end_of_backward() -> None:
    """``StepTerms.fsdp_gathered_kept``: the whole gathered stage is still there at the embedding's backward (no unit
    resharded after its backward), where a resharding walk has released it; the step has resharded."""
    from dataclasses import replace

    from trainfit.memory.phases import backward_peak, optimizer_peak
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.walk import walk_sft_like

    card = _card(version="fsdp2")
    plan = make_plan(card)
    t = walk_sft_like(card, model_spec_of(card), plan.gpu)[-1].terms
    assert t.fsdp_gathered_kept and t.fsdp_all_gathered > 4.0 * GIB
    # a large transient at the embedding's backward puts the backward peak there
    kept = replace(t, tied_embedding_grad_transient=100 * GIB)
    resharded = replace(kept, fsdp_gathered_kept=False)
    assert backward_peak(kept).at == backward_peak(resharded).at == "embedding backward"
    gap = backward_peak(kept).components["fsdp_buffers"] - backward_peak(resharded).components["fsdp_buffers"]
    assert gap == pytest.approx(t.fsdp_all_gathered)
    assert "fsdp_buffers" not in optimizer_peak(kept).components
