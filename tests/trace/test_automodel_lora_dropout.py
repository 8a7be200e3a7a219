"""``lora.dropout_position``: NeMo Automodel's LoRA dropout on the adapter's output (its default ``post``) or input
(``pre``), planned as the fake-tensor trace of its adapter (``trainfit.trace.automodel_lora``) measures it.

The trace runs torch's CPU dropout, which keeps a noise tensor in the dropout input's dtype (bf16 here, for both
positions: Automodel's adapters are in the base dtype) where CUDA keeps a 1 B bool mask, so the plan is evaluated
with the mask priced at 2 B (``DROPOUT_MASK_BYTES`` patched, as ``test_lora_dropout_hooks`` does). Each phase's
plan-minus-trace residual must then be the one without dropout, to the byte."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.accuracy.grid import GridCase  # noqa: E402
from trainfit.memory import activations  # noqa: E402
from trainfit.plan import make_plan  # noqa: E402
from trainfit.spec.card import load_card_dict  # noqa: E402
from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402
from trainfit.trace.types import TraceUnsupported  # noqa: E402

pytestmark = pytest.mark.trace


def _residual(case: GridCase, *, dropout: float, position: str) -> dict[str, float]:
    card = case.card()
    card["lora"] = card.get("lora", {}) | {"adapter_dtype": "bf16", "dropout": dropout, "dropout_position": position}
    plan = make_plan(load_card_dict(card))
    traced = trace_step(TraceRequest(**(case.trace_kwargs() | {"lora_impl": "automodel", "lora_dropout": dropout,
                                                                "lora_dropout_position": position})))
    assert traced.params_trainable == plan.params_trainable
    planned = {p.phase.value: p.tensor_bytes for p in plan.phases}
    return {p.name: planned[p.name] - p.peak_bytes for p in traced.phases}


def test_plan_matches_the_trace_for_both_dropout_positions(monkeypatch):
    monkeypatch.setattr(activations, "DROPOUT_MASK_BYTES", 2)
    activations.activation_bytes.cache_clear()
    try:
        case = GridCase("llama", scope="lora", seq_len=512)
        none = _residual(case, dropout=0.0, position="pre")
        for position in ("pre", "post"):
            assert _residual(case, dropout=0.1, position=position) == none, position
    finally:
        activations.activation_bytes.cache_clear()


def test_post_dropout_is_refused_for_peft():
    with pytest.raises(TraceUnsupported, match="lora_dropout_position 'post' is NeMo Automodel's adapter"):
        TraceRequest(**(GridCase("llama", scope="lora", seq_len=64).trace_kwargs()
                        | {"lora_dropout": 0.1, "lora_dropout_position": "post"}))
