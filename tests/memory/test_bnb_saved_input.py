"""memory.bnb_saved_input: bitsandbytes' MatMul4Bit before 0.43.2 keeps its input; the plan adds it only on such a pin,
once per distinct input that needs a gradient and is not saved already (hand-computed expectations)."""

from __future__ import annotations

import pytest

from trainfit.memory.bnb_saved_input import saves_input
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize(("pin", "keeps"), [("0.41.1", True), ("==0.40.2", True), ("0.43.1", True), ("0.43.0", True),
                                            ("0.43.2", False), ("0.45.0", False), ("0.50.2", False), (None, False),
                                            (">=0.41", False)])
def test_versions(pin: str | None, keeps: bool) -> None:
    assert saves_input(pin) is keeps


def _card(pin: str | None, targets: tuple[str, ...] = ("q_proj", "v_proj")) -> dict:
    card = {"model": "meta-llama/Llama-2-7b-hf", "scope": "qlora",
            "lora": {"rank": 8, "alpha": 16, "targets": list(targets), "adapter_dtype": "bf16"},
            "precision": {"weights": "nf4", "compute": "bf16", "optimizer": "adamw", "optimizer_impl": "foreach"},
            "hardware": {"gpu": "a100-40gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 1, "seq_len": 1304}}
    if pin:
        card["software"] = {"bitsandbytes": pin}
    return card


T, H, I = 1304, 4096, 11008  # Llama-2-7B, one sequence of 1304 tokens, bf16 (2 B)


def _activations(pin: str | None, targets: tuple[str, ...] = ("q_proj", "v_proj")) -> float:
    return make_plan(load_card_dict(_card(pin, targets))).peak.components["activations"]


def test_plan_adds_only_the_inputs_nothing_saves_yet_on_an_old_pin() -> None:
    # bf16 adapters on q/v: lora_A already saves the attention norm's output (every layer, layer 0 included), so
    # the frozen q/k/v add nothing; o_proj's input is a view of SDPA's saved output. Each layer's MLP input needs a
    # gradient (the q/v adapters precede it, layer 0 too): gate/up keep the MLP norm's output (H), down_proj the
    # gated product (I)
    assert _activations("0.45.0") == _activations(None)
    assert _activations("0.41.1") - _activations("0.45.0") == 32 * T * (H + I) * 2


def test_mlp_only_adapters_leave_layer_0s_frozen_inputs_unsaved() -> None:
    # adapters on gate/up only: layer 0's attention and MLP inputs need no gradient (frozen embedding, frozen
    # attention), so only its down_proj keeps an input (the gated product, downstream of the adapters); from layer 1
    # the residual stream needs one: q/k/v keep the attention norm's output (H, once), gate/up's input is lora_A's
    # already, down_proj keeps the gated product (I)
    mlp = ("gate_proj", "up_proj")
    assert _activations("0.41.1", mlp) - _activations("0.45.0", mlp) == T * I * 2 + 31 * T * (H + I) * 2


def test_old_pins_forward_dequantisation_adds_no_saved_input_and_one_absmax() -> None:
    # the wide-MLP grid model (down_proj 8192 -> 512, fp32 adapters on all linears, 128 tokens), whose forward peak is
    # the last down_proj's dequantisation: 0.41.1 keeps that input in the layer's saved set and makes one fp32 absmax
    # in place; 0.45.0 one absmax, the input live but unsaved; unpinned (0.50 fallback) two. lora_A's fp32 copy of
    # the input is counted in the saved set but made after the base GEMM: subtracted on every pin
    from trainfit.accuracy.grid import GridCase

    def forward_transient(pin: str | None) -> float:
        card = GridCase("llama_widemlp", scope="qlora", seq_len=128).card()
        if pin:
            card["software"] = {"bitsandbytes": pin}
        return {p.phase.value: p for p in make_plan(load_card_dict(card)).phases}["forward"].components[
            "activation_transients"]

    n, rows, absmax = 8192 * 512, 128, 4 * 8192 * 512 // 64
    base = 2 * n + rows * 512 * 2 - rows * 8192 * 4
    assert forward_transient("0.41.1") == absmax + base
    assert forward_transient("0.45.0") == absmax + base + rows * 8192 * 2
    assert forward_transient(None) == 2 * absmax + base + rows * 8192 * 2


def _phases(pin: str | None, *, keeps_output: bool, checkpointing: bool = False) -> dict:
    card = _card(pin)
    card["loop"] = {"keeps_output_through_backward": keeps_output}
    card["parallel"]["gradient_checkpointing"] = checkpointing
    return {p.phase.value: p for p in make_plan(load_card_dict(card)).phases}


def test_graph_held_input_bytes_is_the_kept_inputs_of_every_layer() -> None:
    from trainfit.memory.bnb_saved_input import graph_held_input_bytes

    kw = {"saved_per_layer": (10, 12, 12), "plain_per_layer": (7, 8, 8)}
    assert graph_held_input_bytes(**kw, loop_keeps_graph=True, gradient_checkpointing=False) == 11.0
    assert graph_held_input_bytes(**kw, loop_keeps_graph=False, gradient_checkpointing=False) == 0.0
    assert graph_held_input_bytes(**kw, loop_keeps_graph=True, gradient_checkpointing=True) == 0.0


def test_a_loop_holding_its_output_keeps_the_previous_inputs_into_the_next_forward() -> None:
    # MatMul4Bit keeps its input as a ctx attribute (not save_for_backward): the backward does not free it, so a loop
    # that keeps its output bound until the next micro-batch's forward returns holds the previous micro-batch's inputs
    # at the next loss and through the optimizer step: 32 layers x (the MLP norm's output H + the gated product I)
    held = 32 * T * (H + I) * 2
    old = _phases("0.41.1", keeps_output=True)
    assert old["forward"].components["graph_held_inputs"] == held
    assert old["optimizer_step"].components["graph_held_inputs"] == held
    assert "graph_held_inputs" not in old["backward"].components  # the backward's own inputs are the activations
    # a fixed pin (0.43.2+ stores (None, B)), a loop that drops its output, or checkpointed layers: nothing held
    for phases in (_phases("0.45.0", keeps_output=True), _phases("0.41.1", keeps_output=False),
                   _phases("0.41.1", keeps_output=True, checkpointing=True)):
        assert all("graph_held_inputs" not in p.components for p in phases.values())
