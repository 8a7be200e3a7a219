"""``parallel.fsdp_adapter_units`` resolves as the card's framework wraps a PEFT model under FSDP1
(``RunCard.resolved_fsdp_adapter_units``): null takes the preset's framework (trl and verl wrap each lora_A / lora_B
as a unit of its own), an explicit true / false is kept, and nothing resolves true off FSDP1 LoRA / QLoRA."""

from __future__ import annotations

from typing import Any

import pytest

from trainfit.errors import CardError
from trainfit.spec.card import ADAPTER_UNIT_PRESETS, load_card_dict


def _card(*, preset: str | None = None, scope: str = "lora", version: str = "fsdp1", strategy: str = "fsdp",
          units: bool | None = None) -> Any:
    d: dict[str, Any] = {"model": "mistralai/Mistral-7B-v0.1", "scope": scope,
                         "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
                         "parallel": {"strategy": strategy, "fsdp_version": version}}
    if preset:
        d["preset"] = preset
    if units is not None:
        d["parallel"]["fsdp_adapter_units"] = units
    return load_card_dict(d)


def test_default_is_null_and_no_preset_resolves_false() -> None:
    c = _card()
    assert c.parallel.fsdp_adapter_units is None
    assert c.resolved_fsdp_adapter_units is False


@pytest.mark.parametrize("preset", ["trl", "verl"])
def test_presets_whose_framework_wraps_adapter_units_resolve_true(preset: str) -> None:
    assert preset in ADAPTER_UNIT_PRESETS
    assert _card(preset=preset).resolved_fsdp_adapter_units is True
    assert _card(preset=preset, scope="qlora").resolved_fsdp_adapter_units is True


def test_explicit_values_are_kept() -> None:
    assert _card(preset="trl", units=False).resolved_fsdp_adapter_units is False
    assert _card(units=True).resolved_fsdp_adapter_units is True


@pytest.mark.parametrize("kw", [{"version": "fsdp2"}, {"scope": "full"}, {"strategy": "zero3"}])
def test_off_fsdp1_lora_never_resolves_true_and_null_is_not_refused(kw: dict[str, str]) -> None:
    assert _card(preset="trl", **kw).resolved_fsdp_adapter_units is False


def test_explicit_true_off_fsdp1_is_still_refused_naming_the_field() -> None:
    with pytest.raises(CardError, match="parallel.fsdp_adapter_units"):
        _card(units=True, version="fsdp2")
