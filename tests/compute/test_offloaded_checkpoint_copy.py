"""Unsloth's offloaded checkpoint copies, timed (``compute.offload.offloaded_checkpoint_copy_seconds``,
``plan.time.offloaded_checkpoint_copy_of``): at the release ``preset: unsloth`` reads (2025.2.4, unsloth-zoo
@de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de gradient_checkpointing.py l.145 ``hidden_states.to("cpu", non_blocking =
True)``, l.158 ``.to("cuda:0", non_blocking = True)``) each layer input goes to the host and back on the compute
stream, so the update waits 2 x layers x input bytes / host copy rate a micro-batch."""

from __future__ import annotations

import pytest

from trainfit import api
from trainfit.compute.offload import host_copy_bytes_per_s, offloaded_checkpoint_copy_seconds

CARD = {
    "model": "Qwen/Qwen3-8B", "method": "grpo", "scope": "qlora", "preset": "unsloth", "lora": {"rank": 32, "alpha": 64},
    "hardware": {"gpu": "l40s", "gpus_per_node": 1, "nodes": 1}, "batch": {"micro_batch_size": 8},
    "rollout": {"prompts_per_step": 1, "num_generations": 8, "prompt_len": 512, "response_len": 4096},
}


def _update_terms(card: dict) -> dict:
    (update,) = [p for p in api.plan(card).time_phases if p.name == "actor_update"]
    return update.terms


def test_two_copies_a_layer_at_the_host_copy_rate() -> None:
    assert offloaded_checkpoint_copy_seconds(layers=36, layer_input_bytes=1e9, copy_bytes_per_s=25e9) \
        == pytest.approx(2 * 36 * 1e9 / 25e9)
    with pytest.raises(ValueError):
        offloaded_checkpoint_copy_seconds(layers=36, layer_input_bytes=1.0, copy_bytes_per_s=0.0)


def test_the_unsloth_update_waits_for_its_layer_input_copies() -> None:
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates

    r = default_rates(resolve_gpu("l40s"))
    rate = host_copy_bytes_per_s(pcie_bytes_per_s=r.pcie_bytes_per_s, host_memory_bytes_per_s=r.host_memory_bytes_per_s,
                                 gpus_per_node=1)
    layer_input = 8 * 4608 * 4096 * 2  # micro-batch x (prompt + response) x hidden x bf16
    terms = _update_terms(CARD)
    assert terms["activation_offload"] == pytest.approx(2 * 36 * layer_input / rate, rel=1e-6)
    # the card turning Unsloth's offload off (use_gradient_checkpointing=True): no copies
    assert "activation_offload" not in _update_terms({**CARD, "parallel": {"activation_offload": False}})
    # the same offload under TRL is torchtune's OffloadActivations, which this term does not price
    trl = {**CARD, "preset": "trl", "parallel": {"activation_offload": True}}
    assert "activation_offload" not in _update_terms(trl)
