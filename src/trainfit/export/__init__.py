"""Launch configs for the frameworks people run: accelerate, DeepSpeed, TRL, verl, OpenRLHF.

Pure functions of a ``RunCard``. ``to_accelerate`` / ``to_deepspeed`` / ``to_trl`` / ``to_verl`` /
``to_openrlhf`` return the config itself; ``export(card, target)`` returns an ``Export`` with the
text to save, the same config as data, and ``notes``: every card setting the target cannot
express (said, never silently dropped).
"""

from __future__ import annotations

from trainfit.errors import TrainfitError
from trainfit.export import accelerate as _accelerate
from trainfit.export import deepspeed as _deepspeed
from trainfit.export import openrlhf as _openrlhf
from trainfit.export import trl as _trl
from trainfit.export import verl as _verl
from trainfit.export.accelerate import to_accelerate
from trainfit.export.common import TARGETS, Export
from trainfit.export.deepspeed import to_deepspeed
from trainfit.export.openrlhf import to_openrlhf
from trainfit.export.trl import to_trl
from trainfit.export.verl import to_verl
from trainfit.spec.card import RunCard

_BUILDERS = {
    "accelerate": _accelerate.build,
    "deepspeed": _deepspeed.build,
    "trl": _trl.build,
    "verl": _verl.build,
    "openrlhf": _openrlhf.build,
}


class ExportError(TrainfitError):
    """An unknown export target."""


def export(card: RunCard, target: str) -> Export:
    """The launch config for ``target`` with its notes."""
    key = target.strip().lower()
    if key not in _BUILDERS:
        raise ExportError(f"--to: '{target}' is not a target; allowed: {', '.join(TARGETS)}")
    return _BUILDERS[key](card)


__all__ = ["Export", "TARGETS", "export", "to_accelerate", "to_deepspeed", "to_openrlhf", "to_trl", "to_verl"]
