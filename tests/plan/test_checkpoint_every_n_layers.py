"""Checkpointing a subset of the decoder layers (``parallel.checkpoint_every_n_layers``, torchtitan's
``selective_ac_option`` n): the card's rule and refusals, the per-layer memory mask and the recompute time.
The fake-tensor check of the memory is ``tests/trace/test_layer_subset_checkpointing.py``."""

import pytest

from trainfit.accuracy.grid import GridCase
from trainfit.errors import CardError
from trainfit.memory.activations import ActivationBytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

BASE = GridCase("llama", micro_batch_size=4, seq_len=512, ckpt=True)  # 4 decoder layers


def _card(gc=True, **par):
    c = BASE.card()
    c["parallel"].update(gradient_checkpointing=gc, **par)
    return load_card_dict(c)


def _peaks(card):
    return {p.phase.value: p.tensor_bytes for p in make_plan(card).phases}


@pytest.mark.parametrize("n,mask", [(1, (True,) * 4), (2, (False, True, False, True)),
                                    (3, (False, False, True, False)), (5, (False,) * 4)])
def test_torchtitan_rule_counts_layers_from_one(n, mask):
    assert _card(checkpoint_every_n_layers=n).parallel.checkpointed_layers(4) == mask


def test_unset_or_without_checkpointing_is_every_layer_as_before():
    assert _card().parallel.checkpointed_layers(4) is None
    assert _card(gc=False).parallel.checkpointed_layers(4) is None


@pytest.mark.parametrize("par,match", [
    ({"gradient_checkpointing": False, "checkpoint_every_n_layers": 2}, "needs gradient_checkpointing: true"),
    ({"gradient_checkpointing": "selective", "checkpoint_every_n_layers": 2}, "needs gradient_checkpointing: true"),
    ({"checkpoint_every_n_layers": 0}, "greater than or equal to 1"),
    ({"checkpoint_every_n_layers": 2, "tensor_parallel": 2, "sequence_parallel": True}, "allowed with them: null"),
])
def test_refusals_name_the_field(par, match):
    c = BASE.card()
    c["hardware"]["gpus_per_node"] = 2
    c["parallel"].update(par)
    with pytest.raises(CardError, match=f"^parallel.checkpoint_every_n_layers: .*{match}"):
        load_card_dict(c)


def test_every_layer_and_no_layer_match_full_and_no_checkpointing():
    assert _peaks(_card(checkpoint_every_n_layers=1)) == _peaks(_card())
    none, beyond = _peaks(_card(gc=False)), _peaks(_card(checkpoint_every_n_layers=5))
    for phase in ("forward", "backward"):
        assert beyond[phase] == none[phase]


def test_every_second_layer_keeps_half_the_layers_activations():
    full, none, half = (_peaks(_card()), _peaks(_card(gc=False)), _peaks(_card(checkpoint_every_n_layers=2)))
    assert full["backward"] < half["backward"] < none["backward"]
    # two of four layers keep per_layer instead of their input: half the difference (rotary cos/sin aside)
    assert half["forward"] - full["forward"] == pytest.approx((none["forward"] - full["forward"]) / 2, rel=0.01)


def test_mask_folds_into_the_checkpointed_figures():
    act = ActivationBytes(per_layer=(10, 20, 30, 40), checkpointed_per_layer=(1, 2, 3, 4), embedding=7, head=5,
                          checkpointed_embedding=3)
    sub = act.checkpointing_only((False, True, False, True))
    assert sub.checkpointed_per_layer == (10, 2, 30, 4)
    assert sub.checkpointed_embedding == 7  # the layers left out save the shared rotary cos/sin
    assert sub.total(gradient_checkpointing=True) == 7 + 46 + 5
    assert act.checkpointing_only((True,) * 4) == act
    with pytest.raises(ValueError):
        act.checkpointing_only((True,))


def _recompute_seconds(card):
    return {p.name: p.seconds for p in make_plan(card).time.phases}.get("recompute", 0.0)


def test_recompute_time_counts_the_checkpointed_layers_only():
    big = {"model": "meta-llama/Llama-3.1-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
           "batch": {"micro_batch_size": 1, "seq_len": 8192}}

    def card(**par):
        return load_card_dict(dict(big, parallel={"strategy": "fsdp", "gradient_checkpointing": True, **par}))

    full = _recompute_seconds(card())
    assert full > 0
    assert _recompute_seconds(card(checkpoint_every_n_layers=2)) == pytest.approx(full / 2, rel=1e-6)
    assert _recompute_seconds(card(checkpoint_every_n_layers=3)) == pytest.approx(full * 10 / 32, rel=1e-6)
    assert _recompute_seconds(card(checkpoint_every_n_layers=1)) == full
