"""The plan meets the real run: ``trainfit.watch(card)`` measures each phase of each step and
compares it with the plan.

    trainer = GRPOTrainer(..., callbacks=[trainfit.watch("card.yaml")])   # Trainer, TRL SFT/DPO/GRPO

    with trainfit.watch(card, record="run.record.yaml") as w:            # a custom loop
        w.phase("rollout"); ...
        w.phase("forward"); ...
        w.step()

Importing this package does not import torch or transformers: ``watch()`` does, when called.
``docs/watch.md`` documents the phases, the record, the verdict and the hooks for verl and OpenRLHF.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

__all__ = ["watch"]


def watch(card: Any, **kw: Any) -> Any:
    """A ``Watch`` for ``card`` (a RunCard, a card file or mapping): a ``transformers.TrainerCallback``
    when transformers is installed (so it goes into ``callbacks=[...]``), and in every case a context
    manager for custom loops. Keyword arguments: ``trainfit.watch.core.Watch``."""
    try:
        from trainfit.watch.callback import WatchCallback
    except ImportError:  # no transformers: the context manager alone
        from trainfit.watch.core import Watch

        return Watch(card, **kw)
    return WatchCallback(card, **kw)


class _CallablePackage(ModuleType):
    """This package is also the function ``watch``: ``trainfit.watch(card)`` (as ``trainfit.plan(card)``)."""

    def __call__(self, card: Any, **kw: Any) -> Any:
        return watch(card, **kw)


sys.modules[__name__].__class__ = _CallablePackage
