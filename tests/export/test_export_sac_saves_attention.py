"""``parallel.sac_saves_attention`` false (a description of torchtitan's per-op policy before b39377f9, not a knob)
through the exporters: every target names it among what it loses and says so in a note."""

import pytest
from export_cards import _default, assert_lost_fields_named

from trainfit.export import TARGETS, export

FIELD = "parallel.sac_saves_attention"


def _card():
    return _default(parallel__gradient_checkpointing="selective", parallel__sac_saves_attention=False)


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_names_the_field(target):
    assert_lost_fields_named(_card(), target, (FIELD,))


def test_the_note_says_why():
    e = export(_card(), "torchtitan")
    assert FIELD in e.lost
    assert any(n.startswith("parallel.sac_saves_attention false") for n in e.notes)
