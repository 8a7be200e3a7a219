"""Memory of PEFT's prepare_model_for_kbit_training (``lora.prepare_kbit``, ``memory.kbit_upcast``): the non-4-bit
parameters (embeddings, norms, head) are fp32, and each checkpointed layer saves its fp32 input hidden states."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.kbit_upcast import checkpoint_input_extra_bytes
from trainfit.memory.params import param_breakdown
from trainfit.memory.weights import quantized_linear_params
from trainfit.plan import make_plan
from trainfit.plan.resolve import card_with
from trainfit.spec.card import RunCard

MODEL = "mistralai/Mistral-7B-v0.1"
CARD = RunCard.model_validate({"scope": "qlora", "model": MODEL, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                               "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 2, "seq_len": 2048}})


def _backward(card: RunCard) -> dict[str, float]:
    return next(p for p in make_plan(card).phases if p.phase.value == "backward").components


def test_checkpoint_input_term():
    assert checkpoint_input_extra_bytes(tokens=10, hidden_size=8) == 10 * 8 * 2
    assert checkpoint_input_extra_bytes(tokens=10, hidden_size=8, stream_bytes=4) == 0


def test_default_card_is_unchanged_and_recipe_adds_fp32_params_and_inputs():
    assert CARD.lora.prepare_kbit is False
    off, on = _backward(CARD), _backward(card_with(CARD, lora__prepare_kbit=True))
    spec = from_catalog(MODEL)
    rest = param_breakdown(spec).total - quantized_linear_params(spec)  # embeddings, norms, head
    assert on["weights"] - off["weights"] == pytest.approx(rest * (4 - 2), rel=1e-9)
    tokens = 2 * 2048
    assert on["activations"] - off["activations"] == pytest.approx(
        spec.num_layers * tokens * spec.hidden_size * (4 - 2), rel=1e-6)
    assert {k: v for k, v in on.items() if k not in ("weights", "activations")} == {
        k: v for k, v in off.items() if k not in ("weights", "activations")}
