"""The torchtune QLoRA points of the llama3_1 / llama3_2 configs (benchmarks/published.py #5, #8, #30) run torchao's
NF4Tensor (torchtune modules/peft/lora.py ``to_nf4`` / ``linear_nf4``), not bitsandbytes: their cards plan
``lora.dequant: torchao``, so bitsandbytes' dequantise buffers (memory/nf4_dequant.py) are not in their plans."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import trainfit
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import QloraDequant

REPO = Path(trainfit.__file__).resolve().parents[2]


def _published():
    spec = importlib.util.spec_from_file_location("trainfit_bench_published_tt_nf4", REPO / "benchmarks" / "published.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("point", [5, 8, 30])
def test_torchtune_qlora_points_plan_torchao_nf4(point):
    card = load_card_dict(_published().POINTS[point]["card"])
    assert card.lora is not None and card.lora.dequant is QloraDequant.TORCHAO
