"""``plan.checkpointing.checkpoint_reentrant``: the default checkpoint of a card's own settings (transformers pin,
TRL, PEFT under ZeRO-3, Megatron-Core, LLaMA-Factory), and ``loop.checkpoint_reentrant`` overriding it."""

from __future__ import annotations

import pytest

from trainfit.plan.checkpointing import checkpoint_reentrant
from trainfit.spec.card import load_card_dict

BASE = {"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "full", "hardware": {"gpu": "h200", "gpus_per_node": 8},
        "parallel": {"strategy": "zero2", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": 4096}}


def _card(**over):
    return load_card_dict({**BASE, **over})


@pytest.mark.parametrize(("software", "reentrant"), [
    (None, False),                       # no pin: the newest transformers, use_reentrant False
    ({"transformers": "5.0.0"}, False),  # 5.0: gradient_checkpointing_enable's default False
    ({"transformers": "4.57.1"}, True),  # 4.x: the Trainer's default True
    ({"transformers": "<5"}, True),
    ({"transformers": "4.46.1", "trl": "0.26.0"}, True),   # TRL before 0.27 keeps the Trainer's default
    ({"transformers": "4.46.1", "trl": "0.27.0"}, False),  # TRL 0.27 sets use_reentrant False on transformers < 5
    ({"transformers": "4.46.1", "trl": "1.9.0"}, False),
    ({"transformers": "4.x"}, True),     # a major series: transformers 4, the Trainer's default True
    ({"transformers": "4.*"}, True),
    ({"transformers": "5.x"}, False),
    ({"transformers": "main"}, False),   # a branch names no release: the newest, as with no pin
    ({"transformers": "4.46.1", "trl": "main"}, False),      # a TRL branch: the newest TRL, use_reentrant False
    ({"transformers": "4.46.1", "trl": "17acd61f28140243a458d10656a2194af788ff38"}, False),  # a commit: the same
    ({"transformers": "4.x", "trl": "<0.27"}, True),         # an upper bound names releases before 0.27
])
def test_hf_trainer_default_follows_the_transformers_and_trl_pins(software, reentrant):
    card = _card(**({"software": software} if software else {}))
    assert checkpoint_reentrant(card) is reentrant


def test_trl_preset_without_a_trl_pin_reads_the_newest_trl():
    assert not checkpoint_reentrant(_card(preset="trl", software={"transformers": "4.57.1"}))


@pytest.mark.parametrize(("method", "trl", "reentrant"), [
    ("sft", "0.27.0", False), ("sft", "0.28.0", True), ("grpo", "1.8.0", False), ("grpo", "1.9.0", True),
    ("dpo", "1.9.0", True), ("sft", None, True),
    ("grpo", "main", True), ("grpo", "35def3ee000a87f6839e66f4b7749b06274ed1b3", True),  # no release named: newest
    ("grpo", "1.x", False), ("sft", "1.x", True),
])
def test_trl_forces_reentrant_for_peft_under_zero3(method, trl, reentrant):
    software = {"transformers": "5.0.0", **({"trl": trl} if trl else {})}
    card = _card(method=method, scope="lora", parallel={"strategy": "zero3", "gradient_checkpointing": True},
                 software=software, **({} if trl else {"preset": "trl"}))
    assert checkpoint_reentrant(card) is reentrant


def test_peft_zero3_without_trl_keeps_the_trainer_default():
    card = _card(scope="lora", parallel={"strategy": "zero3", "gradient_checkpointing": True})
    assert not checkpoint_reentrant(card)


def test_megatron_is_reentrant_and_the_card_overrides_every_default():
    meg = _card(parallel={"strategy": "ddp", "gradient_checkpointing": True, "tensor_parallel_impl": "megatron"})
    assert checkpoint_reentrant(meg)
    old = _card(software={"transformers": "4.46.1"})
    assert checkpoint_reentrant(old)
    assert not checkpoint_reentrant(_card(software={"transformers": "4.46.1"}, loop={"checkpoint_reentrant": False}))
    assert checkpoint_reentrant(_card(loop={"checkpoint_reentrant": True}))


def test_nanotron_layers_are_not_transformers_and_keep_their_own_checkpoint():
    card = _card(parallel={"strategy": "ddp", "gradient_checkpointing": True, "tensor_parallel_impl": "nanotron"},
                 software={"transformers": "4.46.1"})
    assert not checkpoint_reentrant(card)


def test_a_transformers_4_pin_times_the_whole_layer_recompute():
    """The default reaches the step time: transformers 4.x's re-entrant checkpoint re-runs the layer's last linear
    and residual add (the longer recompute) and its first forward runs under no_grad (the shorter forward)."""
    from trainfit.plan import make_plan

    def parts(card):
        return {p.name: p.seconds for p in make_plan(card).time.phases}

    v4, v5 = parts(_card(software={"transformers": "4.57.1"})), parts(_card(software={"transformers": "5.0.0"}))
    assert v4["recompute"] > v5["recompute"]
    assert v4["forward"] <= v5["forward"]


def test_verl_and_nemo_rl_dtensor_checkpoint_non_reentrantly_on_any_transformers():
    for preset in ("verl", "nemo-rl"):
        card = _card(method="grpo", preset=preset, software={"transformers": "4.57.1"})
        assert not checkpoint_reentrant(card), preset
    meg = _card(method="grpo", preset="nemo-rl", parallel={"strategy": "ddp", "gradient_checkpointing": True,
                                                           "tensor_parallel_impl": "megatron"})
    assert checkpoint_reentrant(meg)


def test_llamafactory_and_ms_swift_deepspeed_presets_are_reentrant_on_transformers_5():
    for preset in ("llamafactory-z3", "ms-swift-zero2", "ms-swift-zero3"):
        assert checkpoint_reentrant(_card(preset=preset, software={"transformers": "5.0.0"})), preset


@pytest.mark.parametrize(("pin", "names"), [
    (None, False), ("", False), ("main", False), ("17acd61f28140243a458d10656a2194af788ff38", False),
    ("4.57.1", True), (">=0.27", True), ("<5", True), ("4.x", True), ("==4.*", True),
])
def test_which_pins_name_a_release(pin, names):
    from trainfit.spec.card import pin_names_release

    assert pin_names_release(pin) is names


def test_a_major_series_reads_as_every_release_of_that_major():
    from trainfit.spec.card import pin_at_least, pin_before

    assert pin_before("4.x", (5, 0)) and not pin_before("4.x", (4, 46)) and not pin_before("5.x", (5, 0))
    assert pin_at_least("4.x", (4, 0)) and not pin_at_least("4.x", (4, 46)) and pin_at_least("5.x", (4, 46))
