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


def _last_terms(card):
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.walk import walk_sft_like

    return walk_sft_like(card, model_spec_of(card), make_plan(card).gpu)[-1].terms


def test_a_later_micro_batch_adds_a_whole_unsharded_gradient() -> None:
    """FSDP2's accumulate_unsharded_grad_if_needed adds the unit's new unsharded gradient (bf16, the gathered dtype)
    into the held fp32 one: on the last stage the root unit's (norm and head), half the held fp32 head gradient, not
    an 8-way shard of it (0.245 GiB before)."""
    t = _last_terms(_card(version="fsdp2"))
    assert t.grads_head == pytest.approx(1.957 * GIB, rel=1e-3)
    assert t.accumulation_transient == pytest.approx(t.grads_head / 2, rel=1e-6)


@pytest.mark.parametrize(("unit", "largest", "grad", "gathered", "expected"), [
    (8.0, 3.0, 4, 2, 4.0),  # bf16 gathered, fp32 reduce: FSDP2 adds the whole unit's bf16 gradient
    (8.0, 3.0, 2, 2, 3.0),  # one dtype: autograd adds tensor by tensor
])
def test_held_accumulation_bytes(unit, largest, grad, gathered, expected) -> None:
    from trainfit.plan.fsdp_no_sync import pipeline_fsdp2_held_accumulation_bytes

    assert pipeline_fsdp2_held_accumulation_bytes(unit_grad_bytes=unit, largest_tensor_grad_bytes=largest,
                                                  grad_dtype_bytes=grad, gathered_dtype_bytes=gathered) == expected


def test_cpu_offload_keeps_the_held_gradients_on_the_gpu() -> None:
    """CPUOffloadPolicy moves only the reduce-scattered shards to the host: the held unsharded gradients and the
    gathered stage stay on the GPU, as without offload; the optimizer step reads host shards (none on the GPU)."""
    base = _card(version="fsdp2").model_dump(mode="json", exclude_unset=True)
    base["parallel"]["offload"] = "params_and_optimizer"
    off = load_card_dict(base)
    assert pipeline_fsdp2_holds_unsharded(off)
    t_off, t_on = _last_terms(off), _last_terms(_card(version="fsdp2"))
    assert t_off.grads_head == pytest.approx(t_on.grads_head) and t_off.grads_head > 1.9 * GIB
    assert sum(t_off.grads_per_layer) == pytest.approx(sum(t_on.grads_per_layer))
    assert sum(t_off.grads_per_layer) > 0
    assert t_off.fsdp_gathered_kept and t_off.fsdp_all_gathered == pytest.approx(t_on.fsdp_all_gathered)
    assert t_off.optimizer_step_grads == 0.0 < t_on.optimizer_step_grads
