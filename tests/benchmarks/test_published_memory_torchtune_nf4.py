"""The torchtune QLoRA points of the llama3_1 / llama3_2 configs (benchmarks/published.py #5, #8, #30) run torchao's
NF4Tensor (torchtune modules/peft/lora.py ``to_nf4`` / ``linear_nf4``), not bitsandbytes: their cards plan
``lora.dequant: torchao``, so bitsandbytes' dequantise buffers (memory/nf4_dequant.py) are not in their plans."""

from __future__ import annotations

import pytest
from step_times_module import load_benchmark

from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import QloraDequant


def _published():
    return load_benchmark("published.py", "trainfit_bench_published_tt_nf4")


@pytest.mark.parametrize("point", [5, 8, 30])
def test_torchtune_qlora_points_plan_torchao_nf4(point):
    card = load_card_dict(_published().POINTS[point]["card"])
    assert card.lora is not None and card.lora.dequant is QloraDequant.TORCHAO
