"""Findings of the sixth review of the December 2026 hardening pass, as explicit cases (each fails without its fix).
As in ``test_hardening_2612.py``: the CLI runs in-process (``fuzzlib.run_cli``); a refusal is one line, exit code 2,
no traceback and no output file; the Python API raises trainfit's own error class with the CLI's one line."""

from __future__ import annotations

import pytest

import trainfit
from trainfit.errors import CardError

_FIT = dict(gpus=["rtx4090"], max_gpus=1, steps=10)


# ------------------------------------------------------------------------------------------------
# 1. trainfit.fit(fx=...): anything but None, a mapping or an iterable escaped as Python's own TypeError
#    ("'float' object is not iterable"), and one "USD:CNY=7.2" string was read character by character
#    ("fx: expected FROM:TO=RATE ..., got 'U'").
@pytest.mark.parametrize("fx", [7.2, 1, object(), b"USD:CNY=7.2", (x for x in ["USD:CNY=7.2"])])
def test_fit_refuses_an_fx_that_is_no_mapping_or_list_in_its_own_error(fx):
    with pytest.raises(CardError) as exc:
        trainfit.fit(None, fx=fx, **_FIT)
    assert str(exc.value).startswith("fx: a mapping {('USD', 'CNY'): 7.2}, a list of 'FROM:TO=RATE' strings or None, got")
    assert "\n" not in str(exc.value)


def test_fit_reads_one_fx_string_as_one_rate():
    one = trainfit.fit(None, fx="USD:CNY=7.2", **_FIT)
    listed = trainfit.fit(None, fx=["USD:CNY=7.2"], **_FIT)
    assert one.goal.fx == listed.goal.fx and ("USD", "CNY") in one.goal.fx
