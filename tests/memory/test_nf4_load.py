"""torchao 0.1's NF4 quantization at load (trainfit.memory.nf4_load): the (numel, 16) bf16 spike, the
reserved it leaves, and the plan's load phase for a QLoRA card pinned to torchao before 0.2."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.memory.nf4_load import load_reserved_bytes, spikes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.training import LoraSpec
from trainfit.units import GIB

ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
QLORA_7B = {"model": "meta-llama/Llama-2-7b-hf", "scope": "qlora",
            "lora": {"rank": 8, "alpha": 16, "adapter_dtype": "bf16", "targets": list(ALL)},
            "hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 2, "seq_len": 512}}


@pytest.mark.parametrize(("pin", "expected"), [
    ("0.1", True), ("==0.1", True), ("0.1.0", True), ("v0.1", True), ("0.2", False), ("0.2.0", False),
    ("0.13.0", False), (None, False), ("", False), ("latest", False),
])
def test_only_torchao_before_0_2_spikes(pin, expected):
    assert spikes(pin) is expected


def test_load_peak_holds_two_numel_x_16_bf16_tensors_of_the_largest_linear():
    spec = resolve_model("meta-llama/Llama-2-7b-hf")
    peak, reserved = load_reserved_bytes(spec, LoraSpec(rank=8, targets=ALL, adapter_dtype_bytes=2))
    mlp = 4096 * 11008
    nf4_weights = 32 * (4 * 4096 * 4096 + 3 * mlp) // 2  # two codes per byte
    bf16_rest = 2 * 2 * 32000 * 4096  # embedding and head
    # at the spike: the finished weights, the bf16 input and scaled blocks, and (value - nf4) and its abs()
    assert peak >= nf4_weights + bf16_rest + (2 + 2 + 64) * mlp - 64 * 4096 * 4096
    assert reserved > peak
    # the segments kept for the MLP's and the attention's temporaries: above 2 x 32 B per MLP element
    assert reserved - peak > 0 and reserved > nf4_weights + bf16_rest + 64 * mlp


def test_plan_load_phase_reserves_it_only_with_the_pin():
    plain = make_plan(load_card_dict(QLORA_7B))
    pinned = make_plan(load_card_dict({**QLORA_7B, "software": {"torchao": "0.1"}}))
    later = make_plan(load_card_dict({**QLORA_7B, "software": {"torchao": "0.2.0"}}))
    load = {name: next(p for p in plan.phases if p.phase.value == "load")
            for name, plan in (("plain", plain), ("pinned", pinned), ("later", later))}
    assert load["plain"] == load["later"]
    assert load["pinned"].reserved > 7 * GIB > load["plain"].reserved
    assert load["pinned"].components["nf4_quantize_temporaries"] > 2.5 * GIB
    assert pinned.peak.phase.value == "load"
    assert any("torchao 0.1 NF4" in a for a in pinned.assumptions)
    # the training phases do not change
    assert [p.reserved for p in pinned.phases[1:]] == [p.reserved for p in plain.phases[1:]]


def test_two_gpus_are_not_replayed():
    card = {**QLORA_7B, "software": {"torchao": "0.1"}, "hardware": {"gpu": "rtx4090", "gpus_per_node": 2},
            "parallel": {"strategy": "ddp", "gradient_checkpointing": True}}
    plan = make_plan(load_card_dict(card))
    assert not any("torchao 0.1 NF4" in a for a in plan.assumptions)
