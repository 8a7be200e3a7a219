"""memory.bnb_saved_input: bitsandbytes' MatMul4Bit before 0.43.2 keeps its input; the plan adds it only on such a pin,
once per distinct input that needs a gradient and is not saved already (hand-computed expectations)."""

from __future__ import annotations

import re

import pytest

from trainfit.memory.bnb_saved_input import saves_input
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize(("pin", "keeps"), [
    ("0.41.1", True), ("==0.40.2", True), ("0.43.1", True), ("0.43.0", True), ("v0.41.1", True),
    ("0.43.1.post1", True), ("0.43.1+cu121", True), ("<0.43.2", True), ("<=0.43.1", True), ("<0.43", True),
    ("~=0.41.1", True), ("0.41", True), ("0.41.*", True), (">=0.40,<0.43.2", True),
    ("0.43.2", False), ("0.45.0", False), ("0.50.2", False), (None, False), (">=0.41", False),
    ("0.43.2.post1", False), ("<=0.43.2", False), ("<0.44", False), ("~=0.41", False), ("~=0.43.0", False),
    ("0.43", False), ("main", False), ("8de5fb44", False)])
def test_versions(pin: str | None, keeps: bool) -> None:
    # every release the pin admits must keep the input: an upper bound at or below 0.43.2 (exclusive), a compatible
    # release inside an old series, a post release of an old one
    assert saves_input(pin) is keeps


@pytest.mark.parametrize(("pin", "keeps"), [
    # PEP 440 order: '<0.43.2.post1' admits 0.43.2; '==0.43' is 0.43.0; '0.43.1-1' is 0.43.1.post1; four-part releases
    ("<0.43.2.post1", False), ("==0.43", True), ("0.43.1-1", True), ("<0.43.1.5", True),
    ("==0.43.1.*", True), ("==0.43.*", False), ("~=0.43.1.5", True), ("0.42.post3", True), ("== 0.43.1", True),
    ("1!0.41", False), ("~=1", False), ("<0.41.*", False), ("0.41.x", False), ("<0.43.2rc1", True)])
def test_versions_in_pep440_order(pin: str, keeps: bool) -> None:
    assert saves_input(pin) is keeps


def test_a_boolean_bitsandbytes_pin_is_refused_like_a_list() -> None:
    from trainfit.errors import CardError

    for value, what in ((True, "boolean (True)"), (["0.41.1"], "list")):
        card = _card(None)
        card["software"] = {"bitsandbytes": value}
        with pytest.raises((CardError, ValueError), match=f"software.bitsandbytes: .*got a {re.escape(what)}"):
            load_card_dict(card)


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


def _phases(pin: str | None, *, keeps_output: bool, checkpointing: bool = False,
            reentrant: bool | None = None) -> dict:
    card = _card(pin)
    card["loop"] = {"keeps_output_through_backward": keeps_output}
    if reentrant is not None:
        card["loop"]["checkpoint_reentrant"] = reentrant
    card["parallel"]["gradient_checkpointing"] = checkpointing
    return {p.phase.value: p for p in make_plan(load_card_dict(card)).phases}


def test_kept_input_bytes_are_every_distinct_input_that_needs_a_gradient() -> None:
    from trainfit.memory.bnb_saved_input import kept_input_bytes_per_layer

    linears = {"q_proj": 8, "k_proj": 8, "v_proj": 8, "o_proj": 6, "gate_proj": 8, "up_proj": 8, "down_proj": 20}
    kw = {"layers": 3, "linears": linears, "tokens": 5, "dtype_bytes": 2}
    # q/v adapted: layer 0's attention input needs no gradient; o_proj's (6), the MLP's (8) and down's (20) do; from
    # layer 1 on all four distinct inputs (8 + 6 + 8 + 20)
    assert kept_input_bytes_per_layer(**kw, adapted=frozenset({"q_proj", "v_proj"})) == (340.0, 420.0, 420.0)
    # MLP adapters only: layer 0 keeps down_proj's input alone
    assert kept_input_bytes_per_layer(**kw, adapted=frozenset({"gate_proj", "up_proj"})) == (200.0, 420.0, 420.0)
    # fused projections read one input each
    fused = {"qkv_proj": 8, "o_proj": 6, "gate_up_proj": 8, "down_proj": 20}
    assert kept_input_bytes_per_layer(**dict(kw, linears=fused), adapted=frozenset({"qkv_proj"})) == (
        340.0, 420.0, 420.0)


