"""``parallel.fsdp_adapter_units`` in the exports: each target's note says what its framework does with PEFT's
adapter linears under FSDP1 (export.common.ADAPTER_UNITS_BY_TARGET), and TRL / verl files read back with the adapter
units their trainers wrap (export.importers.ADAPTER_UNITS_READ)."""

from __future__ import annotations

from typing import Any

import pytest

from trainfit.export import export, read_back
from trainfit.spec.card import load_card_dict


def _card(*, preset: str | None = None, units: bool | None = None, version: str = "fsdp1") -> Any:
    d: dict[str, Any] = {"model": "mistralai/Mistral-7B-v0.1", "scope": "lora",
                         "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
                         "parallel": {"strategy": "fsdp", "fsdp_version": version}}
    if preset:
        d["preset"] = preset
    if units is not None:
        d["parallel"]["fsdp_adapter_units"] = units
    return load_card_dict(d)


def _note(e: Any) -> str:
    (note,) = [n for n in e.notes if n.startswith("parallel.fsdp_adapter_units")]
    return note


@pytest.mark.parametrize(("target", "says"), [
    ("accelerate", "writes fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP"),
    ("trl", "TRL's trainers are the HF Trainer: the HF Trainer replaces the file's wrap policy with PEFT's"
            " fsdp_auto_wrap_policy"),
    ("verl", "get_fsdp_wrap_policy(is_lora=lora_rank > 0)"),
    ("deepspeed", "DeepSpeed ZeRO partitions parameters with no FSDP units"),
    ("openrlhf", "OpenRLHF trains on DeepSpeed ZeRO"),
    ("nemo-rl", "NeMo RL's DTensor policy shards with FSDP2"),
])
def test_each_target_says_what_its_framework_does_with_adapter_units(target: str, says: str) -> None:
    note = _note(export(_card(units=True), target))
    assert note.startswith("parallel.fsdp_adapter_units true: ") and says in note
    assert _note(export(_card(preset="trl"), target)).startswith(
        "parallel.fsdp_adapter_units true (null: the preset's framework): ")


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_trl_and_verl_files_read_back_with_adapter_units(target: str) -> None:
    card = _card(units=True)
    e = export(card, target)
    assert "parallel.fsdp_adapter_units" not in e.lost
    assert read_back(card, e).parallel.fsdp_adapter_units is True


def test_a_false_card_exported_to_trl_is_listed_lost_with_the_specific_note_only() -> None:
    e = export(_card(units=False), "trl")
    assert e.lost["parallel.fsdp_adapter_units"] == {"card": False, "file": True}
    assert not [n for n in e.notes if n.startswith("parallel.fsdp_adapter_units: the card has")]
    assert "no TRL or accelerate key turns it off" in _note(e)


def test_an_fsdp2_card_gets_no_adapter_units_note() -> None:
    e = export(_card(version="fsdp2"), "accelerate")
    assert not [n for n in e.notes if "fsdp_adapter_units" in n]
