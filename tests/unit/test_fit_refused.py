"""A ``fit`` whose every combination is refused reports why (CardError, exit 2), never an empty table."""

import pytest

from trainfit.cli.common import default_card_dict, set_path
from trainfit.errors import CardError
from trainfit.fit_search import _refused
from trainfit.search import fit

TOO_MANY_BF16 = {"hardware.gpu": "h100-sxm", "precision.compute": "fp8", "precision.fp8_recipe": "current",
                 "precision.bf16_first_layers": 30, "precision.bf16_last_layers": 10}
"""40 bf16 layers of Qwen3-8B's 36: ``make_plan`` refuses every combination with one line (no knob lifts it)."""


def _card(sets: dict) -> dict:
    data = default_card_dict()
    for k, v in sets.items():
        set_path(data, k, v)
    return data


def test_one_reason_shared_by_every_combination_is_raised_as_is():
    with pytest.raises(CardError) as got:
        fit(_card(TOO_MANY_BF16), gpus=["h100-sxm"], max_gpus=2, workers=1)  # before: FitResult(rows=())
    assert str(got.value) == ("precision.bf16_first_layers (30) + precision.bf16_last_layers (10) exceed"
                              " Qwen/Qwen3-8B's 36 decoder layers")


def test_several_reasons_are_counted_with_one_of_them():
    with pytest.raises(CardError, match=r"^fit: every one of the 25,152 configurations tried was refused, for more"
                       r" than one reason; one of them: a: x$"):
        _refused(25_152, {"b: y", "a: x"})


def test_a_search_with_a_plan_still_returns_rows():
    sets = TOO_MANY_BF16 | {"precision.bf16_last_layers": 0}
    result = fit(_card(sets), gpus=["h100-sxm"], max_gpus=1, workers=1)
    assert result.rows and all(r.gpu == "h100-sxm" for r in result.rows)
