"""An SGLang engine (presets miles, slime) that states no fraction takes SGLang's ServerArgs rule, not TRL's vLLM
defaults: mem_fraction_static None, set by _handle_gpu_memory_settings on the GPU memory and TP size (sglang
0.5.15.post1 python/sglang/srt/server_args.py l.3469-3690, https://pypi.org/project/sglang/0.5.15.post1/ read
2026-12-05; methods.sglang_memory)."""

from __future__ import annotations

import pytest

from trainfit.api import load_card
from trainfit.methods.sglang_memory import (
    sglang_chunk_and_decode_bs, sglang_mem_fraction_static, sglang_prefill_graph_sizes,
)
from trainfit.plan import make_plan


@pytest.mark.parametrize(("mib", "tp", "expected"), [
    (16000, 1, (2048, 8)), (23034, 1, (2048, 24)), (23034, 4, (2048, 80)),  # l.3497-3513
    (40960, 2, (4096, 32)), (40960, 4, (4096, 160)),  # l.3514-3523
    (81559, 1, (8192, 256)), (81559, 8, (8192, 512)), (143771, 2, (8192, 256)),  # l.3524-3543
    (183359, 1, (16384, 512)),  # l.3544-3550
])
def test_tiers(mib, tp, expected):
    assert sglang_chunk_and_decode_bs(gpu_memory_mib=mib, tp_size=tp) == expected


def test_prefill_graph_sizes():
    # l.3765-3774: 8 + 14 + 8 + 8 + 12 sizes to 4096, then every 512 from 4608
    assert sglang_prefill_graph_sizes(max_tokens=4096) == 50
    assert sglang_prefill_graph_sizes(max_tokens=8192) == 58


@pytest.mark.parametrize(("mib", "tp", "mla", "expected"), [
    # H100 TP 1: 512 + 8192 x 1.5 + 256 x 2 + 128 + 58 x 8 = 13,904 MiB -> round(67,655 / 81,559, 3)
    (81559, 1, False, 0.830),
    # MLA: no prefill graph (Breakable refuses MLA, l.3350-3384): 13,440 MiB
    (81559, 1, True, 0.835),
    # A100 40GB TP 1: 512 + 4096 x 1.5 + 32 x 2 + 128 + 50 x 8 = 7,248 MiB, no 10 GiB floor under 60 GiB
    (40960, 1, False, 0.823),
    # H200 TP 1: 13,904 MiB
    (143771, 1, False, 0.903),
])
def test_fraction(mib, tp, mla, expected):
    assert sglang_mem_fraction_static(gpu_memory_mib=mib, tp_size=tp, mla=mla) == pytest.approx(expected, abs=1e-9)


def test_unknown_gpu_memory_is_sglangs_fallback():
    assert sglang_mem_fraction_static(gpu_memory_mib=None, tp_size=1) == 0.88  # l.3686-3690


_MILES = {"method": "grpo", "scope": "full", "preset": "miles", "model": "Qwen/Qwen3-8B", "hardware.gpu": "h100-sxm",
          "rollout.placement": "split", "rollout.gpus": 4}


@pytest.mark.parametrize("preset", ["miles", "slime"])
def test_sglang_presets_take_sglangs_rule_not_trls(preset):
    card = load_card(None, {**_MILES, "preset": preset})
    assert card.rollout.gpu_memory_utilization == 0.830
    line = next(a for a in make_plan(card).assumptions if a.startswith("rollout:"))
    assert "SGLang ServerArgs mem_fraction_static rule" in line and "TRL" not in line


def test_stated_fraction_is_kept():
    card = load_card(None, {**_MILES, "rollout.gpu_memory_utilization": 0.7})
    assert card.rollout.gpu_memory_utilization == 0.7
