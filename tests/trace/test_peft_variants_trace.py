"""The DoRA, (IA)^3 and prompt-tuning traces build PEFT's own models: the parameters they train are the
plan's, and trainfit's (IA)^3 defaults are the installed PEFT's. (Plan-vs-trace peaks: tests/trace/test_grid.py.)"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.accuracy.grid import GRID  # noqa: E402
from trainfit.memory.peft_variants import IA3_DEFAULTS  # noqa: E402
from trainfit.plan import make_plan  # noqa: E402
from trainfit.spec.card import load_card_dict  # noqa: E402
from trainfit.trace.build import build_meta, count_params  # noqa: E402
from trainfit.trace.types import TraceRequest, TraceUnsupported  # noqa: E402

VARIANT_CASES = [c for c in GRID if c.scope in ("dora", "ia3", "prompt_tuning")]


def test_ia3_defaults_match_the_installed_peft():
    from peft.utils.constants import (
        TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING as FF,
        TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING as TARGETS,
    )

    for family, (targets, feedforward) in IA3_DEFAULTS.items():
        assert tuple(TARGETS[family]) == targets and tuple(FF[family]) == feedforward, family


@pytest.mark.parametrize("case", VARIANT_CASES, ids=[c.name for c in VARIANT_CASES])
def test_trace_trains_what_the_plan_counts(case):
    req = TraceRequest(**case.trace_kwargs())
    total, trainable = count_params(build_meta(req, case.hf_config()["num_hidden_layers"]))
    plan = make_plan(load_card_dict(case.card()))
    assert trainable == plan.params_trainable
    assert total - trainable == plan.params_total


def test_grid_covers_each_variant():
    assert {c.scope for c in VARIANT_CASES} == {"dora", "ia3", "prompt_tuning"}
    assert {c.ckpt for c in VARIANT_CASES} == {True, False}


def test_prompt_tuning_trace_needs_virtual_tokens():
    from trainfit.accuracy.grid import ARCHS

    with pytest.raises(TraceUnsupported, match="num_virtual_tokens"):
        build_meta(TraceRequest(hf_config=ARCHS["llama"], scope="prompt_tuning"), 1)
