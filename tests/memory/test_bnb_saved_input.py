"""memory.bnb_saved_input: bitsandbytes' MatMul4Bit before 0.43.2 keeps its input; the plan adds it only on such a pin."""

from __future__ import annotations

import pytest

from trainfit.memory.bnb_saved_input import saved_input_bytes_per_layer, saves_input
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize(("pin", "keeps"), [("0.41.1", True), ("==0.40.2", True), ("0.43.1", True), ("0.43.0", True),
                                            ("0.43.2", False), ("0.45.0", False), ("0.50.2", False), (None, False),
                                            (">=0.41", False)])
def test_versions(pin: str | None, keeps: bool) -> None:
    assert saves_input(pin) is keeps


def test_layer_bytes() -> None:
    # Llama-2-7B, 1304 tokens, bf16: attention norm output + MLP norm output (4096 each) + gated product (11008)
    assert saved_input_bytes_per_layer(tokens=1304, hidden_size=4096, intermediate_size=11008, dtype_bytes=2,
                                       attention_input_needs_grad=True) == 1304 * (2 * 4096 + 11008) * 2
    assert saved_input_bytes_per_layer(tokens=1304, hidden_size=4096, intermediate_size=11008, dtype_bytes=2,
                                       attention_input_needs_grad=False) == 1304 * (4096 + 11008) * 2


def _card(pin: str | None) -> dict:
    card = {"model": "meta-llama/Llama-2-7b-hf", "scope": "qlora",
            "lora": {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"], "adapter_dtype": "bf16"},
            "precision": {"weights": "nf4", "compute": "bf16", "optimizer": "adamw", "optimizer_impl": "foreach"},
            "hardware": {"gpu": "a100-40gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 1, "seq_len": 1304}}
    if pin:
        card["software"] = {"bitsandbytes": pin}
    return card


def test_plan_adds_the_inputs_of_every_layer_on_an_old_pin() -> None:
    new = make_plan(load_card_dict(_card("0.45.0"))).peak
    old = make_plan(load_card_dict(_card("0.41.1"))).peak
    assert new.allocated == make_plan(load_card_dict(_card(None))).peak.allocated
    layer = 1304 * (2 * 4096 + 11008) * 2
    expected = 31 * layer + 1304 * (4096 + 11008) * 2  # layer 0's attention input needs no gradient
    assert old.components["activations"] - new.components["activations"] == pytest.approx(expected)
