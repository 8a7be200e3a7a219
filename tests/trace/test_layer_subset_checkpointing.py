"""Every n-th decoder layer checkpointed (``parallel.checkpoint_every_n_layers``; torchtitan's
``selective_ac_option`` n): trainfit plan vs the fake-tensor trace with transformers' checkpointing switched off
in the other layers (``trainfit.trace.build.enable_checkpointing``). Same rule as the grid (``test_grid.py``):
allocated peak within 2%, same peak phase."""

import pytest

from trainfit.accuracy.grid import GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, TraceUnsupported, trace_step  # noqa: E402

TOLERANCE = 0.02
CASES = (
    (GridCase("llama", micro_batch_size=4, seq_len=512, ckpt=True), 2),  # 4 layers: the 2nd and 4th checkpointed
    (GridCase("llama", micro_batch_size=4, seq_len=512, ckpt=True), 3),  # the 3rd only: the last layer keeps all
    (GridCase("llama", micro_batch_size=4, seq_len=512, ckpt=True, scope="lora"), 2),
)


def _compare(case: GridCase, n: int) -> tuple[float, dict, str, str]:
    card = case.card()
    card["parallel"]["checkpoint_every_n_layers"] = n
    plan = make_plan(load_card_dict(card))
    traced = trace_step(TraceRequest(**dict(case.trace_kwargs(), checkpoint_every_n_layers=n)))
    planned = {p.phase.value: p.tensor_bytes for p in plan.phases}
    measured = {p.name: p.peak_bytes for p in traced.phases}
    err = (max(planned[k] for k in measured) - traced.peak_bytes) / traced.peak_bytes
    detail = {k: (round(planned[k] / 2**20, 3), round(measured[k] / 2**20, 3)) for k in measured}
    return err, detail, max(measured, key=lambda k: planned[k]), traced.peak_phase


@pytest.mark.trace
@pytest.mark.parametrize("case,n", CASES, ids=[f"{c.name}-every{n}" for c, n in CASES])
def test_every_nth_layer_plan_matches_trace(case, n):
    err, detail, plan_phase, trace_phase = _compare(case, n)
    assert abs(err) <= TOLERANCE, f"peak error {err:+.2%}; per phase MiB (plan, trace): {detail}"
    assert plan_phase == trace_phase, detail


@pytest.mark.trace
def test_traced_peak_sits_between_full_and_no_checkpointing():
    base = CASES[0][0]
    peaks = {name: trace_step(TraceRequest(**dict(base.trace_kwargs(), **kw))).peak_bytes
             for name, kw in (("full", {}), ("none", {"gradient_checkpointing": False}),
                              ("every2", {"checkpoint_every_n_layers": 2}))}
    assert peaks["full"] < peaks["every2"] < peaks["none"], peaks


def test_trace_refuses_without_checkpointing():
    with pytest.raises(TraceUnsupported, match="checkpoint_every_n_layers"):
        TraceRequest(**dict(CASES[0][0].trace_kwargs(), gradient_checkpointing=False, checkpoint_every_n_layers=2))


def test_trace_cli_passes_the_field():
    from trainfit.cli.trace_cmd import hf_config_for, trace_request_kwargs

    card = CASES[0][0].card()
    card["parallel"]["checkpoint_every_n_layers"] = 2
    c = load_card_dict(card)
    assert trace_request_kwargs(c, hf_config_for(c))["checkpoint_every_n_layers"] == 2
