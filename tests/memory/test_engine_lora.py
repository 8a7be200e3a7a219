"""memory.engine_lora: vLLM's LoRA adapter slots (``create_lora_weights``: per packed slice an A of rank x input and a
B of output x rank, column-parallel outputs and row-parallel inputs split over tp) and verl's summon peak while it
collects the adapter (one decoder layer under layered_summon, else the whole actor)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.memory.engine_lora import adapter_summon_peak_bytes, engine_lora_slot_bytes


def test_slots_of_qwen25_32b_at_rank_32_tp_8_by_hand() -> None:
    spec = resolve_model("Qwen/Qwen2.5-32B")
    h, i, r, tp = 5120, 27648, 32, 8
    q, kv = 40 * 128, 8 * 128
    per_layer = (3 * r * h + (q + 2 * kv) // tp * r) + (r * q // tp + h * r) \
        + (2 * r * h + 2 * i // tp * r) + (r * i // tp + h * r)
    assert engine_lora_slot_bytes(spec, max_lora_rank=r, max_loras=1, tp=tp) == pytest.approx(64 * per_layer * 2)
    assert 0.15e9 < engine_lora_slot_bytes(spec, max_lora_rank=r, max_loras=1, tp=tp) < 0.25e9


def test_qwen25_7b_at_tp_8_keeps_one_kv_head_a_rank() -> None:
    """4 KV heads over TP 8: vLLM's QKVParallelLinear replicates them (num_kv_head_replicas 2), so each rank's K and
    V slices of the B slot are one head wide (128), not kv_dim / tp (64)."""
    spec = resolve_model("Qwen/Qwen2.5-7B")
    h, i, r, tp = 3584, 18944, 32, 8
    q, head = 28 * 128, 128
    per_layer = (3 * r * h + (q // tp + 2 * head) * r) + (r * q // tp + h * r) \
        + (2 * r * h + 2 * i // tp * r) + (r * i // tp + h * r)
    assert engine_lora_slot_bytes(spec, max_lora_rank=r, max_loras=1, tp=tp) == pytest.approx(28 * per_layer * 2)


def test_slots_scale_with_max_loras_and_rank_and_shrink_with_tp() -> None:
    spec = resolve_model("Qwen/Qwen2.5-7B")
    one = engine_lora_slot_bytes(spec, max_lora_rank=16, max_loras=1, tp=1)
    assert engine_lora_slot_bytes(spec, max_lora_rank=16, max_loras=4, tp=1) == pytest.approx(4 * one)
    assert engine_lora_slot_bytes(spec, max_lora_rank=32, max_loras=1, tp=1) == pytest.approx(2 * one)
    # the column-parallel A and row-parallel B stay whole on every rank: tp 4 keeps more than a quarter
    assert one / 4 < engine_lora_slot_bytes(spec, max_lora_rank=16, max_loras=1, tp=4) < one
    with pytest.raises(ValueError, match="max_lora_rank"):
        engine_lora_slot_bytes(spec, max_lora_rank=0, max_loras=1, tp=1)


_SUMMON = {"largest_layer_params": 1e9, "decoder_params": 64e9, "adapter_params": 0.64e9, "num_layers": 64,
           "trainer_bytes_per_param": 4.0}


def test_layered_summon_holds_one_layer_the_whole_actor_otherwise() -> None:
    kw = _SUMMON | {"summons_base_units": True, "adapter_sharded": True}  # FSDP1
    assert adapter_summon_peak_bytes(**kw, layered=True) == pytest.approx((1e9 + 0.01e9) * 4)
    assert adapter_summon_peak_bytes(**kw, layered=False) == pytest.approx(64.64e9 * 4)


def test_fsdp2_gathers_the_adapter_alone_an_unsharded_actor_nothing() -> None:
    """FSDP2: verl's summon leaves the fully_shard DTensors sharded and full_tensor() gathers each adapter tensor
    (verl fsdp_utils.py collect_lora_params @8a694930); an unsharded actor holds its adapter whole already."""
    fsdp2 = _SUMMON | {"summons_base_units": False, "adapter_sharded": True}
    assert adapter_summon_peak_bytes(**fsdp2, layered=False) == pytest.approx(0.64e9 * 4)
    assert adapter_summon_peak_bytes(**fsdp2, layered=True) == pytest.approx(0.01e9 * 4)
    unsharded = _SUMMON | {"summons_base_units": False, "adapter_sharded": False}
    assert adapter_summon_peak_bytes(**unsharded, layered=False) == 0.0
