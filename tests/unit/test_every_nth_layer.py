"""The every-n-th-layer checkpointing rule has one home (``spec.card.every_nth_layer``): the card plans it and the
trace applies it."""

from __future__ import annotations

from trainfit.spec.card import ParallelSection, every_nth_layer


def test_layers_n_2n_counting_from_one():
    assert every_nth_layer(num_layers=7, every_n_layers=3) == (False, False, True, False, False, True, False)
    assert every_nth_layer(num_layers=4, every_n_layers=1) == (True,) * 4
    assert every_nth_layer(num_layers=2, every_n_layers=5) == (False, False)


def test_the_card_plans_the_same_rule():
    par = ParallelSection(gradient_checkpointing=True, checkpoint_every_n_layers=2)
    assert par.checkpointed_layers(6) == every_nth_layer(num_layers=6, every_n_layers=2)
    assert ParallelSection(gradient_checkpointing=True).checkpointed_layers(6) is None
