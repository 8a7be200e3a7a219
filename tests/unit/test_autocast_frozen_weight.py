"""What a frozen fp32 linear saves under bf16 autocast (plan.terms._autocast_frozen_copies), measured with torch."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

torch = pytest.importorskip("torch")


def _saved(requires_grad: bool) -> list[tuple[tuple[int, ...], object]]:
    lin = torch.nn.Linear(256, 512, bias=False)
    lin.weight.requires_grad_(requires_grad)
    x = torch.randn(8, 256, requires_grad=True)
    out: dict[int, tuple[tuple[int, ...], object]] = {}

    def pack(t):  # noqa: ANN001, ANN202
        out[t.untyped_storage().data_ptr()] = (tuple(t.shape), t.dtype)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
        lin(x)
    return list(out.values())


def test_frozen_fp32_linear_saves_its_bf16_weight_copy() -> None:
    assert _saved(False) == [((256, 512), torch.bfloat16)]


def _card(scope_weights: str) -> dict:
    return {"model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
            "lora": {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]},
            "precision": {"weights": scope_weights, "compute": "bf16", "optimizer": "adamw", "optimizer_states": "fp32"},
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 1, "seq_len": 512}}


def test_plan_counts_the_copies_of_an_fp32_lora_base() -> None:
    act = make_plan(load_card_dict(_card("fp32"))).peak.components["activations"]
    act16 = make_plan(load_card_dict(_card("bf16"))).peak.components["activations"]
    # Llama-2-7B: every frozen weight but layer 0's q/k/v and the embedding, 2 B each (~12.8 GB), less what the
    # adapters save: bf16 casts of the fp32 input and of lora_A's output, 2·(in + r), instead of a bf16 base's fp32
    # copies, 4·(in + r) (memory.activations._adapter_saved), for q and v in 32 layers
    n = 6_738_415_616 - 32000 * 4096 - 3 * 4096 * 4096
    adapters = 32 * 2 * 2 * 512 * (4096 + 8)
    assert act - act16 == pytest.approx(2 * n - adapters, rel=0.001)
