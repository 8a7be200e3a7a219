"""``preset: unsloth`` is known and refused with its reason (trainfit.methods.unsloth): Unsloth's GRPO shares one
4-bit copy of the base weights between its in-process vLLM engine and the trainer, hands the adapter over each
step instead of syncing weights, and offloads checkpointed activations to the host; the card cannot state any of
the three, so a preset that filled TRL's values would plan another run. The refusal is one line naming the field
and the allowed presets, from the loaders (``methods.presets.preset``) and from the card itself alike."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainfit.errors import CardError
from trainfit.methods.presets import PRESETS, apply_preset, preset
from trainfit.methods.unsloth import REFUSED_PRESETS, UNSLOTH_PRESET_REFUSAL
from trainfit.spec.card import RunCard


def test_unsloth_is_refused_not_planned_as_another_framework() -> None:
    assert "unsloth" in REFUSED_PRESETS and "unsloth" not in PRESETS
    with pytest.raises(CardError) as exc:
        preset("unsloth")
    line = str(exc.value)
    assert "\n" not in line
    assert line.startswith("preset: 'unsloth' is refused: ")
    assert UNSLOTH_PRESET_REFUSAL in line
    assert line.endswith("; allowed: " + ", ".join(PRESETS))


def test_apply_preset_refuses_it_before_filling_any_default() -> None:
    with pytest.raises(CardError, match="preset: 'unsloth' is refused"):
        apply_preset({"method": "grpo"}, "unsloth")


def test_a_card_built_without_the_loaders_is_refused_alike() -> None:
    # the validator: a RunCard constructed directly never passes through apply_preset
    with pytest.raises(ValidationError, match="preset: 'unsloth' is refused: Unsloth is not planned yet"):
        RunCard(method="grpo", preset="unsloth")


@pytest.mark.parametrize("mechanism", ["shares the trainer's base weights", "hands the LoRA adapter",
                                       "offloads checkpointed activations"])
def test_the_reason_names_each_mechanism_the_card_cannot_state(mechanism: str) -> None:
    assert mechanism in UNSLOTH_PRESET_REFUSAL


def test_the_research_notes_cite_the_releases_the_runs_print() -> None:
    import trainfit.methods.unsloth as notes

    doc = notes.__doc__ or ""
    # unslothai/unsloth at Unsloth 2025.2.4 (unsloth/models/_utils.py l.15) and the unsloth-zoo release beside it
    assert "@027b5100c7492bce025fe2f03681f440843e4666" in doc
    assert "@de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de" in doc