def test_held_bytes_follow_the_checkpoint_kind() -> None:
    from trainfit.memory.bnb_saved_input import ctx_held_input_bytes, graph_held_input_bytes

    kept, none, every, first_two = (10.0, 12.0, 12.0), (False,) * 3, (True,) * 3, (True, True, False)
    # the current micro-batch's graph: only a non-reentrant checkpoint's layers hold them beside the checkpointed inputs
    assert ctx_held_input_bytes(kept_per_layer=kept, checkpointed=every, reentrant=False) == 34.0
    assert ctx_held_input_bytes(kept_per_layer=kept, checkpointed=first_two, reentrant=False) == 22.0
    assert ctx_held_input_bytes(kept_per_layer=kept, checkpointed=every, reentrant=True) == 0.0
    assert ctx_held_input_bytes(kept_per_layer=kept, checkpointed=none, reentrant=False) == 0.0
    # carried into the next forward by a loop that holds its output: every layer the first forward recorded
    held = {"kept_per_layer": kept, "loop_keeps_graph": True}
    assert graph_held_input_bytes(**held, checkpointed=none, reentrant=False) == 34.0
    assert graph_held_input_bytes(**held, checkpointed=every, reentrant=False) == 34.0
    assert graph_held_input_bytes(**held, checkpointed=every, reentrant=True) == 0.0
    assert graph_held_input_bytes(**held, checkpointed=first_two, reentrant=True) == 12.0
    assert graph_held_input_bytes(**dict(held, loop_keeps_graph=False), checkpointed=none, reentrant=False) == 0.0


# Llama-2-7B, q/v adapters: layer 0 keeps o_proj's, the MLP norm's and down_proj's inputs, later layers the attention
# norm's too (32 layers, one sequence of T tokens, bf16)
KEPT = (H + H + I) * T * 2 + 31 * (H + H + H + I) * T * 2


def test_a_loop_holding_its_output_keeps_the_previous_inputs_into_the_next_forward() -> None:
    # MatMul4Bit keeps its input as a ctx attribute (not save_for_backward): the backward does not free it, so a loop
    # that keeps its output bound until the next micro-batch's forward returns holds every distinct input of the
    # previous micro-batch at the next loss and through the optimizer step, those lora_A's and SDPA's saved sets
    # shared too (their save_for_backward copies are released by the backward)
    old = _phases("0.41.1", keeps_output=True)
    assert old["forward"].components["graph_held_inputs"] == KEPT
    assert old["optimizer_step"].components["graph_held_inputs"] == KEPT
    assert "graph_held_inputs" not in old["backward"].components  # the backward's own inputs are the activations
    # a fixed pin (0.43.2+ stores (None, B)), a loop that drops its output, or a reentrant checkpoint: nothing held
    for phases in (_phases("0.45.0", keeps_output=True), _phases("0.41.1", keeps_output=False),
                   _phases("0.41.1", keeps_output=True, checkpointing=True, reentrant=True)):
        assert all("graph_held_inputs" not in p.components for p in phases.values())


def test_a_non_reentrant_checkpoint_keeps_the_inputs_from_the_forward_to_the_end_of_backward() -> None:
    # non-reentrant: the first forward records MatMul4Bit's nodes (the checkpoint's hooks only see save_for_backward),
    # so every layer's inputs stay beside the checkpointed ones at the loss and through the backward; 0.45.0 and a
    # reentrant checkpoint (no-grad first forward) keep none. Before this, both kinds planned the same peak
    new = _phases("0.45.0", keeps_output=False, checkpointing=True, reentrant=False)
    old = _phases("0.41.1", keeps_output=False, checkpointing=True, reentrant=False)
    reentrant = _phases("0.41.1", keeps_output=False, checkpointing=True, reentrant=True)
    assert old["forward"].components["ctx_held_inputs"] == KEPT
    assert old["backward"].components["ctx_held_inputs"] == KEPT
    assert old["forward"].allocated - new["forward"].allocated == KEPT
    assert old["backward"].allocated - new["backward"].allocated == pytest.approx(KEPT, rel=1e-3)
    assert all("ctx_held_inputs" not in p.components for p in reentrant.values())
    assert reentrant["forward"].allocated == new["forward"].allocated
    assert make_plan(load_card_dict(_card("0.41.1") | {
        "parallel": {"strategy": "single", "gradient_checkpointing": True},
        "loop": {"checkpoint_reentrant": False}})).peak.allocated > make_plan(load_card_dict(_card("0.41.1") | {
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "loop": {"checkpoint_reentrant": True}})).peak.allocated
    # a loop that holds its output carries them into the next forward as well: both micro-batches' at its loss
    held = _phases("0.41.1", keeps_output=True, checkpointing=True, reentrant=False)
    assert held["forward"].components["ctx_held_inputs"] == held["forward"].components["graph_held_inputs"] == KEPT
    assert held["optimizer_step"].components["graph_held_inputs"] == KEPT
