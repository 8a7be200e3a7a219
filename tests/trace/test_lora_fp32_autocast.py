"""A LoRA adapter on a frozen fp32 base under bf16 autocast: plan vs the fake-tensor trace (plan.terms
._autocast_frozen_copies: each frozen linear saves its bf16 weight copy). Not in the grid (its table stays as it is).

Without the frozen copies the plan is 4.6 % (no checkpointing) and 7.1 % (checkpointing) below the trace; with them
+2.7 % and -0.4 % (tiny llama, 4 layers, 512 tokens: forward 287.6 vs 279.6 MiB, backward 281.6 vs 282.7 MiB). The
+8 MiB left without checkpointing was the adapters' saved inputs: under autocast an fp32 base's norm outputs are fp32,
PEFT's cast to the fp32 adapter returns x itself and autocast saves its bf16 casts (2·(in + r) per module), not the
fp32 ``x.to(lora dtype)`` copies (4·(in + r)) of a bf16 base (``memory.activations._adapter_saved``,
``fp32_stream_autocast``). The grid's 2 % tolerance."""

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy.grid import GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402


@pytest.mark.trace
@pytest.mark.parametrize("ckpt", [False, True])
def test_lora_on_fp32_base_under_autocast(ckpt: bool) -> None:
    case = GridCase("llama", scope="lora", precision="fp32_autocast", ckpt=ckpt, seq_len=512)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=0.02)
