"""Selective (per-op) activation checkpointing: trainfit plan vs the fake-tensor trace running torch's
selective checkpointing with torchtitan's policy (``trainfit.trace.build.selective_checkpointing_context``).
Same rule as the grid (``test_grid.py``): allocated peak within 2%, same peak phase."""

from dataclasses import dataclass
from typing import Any

import pytest

from trainfit.accuracy.grid import GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02


@dataclass(frozen=True, slots=True)
class SelectiveCase:
    base: GridCase

    @property
    def name(self) -> str:
        return self.base.name.replace("-nockpt-", "-sac_op-")

    def card(self) -> dict[str, Any]:
        card = self.base.card()
        card["parallel"]["gradient_checkpointing"] = "selective"
        return card

    def trace_kwargs(self) -> dict[str, Any]:
        return dict(self.base.trace_kwargs(), gradient_checkpointing=False, selective_checkpointing="op")


CASES = (
    SelectiveCase(GridCase("llama")),
    SelectiveCase(GridCase("qwen2", seq_len=512)),  # q/k/v with a bias: addmm, neither saved nor counted
    SelectiveCase(GridCase("llama", scope="lora", micro_batch_size=4, seq_len=512)),
    SelectiveCase(GridCase("llama", world_size=4, tensor_parallel=4, sequence_parallel=True, seq_len=512)),
)
SLOW_CASES = (
    SelectiveCase(GridCase("llama", micro_batch_size=4, seq_len=512)),
    SelectiveCase(GridCase("qwen3", micro_batch_size=4, seq_len=512)),
    SelectiveCase(GridCase("llama", world_size=8)),
    SelectiveCase(GridCase("llama", attention="eager", seq_len=512, micro_batch_size=4)),
    SelectiveCase(GridCase("llama", world_size=2, tensor_parallel=2, seq_len=512)),
    SelectiveCase(GridCase("qwen3_moe", seq_len=512, micro_batch_size=4)),  # the router's mm counts, grouped_mm not
)


def _compare(case: SelectiveCase) -> tuple[float, dict, str, str]:
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    planned = {p.phase.value: p.tensor_bytes for p in plan.phases}
    measured = {p.name: p.peak_bytes for p in traced.phases}
    peak_planned = max(planned[k] for k in measured)
    err = (peak_planned - traced.peak_bytes) / traced.peak_bytes
    detail = {k: (round(planned[k] / 2**20, 2), round(measured[k] / 2**20, 2)) for k in measured}
    return err, detail, max(measured, key=lambda k: planned[k]), traced.peak_phase


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_selective_plan_matches_trace(case):
    err, detail, plan_phase, trace_phase = _compare(case)
    assert abs(err) <= TOLERANCE, f"peak error {err:+.2%}; per phase MiB (plan, trace): {detail}"
    assert plan_phase == trace_phase, detail


@pytest.mark.trace
@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=[c.name for c in SLOW_CASES])
def test_selective_plan_matches_trace_more(case):
    test_selective_plan_matches_trace(case)


@pytest.mark.trace
def test_selective_increment_over_full_matches_trace():
    """What per-op SAC keeps beyond full checkpointing (its saved matmul and attention outputs), planned vs traced
    within 2%; and the traced peak sits between full and no checkpointing."""
    base = GridCase("llama", micro_batch_size=4, seq_len=512)
    peaks, planned = {}, {}
    for name, kw, gc in (("none", {}, False), ("full", {"gradient_checkpointing": True}, True),
                         ("op", {"selective_checkpointing": "op"}, "selective")):
        peaks[name] = trace_step(TraceRequest(**dict(base.trace_kwargs(), **kw))).peak_bytes
        card = base.card()
        card["parallel"]["gradient_checkpointing"] = gc
        planned[name] = max(p.tensor_bytes for p in make_plan(load_card_dict(card)).phases)
    assert peaks["full"] < peaks["op"] < peaks["none"], peaks
    traced_inc, planned_inc = peaks["op"] - peaks["full"], planned["op"] - planned["full"]
    assert abs(planned_inc / traced_inc - 1) <= TOLERANCE, (planned_inc, traced_inc)


def test_trace_cli_maps_selective_and_refuses_fp8_and_core_attention():
    from trainfit.cli.trace_cmd import TraceCardError, hf_config_for, trace_request_kwargs

    def request_from_card(c):
        return trace_request_kwargs(c, hf_config_for(c))

    card = {"model": {"config": GridCase("llama").hf_config(), "id": "llama"}, "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": "selective"}}
    assert request_from_card(load_card_dict(card))["selective_checkpointing"] == "op"
    with pytest.raises(TraceCardError, match="^precision.compute: fp8 is not traced"):
        request_from_card(load_card_dict(dict(card, precision={"compute": "fp8", "fp8_recipe": "current"})))
    core = dict(card, parallel=dict(card["parallel"], selective_checkpointing="core_attention"))
    with pytest.raises(Exception, match="core_attention' is not traced"):
        TraceRequest(**request_from_card(load_card_dict(core)))
