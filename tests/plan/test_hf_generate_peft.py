"""``rollout.engine: hf`` runs ``generate`` on the PEFT model being trained (TRL 1.16.0 trl/trainer/grpo_trainer.py
l.1861-1875, no merge, no ``eval()``: the Trainer's ``training_step`` left it in train mode), so every adapted linear
launches its ``lora_A`` / ``lora_B`` GEMMs, the scale and the add (and its dropout at p > 0) in every forward
(``compute.static_generation.peft_lora_forward_kernels``, the training inventory's PEFT counts); a QLoRA base streams
its packed 4-bit weights in decode (bitsandbytes 0.50.2's fused ``gemm_4bit`` under ``no_grad`` for at most 512 rows)
and dequantises each linear in the prefill's larger forward (``_dequant_linear_fallback``)."""

import pytest

from trainfit.compute.inventory import LORA_DROPOUT_KERNELS, LORA_EXTRA_KERNELS
from trainfit.compute.static_generation import peft_lora_forward_kernels
from trainfit.plan import make_plan
from trainfit.scenarios import ppo_tier
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import merge_under

LORA = {"scope": "lora", "lora": {"rank": 16, "alpha": 32, "targets": "all-linear"}}


def _gen(*extra):
    card = ppo_tier("unoptimised")
    for e in extra:
        card = merge_under(card, e)
    p = make_plan(load_card_dict(card))
    return next(ph for ph in p.time.phases if ph.name == "generation")


def test_peft_kernels_per_adapted_linear():
    # lora_A, lora_B, then the scaling mul and the add (peft/tuners/lora/layer.py Linear.forward); fp32 adapters
    # cast x up and the output down (two more); nn.Dropout at p > 0 in train mode: one fused kernel
    assert peft_lora_forward_kernels(adapted_linears=10, adapter_dtype_bytes=2, dropout=False) == 10 * (2 + LORA_EXTRA_KERNELS)
    assert peft_lora_forward_kernels(adapted_linears=10, adapter_dtype_bytes=4, dropout=True) == \
        10 * (2 + LORA_EXTRA_KERNELS + 2 + LORA_DROPOUT_KERNELS)


def test_a_lora_policy_generates_through_its_adapters():
    full, lora = _gen(), _gen(LORA)
    assert full.terms["adapter_kernels"] == 0.0
    assert lora.terms["adapter_kernels"] > 0.0
    assert lora.seconds == pytest.approx(full.seconds + lora.terms["adapter_kernels"], rel=0.02)
    dropped = _gen(LORA, {"lora": {"dropout": 0.05}})
    assert dropped.terms["adapter_kernels"] > lora.terms["adapter_kernels"]


def test_a_qlora_base_dequantises_in_the_prefill_only():
    lora, qlora = _gen(LORA), _gen(LORA, {"scope": "qlora"})
    assert lora.terms["nf4_dequant"] == 0.0
    assert qlora.terms["nf4_dequant"] > 0.0  # 8 prompts x 512 tokens: past the fused kernel's 512 rows
    assert qlora.terms["nf4_dequant"] < qlora.terms["prefill"]
