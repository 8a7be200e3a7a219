"""One bound for a node's GPUs and a price's rentable unit: ``spec.card.MAX_GPUS_PER_NODE``.

It is an input bound, not a model constant, so it lives outside the packages whose numeric constants must cite a
source (``tests/compute/test_constants_cited.py``: compute, plan, memory); ``compute.cost`` imports it."""

from __future__ import annotations

import pytest

from trainfit.compute import cost
from trainfit.errors import CardError
from trainfit.spec import card


def _le(field: str) -> int:
    return next(m.le for m in card.HardwareSection.model_fields[field].metadata if hasattr(m, "le"))


def test_the_card_and_the_price_share_one_bound():
    assert cost.MAX_GPUS_PER_INSTANCE is card.MAX_GPUS_PER_NODE == 1024
    assert _le("gpus_per_node") == card.MAX_GPUS_PER_NODE
    assert _le("price_gpus_per_instance") == card.MAX_GPUS_PER_NODE


def test_the_refusals_keep_their_wording():
    why = card.price_unit_refusal(1025, price_per_gpu_hour=1.0, price_preset=None)
    assert why is not None and "allowed: a whole number of GPUs 1 to 1024 (the price's rentable unit" in why
    assert card.price_unit_refusal(1024, price_per_gpu_hour=1.0, price_preset=None) is None
    with pytest.raises(CardError, match=r"gpus_per_instance must be a whole number of GPUs in 1\.\.1024 "):
        cost.Price(per_gpu_hour=2.0, currency="USD", gpus_per_instance=1025)
    assert cost.Price(per_gpu_hour=2.0, currency="USD", gpus_per_instance=1024).gpus_per_instance == 1024
