"""Expert parallel: rank 0's traced step (experts split over the ranks, all-to-all dispatch and
combine) against the plan."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _plan_and_trace(case):
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict
    from trainfit.trace.expert_parallel import trace_expert_parallel
    from trainfit.trace.types import TraceRequest

    plan = make_plan(load_card_dict(case.card()))
    traced = trace_expert_parallel(TraceRequest(**case.trace_kwargs()), expert_parallel=case.expert_parallel)
    return {p.phase.value: float(p.tensor_bytes) for p in plan.phases}, traced


def test_ep_rank_holds_its_share_of_the_experts_and_matches_the_plan() -> None:
    from trainfit.accuracy.grid import ARCHS, EP_GRID

    case = EP_GRID[0]
    planned, traced = _plan_and_trace(case)
    cfg = ARCHS[case.arch]
    h, i, e, layers = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["num_experts"], cfg["num_hidden_layers"]
    expert_params = layers * e * 3 * h * i
    # the rank's parameters: everything but the other ranks' experts
    from trainfit.trace import build
    from trainfit.trace.types import TraceRequest

    full = build.count_params(build.build_meta(TraceRequest(hf_config=cfg), layers))[0]
    assert traced.params_total == full - expert_params // case.expert_parallel
    opt = traced.phase("optimizer_step").breakdown
    assert opt["weights"] == pytest.approx(2 * traced.params_total, abs=4096)
    for ph in traced.phases:
        assert abs(planned[ph.name] - ph.peak_bytes) / ph.peak_bytes < 0.02, ph.name


def test_expert_parallel_trace_refuses_what_it_does_not_cover() -> None:
    from trainfit.accuracy.grid import ARCHS
    from trainfit.trace.expert_parallel import trace_expert_parallel
    from trainfit.trace.types import TraceRequest, TraceUnsupported

    with pytest.raises(TraceUnsupported, match="world_size = expert_parallel"):
        trace_expert_parallel(TraceRequest(hf_config=ARCHS["qwen3_moe"], world_size=4), expert_parallel=2)
    with pytest.raises(TraceUnsupported, match="qwen3_moe, not llama"):
        trace_expert_parallel(TraceRequest(hf_config=ARCHS["llama"], world_size=2, seq_len=64), expert_parallel=2)


@pytest.mark.slow
@pytest.mark.parametrize("i", range(1, 4))
def test_ep_grid_case_within_two_percent(i: int) -> None:
    from trainfit.accuracy.grid import EP_GRID

    planned, traced = _plan_and_trace(EP_GRID[i])
    for ph in traced.phases:
        assert abs(planned[ph.name] - ph.peak_bytes) / ph.peak_bytes < 0.02, (EP_GRID[i].name, ph.name)


@pytest.mark.slow
def test_ep_expert_heavy_forward_holds_the_dispatch_rows() -> None:
    """Experts dominate (top-4 of 8, experts 2x the hidden size, vocabulary 512): the forward peaks at
    the end of the last MoE layer with its six unsaved (token, expert)-row tensors; the plan's forward
    is within 2%. (Its backward is +3.7%, as on one rank: the MoE backward model, not expert parallel.)"""
    from trainfit.accuracy.grid import GridCase

    case = GridCase("qwen3_moe_wide", world_size=4, expert_parallel=4, seq_len=2048)
    planned, traced = _plan_and_trace(case)
    fwd = traced.phase("forward").peak_bytes
    assert abs(planned["forward"] - fwd) / fwd < 0.02


def test_rl_reference_under_expert_parallel_holds_the_traced_rank_parameters() -> None:
    """A GRPO reference laid out like the actor (``plan.stages.frozen_share``) on the traced expert-parallel rank:
    its bf16 weights are the traced rank's parameters to the byte (dense whole, ``1 / ep`` of the experts)."""
    from trainfit.accuracy.grid import EP_GRID
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict
    from trainfit.trace.expert_parallel import trace_expert_parallel
    from trainfit.trace.types import TraceRequest

    case = EP_GRID[0]
    card = case.card() | {"method": "grpo", "roles": {"reference": "gpu", "kl_coef": 0.001},
                          "rollout": {"prompts_per_step": 4, "num_generations": 2, "prompt_len": 256,
                                      "response_len": 256}}
    (group,) = make_plan(load_card_dict(card)).groups
    traced = trace_expert_parallel(TraceRequest(**case.trace_kwargs()), expert_parallel=case.expert_parallel)
    for p in group.phases:
        assert p.components["reference_weights"] == 2 * traced.params_total, p.phase.value
