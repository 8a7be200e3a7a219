"""The step time's FSDP / ZeRO-3 gathered weight bytes read the same condition as memory for a QLoRA of a MoE model
(``plan.terms.bnb_loop_experts``): transformers < 5's per-expert loop holds each expert's linears as bitsandbytes
``Linear4bit`` (gathered packed, like the dense ones); transformers 5's 3-D expert stacks stay bf16
(benchmarks/qlora_moe_experts_cpu.py)."""

from __future__ import annotations

import pytest

import trainfit.plan.time as plan_time
from trainfit.memory.weights import weight_bytes
from trainfit.plan import make_plan
from trainfit.plan.resolve import model_spec_of, trainable_spec
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import ComputeDtype, Dtype


def _card(**software):
    d = {"model": "mistralai/Mixtral-8x7B-v0.1", "scope": "qlora", "precision": {"weights": "nf4"},
         "hardware": {"gpu": "a100-80gb", "gpus_per_node": 2},
         "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
         "batch": {"micro_batch_size": 1, "seq_len": 2048}}
    if software:
        d["software"] = software
    return load_card_dict(d)


def _gathered(card, monkeypatch) -> float:
    seen = []
    real = plan_time.train_step_time

    def spy(*a, **k):
        seen.append(k["gathered_weight_bytes"])
        return real(*a, **k)

    monkeypatch.setattr(plan_time, "train_step_time", spy)
    make_plan(card)
    monkeypatch.setattr(plan_time, "train_step_time", real)
    return seen[0]


@pytest.mark.parametrize("pin, packed_experts", [("4.48.1", True), ("5.24.0", False)])
def test_gathered_bytes_follow_the_experts_storage(monkeypatch, pin, packed_experts):
    card = _card(transformers=pin)
    spec = model_spec_of(card)
    w = weight_bytes(spec, weights=Dtype.NF4, compute=ComputeDtype.BF16, trainable=trainable_spec(card),
                     quantized_experts=packed_experts)
    assert _gathered(card, monkeypatch) == pytest.approx(w.base + w.adapter, rel=1e-9)
