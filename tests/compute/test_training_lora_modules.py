"""DeepSpeed ZeRO-3 hooks the modules a LoRA implementation adds (``compute.training.peft_lora_called_modules``): PEFT's
``lora.Linear`` wrapper, its ``lora_dropout``, ``lora_A`` and ``lora_B`` run their own forward for every adapted
linear (four modules), DeepSpeed-Chat's ``LinearLayer_LoRA`` one (its ``lora_dropout``)."""

from __future__ import annotations

import pytest

from trainfit.compute.rates import ZERO3_MODULE_FORWARD_HOST_S
from trainfit.compute.training import (DSCHAT_LORA_CALLED_MODULES, PEFT_LORA_CALLED_MODULES,
                                       peft_lora_called_modules)
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_modules_per_adapted_call() -> None:
    assert (PEFT_LORA_CALLED_MODULES, DSCHAT_LORA_CALLED_MODULES) == (4, 1)
    assert peft_lora_called_modules(adapted_calls=36) == 144
    assert peft_lora_called_modules(adapted_calls=36, per_call=DSCHAT_LORA_CALLED_MODULES) == 36
    with pytest.raises(ValueError):
        peft_lora_called_modules(adapted_calls=-1)


def _forward_host_s(strategy: str, targets: list[str]) -> float:
    d = {"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "lora", "lora": {"targets": targets},
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
         "parallel": {"strategy": strategy, "gradient_checkpointing": False},
         "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 1}}
    return {p.name: p for p in make_plan(load_card_dict(d)).time_phases}["forward"].terms["host_launch"]


def test_zero3_hooks_each_peft_module_of_an_adapted_linear() -> None:
    """One more adapted linear a layer (v_proj beside q_proj, Qwen3-8B's 36 layers) costs ZeRO-3 the hooks of four more
    modules a layer beyond the adapter's own launches, which ZeRO-2 (no module hooks) pays too."""
    z3 = _forward_host_s("zero3", ["q_proj", "v_proj"]) - _forward_host_s("zero3", ["q_proj"])
    z2 = _forward_host_s("zero2", ["q_proj", "v_proj"]) - _forward_host_s("zero2", ["q_proj"])
    assert z3 - z2 == pytest.approx(PEFT_LORA_CALLED_MODULES * 36 * ZERO3_MODULE_FORWARD_HOST_S, rel=1e-3)
