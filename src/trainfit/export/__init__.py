"""Launch configs for the frameworks people run: accelerate, DeepSpeed, TRL, verl, OpenRLHF, torchtitan, NeMo RL.

Pure functions of a ``RunCard``. ``to_accelerate`` / ``to_deepspeed`` / ``to_trl`` / ``to_verl`` /
``to_openrlhf`` return the config itself; ``export(card, target)`` returns an ``Export`` with the
text to save, the same config as data, ``notes``: every card setting the target cannot
express (said, never silently dropped), and ``lost``: the card keys whose value the file does not
carry, found by reading the file back (``trainfit.export.importers``) and comparing every value the
plan reads (``plan_facts``). Restoring the ``lost`` keys on the imported card gives the card's plan.
"""

from __future__ import annotations

from trainfit.errors import TrainfitError
from trainfit.export import accelerate as _accelerate
from trainfit.export import deepspeed as _deepspeed
from trainfit.export import nemo_rl as _nemo_rl
from trainfit.export import openrlhf as _openrlhf
from trainfit.export import torchtitan as _torchtitan
from trainfit.export import trl as _trl
from trainfit.export import verl as _verl
from trainfit.export.accelerate import to_accelerate
from trainfit.export.common import TARGETS, Export, ExportError, plan_facts
from trainfit.export.deepspeed import to_deepspeed
from trainfit.export.nemo_rl import to_nemo_rl
from trainfit.export.openrlhf import to_openrlhf
from trainfit.export.torchtitan import to_torchtitan
from trainfit.export.trl import to_trl
from trainfit.export.verl import to_verl
from trainfit.spec.card import RunCard

_BUILDERS = {
    "accelerate": _accelerate.build,
    "deepspeed": _deepspeed.build,
    "trl": _trl.build,
    "verl": _verl.build,
    "openrlhf": _openrlhf.build,
    "torchtitan": _torchtitan.build,
    "nemo-rl": _nemo_rl.build,
}


def export(card: RunCard, target: str) -> Export:
    """The launch config for ``target`` with its notes and the card keys it cannot carry."""
    from dataclasses import replace

    key = target.strip().lower()
    if key not in _BUILDERS:
        raise ExportError(f"--to: '{target}' is not a target; allowed: {', '.join(TARGETS)}")
    if card.scope.value in ("dora", "ia3", "prompt_tuning", "prefix_tuning"):  # every target writes a LoRA config for an adapter scope
        raise ExportError(f"scope: '{card.scope.value}' is not exported (the targets write LoRA adapter configs);"
                          " allowed for export: full, lora, qlora")
    from trainfit.plan import check_model_options

    check_model_options(card)  # an MoE-only option on a dense model: refused as the plan refuses it
    e = _BUILDERS[key](card)
    try:
        lost = lost_settings(card, e)
    except TrainfitError as exc:  # the file could not be read back: say so rather than claim nothing is lost
        return replace(e, notes=[*e.notes, f"the {key} file could not be read back to check what it carries ({exc})"],
                       lost={"(read back)": {"card": None, "file": str(exc)}})
    said = " ".join(e.notes)
    unexplained = [k for k in lost if k not in said]
    by_section: dict[str, list[str]] = {}
    for k in unexplained:
        by_section.setdefault(k.split(".")[0], []).append(k)
    extra = []
    if "hardware.gpu" in unexplained and lost["hardware.gpu"]["file"] is None:  # lent to read an fp8 file back
        by_section["hardware"].remove("hardware.gpu")
        if not by_section["hardware"]:
            by_section.pop("hardware")
        extra.append(f"hardware.gpu: no {key} file names a GPU model, and fp8 compute needs one with fp8 tensor cores;"
                     f" import it with --set hardware.gpu={card.hardware.gpu}")
    for section, keys in by_section.items():
        if len(keys) == 1:
            k = keys[0]
            extra.append(f"{k}: the card has {lost[k]['card']!r}; the {key} file reads back as {lost[k]['file']!r}")
        else:
            names = ", ".join(k.partition(".")[2] or k for k in keys)
            extra.append(f"{section}.* ({len(keys)}: {names}): not carried as the card has them by the {key} file")
    return replace(e, notes=[*e.notes, *extra], lost=lost)


def read_back(card: RunCard, e: Export) -> RunCard:
    """The card ``trainfit import`` reads from the export (a TRL config with its accelerate.yaml)."""
    return _read_back(card, e)[0]


def _read_back(card: RunCard, e: Export) -> tuple[RunCard, bool]:
    """The read-back card, and whether the card's GPU had to be lent to it: no launch config names a GPU model,
    and an fp8 file read onto the default card (an A100, no fp8 tensor cores) is refused; then the card's GPU
    is used and ``hardware.gpu`` is listed as lost (``trainfit import`` needs ``--set hardware.gpu=...``)."""
    from trainfit.errors import CardError
    from trainfit.export.importers import import_text
    from trainfit.spec.card import resolve_card
    from trainfit.spec.dotted import set_dotted

    companion = ("accelerate", _accelerate.build(card).text) if e.target == "trl" else None
    data = import_text(e.text, e.target, companion=companion).card
    try:  # the framework's preset filled as `trainfit plan` fills it on the imported card (resolve_card)
        return resolve_card(data), False
    except CardError as exc:
        if "fp8 tensor cores" not in str(exc) or "gpu" in (data.get("hardware") or {}):
            raise
    set_dotted(data, "hardware.gpu", card.hardware.gpu)
    return resolve_card(data), True


def lost_settings(card: RunCard, e: Export) -> dict[str, dict]:
    """Card keys whose planned value the exported file does not carry: ``{key: {card, file}}``."""
    before = plan_facts(card)
    back, lent_gpu = _read_back(card, e)
    after = plan_facts(back)
    lost = {k: {"card": before.get(k), "file": after.get(k)} for k in [*before, *(k for k in after if k not in before)]
            if before.get(k) != after.get(k)}
    if lent_gpu:
        lost["hardware.gpu"] = {"card": card.hardware.gpu, "file": None}
    return lost


__all__ = ["TARGETS", "Export", "ExportError", "export", "lost_settings", "read_back", "to_accelerate", "to_deepspeed",
           "to_nemo_rl", "to_openrlhf", "to_torchtitan", "to_trl", "to_verl"]
