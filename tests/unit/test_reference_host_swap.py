"""roles.reference host_swap: NeMo RL's reference in pinned host memory, swapped into the policy's parameters for
its pass (methods/rl.py memory, plan/rl_offload.py reference_swap phase, methods/roles.py the nemo-rl default)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.compute.reference_swap import BLOCKING_COPIES_PER_SWAP, S_PER_BLOCKING_COPY
from trainfit.methods.presets import apply_preset
from trainfit.methods.roles import reference_placement
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import RefPlacement

MODEL = "Qwen/Qwen2.5-1.5B"
TRAIN_GPUS = 4


def _data(**roles) -> dict:
    return {"model": MODEL, "method": "grpo", "preset": "nemo-rl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "zero1", "tensor_parallel": 2}, "batch": {"micro_batch_size": 1},
            "roles": {"kl_coef": 0.04} | roles,
            "rollout": {"placement": "split", "gpus": 8 - TRAIN_GPUS, "prompts_per_step": 16, "num_generations": 4,
                        "prompt_len": 256, "response_len": 512}}


def _card(data: dict):
    """As the CLI loads it: the preset fills what the card leaves open."""
    return load_card_dict(apply_preset(data, "nemo-rl"))


@pytest.fixture(scope="module")
def plans():
    return {"swap": make_plan(_card(_data())), "gpu": make_plan(_card(_data(reference="gpu")))}


def _train(plan) -> dict:
    (group,) = [g for g in plan.groups if g.name == "train"]
    return {p.phase.value: p for p in group.phases}


def test_preset_default_and_explicit_value_wins():
    assert reference_placement(_card(_data())) is RefPlacement.HOST_SWAP
    assert reference_placement(_card(_data(reference="gpu"))) is RefPlacement.GPU
    assert reference_placement(_card(_data(reference="cpu"))) is RefPlacement.CPU
    assert reference_placement(_card(_data(kl_coef=0.0))) is RefPlacement.NONE  # no KL term: no reference loaded
    lora = _data() | {"scope": "lora", "lora": {"rank": 16}}
    assert reference_placement(_card(lora)) is RefPlacement.HOST_SWAP  # the whole state dict is swapped
    no_preset = {k: v for k, v in _data().items() if k != "preset"}
    assert reference_placement(load_card_dict(no_preset)) is RefPlacement.GPU


def test_reference_bytes_move_from_the_gpu_to_host_ram(plans):
    swap, gpu = _train(plans["swap"]), _train(plans["gpu"])
    ref = gpu["ref_logprob"].components["reference_weights"]
    # a bf16 copy of the TP-2 shard of a 1.5B model: ~1.5 GB
    assert 1.2e9 < ref < 1.9e9
    assert "ref_logprob" in swap  # the pass still runs, on the policy's own storage
    for name, phase in swap.items():
        assert phase.components.get("reference_weights", 0.0) == 0.0
        assert phase.allocated == pytest.approx(gpu[name].allocated - ref, rel=1e-9)
    host = plans["swap"].host_ram
    # the pinned reference and the saved policy copy, every training GPU of the node
    assert host["reference_weights"] == pytest.approx(ref * TRAIN_GPUS)
    assert host["reference_swap_policy_copy"] == pytest.approx(ref * TRAIN_GPUS)
    assert "reference_swap_policy_copy" not in plans["gpu"].host_ram


def test_swap_phase_is_three_pcie_copies_of_the_rank_weights(plans):
    swap = {p.name: p for p in plans["swap"].time.phases}
    gpu = {p.name: p for p in plans["gpu"].time.phases}
    assert "reference_swap" not in gpu
    t = swap["reference_swap"]
    r = default_rates(resolve_gpu("h100-sxm"))
    rate = min(r.pcie_bytes_per_s, r.host_memory_bytes_per_s / TRAIN_GPUS)
    ref = _train(plans["gpu"])["ref_logprob"].components["reference_weights"]
    # the time's state-dict bytes are the memory's reference bytes (the rank's bf16 shard), within 1%
    assert t.terms["to_host"] == pytest.approx(ref / rate, rel=0.01)
    assert t.terms["to_device"] == pytest.approx(2 * t.terms["to_host"])
    tensors = t.terms["per_tensor"] / (BLOCKING_COPIES_PER_SWAP * S_PER_BLOCKING_COPY)
    assert 28 * 7 < tensors < 28 * 16  # the rank's tensors: ~9-12 per layer (HF names)
    assert t.bound == "offload"
    assert 0.05 < t.seconds < 1.0
    # the same reference pass; the synchronous step adds the swap
    assert swap["ref_logprob"].seconds == pytest.approx(gpu["ref_logprob"].seconds)
    assert plans["swap"].step_seconds == pytest.approx(plans["gpu"].step_seconds + t.seconds, rel=1e-9)


def test_no_swap_without_a_kl_term():
    plan = make_plan(_card(_data(kl_coef=0.0)))
    assert "reference_swap" not in {p.name for p in plan.time.phases}
    assert "reference_weights" not in plan.host_ram


def test_nemo_rl_export_and_import_name_the_swap():
    from trainfit.export import export, read_back

    card = load_card_dict({k: v for k, v in _data().items() if k != "preset"})  # reference gpu
    e = export(card, "nemo-rl")
    assert any(n.startswith("roles.reference gpu: NeMo RL keeps the reference's weights in pinned host memory")
               for n in e.notes)
    assert read_back(card, e).roles.reference is RefPlacement.HOST_SWAP
    assert e.lost["roles.reference"] == {"card": "gpu", "file": "host_swap"}


def test_dpo_under_nemo_rl_swaps_once_per_step():
    def dpo(**roles):
        return {"model": MODEL, "method": "dpo", "preset": "nemo-rl",
                "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1}, "parallel": {"strategy": "fsdp"},
                "batch": {"micro_batch_size": 1, "seq_len": 1024}, "roles": roles}

    swap, gpu = make_plan(_card(dpo())), make_plan(_card(dpo(reference="gpu")))
    assert reference_placement(swap.card) is RefPlacement.HOST_SWAP
    ref = max(p.components.get("reference_weights", 0.0) for g in gpu.groups for p in g.phases)
    assert ref > 0
    assert all(p.components.get("reference_weights", 0.0) == 0.0 for g in swap.groups for p in g.phases)
    assert swap.host_ram["reference_weights"] == swap.host_ram["reference_swap_policy_copy"] > 0
    phases = {p.name: p for p in swap.time.phases}
    assert "reference_swap" in phases and "reference_swap" not in {p.name for p in gpu.time.phases}
    assert swap.step_seconds == pytest.approx(gpu.step_seconds + phases["reference_swap"].seconds, rel=1e-9)
